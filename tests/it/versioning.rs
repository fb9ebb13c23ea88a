//! The `Accept` header on the three auth endpoints: the dashboard's 415s, and RFC 9110 lists
//! (which we accept where the dashboard does not).

use crate::common::*;
use serde_json::json;

fn credentials() -> String {
    json!({"username": ADMIN, "password": ADMIN_PW}).to_string()
}

fn incorrect(requested: &str) -> String {
    format!("Incorrect version: endpoint is '1.0', client requested '{requested}'")
}

#[tokio::test]
async fn login_without_an_accept_header_gives_415_unable_to_find_version() {
    let gw = Gateway::new().user(User::admin()).start();
    let r = gw.raw_post(
        "/api/auth",
        &[("Content-Type", "application/json")],
        credentials().as_bytes(),
    );
    assert_unsupported_version(&r, NO_VERSION);
}

#[tokio::test]
async fn login_with_a_generic_accept_gives_415_unable_to_find_version() {
    let gw = Gateway::new().user(User::admin()).start();
    let body = json!({"username": ADMIN, "password": ADMIN_PW});
    for accept in ["*/*", "application/json", "application/*", "text/html"] {
        let r = gw.post_json("/api/auth", Some(accept), &body).await;
        assert_eq!(r.status, 415, "{accept}: {}", r.text());
        assert_unsupported_version(&r, NO_VERSION);
    }
}

#[tokio::test]
async fn login_with_another_version_names_both_versions() {
    let gw = Gateway::new().user(User::admin()).start();
    let body = json!({"username": ADMIN, "password": ADMIN_PW});
    for v in ["9.9", "2.0", "1.1"] {
        let accept = format!("application/vnd.ceph.api.v{v}+json");
        let r = gw.post_json("/api/auth", Some(&accept), &body).await;
        assert_unsupported_version(&r, &incorrect(v));
    }
}

#[tokio::test]
async fn the_version_is_checked_before_the_credentials() {
    let gw = Gateway::new().user(User::admin()).start();
    let wrong = json!({"username": ADMIN, "password": "wrong"});
    assert_unsupported_version(
        &gw.post_json("/api/auth", Some("*/*"), &wrong).await,
        NO_VERSION,
    );
}

#[tokio::test]
async fn login_accepts_rfc_9110_lists_that_include_the_v1_type() {
    let gw = Gateway::new().user(User::admin()).start();
    let body = json!({"username": ADMIN, "password": ADMIN_PW});
    for accept in [
        "application/json;q=0.5, application/vnd.ceph.api.v1.0+json",
        "application/vnd.ceph.api.v1.0+json; q=0.9",
        "application/vnd.ceph.api.v1.0+json;q=0.9, */*;q=0.1",
        "text/html,application/vnd.ceph.api.v1.0+json",
    ] {
        let r = gw.post_json("/api/auth", Some(accept), &body).await;
        assert_eq!(r.status, 201, "{accept}: {}", r.text());
    }
}

#[tokio::test]
async fn a_vendor_type_with_q_zero_does_not_count() {
    let gw = Gateway::new().user(User::admin()).start();
    let body = json!({"username": ADMIN, "password": ADMIN_PW});
    for accept in [
        "application/vnd.ceph.api.v1.0+json;q=0",
        "application/json, application/vnd.ceph.api.v1.0+json; q=0",
        "application/vnd.ceph.api.v1.0+json;q=0.000",
    ] {
        let r = gw.post_json("/api/auth", Some(accept), &body).await;
        assert_eq!(r.status, 415, "{accept}: {}", r.text());
        assert_unsupported_version(&r, NO_VERSION);
    }
}

#[tokio::test]
async fn check_accepts_no_star_or_json_accept_and_answers_plain_json() {
    let gw = Gateway::new().user(User::admin()).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let body = json!({ "token": token });
    for accept in ["*/*", "application/json"] {
        let r = gw.post_json("/api/auth/check", Some(accept), &body).await;
        assert_check_ok(&r, ADMIN, &admin_permissions());
        assert!(
            r.content_type().starts_with("application/json"),
            "{accept}: {}",
            r.content_type()
        );
    }
    let raw = gw.raw_post(
        "/api/auth/check",
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    );
    assert_check_ok(&raw, ADMIN, &admin_permissions());
    assert!(
        raw.content_type().starts_with("application/json"),
        "no Accept: {}",
        raw.content_type()
    );
    let r = gw
        .post_json("/api/auth/check", Some("*/*"), &json!({"token": "garbage"}))
        .await;
    assert_login_url(&r);
    assert!(r.content_type().starts_with("application/json"));
}

#[tokio::test]
async fn check_refuses_vendor_versions_it_cannot_serve() {
    let gw = Gateway::new().user(User::admin()).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    for v in ["9.9", "2.0"] {
        let accept = format!("application/vnd.ceph.api.v{v}+json");
        let r = gw
            .post_json("/api/auth/check", Some(&accept), &json!({ "token": token }))
            .await;
        assert_unsupported_version(&r, &incorrect(v));
    }
}

#[tokio::test]
async fn logout_without_the_v1_type_gives_415_and_keeps_the_token() {
    let gw = Gateway::new().user(User::admin()).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let bearer = format!("Bearer {token}");
    for accept in ["*/*", "application/json"] {
        let req = gw
            .client()
            .post(gw.url("/api/auth/logout"))
            .header("Accept", accept)
            .header("Authorization", &bearer)
            .body("");
        assert_unsupported_version(&gw.send(req).await, NO_VERSION);
    }
    let r = gw.raw_post("/api/auth/logout", &[("Authorization", &bearer)], b"");
    assert_unsupported_version(&r, NO_VERSION);
    let req = gw
        .client()
        .post(gw.url("/api/auth/logout"))
        .header("Accept", "application/vnd.ceph.api.v9.9+json")
        .header("Authorization", &bearer)
        .body("");
    assert_unsupported_version(&gw.send(req).await, &incorrect("9.9"));
    // None of the refused logouts revoked the token.
    assert_check_ok(&gw.check(&token).await, ADMIN, &admin_permissions());
}

#[tokio::test]
async fn an_accept_list_split_over_two_header_lines_is_one_list() {
    // RFC 9110 section 5.3: repeated field lines combine into one comma-separated list.
    let gw = Gateway::new().user(User::admin()).start();
    let r = gw.raw_post(
        "/api/auth",
        &[
            ("Accept", "application/json"),
            ("Accept", V1),
            ("Content-Type", "application/json"),
        ],
        credentials().as_bytes(),
    );
    assert_eq!(r.status, 201, "{}", r.text());
}
