//! Scripts with the identity provider's tokens (issue 25, item 3), against a real OpenID
//! Certified provider (tests/oidc/provider.js) and the real dashboard: a bearer token is
//! allowed and refused per operation exactly as a local user with the roles its groups map
//! to; forged tokens and unmapped users are refused with JSON 401/403; a key rotation is
//! picked up without a restart; through a provider outage the cached keys keep working and
//! a gateway that never had them refuses with 503; a SIGHUP applies a new group-to-role
//! map; `oidc.local_login = false` closes `/api/auth`.

use std::time::Duration;

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};

const POOLS: &str = "ceph-pools";
const VIEWERS: &str = "ceph-viewers";

/// poolops (pool-manager through its group), watcher (read-only), drifter (no mapped group).
fn provider() -> OidcProvider {
    OidcProvider::start(&[
        ("poolops", &[POOLS, "staff"]),
        ("watcher", &[VIEWERS]),
        ("drifter", &["staff"]),
    ])
}

fn gateway(dash: &Dashboard, idp: &OidcProvider) -> Gateway {
    Gateway::with_dashboard_users()
        .upstream(dash)
        .oidc(
            idp,
            &[(POOLS, &["pool-manager"]), (VIEWERS, &["read-only"])],
        )
        .extra_toml("log", "audit_file = \"audit.log\"")
}

/// Reads and writes of pools and other scopes; the writes name a pool that does not exist.
fn operations() -> Vec<(Method, &'static str, Option<Value>)> {
    vec![
        (Method::GET, "/api/pool", None),
        (Method::GET, "/api/host", None),
        (Method::GET, "/api/osd", None),
        (
            Method::PUT,
            "/api/pool/oidc-no-such-pool",
            Some(json!({"application_metadata": []})),
        ),
        (Method::DELETE, "/api/pool/oidc-no-such-pool", None),
        (Method::DELETE, "/api/user/oidc-no-such-user", None),
    ]
}

/// The statuses of [`operations`] with `token`.
async fn statuses(gw: &RunningGateway, token: &str) -> Vec<u16> {
    let mut out = Vec::new();
    for (method, path, body) in operations() {
        let reply = gw
            .api(method.clone(), path, Some(token), body.as_ref())
            .await;
        if matches!(reply.status, 401 | 403) {
            assert_gateway_refusal(&reply, &format!("{method} {path}"));
        }
        out.push(reply.status);
    }
    out
}

/// A refusal is the gateway's JSON, never a redirect to a sign-in page.
fn assert_gateway_refusal(reply: &Reply, what: &str) {
    assert!(
        reply.content_type().contains("json"),
        "{what}: {}",
        reply.content_type()
    );
    assert!(reply.header("location").is_none(), "{what}: redirected");
    assert!(
        reply.json()["detail"].is_string(),
        "{what}: {}",
        reply.text()
    );
}

#[tokio::test]
async fn a_bearer_token_is_allowed_and_refused_per_operation_as_its_mapped_roles() {
    bearer_tokens_per_operation("16.2").await;
}

#[tokio::test]
async fn ceph_20_2_a_bearer_token_is_allowed_and_refused_per_operation_as_its_mapped_roles() {
    bearer_tokens_per_operation("20.2").await;
}

async fn bearer_tokens_per_operation(release: &'static str) {
    let dash = Dashboard::shared_release(release);
    let idp = provider();
    let gw = gateway(dash, &idp).start();
    for (account, local, local_pw) in [
        ("poolops", POOLMGR, POOLMGR_PW),
        ("watcher", VIEWER, VIEWER_PW),
    ] {
        let sso = statuses(&gw, &idp.token(account).await).await;
        let same_roles = statuses(&gw, &gw.login(local, local_pw).await).await;
        assert_eq!(
            sso, same_roles,
            "{account} (provider) vs {local} (users file)"
        );
        assert!(
            sso.contains(&200) && sso.contains(&403),
            "{account}: {sso:?}"
        );
    }
    // A user none of whose groups is mapped: refused, never given a default role.
    let drifter = idp.token("drifter").await;
    let reply = gw.api(Method::GET, "/api/pool", Some(&drifter), None).await;
    assert_eq!(reply.status, 403, "{}", reply.text());
    assert_gateway_refusal(&reply, "unmapped user");
    // No token, or a browser's Accept: a JSON 401 for API paths, never a redirect.
    let reply = gw
        .send(
            gw.client()
                .get(gw.url("/api/pool"))
                .header("Accept", "text/html"),
        )
        .await;
    assert_eq!(reply.status, 401);
    assert_gateway_refusal(&reply, "no token");
    // The audit names the method and the provider's subject.
    let audit = std::fs::read_to_string(gw.dir().join("audit.log")).unwrap();
    let line = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["user"] == "poolops" && l["event"] == "call")
        .unwrap_or_else(|| panic!("no call by poolops in\n{audit}"));
    assert_eq!(line["auth"], "oidc", "{line}");
    assert_eq!(line["subject"], "script-poolops", "{line}");
    assert_eq!(
        gw.metric("clustergate_oidc_tokens_total", &[("result", "no_role")])
            .await,
        1.0
    );
}

