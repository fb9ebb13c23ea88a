//! `[server]` and `[metrics]`: the listeners, TLS, the client limits, the body budget and
//! the trusted proxies.

use super::*;
use std::time::Duration;

#[test]
fn bad_listen_address_names_the_key() {
    assert!(errors_of("[server]\nlisten = \"8443\"").mentions("server.listen"));
}

#[test]
fn metrics_listen_must_differ_from_server_listen() {
    let e =
        errors_of("[server]\nlisten = \"0.0.0.0:9000\"\n[metrics]\nlisten = \"127.0.0.1:9000\"");
    assert!(e.mentions("metrics.listen"), "{e}");
}

#[test]
fn both_listeners_may_ask_for_port_0() {
    let d = dir();
    let text = "[server]\nlisten = \"127.0.0.1:0\"\n[metrics]\nlisten = \"127.0.0.1:0\"";
    let c = parse(text, d.path()).unwrap();
    assert_eq!(c.server.listen.port(), 0);
    assert_eq!(c.metrics.listen.port(), 0);
}

#[test]
fn cert_without_key_is_refused() {
    assert!(errors_of("[server]\ncert_file = \"c.pem\"").mentions("server.key_file"));
}

#[test]
fn unreadable_certificate_files_are_refused() {
    let e = errors_of("[server]\ncert_file = \"c.pem\"\nkey_file = \"k.pem\"");
    assert!(e.mentions("server.cert_file"), "{e}");
}

#[test]
fn tls_off_ignores_certificate_settings() {
    let d = dir();
    let c = parse("[server]\ntls = false", d.path()).unwrap();
    assert!(matches!(c.server.tls, TlsMode::Off));
}

// Found by fuzz_properties::config: an unreadable key file was reported as
// server.cert_file, with pingora's "Certificate in pem file could not be read".
#[test]
fn an_unreadable_key_file_is_named_by_its_key() {
    let d = dir();
    crate::tls::ensure_generated(d.path()).unwrap();
    for key_file in ["missing.pem", "", "tls"] {
        let text = format!("[server]\ncert_file = \"tls/cert.pem\"\nkey_file = {key_file:?}");
        let e = parse(&text, d.path()).unwrap_err();
        assert!(
            e.mentions("server.key_file") && !e.mentions("server.cert_file"),
            "{e}"
        );
    }
}

#[test]
fn client_limits_have_documented_defaults() {
    let d = dir();
    let c = parse("", d.path()).unwrap();
    assert_eq!(
        c.server.clients,
        ClientLimits {
            max_header_bytes: 32 * 1024,
            max_header_count: 100,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(10),
            min_send_rate: Some(16 * 1024),
            keepalive_timeout: Duration::from_secs(60),
            max_connections_per_ip: Some(64),
        }
    );
    let c = parse("[server]\nmin_send_bytes_per_second = 0\n", d.path()).unwrap();
    assert_eq!(c.server.clients.min_send_rate, None);
    let c = parse("[server]\nmax_connections_per_ip = 50\n", d.path()).unwrap();
    assert_eq!(c.server.clients.max_connections_per_ip, Some(50));
    let c = parse("[server]\nmax_connections_per_ip = 0\n", d.path()).unwrap();
    assert_eq!(c.server.clients.max_connections_per_ip, None, "0: no cap");
}

#[test]
fn client_limits_are_bounded_by_what_pingora_parses() {
    for (line, key) in [
        ("max_header_bytes = 100", "server.max_header_bytes"),
        ("max_header_bytes = 2000000", "server.max_header_bytes"),
        ("max_header_count = 0", "server.max_header_count"),
        ("max_header_count = 257", "server.max_header_count"),
        ("header_timeout_ms = 10", "server.header_timeout_ms"),
        ("body_timeout_ms = 10", "server.body_timeout_ms"),
        ("body_timeout_ms = 600001", "server.body_timeout_ms"),
        ("keepalive_timeout_s = 0", "server.keepalive_timeout_s"),
        ("write_timeout_ms = 10", "server.write_timeout_ms"),
        ("write_timeout_ms = 600001", "server.write_timeout_ms"),
        (
            "min_send_bytes_per_second = 2000000000",
            "server.min_send_bytes_per_second",
        ),
    ] {
        assert!(
            errors_of(&format!("[server]\n{line}\n")).mentions(key),
            "{line}"
        );
    }
}

