//! Login lockout: N consecutive failures lock one username for T seconds, never for good.
//! With `auth.source = "dashboard"`, against the real dashboard: no sequence of logins
//! through the gateways disables a dashboard account (it does at its 10th consecutive
//! failure), and the password that last succeeded still logs in after an attack.

use std::time::{Duration, Instant};

use crate::common::*;

async fn fail(gw: &RunningGateway, user: &str, times: usize) {
    for i in 0..times {
        assert_invalid_credentials(&gw.try_login(user, &format!("wrong-{i}")).await);
    }
}

#[tokio::test]
async fn after_the_allowed_failures_even_the_right_password_is_refused_with_the_same_400() {
    let gw = Gateway::with_admin_and_viewer().lockout(3, 300).start();
    fail(&gw, ADMIN, 3).await;
    let r = gw.try_login(ADMIN, ADMIN_PW).await;
    assert_invalid_credentials(&r);
    assert_no_token_cookie(&r, "locked user");
    // Only that username is locked.
    gw.login(VIEWER, VIEWER_PW).await;
}

#[tokio::test]
async fn one_failure_less_than_the_limit_does_not_lock() {
    let gw = Gateway::new().user(User::admin()).lockout(3, 300).start();
    fail(&gw, ADMIN, 2).await;
    gw.login(ADMIN, ADMIN_PW).await;
}

#[tokio::test]
async fn the_lockout_ends_after_lockout_seconds() {
    let gw = Gateway::new().user(User::admin()).lockout(2, 2).start();
    fail(&gw, ADMIN, 2).await;
    assert_invalid_credentials(&gw.try_login(ADMIN, ADMIN_PW).await);
    // A locked username's attempts are refused unchecked and not counted.
    let (every, deadline) = (Duration::from_millis(500), Duration::from_secs(10));
    let ends = || async { gw.try_login(ADMIN, ADMIN_PW).await.status == 201 };
    eventually("the lock ends", every, deadline, ends).await;
}

#[tokio::test]
async fn a_success_resets_the_failure_count() {
    let gw = Gateway::new().user(User::admin()).lockout(3, 300).start();
    fail(&gw, ADMIN, 2).await;
    gw.login(ADMIN, ADMIN_PW).await;
    fail(&gw, ADMIN, 2).await;
    gw.login(ADMIN, ADMIN_PW).await;
}

#[tokio::test]
async fn lockout_attempts_zero_never_locks() {
    let gw = Gateway::new().user(User::admin()).lockout(0, 300).start();
    fail(&gw, ADMIN, 12).await;
    gw.login(ADMIN, ADMIN_PW).await;
}

#[tokio::test]
async fn failures_for_unknown_usernames_lock_nobody_else() {
    let gw = Gateway::new().user(User::admin()).lockout(2, 300).start();
    fail(&gw, "nosuchuser", 4).await;
    gw.login(ADMIN, ADMIN_PW).await;
}

#[tokio::test]
async fn tokens_issued_before_a_lockout_stay_valid() {
    // Unlike the dashboard, which disables the account, a lockout only refuses new logins.
    let gw = Gateway::new().user(User::admin()).lockout(2, 300).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    fail(&gw, ADMIN, 3).await;
    assert_check_ok(&gw.check(&token).await, ADMIN, &admin_permissions());
}

/// The gateway's lock in the dashboard tests: short, so that waiting it out is cheap.
const SHORT_LOCK_SECONDS: u64 = 1;

/// A gateway whose logins the dashboard checks, its lockout at the default 5 attempts
/// with a short lock, and no per-client limit (the attacks below come from one address).
fn dashboard_gateway(dash: &Dashboard) -> Gateway {
    Gateway::new()
        .dashboard_accounts(5)
        .lockout(5, SHORT_LOCK_SECONDS)
        .failed_logins_per_minute(0)
        .upstream(dash)
}

