//! Paths the gateway does not answer itself: 401 without a usable token, 404 otherwise; 405 on
//! the auth endpoints; and the headers every response carries.

use crate::common::*;
use reqwest::Method;
use serde_json::json;

const API_PATHS: [&str; 5] = [
    "/api/summary",
    "/api/health/minimal",
    "/api/pool",
    "/api/auth/nonexistent",
    "/api/",
];

#[tokio::test]
async fn api_paths_without_a_token_give_401_in_the_status_shape() {
    let gw = Gateway::new().user(User::admin()).start();
    for path in API_PATHS {
        let r = gw.api_get(path, None).await;
        assert_eq!(r.status, 401, "{path}: {}", r.text());
        assert_unauthorized(&r);
    }
    let post = gw
        .client()
        .post(gw.url("/api/pool"))
        .header("Accept", V1)
        .json(&json!({"pool": "x"}));
    assert_unauthorized(&gw.send(post).await);
}

#[tokio::test]
async fn api_paths_with_garbage_basic_or_foreign_credentials_give_401() {
    let gw = Gateway::new().user(User::admin()).start();
    let foreign = forge_token(
        b"not-the-gateway-secret-not-the-gateway-secret",
        &claims("clustergate", ADMIN, 5, 600),
    );
    let cases = [
        ("Authorization", "Bearer garbage".to_string()),
        ("Authorization", format!("Bearer {foreign}")),
        (
            "Authorization",
            "Basic YWRtaW46QWRtMW4tQ2VwaC1QYXNz".to_string(),
        ),
        ("Cookie", "token=garbage".to_string()),
        ("Cookie", format!("token={foreign}")),
    ];
    for (header, value) in cases {
        let req = gw
            .client()
            .get(gw.url("/api/summary"))
            .header("Accept", V1)
            .header(header, &value);
        let r = gw.send(req).await;
        assert_eq!(r.status, 401, "{header}: {value}: {}", r.text());
        assert_unauthorized(&r);
    }
}

#[tokio::test]
async fn api_paths_with_a_valid_token_in_header_or_cookie_give_404_until_forwarding_exists() {
    let gw = Gateway::new().user(User::admin()).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    for path in API_PATHS {
        let r = gw.api_get(path, Some(&token)).await;
        assert_eq!(r.status, 404, "{path}: {}", r.text());
        assert_not_found(&r);
    }
    for (header, value) in [
        ("Authorization", format!("bearer {token}")),
        ("Cookie", format!("token={token}")),
        ("Cookie", format!("theme=dark; token={token}; lang=en")),
    ] {
        let req = gw
            .client()
            .get(gw.url("/api/summary"))
            .header("Accept", V1)
            .header(header, &value);
        assert_not_found(&gw.send(req).await);
    }
}

#[tokio::test]
async fn paths_outside_api_give_404_in_the_status_shape() {
    let gw = Gateway::new().user(User::admin()).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    for path in ["/no-such-page", "/apinope", "/static/app.js", "/metrics"] {
        let r = gw.send(gw.client().get(gw.url(path))).await;
        assert_eq!(r.status, 404, "{path}: {}", r.text());
        assert_not_found(&r);
        let with_token = gw
            .client()
            .get(gw.url(path))
            .header("Authorization", format!("Bearer {token}"));
        assert_not_found(&gw.send(with_token).await);
    }
}

#[tokio::test]
async fn other_methods_on_the_auth_endpoints_give_405_with_allow_post() {
    let gw = Gateway::new().user(User::admin()).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    for path in ["/api/auth", "/api/auth/check", "/api/auth/logout"] {
        for method in [Method::GET, Method::PUT, Method::DELETE, Method::PATCH] {
            let req = gw
                .client()
                .request(method.clone(), gw.url(path))
                .header("Accept", V1)
                .header("Authorization", format!("Bearer {token}"));
            let r = gw.send(req).await;
            assert_eq!(r.status, 405, "{method} {path}: {}", r.text());
            assert_status_shape(&r, 405, "405 Method Not Allowed", None);
            assert_eq!(
                r.header("allow").as_deref(),
                Some("POST"),
                "{method} {path}"
            );
        }
    }
    // GET /api/auth/logout did not log anybody out.
    assert_check_ok(&gw.check(&token).await, ADMIN, &admin_permissions());
}

#[tokio::test]
async fn every_kind_of_response_carries_the_security_headers_and_no_hsts_without_tls() {
    let gw = Gateway::new().user(User::admin()).start();
    let c = gw.client();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let big = json!({"username": ADMIN, "password": "x".repeat(70 * 1024)});
    let requests = [
        (
            "201 login",
            c.post(gw.url("/api/auth"))
                .header("Accept", V1)
                .json(&json!({"username": ADMIN, "password": ADMIN_PW})),
        ),
        (
            "400 login",
            c.post(gw.url("/api/auth"))
                .header("Accept", V1)
                .json(&json!({"username": ADMIN, "password": "no"})),
        ),
        (
            "400 bad body",
            c.post(gw.url("/api/auth"))
                .header("Accept", V1)
                .header("Content-Type", "application/json")
                .body("{"),
        ),
        (
            "413 login",
            c.post(gw.url("/api/auth")).header("Accept", V1).json(&big),
        ),
        (
            "415 login",
            c.post(gw.url("/api/auth"))
                .header("Accept", "*/*")
                .json(&json!({})),
        ),
        (
            "200 check",
            c.post(gw.url("/api/auth/check"))
                .header("Accept", V1)
                .json(&json!({ "token": token })),
        ),
        (
            "405 check",
            c.get(gw.url("/api/auth/check")).header("Accept", V1),
        ),
        (
            "401 api",
            c.get(gw.url("/api/summary")).header("Accept", V1),
        ),
        (
            "404 api",
            c.get(gw.url("/api/summary"))
                .header("Accept", V1)
                .bearer_auth(&token),
        ),
        ("404 other", c.get(gw.url("/nothing"))),
        (
            "401 logout",
            c.post(gw.url("/api/auth/logout"))
                .header("Accept", V1)
                .body(""),
        ),
        (
            "200 logout",
            c.post(gw.url("/api/auth/logout"))
                .header("Accept", V1)
                .bearer_auth(&token)
                .body(""),
        ),
    ];
    for (what, req) in requests {
        let r = gw.send(req).await;
        assert_eq!(r.status.to_string(), what[..3], "{what}: {}", r.text());
        assert_security_headers(&r, false, what);
    }
}

#[tokio::test]
async fn each_response_gets_its_own_request_id() {
    let gw = Gateway::new().user(User::admin()).start();
    let a = gw.api_get("/api/summary", None).await;
    let b = gw.api_get("/api/summary", None).await;
    assert_unauthorized(&a);
    assert_unauthorized(&b);
    assert_ne!(a.header("x-request-id"), b.header("x-request-id"));
}