#[tokio::test]
async fn forged_tokens_are_refused_with_401() {
    let dash = Dashboard::shared();
    let idp = provider();
    let gw = gateway(dash, &idp).start();
    let good = idp.claims("poolops", &[POOLS]);
    assert_eq!(
        gw.api_get("/api/pool", Some(&idp.sign("k1", &good)))
            .await
            .status,
        200
    );
    let with = |key: &str, value: Value| {
        let mut claims = good.clone();
        claims[key] = value;
        idp.sign("k1", &claims)
    };
    let b64 = |v: &Value| base64_url(v.to_string().as_bytes());
    // Signed with a key the provider never published, under a kid it does not have.
    idp.foreign_key("k-unknown");
    let unknown_kid = idp.sign("k-unknown", &good);
    let hs256 = {
        use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("k1".into());
        encode(
            &header,
            &good,
            &EncodingKey::from_secret(idp.public_pem("k1").as_bytes()),
        )
        .unwrap()
    };
    let forged = [
        ("wrong issuer", with("iss", json!("http://127.0.0.1:1"))),
        ("wrong audience", with("aud", json!("clustergate"))),
        ("expired", with("exp", json!(now_secs() - 3600))),
        (
            "alg none",
            format!(
                "{}.{}.",
                b64(&json!({"alg": "none", "kid": "k1"})),
                b64(&good)
            ),
        ),
        ("HS256 with the public key", hs256),
        ("unknown kid", unknown_kid),
        (
            "bad signature",
            format!("{}x", idp.sign("k1", &good).trim_end_matches('x')),
        ),
    ];
    for (what, token) in forged {
        let reply = gw.api_get("/api/pool", Some(&token)).await;
        assert_eq!(reply.status, 401, "{what}: {}", reply.text());
        assert_gateway_refusal(&reply, what);
    }
}

fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[tokio::test]
async fn a_key_rotation_is_picked_up_and_cached_keys_serve_through_an_outage() {
    let dash = Dashboard::shared();
    let mut idp = provider();
    let gw = gateway(dash, &idp).start();
    let before = idp.token("poolops").await;
    assert_eq!(gw.api_get("/api/pool", Some(&before)).await.status, 200);
    idp.rotate("k2");
    let after = idp.token("poolops").await;
    assert_eq!(jwt_header(&after)["kid"], "k2");
    // The gateway has not seen k2: the token's unknown kid fetches the keys again (at
    // most once per jwks_min_refresh_seconds, 1 s here, which may not have passed yet).
    eventually(
        "the rotated key",
        Duration::from_millis(200),
        Duration::from_secs(5),
        || async { gw.api_get("/api/pool", Some(&after)).await.status == 200 },
    )
    .await;
    assert_eq!(gw.metric("clustergate_oidc_keys", &[]).await, 2.0);
    idp.stop();
    for token in [&before, &after] {
        let reply = gw.api_get("/api/pool", Some(token)).await;
        assert_eq!(reply.status, 200, "provider down: {}", reply.text());
    }
    assert_eq!(gw.readyz(), 200);
}

