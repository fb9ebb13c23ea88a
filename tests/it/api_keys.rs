//! API keys against the real dashboard (docs/api-keys.md): a key made
//! through the key API acts with its roles only, at the edge and at the dashboard (the
//! account holding its roles); it gets no role its creator lacks; an expired or revoked
//! key is refused on every gateway of a deployment (two on one Redis); a key limited to an
//! address range is refused from another; each key is held to its rate (429 with
//! `Retry-After`); the `keys` command does its work with no password stored.

use std::time::Duration;

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};

const KEYS: &str = "/api/clustergate/keys";

/// A gateway in front of the shared dashboard, its users seen there as the accounts the
/// gateway manages for their roles.
fn gateway() -> Gateway {
    Gateway::with_dashboard_users()
        .upstream(Dashboard::shared())
        .role_identity(ROLE_ACCOUNTS_KEY)
}

/// Creates a key as `token`'s user; the answer.
async fn create(gw: &RunningGateway, token: &str, body: Value) -> Reply {
    gw.api(Method::POST, KEYS, Some(token), Some(&body)).await
}

/// A key for `token`'s user holding `roles`, living `seconds`: the key.
async fn key_for(gw: &RunningGateway, token: &str, roles: &[&str], seconds: u64) -> String {
    let body = json!({"name": "test-job", "roles": roles, "expires_in_seconds": seconds});
    let created = create(gw, token, body).await;
    assert_eq!(created.status, 201, "{}", created.text());
    created.json()["key"].as_str().unwrap().to_string()
}

fn id_of(key: &str) -> &str {
    &key[4..20]
}

#[tokio::test]
async fn a_read_only_key_reads_and_is_refused_writes() {
    let gw = gateway().start();
    let admin = gw.login(ADMIN, ADMIN_PW).await;
    let key = key_for(&gw, &admin, &["read-only"], 600).await;
    let pools = gw.api_get("/api/pool", Some(&key)).await;
    assert_eq!(pools.status, 200, "{}", pools.text());
    assert!(pools.json().as_array().is_some(), "{}", pools.text());
    let write = json!({"pool": "cg-key-denied", "pg_num": 8, "pool_type": "replicated"});
    let refused = gw
        .api(Method::POST, "/api/pool", Some(&key), Some(&write))
        .await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert_eq!(refused.json()["detail"], FORBIDDEN_DETAIL);
    // The key's check answers as the dashboard's for its roles.
    let checked = gw.check(&key).await.json();
    assert_eq!(checked["username"], ADMIN, "{checked}");
    let permissions = checked["permissions"].as_object().unwrap();
    assert!(
        permissions.values().all(|p| p == &json!(["read"])),
        "a read-only key's permissions: {checked}"
    );
    let metrics = gw.metrics().await;
    assert!(
        metrics.contains("clustergate_api_key_requests_total{result=\"accepted\"}"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_key_gets_no_more_roles_than_its_creator_and_never_makes_keys() {
    let gw = gateway().start();
    let viewer = gw.login(VIEWER, VIEWER_PW).await;
    let more = json!({"name": "escalate", "roles": ["administrator"], "expires_in_seconds": 60});
    let refused = create(&gw, &viewer, more).await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(
        refused.text().contains("administrator"),
        "{}",
        refused.text()
    );
    let key = key_for(&gw, &viewer, &["read-only"], 60).await;
    let again = json!({"name": "child", "roles": ["read-only"], "expires_in_seconds": 60});
    let refused = create(&gw, &key, again).await;
    assert_eq!(refused.status, 403, "a key made a key: {}", refused.text());
    let listed = gw.api_get(KEYS, Some(&viewer)).await;
    assert_eq!(listed.status, 200, "{}", listed.text());
    assert!(
        !listed.text().contains(&key[20..]),
        "the list shows a secret"
    );
}

#[tokio::test]
async fn expired_and_revoked_keys_get_401_on_every_gateway() {
    let redis = RedisServer::start();
    let spec = gateway().redis_state(&redis);
    let (first, second) = (spec.clone().start(), spec.start());
    let admin = first.login(ADMIN, ADMIN_PW).await;
    let revoked = key_for(&first, &admin, &["read-only"], 600).await;
    let expiring = key_for(&first, &admin, &["read-only"], 3).await;
    for gw in [&first, &second] {
        for key in [&revoked, &expiring] {
            let r = gw.api_get("/api/summary", Some(key)).await;
            assert_eq!(r.status, 200, "{}", r.text());
        }
    }
    let path = format!("{KEYS}/{}", id_of(&revoked));
    let r = first.api(Method::DELETE, &path, Some(&admin), None).await;
    assert_eq!(r.status, 204, "{}", r.text());
    let r = first.api_get("/api/summary", Some(&revoked)).await;
    assert_eq!(
        r.status,
        401,
        "at once on the revoking gateway: {}",
        r.text()
    );
    let every = Duration::from_millis(100);
    eventually(
        "the revocation on the other gateway",
        every,
        Duration::from_secs(5),
        || refused_by(&second, &revoked),
    )
    .await;
    for gw in [&first, &second] {
        eventually("the expiry", every, Duration::from_secs(10), || {
            refused_by(gw, &expiring)
        })
        .await;
        let r = gw.api_get("/api/summary", Some(&expiring)).await;
        assert_eq!(
            r.json()["detail"],
            "You are not authorized to access that resource"
        );
    }
}

/// Whether `gw` refuses `key` with 401.
async fn refused_by(gw: &RunningGateway, key: &str) -> bool {
    gw.api_get("/api/summary", Some(key)).await.status == 401
}

#[tokio::test]
async fn a_key_limited_to_an_address_range_is_refused_from_another() {
    let gw = gateway().start();
    let admin = gw.login(ADMIN, ADMIN_PW).await;
    let limited = |networks: &[&str]| {
        json!({"name": "exporter", "roles": ["read-only"], "expires_in_seconds": 60,
               "networks": networks})
    };
    let elsewhere = create(&gw, &admin, limited(&["10.0.0.0/8"])).await.json();
    let here = create(&gw, &admin, limited(&["127.0.0.0/8", "::1"]))
        .await
        .json();
    let summary = |key: &Value| {
        let key = key["key"].as_str().unwrap().to_string();
        let gw = &gw;
        async move { gw.api_get("/api/summary", Some(&key)).await }
    };
    assert_eq!(summary(&here).await.status, 200);
    let refused = summary(&elsewhere).await;
    assert_eq!(refused.status, 401, "{}", refused.text());
}

#[tokio::test]
async fn each_key_is_held_to_its_rate_with_retry_after() {
    let gw = gateway()
        .extra_toml("api_keys", "rate_per_second = 1")
        .extra_toml("api_keys", "burst = 2")
        .start();
    let admin = gw.login(ADMIN, ADMIN_PW).await;
    let key = key_for(&gw, &admin, &["read-only"], 60).await;
    let statuses =
        futures_util::future::join_all((0..6).map(|_| gw.api_get("/api/summary", Some(&key))))
            .await;
    let limited: Vec<&Reply> = statuses.iter().filter(|r| r.status == 429).collect();
    assert!(
        limited.len() >= 3,
        "{:?}",
        statuses.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    let retry: u64 = limited[0].header("retry-after").unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry), "Retry-After: {retry}");
    // The token of a login is not held to the key's rate.
    assert_eq!(gw.api_get("/api/summary", Some(&admin)).await.status, 200);
}
