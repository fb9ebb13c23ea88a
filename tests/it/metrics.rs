//! The metrics listener: `/healthz`, the Prometheus families, route labels, and the counters
//! that must move on every login attempt.

use std::collections::BTreeMap;

use crate::common::*;
use serde_json::json;

const ROUTES: [&str; 6] = [
    "auth",
    "auth_check",
    "auth_logout",
    "proxy",
    "docs",
    "other",
];

/// The labels of one sample line, `name{a="x",b="y"} 1` -> {a: x, b: y}.
fn labels(line: &str) -> BTreeMap<String, String> {
    let inner = line.split_once('{').unwrap().1.rsplit_once('}').unwrap().0;
    inner
        .split("\",")
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once("=\"").unwrap();
            (k.trim().to_string(), v.trim_end_matches('"').to_string())
        })
        .collect()
}

/// Traffic touching every route the gateway answers.
async fn traffic(gw: &RunningGateway) {
    let token = gw.login(ADMIN, ADMIN_PW).await;
    gw.try_login(ADMIN, "wrong").await;
    gw.check(&token).await;
    gw.check("garbage").await;
    gw.api_get("/api/summary", Some(&token)).await;
    gw.api_get("/api/osd/0/secret-looking-path", None).await;
    gw.send(gw.client().get(gw.url("/random/page"))).await;
    gw.logout(&token).await;
}

#[tokio::test]
async fn healthz_on_the_metrics_listener_answers_200() {
    let gw = Gateway::new().user(User::admin()).start();
    let r = gw
        .send(
            client_builder()
                .build()
                .unwrap()
                .get(format!("http://{}/healthz", gw.metrics_addr)),
        )
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn metrics_expose_every_documented_family() {
    let gw = Gateway::new().user(User::admin()).start();
    traffic(&gw).await;
    let text = gw
        .metrics_until(|t| t.contains("clustergate_token_checks_total{"))
        .await;
    for family in [
        "clustergate_requests_total{",
        "clustergate_request_duration_seconds_bucket",
        "clustergate_logins_total{",
        "clustergate_token_checks_total{",
        "clustergate_password_verifications_total",
        "process_resident_memory_bytes",
    ] {
        assert!(text.contains(family), "no {family} in\n{text}");
    }
}

#[tokio::test]
async fn request_counters_are_labelled_by_route_method_and_status_never_by_raw_path() {
    let gw = Gateway::new().user(User::admin()).start();
    traffic(&gw).await;
    let want = [
        ("auth", "POST", "201"),
        ("auth", "POST", "400"),
        ("auth_check", "POST", "200"),
        ("auth_logout", "POST", "200"),
        ("proxy", "GET", "404"),
        ("proxy", "GET", "401"),
        ("other", "GET", "404"),
    ];
    let text = gw
        .metrics_until(|t| {
            want.iter().all(|(route, method, status)| {
                metric_sum(
                    t,
                    "clustergate_requests_total",
                    &[("route", route), ("method", method), ("status", status)],
                ) >= 1.0
            })
        })
        .await;
    for (route, method, status) in want {
        let n = metric_sum(
            &text,
            "clustergate_requests_total",
            &[("route", route), ("method", method), ("status", status)],
        );
        assert!(
            n >= 1.0,
            "no requests_total for {route} {method} {status} in\n{text}"
        );
    }
    let samples: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("clustergate_requests_total{"))
        .collect();
    assert!(!samples.is_empty());
    for line in samples {
        let l = labels(line);
        let names: Vec<&str> = l.keys().map(String::as_str).collect();
        assert_eq!(names, ["method", "route", "status"], "{line}");
        assert!(
            ROUTES.contains(&l["route"].as_str()),
            "route label not from the Route enum: {line}"
        );
    }
    assert!(
        !text.contains("secret-looking-path") && !text.contains("/random/page"),
        "raw path in metrics"
    );
}

#[tokio::test]
async fn password_verifications_count_every_attempt_including_unknown_and_locked_users() {
    let gw = Gateway::new().user(User::admin()).lockout(2, 300).start();
    let name = "clustergate_password_verifications_total";
    let before = metric_sum(&gw.metrics().await, name, &[]);
    assert_eq!(gw.try_login(ADMIN, ADMIN_PW).await.status, 201);
    assert_invalid_credentials(&gw.try_login("nosuchuser", "whatever").await);
    assert_invalid_credentials(&gw.try_login(ADMIN, "wrong-1").await);
    assert_invalid_credentials(&gw.try_login(ADMIN, "wrong-2").await);
    // Locked now: the right password is refused, yet a hash is still computed.
    assert_invalid_credentials(&gw.try_login(ADMIN, ADMIN_PW).await);
    let attempts = 5.0;
    let text = gw
        .metrics_until(|t| metric_sum(t, name, &[]) - before >= attempts)
        .await;
    assert_eq!(
        metric_sum(&text, name, &[]) - before,
        attempts,
        "one verification per attempt\n{text}"
    );
}

#[tokio::test]
async fn logins_and_token_checks_are_counted_by_result() {
    let gw = Gateway::new().user(User::admin()).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    gw.try_login(ADMIN, "wrong").await;
    gw.try_login("ghost", "wrong").await;
    gw.check(&token).await;
    gw.check("garbage").await;
    gw.post_json("/api/auth/check", Some(V1), &json!({})).await;
    let text = gw
        .metrics_until(|t| {
            metric_sum(t, "clustergate_logins_total", &[]) >= 3.0
                && metric_sum(t, "clustergate_token_checks_total", &[]) >= 2.0
        })
        .await;
    let logins = metric_sum(&text, "clustergate_logins_total", &[]);
    assert_eq!(logins, 3.0, "one login count per attempt\n{text}");
    for family in ["clustergate_logins_total", "clustergate_token_checks_total"] {
        let results: std::collections::BTreeSet<String> = text
            .lines()
            .filter(|l| l.starts_with(&format!("{family}{{")))
            .filter(|l| !l.ends_with(" 0"))
            .map(|l| {
                labels(l)
                    .get("result")
                    .cloned()
                    .unwrap_or_else(|| panic!("no result label: {l}"))
            })
            .collect();
        assert!(
            results.len() >= 2,
            "{family}: success and failure share one result label: {results:?}"
        );
    }
}
