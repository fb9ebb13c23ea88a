//! No secret in any log line at any level: passwords, the gateway's tokens, the dashboard's
//! (the service account's among them), cookie values and query strings stay out of the
//! gateway's standard error, access lines and audit file, at `log.level = "debug"` with
//! `RUST_LOG=trace` through logins, forwarded calls, a failover and logouts, and out of
//! pingora's "Fail to proxy" line at the default level.

use std::time::{Duration, Instant};

use crate::common::*;
use reqwest::Method;
use serde_json::json;

const QUERY_VALUE: &str = "Query-Value-Secret-4";
const COOKIE_VALUE: &str = "Cookie-Value-Secret-4";
const SMUGGLED_TOKEN: &str = "Smuggled-Token-Secret-4";
const WRONG_PW: &str = "Wrong-Pass-Secret-4";
/// What the harmless change sends the dashboard to check (it answers 200, changes nothing).
const CHECKED_PW: &str = "Checked-Pass-Secret-4";

/// Every JWT (the gateway's tokens, the dashboard's, the service account's among them)
/// starts with its base64url JSON header: `{"` is `eyJ`.
const JWT_START: &str = "eyJ";

/// Requests are served again this long after the new active manager accepts logins.
const RECOVERY_DEADLINE: Duration = Duration::from_secs(60);

/// The lines of `text` that hold one of `secrets`, each with the secret it holds.
fn leaks(text: &str, secrets: &[(&str, String)]) -> Vec<String> {
    text.lines()
        .flat_map(|line| {
            secrets
                .iter()
                .filter(|(_, secret)| line.contains(secret.as_str()))
                .map(move |(what, _)| format!("{what}: {line}"))
        })
        .collect()
}

/// Every line of the gateway's output and its audit file holding a secret.
fn logged_secrets(gw: &RunningGateway, secrets: &[(&str, String)]) -> Vec<String> {
    let audit = std::fs::read_to_string(gw.dir().join("audit/audit.log")).unwrap();
    assert!(audit.contains("\"event\":\"logout\""), "{audit}");
    let mut found = leaks(&gw.logs(), secrets);
    found.extend(leaks(&audit, secrets));
    found
}

