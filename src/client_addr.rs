//! Who a request comes from: the TCP peer, or, when the peer is one of
//! `server.trusted_proxies`, the client its `X-Forwarded-For` names; and the unit a client
//! is limited by ([`ClientNet`]). A client can never pick its own address: only what a
//! trusted proxy appended is believed.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use http::HeaderMap;
use ipnet::IpNet;

/// Hops of `X-Forwarded-For` looked at, from the right. More trusted proxies than this in a
/// row is not a real chain: the peer is taken instead.
const MAX_HOPS: usize = 32;

/// The proxies whose `X-Forwarded-For` is believed (`server.trusted_proxies`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn new(nets: Vec<IpNet>) -> TrustedProxies {
        TrustedProxies(nets)
    }

    /// Whether `ip` is one of the trusted proxies.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client behind a request from `peer`. An untrusted peer is the client. A trusted
    /// one is believed for the right-most `X-Forwarded-For` address that is not itself a
    /// trusted proxy, as nginx's `real_ip_recursive on` and Envoy's `xff_num_trusted_hops`
    /// do (the hops to its left were written by whoever the proxy talked to, so may be
    /// anything). Absent, empty or malformed values give the peer; a chain of trusted
    /// proxies only gives its left-most one, as nginx does.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.contains(peer) {
            return peer;
        }
        self.forwarded_client(headers).unwrap_or(peer)
    }

    /// `None`: no usable `X-Forwarded-For`.
    fn forwarded_client(&self, headers: &HeaderMap) -> Option<IpAddr> {
        let mut farthest_trusted = None;
        let mut hops = 0;
        // Header lines in order make one list (RFC 9110 5.3): the last line's last entry
        // is the hop nearest to us.
        for line in headers.get_all("x-forwarded-for").iter().rev() {
            for hop in line.to_str().ok()?.rsplit(',') {
                hops += 1;
                if hops > MAX_HOPS {
                    return None;
                }
                let ip = parse_hop(hop.trim())?.to_canonical();
                if !self.contains(ip) {
                    return Some(ip);
                }
                farthest_trusted = Some(ip);
            }
        }
        farthest_trusted
    }
}

/// One `X-Forwarded-For` entry: an address, or an address with a port (`1.2.3.4:80`,
/// `[2001:db8::1]:443`) as some proxies write it. Anything else (`unknown`, `_hidden`) is
/// malformed.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    hop.parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .or_else(|| {
            let bracketed = hop.strip_prefix('[')?.strip_suffix(']')?;
            bracketed.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
        })
}

/// The unit a client is limited by: its IPv4 address, or the /64 its IPv6 address is in
/// (a subscriber is usually given a whole /64, RFC 6177, and picks addresses in it freely).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClientNet {
    V4(Ipv4Addr),
    /// The first 64 bits of the address.
    V6(u64),
}

impl ClientNet {
    pub fn of(ip: IpAddr) -> ClientNet {
        match ip.to_canonical() {
            IpAddr::V4(v4) => ClientNet::V4(v4),
            IpAddr::V6(v6) => ClientNet::V6((u128::from(v6) >> 64) as u64),
        }
    }

    pub fn is_ipv6(&self) -> bool {
        matches!(self, ClientNet::V6(_))
    }
}

