//! `POST /api/auth/check` and `POST /api/auth/logout`: which tokens count, where they are read
//! from, and what logout revokes.

use std::time::Duration;

use crate::common::*;
use serde_json::json;

fn other_secret() -> &'static [u8] {
    b"another-secret-another-secret-another-secret"
}

/// A token over our claims with another HMAC algorithm: the gateway must insist on HS256.
fn forge_with(alg: jsonwebtoken::Algorithm, secret: &[u8], claims: &serde_json::Value) -> String {
    let header = jsonwebtoken::Header::new(alg);
    let key = jsonwebtoken::EncodingKey::from_secret(secret);
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

/// `{"alg":"none"}` with an empty signature.
fn unsigned_token(claims: &serde_json::Value) -> String {
    use base64::Engine;
    let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(claims.to_string().as_bytes())
    )
}

#[tokio::test]
async fn check_with_a_valid_token_answers_user_and_permissions_in_v1() {
    let gw = Gateway::with_admin_and_viewer().start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let r = gw.check(&token).await;
    assert_check_ok(&r, ADMIN, &admin_permissions());
    assert_eq!(r.content_type(), V1);
    let vtoken = gw.login(VIEWER, VIEWER_PW).await;
    assert_check_ok(&gw.check(&vtoken).await, VIEWER, &read_only_permissions());
}

#[tokio::test]
async fn a_token_forged_with_the_configured_secret_file_is_accepted() {
    // Guards the forged-token tests below: `auth.secret_file` is the signing secret.
    let gw = Gateway::new().user(User::admin()).known_secret().start();
    let login = gw.login(ADMIN, ADMIN_PW).await;
    let token = forge_token(
        TEST_SECRET.as_bytes(),
        &with_credential_of(claims("clustergate", ADMIN, 10, 3600), &login),
    );
    assert_check_ok(&gw.check(&token).await, ADMIN, &admin_permissions());
    assert_not_found(&gw.api_get("/api/summary", Some(&token)).await);
}

#[tokio::test]
async fn check_answers_login_url_for_every_kind_of_unusable_token() {
    let gw = Gateway::new().user(User::admin()).known_secret().start();
    let secret = TEST_SECRET.as_bytes();
    let good = gw.login(ADMIN, ADMIN_PW).await;
    let mut tampered = good.clone();
    tampered.push('x');
    // Each forged token is refused for the one thing it gets wrong, not for the lack of
    // the credential fingerprint a token of ours carries.
    let claims = |issuer: &str, username: &str, age, ttl| {
        with_credential_of(claims(issuer, username, age, ttl), &good)
    };
    let cases = [
        ("empty", String::new()),
        ("garbage", "not-a-jwt".to_string()),
        ("three garbage parts", "a.b.c".to_string()),
        ("tampered signature", tampered),
        (
            "another secret",
            forge_token(other_secret(), &claims("clustergate", ADMIN, 10, 3600)),
        ),
        (
            "another issuer",
            forge_token(secret, &claims("ceph-dashboard", ADMIN, 10, 3600)),
        ),
        (
            "expired an hour ago",
            forge_token(secret, &claims("clustergate", ADMIN, 7200, 3600)),
        ),
        (
            "unknown user",
            forge_token(secret, &claims("clustergate", "ghost", 10, 3600)),
        ),
        (
            "HS512 with our secret",
            forge_with(
                jsonwebtoken::Algorithm::HS512,
                secret,
                &claims("clustergate", ADMIN, 10, 3600),
            ),
        ),
        (
            "alg none",
            unsigned_token(&claims("clustergate", ADMIN, 10, 3600)),
        ),
    ];
    for (what, token) in cases {
        let r = gw.check(&token).await;
        assert_eq!(r.status, 200, "{what}: {}", r.text());
        assert_login_url(&r);
        assert_unauthorized(&gw.api_get("/api/summary", Some(&token)).await);
    }
    let r = gw.post_json("/api/auth/check", Some(V1), &json!({})).await;
    assert_login_url(&r);
}

#[tokio::test]
async fn check_reads_the_token_from_the_query_when_the_body_has_none() {
    let gw = Gateway::new().user(User::admin()).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let path = format!("/api/auth/check?token={token}");
    let r = gw.post_json(&path, Some(V1), &json!({})).await;
    assert_check_ok(&r, ADMIN, &admin_permissions());
    let r = gw.raw_post(&path, &[("Accept", V1)], b"");
    assert_check_ok(&r, ADMIN, &admin_permissions());
    let r = gw
        .post_json("/api/auth/check?token=garbage", Some(V1), &json!({}))
        .await;
    assert_login_url(&r);
}

#[tokio::test]
async fn check_prefers_the_body_token_over_the_query_token() {
    let gw = Gateway::new().user(User::admin()).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let r = gw
        .post_json(
            "/api/auth/check?token=garbage",
            Some(V1),
            &json!({ "token": token }),
        )
        .await;
    assert_check_ok(&r, ADMIN, &admin_permissions());
    let r = gw
        .post_json(
            &format!("/api/auth/check?token={token}"),
            Some(V1),
            &json!({"token": "garbage"}),
        )
        .await;
    assert_login_url(&r);
}

