//! What the dashboard answers, as values and assertions shared by the test files.

use serde_json::{json, Value};

use super::Reply;

pub const SCOPES: [&str; 17] = [
    "cephfs",
    "config-opt",
    "dashboard-settings",
    "grafana",
    "hosts",
    "iscsi",
    "log",
    "manager",
    "monitor",
    "nfs-ganesha",
    "osd",
    "pool",
    "prometheus",
    "rbd-image",
    "rbd-mirroring",
    "rgw",
    "user",
];

/// administrator: every scope, all four permissions (observed-responses 1.1).
pub fn admin_permissions() -> Value {
    let all = json!(["create", "delete", "read", "update"]);
    Value::Object(
        SCOPES
            .iter()
            .map(|s| (s.to_string(), all.clone()))
            .collect(),
    )
}

/// read-only: read on every scope but dashboard-settings and config-opt (observed-responses 1.18).
pub fn read_only_permissions() -> Value {
    Value::Object(
        SCOPES
            .iter()
            .filter(|s| !matches!(**s, "dashboard-settings" | "config-opt"))
            .map(|s| (s.to_string(), json!(["read"])))
            .collect(),
    )
}

pub fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect();
    k.sort();
    k
}

pub fn sorted(list: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = list.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// The dashboard's status shape: exactly `{status, detail, request_id}`, request_id equal to
/// `X-Request-Id`. `detail` None: any non-empty text.
pub fn assert_status_shape(r: &Reply, code: u16, status: &str, detail: Option<&str>) {
    assert_eq!(r.status, code, "status; body {}", r.text());
    let body = r.json();
    assert_eq!(
        keys(&body),
        sorted(&["status", "detail", "request_id"]),
        "body {body}"
    );
    assert_eq!(body["status"], status, "body {body}");
    match detail {
        Some(d) => assert_eq!(body["detail"], d, "body {body}"),
        None => assert!(
            !body["detail"].as_str().unwrap().is_empty(),
            "empty detail: {body}"
        ),
    }
    let rid = r.header("x-request-id").expect("X-Request-Id header");
    assert!(!rid.is_empty());
    assert_eq!(
        body["request_id"],
        rid.as_str(),
        "request_id vs X-Request-Id"
    );
    assert!(
        r.content_type().starts_with("application/json"),
        "content-type {}",
        r.content_type()
    );
}

pub fn assert_unauthorized(r: &Reply) {
    assert_status_shape(
        r,
        401,
        "401 Unauthorized",
        Some("You are not authorized to access that resource"),
    );
}

pub fn assert_not_found(r: &Reply) {
    assert_status_shape(r, 404, "404 Not Found", None);
}

pub const NO_VERSION: &str = "Unable to find version in request header";

pub fn assert_unsupported_version(r: &Reply, detail: &str) {
    assert_status_shape(r, 415, "415 Unsupported Media Type", Some(detail));
}

/// 400 `{"detail": "Invalid credentials", "code": "invalid_credentials", "component": "auth"}`.
pub fn assert_invalid_credentials(r: &Reply) {
    assert_eq!(r.status, 400, "body {}", r.text());
    assert_eq!(
        r.json(),
        json!({"detail": "Invalid credentials", "code": "invalid_credentials", "component": "auth"})
    );
    assert!(
        r.content_type().starts_with("application/json"),
        "content-type {}",
        r.content_type()
    );
}

/// No Set-Cookie hands out a token (clearing one, `token=;`, is fine).
pub fn assert_no_token_cookie(r: &Reply, what: &str) {
    let issued = r
        .header_all("set-cookie")
        .into_iter()
        .any(|c| c.starts_with("token=") && !c.starts_with("token=;"));
    assert!(
        !issued,
        "{what}: a token cookie on a refused login: {:?}",
        r.header_all("set-cookie")
    );
}

/// 400 `{detail, code: "invalid_request", component: "auth"}` with a non-empty detail.
pub fn assert_invalid_request(r: &Reply) {
    assert_bad_request(r, "invalid_request", "auth");
}

/// 400 `{detail, code: "invalid_path", component: "gateway"}`: a path that cannot be
/// normalized safely.
pub fn assert_invalid_path(r: &Reply) {
    assert_bad_request(r, "invalid_path", "gateway");
}

/// 400 in the dashboard's `{detail, code, component}` shape with a non-empty detail.
fn assert_bad_request(r: &Reply, code: &str, component: &str) {
    assert_eq!(r.status, 400, "body {}", r.text());
    let body = r.json();
    assert_eq!(
        keys(&body),
        sorted(&["code", "component", "detail"]),
        "body {body}"
    );
    assert_eq!(body["code"], code);
    assert_eq!(body["component"], component);
    assert!(
        body["detail"].as_str().is_some_and(|d| d.trim().len() > 3),
        "detail: {body}"
    );
}

/// 200 `{"login_url": "#/login", "cluster_status": "POST_INSTALLED"}`.
pub fn assert_login_url(r: &Reply) {
    assert_eq!(r.status, 200, "body {}", r.text());
    assert_eq!(
        r.json(),
        json!({"login_url": "#/login", "cluster_status": "POST_INSTALLED"})
    );
}

/// 200 with exactly `{username, permissions, sso, pwdUpdateRequired}`.
pub fn assert_check_ok(r: &Reply, username: &str, permissions: &Value) {
    assert_eq!(r.status, 200, "body {}", r.text());
    let body = r.json();
    assert_eq!(
        body,
        json!({"username": username, "permissions": permissions, "sso": false, "pwdUpdateRequired": false})
    );
}

/// nosniff, CSP `frame-ancestors 'self'...`, X-Request-Id; HSTS only with TLS.
pub fn assert_security_headers(r: &Reply, tls: bool, what: &str) {
    assert_eq!(
        r.header("x-content-type-options").as_deref(),
        Some("nosniff"),
        "{what}: {:?}",
        r.headers
    );
    let csp = r
        .header("content-security-policy")
        .unwrap_or_else(|| panic!("{what}: no CSP"));
    assert!(
        csp.starts_with("frame-ancestors 'self'"),
        "{what}: CSP {csp}"
    );
    assert!(
        r.header("x-request-id").is_some_and(|v| !v.is_empty()),
        "{what}: no X-Request-Id"
    );
    assert_eq!(
        r.header("strict-transport-security").is_some(),
        tls,
        "{what}: HSTS with tls={tls}"
    );
}

/// Sum of the samples of `name` whose labels include every `(label, value)` pair.
pub fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, label_text) = match series.split_once('{') {
                Some((m, rest)) => (m, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            if metric != name {
                return None;
            }
            let all = labels
                .iter()
                .all(|(k, v)| label_text.contains(&format!("{k}=\"{v}\"")));
            all.then(|| value.parse::<f64>().ok()).flatten()
        })
        // (a sum of nothing is -0.0)
        .fold(0.0, |a, b| a + b)
}