#[tokio::test]
async fn a_gateway_that_never_had_the_keys_is_not_ready_and_refuses_provider_tokens_with_503() {
    let dash = Dashboard::shared();
    let mut idp = provider();
    let token = idp.token("poolops").await;
    idp.stop();
    let gw = gateway(dash, &idp).no_wait_active().start();
    assert_eq!(gw.readyz(), 503);
    let reply = gw.api_get("/api/pool", Some(&token)).await;
    assert_eq!(reply.status, 503, "{}", reply.text());
    // Local users still work: the provider's outage is not theirs.
    let local = gw.login(POOLMGR, POOLMGR_PW).await;
    eventually(
        "an active dashboard",
        Duration::from_millis(100),
        Duration::from_secs(10),
        || async { gw.api_get("/api/pool", Some(&local)).await.status == 200 },
    )
    .await;
    idp.start_again();
    gw.wait_readyz(200);
    assert_eq!(gw.api_get("/api/pool", Some(&token)).await.status, 200);
    assert!(
        gw.metric(
            "clustergate_oidc_key_refreshes_total",
            &[("result", "failure")]
        )
        .await
            >= 1.0
    );
}

/// The status of deleting a pool that does not exist (pool-manager may; read-only may not).
async fn delete(gw: &RunningGateway, token: &str) -> u16 {
    let reply = gw
        .api(
            Method::DELETE,
            "/api/pool/oidc-no-such-pool",
            Some(token),
            None,
        )
        .await;
    reply.status
}

#[tokio::test]
async fn a_new_group_to_role_map_applies_on_sighup_to_tokens_already_issued() {
    let dash = Dashboard::shared();
    let idp = provider();
    let mut gw = gateway(dash, &idp).start();
    let token = idp.token("watcher").await;
    assert_eq!(delete(&gw, &token).await, 403);
    assert!(
        gw.reload(|spec| {
            *spec = spec.clone().set_toml(
                "oidc.role_map",
                &format!("{VIEWERS:?}"),
                &format!("{VIEWERS:?} = [\"pool-manager\"]"),
            );
        })
        .await,
        "{}",
        gw.logs()
    );
    assert_ne!(delete(&gw, &token).await, 403);
    // A role no one defined: the reload is refused and the map stays.
    assert!(
        !gw.reload(|spec| {
            *spec = spec.clone().set_toml(
                "oidc.role_map",
                &format!("{VIEWERS:?}"),
                &format!("{VIEWERS:?} = [\"no-such-role\"]"),
            );
        })
        .await
    );
    assert_ne!(delete(&gw, &token).await, 403);
}

#[tokio::test]
async fn local_login_false_closes_api_auth_and_check_config_names_bad_keys() {
    let idp = provider();
    let gw = Gateway::with_admin_and_viewer()
        .oidc(&idp, &[(VIEWERS, &["read-only"])])
        .extra_toml("oidc", "local_login = false")
        .start();
    let reply = gw.try_login(ADMIN, ADMIN_PW).await;
    assert_eq!(reply.status, 403, "{}", reply.text());
    assert_eq!(reply.json()["code"], "local_login_disabled");
    let open = Gateway::with_admin_and_viewer()
        .oidc(&idp, &[(VIEWERS, &["read-only"])])
        .start();
    assert_eq!(open.try_login(ADMIN, ADMIN_PW).await.status, 201);

    let (_dir, out) = Gateway::new()
        .oidc(&idp, &[(VIEWERS, &["read-write"])])
        .extra_toml("oidc", "algorithms = [\"HS256\"]")
        .check_config();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains("oidc.role_map.ceph-viewers: unknown role \"read-write\""),
        "{stderr}"
    );
    assert!(
        stderr.contains("oidc.algorithms[0]: \"HS256\" is never accepted"),
        "{stderr}"
    );
}