#[test]
fn bodies_without_a_token_are_small_and_the_budget_is_derived_unless_set() {
    let d = dir();
    let c = parse(&with_upstream(d.path(), ""), d.path()).unwrap();
    let upstream = c.upstream.unwrap();
    assert_eq!(upstream.max_body_bytes, 10 * 1024 * 1024);
    assert_eq!(upstream.max_open_body_bytes, 16 * 1024);
    assert_eq!(c.server.body_budget, None, "derived at start");
    let text = format!(
        "[server]\nbody_budget_bytes = 33554432\n{}",
        with_upstream(d.path(), "max_open_body_bytes = 4096\n")
    );
    let c = parse(&text, d.path()).unwrap();
    assert_eq!(c.server.body_budget, Some(32 * 1024 * 1024));
    assert_eq!(c.upstream.unwrap().max_open_body_bytes, 4096);
    // Never more than a token holder may send.
    let text = with_upstream(d.path(), "max_body_bytes = 1000\n");
    let c = parse(&text, d.path()).unwrap();
    assert_eq!(c.upstream.unwrap().max_open_body_bytes, 1000);
}

#[test]
fn body_limits_and_the_budget_are_checked_against_each_other() {
    let d = dir();
    for (server, upstream, key) in [
        ("body_budget_bytes = 1000", "", "server.body_budget_bytes"),
        (
            "body_budget_bytes = 1048576",
            "",
            "server.body_budget_bytes",
        ),
        (
            "",
            "max_open_body_bytes = 0",
            "upstream.max_open_body_bytes",
        ),
    ] {
        let text = format!(
            "[server]\n{server}\n{}",
            with_upstream(d.path(), &format!("{upstream}\n"))
        );
        let e = parse(&text, d.path()).unwrap_err();
        assert!(e.mentions(key), "{server} {upstream}: {e}");
    }
    // Without [upstream], only the auth endpoints' bodies need room.
    assert!(parse("[server]\nbody_budget_bytes = 65536\n", d.path()).is_ok());
}

#[test]
fn work_stealing_is_off_unless_set_and_must_be_a_boolean() {
    let d = dir();
    assert!(!parse("", d.path()).unwrap().server.work_stealing);
    let c = parse("[server]\nwork_stealing = true\n", d.path()).unwrap();
    assert!(c.server.work_stealing);
    assert!(errors_of("[server]\nwork_stealing = \"yes\"").mentions("server.work_stealing"));
}

#[test]
fn trusted_proxies_take_cidrs_and_addresses() {
    let d = dir();
    let c = parse(
        "[server]\ntrusted_proxies = [\"10.0.0.0/8\", \"192.0.2.5\", \"2001:db8::/32\"]",
        d.path(),
    )
    .unwrap();
    let nets = ["10.0.0.0/8", "192.0.2.5/32", "2001:db8::/32"];
    assert_eq!(
        c.server.trusted_proxies,
        crate::client_addr::TrustedProxies::new(nets.iter().map(|n| n.parse().unwrap()).collect())
    );
}

#[test]
fn an_invalid_trusted_proxy_is_named_by_its_index() {
    let e =
        errors_of("[server]\ntrusted_proxies = [\"10.0.0.0/8\", \"10.0.0.0/33\", \"proxy.local\"]");
    assert!(e.mentions("server.trusted_proxies[1]"), "{e}");
    assert!(e.mentions("server.trusted_proxies[2]"), "{e}");
    assert!(!e.mentions("server.trusted_proxies[0]"), "{e}");
}

#[test]
fn a_trusted_proxy_with_bits_after_its_prefix_is_refused_with_the_fix() {
    let e = errors_of("[server]\ntrusted_proxies = [\"10.1.2.3/8\"]");
    assert!(e.mentions("server.trusted_proxies[0]"), "{e}");
    assert!(e.to_string().contains("\"10.0.0.0/8\""), "{e}");
}
