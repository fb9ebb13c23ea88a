//! The gateway's own token on the real dashboard: renewed as the dashboard's short-lived
//! tokens expire, and replaced once (with the request retried) when the dashboard revokes
//! it, with no error a client could see. Each test has its own dashboard.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use reqwest::Method;
use serde_json::json;

/// Requests keep running this long: three lifetimes of a 5 s dashboard token.
const LOAD_DURATION: Duration = Duration::from_secs(15);

async fn logins(gw: &RunningGateway) -> f64 {
    gw.metric(
        "clustergate_upstream_logins_total",
        &[("result", "success")],
    )
    .await
}

async fn upstream_401s(gw: &RunningGateway) -> f64 {
    gw.metric("clustergate_upstream_requests_total", &[("status", "401")])
        .await
}

async fn validate_password(gw: &RunningGateway, token: &str) -> Reply {
    let body = json!({"password": "Cg-test-pass-123"});
    gw.api(
        Method::POST,
        "/api/user/validate_password",
        Some(token),
        Some(&body),
    )
    .await
}

#[tokio::test]
async fn the_service_token_is_renewed_as_short_lived_dashboard_tokens_expire() {
    let dash = Dashboard::dedicated(DashboardOptions {
        jwt_ttl: Some(5),
        ..Default::default()
    });
    // The premise: the dashboard really issues 5-second tokens.
    let direct = dash.login(ADMIN).await;
    let claims = jwt_payload(&direct);
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        5,
        "{claims}"
    );

    let gw = Gateway::new().user(User::admin()).upstream(&dash).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let started = Instant::now();
    let mut sent = 0;
    let mut failures = Vec::new();
    while started.elapsed() < LOAD_DURATION {
        for r in [
            gw.api(Method::GET, "/api/summary", Some(&token), None)
                .await,
            validate_password(&gw, &token).await,
        ] {
            sent += 1;
            if r.status != 200 {
                failures.push(format!(
                    "{:.1?}: {} {}",
                    started.elapsed(),
                    r.status,
                    r.text()
                ));
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        failures.is_empty(),
        "{} of {sent} requests failed: {failures:#?}\n{}",
        failures.len(),
        gw.logs()
    );
    let logins = logins(&gw).await;
    assert!(
        logins >= 2.0,
        "the service account logged in {logins} times in {LOAD_DURATION:?} of 5 s tokens"
    );
    println!(
        "{sent} requests, {logins} service logins, {} refused by the dashboard and retried",
        upstream_401s(&gw).await
    );
}

#[tokio::test]
async fn a_revoked_service_token_is_replaced_once_and_the_request_still_succeeds() {
    let dash = Dashboard::dedicated(DashboardOptions::default());
    let gw = Gateway::new().user(User::admin()).upstream(&dash).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let r = gw
        .api(Method::GET, "/api/summary", Some(&token), None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // A service token issued now, to show the revocation below really revokes.
    let witness = {
        let body = json!({"username": "clustergate", "password": dash.service_password()});
        let r = dash
            .send(Method::POST, "/api/auth", None, V1, Some(&body))
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
        r.json()["token"].as_str().unwrap().to_string()
    };
    let (logins_before, refusals_before) = (logins(&gw).await, upstream_401s(&gw).await);

    // The dashboard compares whole seconds: tokens from an earlier second are revoked.
    next_wall_clock_second().await;
    dash.revoke_service_tokens();
    let r = dash
        .send(Method::GET, "/api/summary", Some(&witness), V1, None)
        .await;
    assert_eq!(
        r.status,
        401,
        "the old service token still works: {}",
        r.text()
    );

    let r = gw
        .api(Method::GET, "/api/summary", Some(&token), None)
        .await;
    assert_eq!(
        r.status,
        200,
        "after revocation: {}\n{}",
        r.text(),
        gw.logs()
    );
    let r = validate_password(&gw, &token).await;
    assert_eq!(r.status, 200, "the next one: {}", r.text());
    let metrics = gw.metrics().await;
    assert_eq!(
        metric_sum(
            &metrics,
            "clustergate_upstream_requests_total",
            &[("status", "401")]
        ) - refusals_before,
        1.0,
        "exactly one forwarded request was refused and retried: {metrics}"
    );
    assert_eq!(
        metric_sum(
            &metrics,
            "clustergate_upstream_logins_total",
            &[("result", "success")]
        ) - logins_before,
        1.0,
        "exactly one new login: {metrics}"
    );
}