/// Issue 33, item 8: with the client id as the audience (`oidc.audience`'s default), the
/// provider's ID tokens and logout tokens carry the audience and the groups as its access
/// tokens do. Only tokens typed `at+jwt` (`oidc.access_token_types`) without `nonce` (ID
/// tokens) or `events` (logout tokens) are taken on API paths; before, each of these was
/// a pool-manager's token.
#[tokio::test]
async fn id_tokens_and_logout_tokens_are_not_access_tokens() {
    let dash = Dashboard::shared();
    let idp = provider();
    let gw = Gateway::new()
        .upstream(dash)
        .oidc_for(&idp, BROWSER_CLIENT, &[(POOLS, &["pool-manager"])])
        .start();
    let mut access = idp.claims("poolops", &[POOLS]);
    access["aud"] = json!(BROWSER_CLIENT);
    let good = idp.sign("k1", &access);
    assert_eq!(gw.api_get("/api/pool", Some(&good)).await.status, 200);
    let mut id = access.clone();
    id["nonce"] = json!("n-0123456789");
    let mut logout = access.clone();
    logout["events"] = json!({"http://schemas.openid.net/event/backchannel-logout": {}});
    let cases = [
        ("an ID token", idp.sign_typed("k1", None, &id)),
        (
            "an ID token typed JWT",
            idp.sign_typed("k1", Some("JWT"), &id),
        ),
        ("an ID token typed at+jwt", idp.sign("k1", &id)),
        (
            "a logout token",
            idp.sign_typed("k1", Some("logout+jwt"), &logout),
        ),
        ("a logout token typed at+jwt", idp.sign("k1", &logout)),
        (
            "a token typed JWT",
            idp.sign_typed("k1", Some("JWT"), &access),
        ),
    ];
    for (what, token) in &cases {
        let reply = gw.api_get("/api/pool", Some(token)).await;
        assert_eq!(reply.status, 401, "{what}: {}", reply.text());
        assert_gateway_refusal(&reply, what);
    }
    assert_eq!(
        gw.metric(
            "clustergate_oidc_tokens_total",
            &[("result", "not_access_token")]
        )
        .await,
        cases.len() as f64
    );
}

/// Issue 33, item 10: a provider user named like a users-file user is shown apart, as
/// `oidc:<name>`, by the token check and in the audit (the name `X-Forwarded-User` and the
/// log lines take too); so is a provider name that starts with `oidc:` itself. Other
/// provider users keep their names; the users file's `admin` is unchanged. Before, the
/// provider's `admin` was shown as the users file's.
#[tokio::test]
async fn a_provider_user_named_like_a_users_file_user_is_shown_apart() {
    let dash = Dashboard::shared();
    let idp = OidcProvider::start(&[(ADMIN, &[POOLS]), ("watcher", &[VIEWERS])]);
    let gw = gateway(dash, &idp).start();
    let token = idp.token(ADMIN).await;
    let check = gw.check(&token).await.json();
    assert_eq!(check["username"], "oidc:admin", "{check}");
    assert_eq!(check["sso"], true);
    assert_eq!(gw.api_get("/api/pool", Some(&token)).await.status, 200);
    // A write, which the audit records.
    assert_ne!(delete(&gw, &token).await, 403);
    let watcher = gw.check(&idp.token("watcher").await).await.json();
    assert_eq!(watcher["username"], "watcher", "{watcher}");
    let mut prefixed = idp.claims("watcher", &[VIEWERS]);
    prefixed["preferred_username"] = json!("oidc:admin");
    let check = gw.check(&idp.sign("k1", &prefixed)).await.json();
    assert_eq!(check["username"], "oidc:oidc:admin", "{check}");
    let local = gw.login(ADMIN, ADMIN_PW).await;
    assert_eq!(gw.check(&local).await.json()["username"], ADMIN);

    let audit = std::fs::read_to_string(gw.dir().join("audit.log")).unwrap();
    let calls: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["auth"] == "oidc")
        .collect();
    assert!(
        calls.iter().any(|l| l["user"] == "oidc:admin"),
        "no call by oidc:admin in\n{audit}"
    );
    assert!(
        calls.iter().all(|l| l["user"] != ADMIN),
        "a provider user shown as the users file's admin in\n{audit}"
    );
}

/// `logout_token` sent to `gw`'s back-channel logout, as the provider sends it.
async fn post_logout(gw: &RunningGateway, token: &str) -> Reply {
    let request = gw
        .client()
        .post(gw.url("/auth/oidc/backchannel-logout"))
        .form(&[("logout_token", token)]);
    gw.send(request).await
}