/// `192.0.2.7`, or `2001:db8:1:2::/64`: the text of store keys and logs.
impl fmt::Display for ClientNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientNet::V4(v4) => write!(f, "{v4}"),
            ClientNet::V6(prefix) => write!(f, "{}/64", Ipv6Addr::from(u128::from(*prefix) << 64)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted(nets: &[&str]) -> TrustedProxies {
        TrustedProxies::new(nets.iter().map(|n| n.parse().unwrap()).collect())
    }

    fn xff(lines: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for line in lines {
            headers.append("x-forwarded-for", line.parse().unwrap());
        }
        headers
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let proxies = trusted(&["10.0.0.0/8"]);
        let headers = xff(&["203.0.113.9"]);
        assert_eq!(proxies.client(ip("192.0.2.1"), &headers), ip("192.0.2.1"));
        let none = TrustedProxies::default();
        assert_eq!(none.client(ip("10.0.0.1"), &headers), ip("10.0.0.1"));
    }

    #[test]
    fn a_trusted_peer_gives_the_right_most_untrusted_hop() {
        let proxies = trusted(&["10.0.0.0/8", "2001:db8:ffff::/48"]);
        let cases: [(&[&str], &str); 7] = [
            (&["203.0.113.9"], "203.0.113.9"),
            // The client wrote the left one; the proxy appended what it saw.
            (&["198.51.100.1, 203.0.113.9"], "203.0.113.9"),
            // Trusted hops on the right are skipped.
            (
                &["198.51.100.1, 203.0.113.9, 10.1.1.1, 10.2.2.2"],
                "203.0.113.9",
            ),
            // Several lines are one list, the last line nearest.
            (&["198.51.100.1", "203.0.113.9,10.1.1.1"], "203.0.113.9"),
            (&["2001:db8:1::5 , 2001:db8:ffff::1"], "2001:db8:1::5"),
            // Ports and brackets as some proxies write them.
            (&["203.0.113.9:4711"], "203.0.113.9"),
            (&["[2001:db8:1::5]:443"], "2001:db8:1::5"),
        ];
        for (lines, want) in cases {
            assert_eq!(
                proxies.client(ip("10.9.9.9"), &xff(lines)),
                ip(want),
                "{lines:?}"
            );
        }
    }

    #[test]
    fn malformed_or_missing_values_give_the_peer() {
        let proxies = trusted(&["10.0.0.0/8"]);
        let peer = ip("10.9.9.9");
        assert_eq!(proxies.client(peer, &HeaderMap::new()), peer);
        for line in [
            "",
            "unknown",
            "203.0.113.9, garbage",
            "203.0.113.9,",
            "1.2.3",
        ] {
            assert_eq!(proxies.client(peer, &xff(&[line])), peer, "{line:?}");
        }
        // A malformed hop to the left of the client does not matter: it is never reached.
        assert_eq!(
            proxies.client(peer, &xff(&["garbage, 203.0.113.9"])),
            ip("203.0.113.9")
        );
        let mut binary = HeaderMap::new();
        binary.append(
            "x-forwarded-for",
            http::HeaderValue::from_bytes(b"203.0.113.\xff").unwrap(),
        );
        assert_eq!(proxies.client(peer, &binary), peer);
    }

    #[test]
    fn a_chain_of_trusted_proxies_gives_its_left_most_one_and_too_long_a_chain_the_peer() {
        let proxies = trusted(&["10.0.0.0/8"]);
        let peer = ip("10.9.9.9");
        assert_eq!(
            proxies.client(peer, &xff(&["10.1.1.1, 10.2.2.2"])),
            ip("10.1.1.1")
        );
        let long = vec!["10.1.1.1"; MAX_HOPS + 1].join(",");
        assert_eq!(proxies.client(peer, &xff(&[&long])), peer);
        let client_then_trusted =
            format!("203.0.113.9,{}", vec!["10.1.1.1"; MAX_HOPS - 1].join(","));
        assert_eq!(
            proxies.client(peer, &xff(&[&client_then_trusted])),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn ipv4_mapped_addresses_are_ipv4() {
        let proxies = trusted(&["127.0.0.1/32"]);
        let mapped = ip("::ffff:127.0.0.1");
        let headers = xff(&["::ffff:203.0.113.9"]);
        assert_eq!(proxies.client(mapped, &headers), ip("203.0.113.9"));
        assert_eq!(
            ClientNet::of(ip("::ffff:192.0.2.1")),
            ClientNet::of(ip("192.0.2.1"))
        );
    }

    #[test]
    fn ipv6_clients_are_counted_by_their_64() {
        let a = ClientNet::of(ip("2001:db8:1:2::1"));
        assert_eq!(a, ClientNet::of(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")));
        assert_ne!(a, ClientNet::of(ip("2001:db8:1:3::1")));
        assert_eq!(a.to_string(), "2001:db8:1:2::/64");
        assert!(a.is_ipv6());
        let v4 = ClientNet::of(ip("192.0.2.7"));
        assert_eq!(v4.to_string(), "192.0.2.7");
        assert_ne!(v4, ClientNet::of(ip("192.0.2.8")));
    }
}
