//! The gateway's own token on the real dashboard: renewed as the dashboard's short-lived
//! tokens expire, and replaced once (with the request retried) when the dashboard revokes
//! it, with no error a client could see; a refused service login backs off and never
//! makes the dashboard disable the account. Each test has its own dashboard, or its own
//! service account on the shared one.

use std::time::{Duration, Instant};

use crate::common::*;
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
    // The service account's token on users' requests (with the default "roles", the
    // accounts' own tokens are replaced alike: tests/it/role_accounts.rs).
    let gw = Gateway::new()
        .user(User::admin())
        .upstream(&dash)
        .extra_toml("upstream", "identity = \"service\"")
        .start();
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

/// How long the service password stays wrong, with requests and health checks running.
const WRONG_PASSWORD_FOR: Duration = Duration::from_secs(60);

/// Issue 33, finding 5: a wrong `upstream.password_file` for a minute, with client requests
/// and health checks (every 500 ms) running, leaves the dashboard account enabled (the
/// dashboard disables it at its 10th consecutive failure: before, within seconds); clients
/// are told what to fix; the right password, read by a reload, brings service back without
/// a restart or a client request.
#[tokio::test]
async fn a_wrong_service_password_backs_off_and_a_reload_with_the_right_one_restores_service() {
    let dash = Dashboard::shared();
    // An administrator of the test's own acts as the service account: the shared
    // dashboard's `clustergate` account is never put at risk.
    let user = format!("cg-svc-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let password = format!("Pw-{}", uuid::Uuid::new_v4().simple());
    dash.create_user(&user, &password, &["administrator"]);
    let mut gw = Gateway::new()
        .user(User::admin())
        .upstream(dash)
        .service_account(&user, &password)
        .extra_toml("upstream", "login_backoff_min_ms = 1000")
        .extra_toml("upstream", "login_backoff_max_ms = 8000")
        .start();
    // Logins wait until the manager's release is known, which the service account learns:
    // the gateway starts with the right password, then the dashboard's is changed under
    // it (which also ends the service token, issued in an earlier second).
    let token = gw.login(ADMIN, ADMIN_PW).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let password = format!("Pw-{}", uuid::Uuid::new_v4().simple());
    dash.set_password(&user, &password);
    let started = Instant::now();
    let (mut sent, mut told) = (0, 0);
    while started.elapsed() < WRONG_PASSWORD_FOR {
        let r = gw
            .api(Method::GET, "/api/summary", Some(&token), None)
            .await;
        sent += 1;
        // 504 only if the dashboard took too long to refuse a login.
        assert!(matches!(r.status, 503 | 504), "{} {}", r.status, r.text());
        if r.status == 503 {
            assert_status_shape(&r, 503, "503 Service Unavailable", None);
            assert!(r.text().contains("upstream.password_file"), "{}", r.text());
            told += 1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(told > 0, "no answer said what to fix");
    assert!(
        dash.user_enabled(&user),
        "the dashboard disabled the service account\n{}",
        gw.logs()
    );
    let refused = gw
        .metric(
            "clustergate_upstream_logins_total",
            &[("result", "refused")],
        )
        .await;
    assert!(
        (1.0..=6.0).contains(&refused),
        "{refused} refused logins in {WRONG_PASSWORD_FOR:?}"
    );
    println!("{sent} requests, {refused} refused service logins in {WRONG_PASSWORD_FOR:?}");

    assert!(
        gw.reload(|spec| { *spec = spec.clone().service_account(&user, &password) })
            .await
    );
    // The health checks log in with the new password: no client request is needed.
    let logged_in = || async { logins(&gw).await >= 1.0 };
    eventually(
        "a login with the new password",
        Duration::from_millis(200),
        Duration::from_secs(30),
        logged_in,
    )
    .await;
    let r = gw
        .api(Method::GET, "/api/summary", Some(&token), None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(dash.user_enabled(&user));
    dash.ceph_ok(&["dashboard", "ac-user-delete", &user]);
}
