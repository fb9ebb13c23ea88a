//! The checks of `clustergate keys`' arguments, as clap value parsers: a bad one exits 2
//! with its reason before anything is read or sent.

use crate::config::ProviderUrl;

/// A key's longest lifetime the command accepts (the gateway's own bound,
/// `api_keys.max_lifetime_days`, is checked there): ten years, so that the seconds sent
/// always fit in the gateway's integers.
const MAX_LIFETIME_SECONDS: u64 = 10 * 366 * 86_400;

/// `30d`, `12h`, `90m` or `45s`: a key's lifetime in seconds (at least one second).
pub fn lifetime(text: &str) -> Result<u64, String> {
    let unit_at = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?}: add a unit: d, h, m or s (30d, 12h, 90m, 45s)"))?;
    let (number, unit) = text.split_at(unit_at);
    let seconds_per_unit: u64 = match unit {
        "d" => 86_400,
        "h" => 3_600,
        "m" => 60,
        "s" => 1,
        _ => {
            return Err(format!(
                "{text:?}: a number and one unit of d, h, m or s (30d, 12h, 90m, 45s)"
            ))
        }
    };
    let count: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: a whole number before the unit (30d, 12h, 90m, 45s)"))?;
    match count.checked_mul(seconds_per_unit) {
        Some(0) => Err(format!("{text:?}: a key lives at least one second")),
        Some(seconds) if seconds <= MAX_LIFETIME_SECONDS => Ok(seconds),
        _ => Err(format!("{text:?}: at most ten years (the gateway's api_keys.max_lifetime_days bounds it further)")),
    }
}

/// A key's name: 1 to 64 of `A-Za-z0-9._-` (what the gateway accepts).
pub fn key_name(text: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    match (1..=64).contains(&text.len()) && text.chars().all(allowed) {
        true => Ok(text.to_string()),
        false => Err(format!(
            "{text:?}: a key's name is 1 to 64 of A-Z a-z 0-9 . _ -"
        )),
    }
}

/// A key's id: the 16 lowercase hex digits after `cgk_` (what `keys list` shows).
pub fn key_id(text: &str) -> Result<String, String> {
    let lower_hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
    match text.len() == 16 && text.chars().all(lower_hex) {
        true => Ok(text.to_string()),
        false => Err(format!(
            "{text:?}: a key's id is 16 lowercase hex digits (the ID column of `clustergate keys list`)"
        )),
    }
}

/// One role's name (the list is split at commas by clap).
pub fn role(text: &str) -> Result<String, String> {
    match text.trim() {
        "" => Err("an empty role name (--roles a,b)".to_string()),
        name => Ok(name.to_string()),
    }
}

/// A client network: a CIDR range, or one address (`10.1.2.3` is `10.1.2.3/32`), as the
/// gateway takes them.
pub fn network(text: &str) -> Result<ipnet::IpNet, String> {
    text.parse::<ipnet::IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("{text:?}: an address or a CIDR range (10.0.0.0/8, 2001:db8::/32)"))
}

/// The gateway's base URL: `https://host[:port]`, or plain `http` to a loopback address
/// (a gateway on this host without TLS): a password or token sent in the clear could be
/// read on the way.
pub fn gateway(text: &str) -> Result<ProviderUrl, String> {
    let url = ProviderUrl::parse(text).map_err(|_| {
        format!("{text:?}: https://host[:port] (plain http:// only to a loopback address)")
    })?;
    match url.path_and_query.as_str() {
        "/" => Ok(url),
        _ => Err(format!(
            "{text:?}: the gateway's address only, without a path"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lifetime_is_a_whole_number_and_one_unit() {
        let table: &[(&str, Result<u64, ()>)] = &[
            ("30d", Ok(2_592_000)),
            ("12h", Ok(43_200)),
            ("90m", Ok(5_400)),
            ("45s", Ok(45)),
            ("1s", Ok(1)),
            ("3660d", Ok(316_224_000)),
            ("0d", Err(())),
            ("30", Err(())),
            ("d", Err(())),
            ("30 d", Err(())),
            ("30D", Err(())),
            ("1h30m", Err(())),
            ("-5m", Err(())),
            ("1.5h", Err(())),
            ("3661d", Err(())),
            ("99999999999999999999d", Err(())),
            ("18446744073709551615d", Err(())),
            ("", Err(())),
        ];
        for (text, expected) in table {
            assert_eq!(lifetime(text).map_err(|_| ()), *expected, "{text:?}");
        }
    }

    #[test]
    fn a_refused_lifetime_says_what_is_expected() {
        let reason = lifetime("30").unwrap_err();
        assert!(reason.contains("30d, 12h, 90m, 45s"), "{reason}");
    }

    #[test]
    fn names_ids_and_roles_are_checked_before_anything_is_sent() {
        assert_eq!(
            key_name("prometheus-exporter.v2_a").unwrap(),
            "prometheus-exporter.v2_a"
        );
        for bad in ["", "has space", "slash/", "é", &"x".repeat(65)] {
            assert!(key_name(bad).is_err(), "{bad:?}");
        }
        assert!(key_name(&"x".repeat(64)).is_ok());
        assert_eq!(key_id("0123456789abcdef").unwrap(), "0123456789abcdef");
        for bad in [
            "0123456789ABCDEF",
            "0123456789abcde",
            "0123456789abcdefa",
            "../../auth/logout",
            "cgk_0123456789abcdef",
        ] {
            assert!(key_id(bad).is_err(), "{bad:?}");
        }
        assert_eq!(role(" read-only ").unwrap(), "read-only");
        assert!(role(" ").is_err());
    }

    #[test]
    fn a_network_is_a_range_or_one_address() {
        assert_eq!(network("10.0.0.0/8").unwrap().to_string(), "10.0.0.0/8");
        assert_eq!(network("10.1.2.3").unwrap().to_string(), "10.1.2.3/32");
        assert_eq!(
            network("2001:db8::1").unwrap().to_string(),
            "2001:db8::1/128"
        );
        for bad in ["10.0.0.0/33", "10.0.0", "host.example", ""] {
            assert!(network(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_gateway_is_https_or_http_to_this_host_and_has_no_path() {
        let url = gateway("https://gw.example:8443").unwrap();
        assert!(url.tls);
        assert_eq!((url.host.as_str(), url.port), ("gw.example", 8443));
        assert_eq!(gateway("https://gw.example/").unwrap().port, 443);
        let ipv6 = gateway("https://[::1]:8443").unwrap();
        assert_eq!(ipv6.host, "::1");
        assert!(!gateway("http://127.0.0.1:8080").unwrap().tls);
        for bad in [
            "http://gw.example:8080",
            "https://gw.example:8443/api",
            "ftp://gw.example",
            "gw.example:8443",
        ] {
            assert!(gateway(bad).is_err(), "{bad:?}");
        }
    }
}