#[tokio::test]
async fn check_with_a_malformed_body_gives_400_invalid_request_never_500() {
    let gw = Gateway::new().user(User::admin()).start();
    for (what, body) in [
        ("malformed", r#"{"token":"#),
        ("array", "[1]"),
        ("numeric token", r#"{"token":5}"#),
    ] {
        let req = gw
            .client()
            .post(gw.url("/api/auth/check"))
            .header("Accept", V1)
            .header("Content-Type", "application/json")
            .body(body);
        let r = gw.send(req).await;
        assert_ne!(r.status, 500, "{what}");
        assert_invalid_request(&r);
    }
}

#[tokio::test]
async fn logout_answers_redirect_url_and_expires_the_cookie() {
    let gw = Gateway::new().user(User::admin()).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let r = gw.logout(&token).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!({"redirect_url": "#/login"}));
    let cookie = r.token_cookie();
    assert!(
        cookie.starts_with("token=;"),
        "cookie not emptied: {cookie}"
    );
    let attrs: Vec<&str> = cookie.split(';').map(str::trim).collect();
    assert!(attrs.contains(&"Max-Age=0"), "{cookie}");
    assert!(attrs.contains(&"Path=/"), "{cookie}");
}

#[tokio::test]
async fn logout_revokes_the_token_for_check_and_api_paths() {
    let gw = Gateway::new().user(User::admin()).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let other = gw.login(ADMIN, ADMIN_PW).await;
    assert_not_found(&gw.api_get("/api/summary", Some(&token)).await);
    assert_eq!(gw.logout(&token).await.status, 200);
    assert_login_url(&gw.check(&token).await);
    assert_unauthorized(&gw.api_get("/api/summary", Some(&token)).await);
    // Only that token: the user's other session stays valid.
    assert_check_ok(&gw.check(&other).await, ADMIN, &admin_permissions());
    assert_not_found(&gw.api_get("/api/summary", Some(&other)).await);
}

#[tokio::test]
async fn logout_twice_with_the_same_token_answers_200_both_times() {
    let gw = Gateway::new().user(User::admin()).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    assert_eq!(gw.logout(&token).await.status, 200);
    let r = gw.logout(&token).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!({"redirect_url": "#/login"}));
}

#[tokio::test]
async fn logout_of_an_expired_token_the_gateway_issued_answers_200() {
    let gw = Gateway::new().user(User::admin()).token_ttl(1).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let expired = || async { gw.check(&token).await.json().get("login_url").is_some() };
    let (every, deadline) = (Duration::from_millis(100), Duration::from_secs(10));
    eventually("the token expires", every, deadline, expired).await;
    assert_login_url(&gw.check(&token).await);
    let r = gw.logout(&token).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!({"redirect_url": "#/login"}));
}

#[tokio::test]
async fn logout_reads_the_token_from_the_cookie() {
    let gw = Gateway::new().user(User::admin()).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let req = gw
        .logout_request()
        .header("Cookie", format!("lang=en; token={token}"))
        .body("");
    let r = gw.send(req).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_login_url(&gw.check(&token).await);
}

#[tokio::test]
async fn logout_prefers_the_authorization_header_over_the_cookie() {
    let gw = Gateway::new().user(User::admin()).start();
    let header_token = gw.login(ADMIN, ADMIN_PW).await;
    let cookie_token = gw.login(ADMIN, ADMIN_PW).await;
    let req = gw
        .logout_request()
        .header("Authorization", format!("Bearer {header_token}"))
        .header("Cookie", format!("token={cookie_token}"))
        .body("");
    assert_eq!(gw.send(req).await.status, 200);
    assert_login_url(&gw.check(&header_token).await);
    assert_check_ok(&gw.check(&cookie_token).await, ADMIN, &admin_permissions());
}

#[tokio::test]
async fn logout_bearer_scheme_is_case_insensitive() {
    let gw = Gateway::new().user(User::admin()).start();
    for scheme in ["bearer", "BEARER", "BeArEr"] {
        let token = gw.login(ADMIN, ADMIN_PW).await;
        let req = gw
            .logout_request()
            .header("Authorization", format!("{scheme} {token}"))
            .body("");
        assert_eq!(gw.send(req).await.status, 200, "{scheme}");
        assert_login_url(&gw.check(&token).await);
    }
}

#[tokio::test]
async fn logout_accepts_an_empty_json_object_body() {
    let gw = Gateway::new().user(User::admin()).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let req = gw
        .logout_request()
        .header("Authorization", format!("Bearer {token}"))
        .json(&json!({}));
    assert_eq!(gw.send(req).await.status, 200);
    assert_login_url(&gw.check(&token).await);
}

#[tokio::test]
async fn logout_without_a_usable_token_gives_401() {
    let gw = Gateway::new().user(User::admin()).start();
    let foreign = forge_token(other_secret(), &claims("clustergate", ADMIN, 10, 3600));
    let bare = gw.logout_request().body("");
    assert_unauthorized(&gw.send(bare).await);
    for (what, token) in [("garbage", "garbage"), ("another secret", foreign.as_str())] {
        let r = gw.logout(token).await;
        assert_eq!(r.status, 401, "{what}: {}", r.text());
        assert_unauthorized(&r);
    }
    let basic = gw
        .logout_request()
        .header("Authorization", "Basic YWRtaW46eA==")
        .body("");
    assert_unauthorized(&gw.send(basic).await);
    // A refused logout does not disturb a real session.
    let token = gw.login(ADMIN, ADMIN_PW).await;
    assert_check_ok(&gw.check(&token).await, ADMIN, &admin_permissions());
}