/// Issue 33, items 7 and 9, across two gateways sharing Redis: the provider's back-channel
/// logout of a user ends the provider's access tokens issued before it (before: only the
/// gateway's own session tokens), on both gateways; its logout token is good once (before:
/// a replay was taken again); and a logout ends only what was issued before its `iat`
/// (before: before the moment it arrived, so a delayed or replayed one ended newer tokens).
#[tokio::test]
async fn a_back_channel_logout_ends_the_provider_tokens_issued_before_it_once() {
    let dash = Dashboard::shared();
    let redis = RedisServer::start();
    let idp = provider();
    let gateway = || {
        Gateway::with_dashboard_users()
            .upstream(dash)
            .known_secret()
            .redis_state(&redis)
            .oidc(
                &idp,
                &[(POOLS, &["pool-manager"]), (VIEWERS, &["read-only"])],
            )
    };
    let (first, second) = (gateway().start(), gateway().start());
    let before = idp.token("poolops").await;
    let other = idp.token("watcher").await;
    for gw in [&first, &second] {
        assert_eq!(gw.api_get("/api/pool", Some(&before)).await.status, 200);
    }
    let logout = idp.logout_token(Some("script-poolops"), None, now_secs());
    let reply = post_logout(&first, &logout).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    for gw in [&first, &second] {
        let reply = gw.api_get("/api/pool", Some(&before)).await;
        assert_eq!(reply.status, 401, "{}", reply.text());
        assert_gateway_refusal(&reply, "a token issued before the logout");
        assert_eq!(gw.api_get("/api/pool", Some(&other)).await.status, 200);
    }
    assert_eq!(
        first
            .metric("clustergate_oidc_tokens_total", &[("result", "logged_out")])
            .await,
        1.0
    );
    // The same logout token again, at either gateway: refused, it has been used.
    for gw in [&first, &second] {
        let reply = post_logout(gw, &logout).await;
        assert_eq!(reply.status, 400, "{}", reply.text());
        assert!(reply.text().contains("used already"), "{}", reply.text());
    }
    // A token issued after the logout works; a logout token issued before that token
    // (a late one, good once) does not end it.
    next_wall_clock_second().await;
    let after = idp.token("poolops").await;
    assert_eq!(second.api_get("/api/pool", Some(&after)).await.status, 200);
    let late = idp.logout_token(Some("script-poolops"), None, now_secs() - 30);
    assert_eq!(post_logout(&second, &late).await.status, 200);
    for gw in [&first, &second] {
        assert_eq!(gw.api_get("/api/pool", Some(&after)).await.status, 200);
        assert_eq!(gw.api_get("/api/pool", Some(&before)).await.status, 401);
    }
}

/// With `upstream.identity = "roles"` a provider user acts upstream as an account holding
/// its mapped roles (issue 32, item 3): the dashboard gives an RGW user's keys to the
/// rgw-manager and withholds them from the read-only user, as it would directly.
#[tokio::test]
async fn a_provider_user_acts_upstream_as_its_mapped_roles() {
    let dash = Dashboard::with_data("16.2");
    let idp = OidcProvider::start(&[("rgwops", &["ceph-rgw"]), ("watcher", &[VIEWERS])]);
    let gw = Gateway::with_dashboard_users()
        .upstream(&dash)
        .oidc(
            &idp,
            &[("ceph-rgw", &["rgw-manager"]), (VIEWERS, &["read-only"])],
        )
        .role_identity("oidc-bearer-test-key-0123456789abcdef")
        .start();
    let path = format!("/api/rgw/user/{}", dash.get("CG_RGW_USER"));
    let keys_of = |answer: &Value| answer["keys"].as_array().map(Vec::len).unwrap_or(0);

    let manager = gw.api_get(&path, Some(&idp.token("rgwops").await)).await;
    assert_eq!(manager.status, 200, "{}", manager.text());
    assert!(
        keys_of(&manager.json()) > 0,
        "rgw-manager: {}",
        manager.text()
    );

    let reader = gw.api_get(&path, Some(&idp.token("watcher").await)).await;
    assert_eq!(reader.status, 200, "{}", reader.text());
    let answer = reader.json();
    assert_eq!(keys_of(&answer), 0, "read-only got keys: {}", reader.text());
    assert!(
        !reader.text().contains(dash.get("CG_RGW_ACCESS_KEY")),
        "read-only got the access key"
    );
}
