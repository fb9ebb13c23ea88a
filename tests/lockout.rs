//! Login lockout: N consecutive failures lock one username for T seconds, never for good.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;

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
    tokio::time::sleep(Duration::from_millis(3500)).await;
    gw.login(ADMIN, ADMIN_PW).await;
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