/// A dashboard account of its own for one test, with the read-only role.
fn test_account(dash: &Dashboard, prefix: &str) -> (String, String) {
    let user = format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let password = format!("Pw-{}", uuid::Uuid::new_v4().simple());
    dash.create_user(&user, &password, &["read-only"]);
    (user, password)
}

/// Waits out the gateway's lock as main had it (the count then started again).
async fn wait_out_the_lock() {
    tokio::time::sleep(Duration::from_secs(SHORT_LOCK_SECONDS) + Duration::from_millis(500)).await;
}

/// The account is still enabled on the dashboard, and its right password logs in through
/// each gateway.
async fn assert_account_usable(
    dash: &Dashboard,
    gateways: &[&RunningGateway],
    user: &str,
    password: &str,
) {
    assert!(dash.user_enabled(user), "the dashboard disabled {user}");
    for gw in gateways {
        gw.login(user, password).await;
    }
    assert!(dash.user_enabled(user));
}

#[tokio::test]
async fn the_issues_sequence_leaves_the_dashboard_account_enabled() {
    let dash = Dashboard::dedicated(DashboardOptions::default());
    let (user, password) = test_account(&dash, "cg-seq");
    let gw = dashboard_gateway(&dash).start();
    // The user has logged in through the gateway before: it keeps a verifier of that password.
    gw.login(&user, &password).await;
    fail(&gw, &user, 5).await;
    wait_out_the_lock().await;
    fail(&gw, &user, 5).await;
    wait_out_the_lock().await;
    fail(&gw, &user, 1).await;
    assert_account_usable(&dash, &[&gw], &user, &password).await;
}

#[tokio::test]
async fn a_slow_attack_over_two_gateways_leaves_the_account_usable() {
    let dash = Dashboard::dedicated(DashboardOptions::default());
    let redis = RedisServer::start();
    let (user, password) = test_account(&dash, "cg-slow");
    let a = dashboard_gateway(&dash).redis_state(&redis).start();
    let b = dashboard_gateway(&dash).redis_state(&redis).start();
    a.login(&user, &password).await;
    // 60 wrong passwords in 6 rounds, each 5 at once on each gateway, the lock waited out
    // between rounds: the attempts race for the count across gateways.
    let started = Instant::now();
    for round in 0..6 {
        let attempts = (0..10).map(|i| {
            let gw = if i % 2 == 0 { &a } else { &b };
            let guess = format!("wrong-{round}-{i}");
            let user = user.clone();
            async move { gw.try_login(&user, &guess).await }
        });
        for r in futures_util::future::join_all(attempts).await {
            assert_invalid_credentials(&r);
        }
        wait_out_the_lock().await;
    }
    println!("60 attempts over two gateways in {:.1?}", started.elapsed());
    assert_account_usable(&dash, &[&a, &b], &user, &password).await;
}

#[tokio::test]
async fn the_service_account_cannot_log_in_through_the_gateway() {
    let dash = Dashboard::shared();
    let gw = dashboard_gateway(dash).start();
    let r = gw.try_login("clustergate", &dash.service_password()).await;
    assert_invalid_credentials(&r);
    assert_no_token_cookie(&r, "service account");
}

#[tokio::test]
async fn unlock_lets_a_user_without_a_verifier_back_in_after_the_dashboard_is_reset() {
    let dash = Dashboard::shared();
    let redis = RedisServer::start();
    let (user, password) = test_account(dash, "cg-unlock");
    let gw = dashboard_gateway(dash).redis_state(&redis).start();
    fail(&gw, &user, 5).await;
    // Never logged in through the gateway: no verifier, so even the right password waits.
    assert_invalid_credentials(&gw.try_login(&user, &password).await);
    dash.ceph_ok(&["dashboard", "ac-user-enable", &user]);
    let config = gw.dir().join("clustergate.toml");
    let out = std::process::Command::new(bin())
        .arg("unlock")
        .arg("--config")
        .arg(&config)
        .arg(&user)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    gw.login(&user, &password).await;
}
