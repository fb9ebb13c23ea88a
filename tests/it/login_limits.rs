//! Failed logins per client address: one client spraying a password over many usernames is
//! refused with 429 and Retry-After after `auth.max_failed_logins_per_ip_per_minute`, before
//! any hash, while other clients log in. Clients are told apart through `X-Forwarded-For`
//! from 127.0.0.1 listed in `server.trusted_proxies`; from an untrusted peer it is ignored.

use std::time::Instant;

use crate::common::*;

const SPRAYED: &str = "Winter2026!";

/// Failed logins, each for another username, with `X-Forwarded-For: forwarded_for(i)`, sent
/// to the gateways in turn, until one is refused; returns that refusal. The bucket holds `per_minute` tokens and refills
/// one every 60/`per_minute` s, so the refusal comes after `per_minute` failures, plus those
/// that refilled meanwhile (none when the machine is fast).
async fn spray_until_refused(
    gateways: &[&RunningGateway],
    per_minute: u32,
    forwarded_for: impl Fn(u32) -> String,
) -> Reply {
    let started = Instant::now();
    for i in 0..per_minute * 3 {
        let gw = gateways[i as usize % gateways.len()];
        let r = gw
            .try_login_forwarded(&forwarded_for(i), &format!("user-{i}"), SPRAYED)
            .await;
        if r.status == 429 {
            let elapsed_ms = started.elapsed().as_millis() as u64;
            let refilled = (elapsed_ms * u64::from(per_minute) / 60_000) as u32;
            assert!(
                (per_minute..=per_minute + refilled).contains(&i),
                "refused after {i} failures in {elapsed_ms} ms, at {per_minute} a minute"
            );
            return r;
        }
        assert_invalid_credentials(&r);
    }
    panic!("{} failed logins and never refused", per_minute * 3);
}

/// 429 in the dashboard's status shape, with `Retry-After` in whole seconds, at most
/// `max_seconds`.
fn assert_rate_limited(r: &Reply, max_seconds: u64) {
    assert_status_shape(r, 429, "429 Too Many Requests", None);
    let retry_after: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("Retry-After in seconds");
    assert!(
        (1..=max_seconds).contains(&retry_after),
        "Retry-After {retry_after}"
    );
    assert!(
        r.json()["detail"]
            .as_str()
            .unwrap()
            .contains("Too many failed logins"),
        "{}",
        r.text()
    );
}

async fn metric(gw: &RunningGateway, name: &str, labels: &[(&str, &str)]) -> f64 {
    metric_sum(&gw.metrics().await, name, labels)
}

#[tokio::test]
async fn a_client_spraying_one_password_over_usernames_gets_429_while_another_client_logs_in() {
    let gw = Gateway::with_admin_and_viewer()
        .failed_logins_per_minute(5)
        .trusted_proxies(&["127.0.0.1/32"])
        .start();
    // 5 a minute: one token every 12 s.
    let r = spray_until_refused(&[&gw], 5, |_| "203.0.113.7".into()).await;
    assert_rate_limited(&r, 12);
    let hashes = metric(&gw, "clustergate_password_verifications_total", &[]).await;
    // Even the right password: the client is refused before its password is looked at.
    let r = gw.try_login_forwarded("203.0.113.7", ADMIN, ADMIN_PW).await;
    assert_rate_limited(&r, 12);
    assert_eq!(
        metric(&gw, "clustergate_password_verifications_total", &[]).await,
        hashes,
        "no password hashed for a refused client"
    );
    // Another client address is not slowed down.
    let r = gw.try_login_forwarded("203.0.113.8", ADMIN, ADMIN_PW).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let text = gw.metrics().await;
    let limited = [("family", "ipv4")];
    assert_eq!(
        metric_sum(&text, "clustergate_login_rate_limited_total", &limited),
        2.0
    );
    let result = [("result", "rate_limited")];
    assert_eq!(metric_sum(&text, "clustergate_logins_total", &result), 2.0);
}

#[tokio::test]
async fn the_default_is_30_failed_logins_a_minute() {
    // No trusted proxies: every request is 127.0.0.1's, whatever it forwards.
    let gw = Gateway::with_admin_and_viewer().start();
    // 30 a minute: one token every 2 s.
    let r = spray_until_refused(&[&gw], 30, |i| format!("198.51.100.{i}")).await;
    assert_rate_limited(&r, 2);
}