/// An API key made, used, presented with a wrong secret and rotated: the key and its
/// successor.
async fn keys_used(gw: &RunningGateway, admin: &str) -> (String, String) {
    let body = json!({"name": "logged", "roles": ["read-only"], "expires_in_seconds": 600});
    let created = gw
        .api(
            Method::POST,
            "/api/clustergate/keys",
            Some(admin),
            Some(&body),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let key = created.json()["key"].as_str().unwrap().to_string();
    assert_eq!(gw.api_get("/api/pool", Some(&key)).await.status, 200);
    let wrong = format!("{}{}", &key[..21], "W".repeat(43));
    assert_eq!(gw.api_get("/api/pool", Some(&wrong)).await.status, 401);
    let rotate = format!("/api/clustergate/keys/{}/rotate", &key[4..20]);
    let rotated = gw.api(Method::POST, &rotate, Some(admin), None).await;
    assert_eq!(rotated.status, 201, "{}", rotated.text());
    let rotated = rotated.json()["key"].as_str().unwrap().to_string();
    assert_eq!(gw.api_get("/api/pool", Some(&rotated)).await.status, 200);
    (key, rotated)
}

/// What the gateway keeps of a key: the SHA-256 of its text, in hex.
fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Forwarded calls with a query and cookies; the first answer that is not 200.
async fn forwarded_calls(gw: &RunningGateway, admin: &str, viewer: &str) -> Option<Reply> {
    let cookies = format!("cd-lang=en; session={COOKIE_VALUE} token={SMUGGLED_TOKEN}");
    let summary = gw
        .request(
            Method::GET,
            &format!("/api/pool?attrs={QUERY_VALUE}"),
            Some(admin),
            Some(V1),
        )
        .header("Cookie", &cookies);
    let checked = json!({"password": CHECKED_PW});
    let validate = gw
        .request(
            Method::POST,
            "/api/user/validate_password",
            Some(admin),
            Some(V1),
        )
        .json(&checked);
    let health = gw
        .request(
            Method::GET,
            &format!("/api/host?sources={QUERY_VALUE}"),
            Some(viewer),
            Some(V1),
        )
        .header("Cookie", format!("token={SMUGGLED_TOKEN}"));
    for req in [summary, validate, health] {
        let r = gw.send(req).await;
        if r.status != 200 {
            return Some(r);
        }
    }
    None
}

#[tokio::test]
async fn no_secret_reaches_any_log_at_debug_and_rust_log_trace() {
    let dash = Dashboard::dedicated(DashboardOptions {
        standby: true,
        ..Default::default()
    });
    let gw = Gateway::with_dashboard_users()
        .upstream(&dash)
        .extra_toml("log", "level = \"debug\"")
        .extra_toml("log", "audit_file = \"audit/audit.log\"")
        .file("audit/README", "the audit log's folder\n")
        .env("RUST_LOG", "trace")
        .start();
    let refused = gw.try_login(ADMIN, WRONG_PW).await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    let admin = gw.login(ADMIN, ADMIN_PW).await;
    let viewer = gw.login(VIEWER, VIEWER_PW).await;
    // A service token of the dashboard's, issued as the gateway's was.
    let service_password = dash.service_password().trim().to_string();
    let service_token = {
        let body = json!({"username": "clustergate", "password": service_password});
        let r = dash
            .send(Method::POST, "/api/auth", None, V1, Some(&body))
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
        r.json()["token"].as_str().unwrap().to_string()
    };
    for token in [&admin, &viewer, &service_token] {
        assert!(token.starts_with(JWT_START), "not a JWT: {token}");
    }
    let (key, rotated) = keys_used(&gw, &admin).await;

    if let Some(r) = forwarded_calls(&gw, &admin, &viewer).await {
        panic!(
            "before the failover: {} {}\n{}",
            r.status,
            r.text(),
            gw.logs()
        );
    }
    let dir = dash.dir.clone();
    let new_active = tokio::task::spawn_blocking(move || Dashboard::mgr_in(&dir, &["fail"]))
        .await
        .unwrap();
    assert_eq!(new_active, "y", "the standby should have taken over");
    let deadline = Instant::now() + RECOVERY_DEADLINE;
    while let Some(r) = forwarded_calls(&gw, &admin, &viewer).await {
        assert!(
            Instant::now() < deadline,
            "not served again after the failover: {} {}\n{}",
            r.status,
            r.text(),
            gw.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for token in [&admin, &viewer] {
        let r = gw.logout(token).await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let audit = gw.dir().join("audit/audit.log");
    assert!(
        gw.logs_come_to(|_| std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .matches("\"event\":\"logout\"")
            .count()
            == 2)
            .await,
        "no audit line for the logouts"
    );
    // The premise: the gateway wrote at debug level, and its access lines.
    let logs = gw.logs();
    assert!(logs.contains("DEBUG"), "{logs}");
    assert!(logs.contains("clustergate::access"), "{logs}");

    let secrets = [
        ("admin's password", ADMIN_PW.to_string()),
        ("viewer's password", VIEWER_PW.to_string()),
        ("a wrong password", WRONG_PW.to_string()),
        ("a password the dashboard checked", CHECKED_PW.to_string()),
        ("the service account's password", service_password),
        ("admin's gateway token", admin.clone()),
        ("viewer's gateway token", viewer.clone()),
        ("a dashboard service token", service_token),
        (
            "a JWT (a gateway's or dashboard's token)",
            JWT_START.to_string(),
        ),
        ("a cookie value", COOKIE_VALUE.to_string()),
        ("a smuggled token cookie", SMUGGLED_TOKEN.to_string()),
        ("a query value", QUERY_VALUE.to_string()),
        ("an API key's secret", key[21..].to_string()),
        ("an API key's digest", sha256_hex(&key)),
        ("a rotated API key's secret", rotated[21..].to_string()),
    ];
    let found = logged_secrets(&gw, &secrets);
    assert!(
        found.is_empty(),
        "{} log lines hold secrets; the first ones:\n{}",
        found.len(),
        found[..found.len().min(10)].join("\n")
    );
}

#[tokio::test]
async fn query_strings_never_reach_the_log_at_the_default_level() {
    let dash = Dashboard::shared();
    let backend = dash.host_ports()[0].parse().unwrap();
    let relay = ResettingRelay::start(backend, "GET /api/summary?");
    let gw = Gateway::with_admin_and_viewer()
        .upstream_via(dash, vec![relay.url()])
        .env_removed("RUST_LOG")
        .start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let path = format!("/api/summary?filter={QUERY_VALUE}");
    let r = gw.api_get(&path, Some(&token)).await;
    assert_eq!(r.status, 502, "{}\n{}", r.text(), gw.logs());
    // The premise: pingora wrote its line about the failed request.
    assert!(
        gw.logs_come_to(|logs| logs.contains("Fail to proxy")).await,
        "{}",
        gw.logs()
    );
    let logs = gw.logs();
    assert!(logs.contains("/api/summary"), "{logs}");
    let found = leaks(&logs, &[("a query value", QUERY_VALUE.to_string())]);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[tokio::test]
async fn a_request_head_that_cannot_be_parsed_is_never_logged() {
    for rust_log in [None, Some("trace")] {
        let gw = match rust_log {
            Some(filter) => Gateway::with_admin_and_viewer().env("RUST_LOG", filter),
            None => Gateway::with_admin_and_viewer().env_removed("RUST_LOG"),
        }
        .start();
        // A header line without a colon: no parser accepts the head.
        let head = format!(
            "GET /metrics?filter={QUERY_VALUE} HTTP/1.1\r\nHost: x\r\n\
             Authorization: Bearer {SMUGGLED_TOKEN}\r\nCookie: s={COOKIE_VALUE}\r\n\
             no colon here\r\nConnection: close\r\n\r\n"
        );
        for addr in [gw.addr, gw.metrics_addr] {
            // The gateway answers 400 or closes: either way the head was refused.
            if let Ok(reply) = try_raw_http(addr, head.as_bytes()) {
                assert_eq!(reply.status, 400, "{addr}: {}", reply.text());
            }
        }
        // The premise: the refusal was logged by the admin listener (pingora's ERROR line).
        assert!(
            gw.logs_come_to(|logs| logs.contains("fails to read")).await,
            "{}",
            gw.logs()
        );
        let secrets = [
            ("a query value", QUERY_VALUE.to_string()),
            ("an Authorization header", SMUGGLED_TOKEN.to_string()),
            ("a cookie value", COOKIE_VALUE.to_string()),
        ];
        let found = leaks(&gw.logs(), &secrets);
        assert!(
            found.is_empty(),
            "RUST_LOG={rust_log:?}:\n{}",
            found.join("\n")
        );
    }
}
