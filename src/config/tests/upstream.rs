//! `[upstream]`: timeouts, in-flight limits, the service login's back-off, the answer
//! buffers and the identity the dashboard sees.

use super::*;
use std::time::Duration;

#[test]
fn every_upstream_timeout_is_derived_once_from_the_two_settings() {
    let t = Timeouts::derive(Duration::from_millis(2000), Duration::from_secs(450));
    assert_eq!(t.connect, Duration::from_secs(2));
    assert_eq!(t.read, Duration::from_secs(450));
    assert_eq!(t.write, Duration::from_secs(10));
    assert_eq!(t.health_probe, Duration::from_secs(4));
    assert_eq!(t.standby_probe, Duration::from_secs(2));
    assert_eq!(t.login_answer, Duration::from_secs(10));
    assert_eq!(t.login, Duration::from_secs(10));
    assert_eq!(t.docs_fetch, Duration::from_secs(20));
    // Short connect timeouts keep their floors.
    let short = Timeouts::derive(Duration::from_millis(100), Duration::from_secs(1));
    assert_eq!(short.health_probe, Duration::from_secs(1));
    assert_eq!(short.standby_probe, Duration::from_secs(1));
}

#[test]
fn in_flight_limits_default_below_the_dashboards_threads_and_are_bounded() {
    let d = dir();
    let c = parse(&with_upstream(d.path(), ""), d.path()).unwrap();
    assert_eq!(
        c.upstream.unwrap().in_flight,
        InFlightLimits {
            max: 8,
            queued: 64,
            wait: Duration::from_secs(5),
        }
    );
    for (line, key) in [
        ("max_in_flight = 0", "upstream.max_in_flight"),
        ("max_queued = 100001", "upstream.max_queued"),
        ("queue_timeout_ms = 0", "upstream.queue_timeout_ms"),
    ] {
        let e = parse(&with_upstream(d.path(), line), d.path()).unwrap_err();
        assert!(e.mentions(key), "{line}: {e}");
    }
}

#[test]
fn refused_service_logins_back_off_doubling_to_a_bound() {
    let d = dir();
    let c = parse(&with_upstream(d.path(), ""), d.path()).unwrap();
    let backoff = c.upstream.unwrap().login_backoff;
    let waits: Vec<u64> = [1, 2, 3, 7, 8, 100]
        .map(|refusals| backoff.after(refusals).as_secs())
        .to_vec();
    assert_eq!(waits, [10, 20, 40, 600, 600, 600]);
    for (line, key) in [
        ("login_backoff_min_ms = 0", "upstream.login_backoff_min_ms"),
        (
            "login_backoff_min_ms = 5000\nlogin_backoff_max_ms = 4000",
            "upstream.login_backoff_max_ms",
        ),
    ] {
        let e = parse(&with_upstream(d.path(), line), d.path()).unwrap_err();
        assert!(e.mentions(key), "{line}: {e}");
    }
}

#[test]
fn answer_buffers_default_above_the_largest_answer_and_are_bounded() {
    let d = dir();
    let c = parse(&with_upstream(d.path(), ""), d.path()).unwrap();
    assert_eq!(
        c.upstream.unwrap().answer_buffers,
        AnswerBufferLimits {
            per_answer: 8 * 1024 * 1024,
            total: 64 * 1024 * 1024,
        }
    );
    let c = parse(
        &with_upstream(
            d.path(),
            "answer_buffer_bytes = 0\nanswer_buffers_total_bytes = 0",
        ),
        d.path(),
    )
    .unwrap();
    assert_eq!(c.upstream.unwrap().answer_buffers.total, 0);
    for (line, key) in [
        (
            "answer_buffer_bytes = 100000000",
            "upstream.answer_buffer_bytes",
        ),
        (
            "answer_buffers_total_bytes = 10000000000",
            "upstream.answer_buffers_total_bytes",
        ),
    ] {
        let e = parse(&with_upstream(d.path(), line), d.path()).unwrap_err();
        assert!(e.mentions(key), "{line}: {e}");
    }
}

#[test]
fn upstream_identity_is_roles_by_default_or_service_or_user() {
    let d = dir();
    let c = parse(&with_upstream(d.path(), ""), d.path()).unwrap();
    assert_eq!(c.identity(), UpstreamIdentity::Roles);
    let c = parse(&with_upstream(d.path(), "identity = \"service\""), d.path()).unwrap();
    assert_eq!(c.identity(), UpstreamIdentity::Service);
    let c = parse(&with_upstream(d.path(), "identity = \"user\""), d.path()).unwrap();
    assert_eq!(c.identity(), UpstreamIdentity::User);
    let e = parse(&with_upstream(d.path(), "identity = \"admin\""), d.path()).unwrap_err();
    assert!(e.mentions("upstream.identity"), "{e}");
}

#[test]
fn gateways_sharing_redis_with_role_accounts_need_one_accounts_key() {
    let d = dir();
    crate::secrets::write_private(&d.path().join("redis.key"), &[7u8; 32]).unwrap();
    crate::secrets::write_private(&d.path().join("accounts.key"), &[9u8; 32]).unwrap();
    let redis = "[state]\nbackend = \"redis\"\n[state.redis]\nurl = \"redis://127.0.0.1:6379\"\nencryption_keys = [{ kid = \"1\", secret_file = \"redis.key\" }]\n";
    let text = |upstream: &str| format!("{}\n{redis}", with_upstream(d.path(), upstream));
    let e = parse(&text(""), d.path()).unwrap_err();
    assert!(e.mentions("upstream.accounts_key_file"), "{e}");
    assert!(e.to_string().contains("head -c 32 /dev/urandom"), "{e}");
    parse(&text("accounts_key_file = \"accounts.key\""), d.path())
        .unwrap_or_else(|e| panic!("{e}"));
    parse(&text("identity = \"service\""), d.path()).unwrap_or_else(|e| panic!("{e}"));
    parse(&with_upstream(d.path(), ""), d.path()).unwrap_or_else(|e| panic!("{e}"));
}