#[tokio::test]
async fn an_untrusted_peer_cannot_pick_its_address_with_x_forwarded_for() {
    // 127.0.0.1 is not in the trusted list: its X-Forwarded-For is not believed.
    let gw = Gateway::with_admin_and_viewer()
        .failed_logins_per_minute(3)
        .trusted_proxies(&["10.0.0.0/8"])
        .start();
    let r = spray_until_refused(&[&gw], 3, |i| format!("198.51.100.{i}")).await;
    assert_rate_limited(&r, 20);
    let r = gw
        .try_login_forwarded("198.51.100.200", ADMIN, ADMIN_PW)
        .await;
    assert_rate_limited(&r, 20);
}

#[tokio::test]
async fn behind_a_trusted_proxy_only_the_right_most_untrusted_address_counts() {
    let gw = Gateway::with_admin_and_viewer()
        .failed_logins_per_minute(3)
        .trusted_proxies(&["127.0.0.1/32", "10.0.0.0/8"])
        .start();
    // The client writes the left part; the proxies append what they saw.
    let chain = |i| format!("198.51.100.{i}, 203.0.113.7, 10.0.0.1");
    assert_rate_limited(&spray_until_refused(&[&gw], 3, chain).await, 20);
    let r = gw
        .try_login_forwarded("192.0.2.99, 203.0.113.7", ADMIN, ADMIN_PW)
        .await;
    assert_rate_limited(&r, 20);
    // A malformed value is the peer itself, another client here.
    let r = gw.try_login_forwarded("unknown", ADMIN, ADMIN_PW).await;
    assert_eq!(r.status, 201, "{}", r.text());
}

#[tokio::test]
async fn ipv6_clients_are_limited_by_their_64() {
    let gw = Gateway::with_admin_and_viewer()
        .failed_logins_per_minute(3)
        .trusted_proxies(&["127.0.0.1/32"])
        .start();
    let addresses = |i| format!("2001:db8:1:2::{:x}", i + 1);
    assert_rate_limited(&spray_until_refused(&[&gw], 3, addresses).await, 20);
    let r = gw
        .try_login_forwarded("2001:db8:1:2:ffff::1", ADMIN, ADMIN_PW)
        .await;
    assert_rate_limited(&r, 20);
    let r = gw
        .try_login_forwarded("2001:db8:1:3::1", ADMIN, ADMIN_PW)
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let limited = [("family", "ipv6")];
    assert_eq!(
        metric(&gw, "clustergate_login_rate_limited_total", &limited).await,
        2.0
    );
}

#[tokio::test]
async fn zero_disables_the_limit_and_the_username_lockout_still_applies() {
    let gw = Gateway::with_admin_and_viewer()
        .failed_logins_per_minute(0)
        .lockout(3, 300)
        .start();
    for i in 0..40 {
        assert_invalid_credentials(&gw.try_login(&format!("user-{i}"), SPRAYED).await);
    }
    for _ in 0..3 {
        assert_invalid_credentials(&gw.try_login(ADMIN, SPRAYED).await);
    }
    assert_invalid_credentials(&gw.try_login(ADMIN, ADMIN_PW).await);
    gw.login(VIEWER, VIEWER_PW).await;
}

#[tokio::test]
async fn gateways_sharing_a_redis_share_each_clients_bucket_and_fail_closed_without_it() {
    let mut redis = RedisServer::start();
    let start = || {
        Gateway::with_admin_and_viewer()
            .failed_logins_per_minute(4)
            .trusted_proxies(&["127.0.0.1/32"])
            .redis_state(&redis)
            .start()
    };
    let (a, b) = (start(), start());
    let r = spray_until_refused(&[&a, &b], 4, |_| "203.0.113.7".into()).await;
    assert_rate_limited(&r, 15);
    for gw in [&a, &b] {
        let r = gw.try_login_forwarded("203.0.113.7", ADMIN, ADMIN_PW).await;
        assert_rate_limited(&r, 15);
    }
    let r = b.try_login_forwarded("203.0.113.8", ADMIN, ADMIN_PW).await;
    assert_eq!(r.status, 201, "{}", r.text());

    redis.stop();
    let r = a.try_login_forwarded("203.0.113.9", ADMIN, ADMIN_PW).await;
    assert_status_shape(
        &r,
        503,
        "503 Service Unavailable",
        Some("session store unavailable"),
    );
}
