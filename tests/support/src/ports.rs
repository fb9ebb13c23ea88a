//! Ports for the servers tests start (gateways, Redis, HAProxy, Prometheus), each handed out
//! once per process.
//!
//! Not bind-port-0-and-drop: the kernel takes bind(0) ports, and every outgoing connection's
//! local port, from its ephemeral range (32768-60999), and may hand a port just dropped to
//! the next bind(0) of another test thread. CI saw a gateway's port already held by another
//! test's admin listener, which then answered the first gateway's requests. Ports here come
//! from 10000-19999, below that range and below the ceph-dev scripts' 20000-32767, from one
//! counter per process (so no two servers of a test binary are given the same port), its
//! start spread by pid (so two test processes rarely meet); a port someone else listens on
//! is skipped.
//!
//! The unit tests of `src/` and the integration tests take them from here, each test process
//! from its own counter.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

const FIRST: u32 = 10_000;
const COUNT: u32 = 10_000;

/// The next port to try, as an offset from `FIRST`; `u32::MAX` until the first pick.
static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);

/// A port on 127.0.0.1 nobody listens on and no other caller of this process was given.
pub fn free_port() -> u16 {
    first_unheld((0..COUNT).map(|_| next_candidate()))
        .unwrap_or_else(|| panic!("no free port on 127.0.0.1 in {FIRST}-{}", FIRST + COUNT - 1))
}

fn first_unheld(mut candidates: impl Iterator<Item = u16>) -> Option<u16> {
    candidates.find(|&port| TcpListener::bind(("127.0.0.1", port)).is_ok())
}

/// `N` distinct free ports.
pub fn free_ports<const N: usize>() -> [u16; N] {
    [(); N].map(|()| free_port())
}

fn next_candidate() -> u16 {
    let start = std::process::id().wrapping_mul(397) % COUNT;
    let _ = NEXT.compare_exchange(u32::MAX, start, Ordering::Relaxed, Ordering::Relaxed);
    let offset = NEXT.fetch_add(1, Ordering::Relaxed) % COUNT;
    // FIRST + offset < 20_000, so it fits.
    (FIRST + offset) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_never_handed_out_twice_and_lie_outside_the_kernels_ephemeral_range() {
        let ports = free_ports::<500>();
        let distinct: std::collections::HashSet<_> = ports.iter().collect();
        assert_eq!(distinct.len(), ports.len());
        assert!(ports.iter().all(|p| (10_000..20_000).contains(p)));
    }

    #[test]
    fn a_port_someone_listens_on_is_skipped() {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let held_port = held.local_addr().unwrap().port();
        let free = TcpListener::bind("127.0.0.1:0").unwrap();
        let free_port = free.local_addr().unwrap().port();
        drop(free);
        assert_eq!(
            first_unheld([held_port, free_port].into_iter()),
            Some(free_port)
        );
    }
}
