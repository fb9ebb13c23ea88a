//! Each release's scope table against that release's real dashboard: for every operation
//! of the table that needs a token (`/ui-api` included), the gateway refuses a read-only
//! and a pool-manager user with 403 exactly when the dashboard itself refuses its users of
//! those roles (the probe is tests/it/common/scope_probe.rs). The gateway runs with its
//! built-in tables and learns each dashboard's release; its users have the gateway's
//! system roles, whose permissions must equal what that release's dashboard lists (20.2's
//! read-only role reads `nvme-of` and `smb`, 16.2's and 18.2's have neither).

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};

/// The dashboard users probed, as the gateway's users of the same name.
const PROBED: [(&str, &str); 2] = [(VIEWER, VIEWER_PW), (POOLMGR, POOLMGR_PW)];

async fn probe_and_check(gw: &RunningGateway, dash: &Dashboard) {
    let mut subjects = Vec::new();
    for (user, password) in PROBED {
        subjects.push(Subject {
            name: user.to_string(),
            gateway_token: gw.login(user, password).await,
            dashboard_token: dash.login(user).await,
        });
    }

    let outcome = probe_scopes(gw, dash, &subjects).await;
    let summary = outcome.summary();
    println!("Ceph {}: {summary}", dash.release());
    for line in &outcome.mismatches {
        println!("MISMATCH {line}");
    }
    assert!(
        outcome.refused.iter().all(|n| *n > 0),
        "the dashboard refused nothing: {summary}"
    );
    assert_eq!(
        outcome.not_forwarded, 0,
        "operations of the table the gateway does not forward: {summary}"
    );
    assert!(
        outcome.mismatches.is_empty(),
        "{summary}\n{}",
        outcome.mismatches.join("\n")
    );
}

#[tokio::test]
async fn the_gateway_refuses_exactly_what_the_dashboard_refuses_for_every_operation() {
    let dash = Dashboard::shared();
    let gw = Gateway::with_dashboard_users().upstream(dash).start();
    probe_and_check(&gw, dash).await;
}

/// The `permissions` object the dashboard's login answer gives `user`.
async fn dashboard_permissions(dash: &Dashboard, user: &str) -> Value {
    let body = json!({"username": user, "password": dash.password(user)});
    let r = dash
        .send(Method::POST, "/api/auth", None, V1, Some(&body))
        .await;
    assert_eq!(r.status, 201, "dashboard login {user}: {}", r.text());
    sorted(&r.json()["permissions"])
}

/// A `permissions` object with each scope's list sorted: the dashboard lists a role's
/// permissions in the order its definition names them, the gateway alphabetically (clients
/// read membership).
fn sorted(permissions: &Value) -> Value {
    let mut sorted = permissions.clone();
    for list in sorted.as_object_mut().expect("an object").values_mut() {
        if let Some(list) = list.as_array_mut() {
            list.sort_by_key(|p| p.as_str().unwrap_or_default().to_string());
        }
    }
    sorted
}

/// A gateway in front of `release`'s shared dashboard with its built-in tables (it learns
/// the release from the manager) and the dashboard's users with the gateway's own system
/// roles of the same names: its login and check answers list what that release's
/// dashboard lists for them, and it refuses what that dashboard refuses.
async fn probe_release(release: &'static str) {
    let dash = Dashboard::shared_release(release);
    let gw = Gateway::with_dashboard_users().upstream(dash).start();
    let metrics = gw.metrics().await;
    let gauge = format!("release=\"{release}\",server=");
    assert!(
        metrics.contains("clustergate_upstream_release_info{") && metrics.contains(&gauge),
        "the gateway did not learn Ceph {release}: {metrics}"
    );
    for (user, password) in [
        (ADMIN, ADMIN_PW),
        (VIEWER, VIEWER_PW),
        (POOLMGR, POOLMGR_PW),
    ] {
        let expected = dashboard_permissions(dash, user).await;
        let login = gw.try_login(user, password).await;
        assert_eq!(login.status, 201, "{}", login.text());
        let login = login.json();
        assert_eq!(
            login["permissions"], expected,
            "Ceph {release}: {user}'s login"
        );
        let token = login["token"].as_str().expect("a token");
        let check = gw.check(token).await.json();
        assert_eq!(
            check["permissions"], expected,
            "Ceph {release}: {user}'s check"
        );
    }
    probe_and_check(&gw, dash).await;
}

#[tokio::test]
async fn ceph_18_2_refuses_through_the_gateway_exactly_what_its_dashboard_refuses() {
    probe_release("18.2").await;
}

#[tokio::test]
async fn ceph_20_2_refuses_through_the_gateway_exactly_what_its_dashboard_refuses() {
    probe_release("20.2").await;
}

/// Logs `POOLMGR` in until the gateway answers other than 503 (the release not known yet),
/// at most `deadline`; returns that answer.
async fn login_once_known(gw: &RunningGateway, deadline: std::time::Duration) -> Reply {
    let started = std::time::Instant::now();
    loop {
        let login = gw.try_login(POOLMGR, POOLMGR_PW).await;
        if login.status != 503 || started.elapsed() > deadline {
            return login;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// A gateway that starts while its 16.2 manager is stopped cannot learn the release: its
/// logins are 503 until it can, never 20.2's roles (a pool-manager would read `prometheus`,
/// which 16.2's dashboard does not grant); then logins and checks list what the dashboard
/// lists, and go on doing so while the manager is down again.
#[tokio::test]
async fn before_the_release_is_known_no_login_or_check_grants_more_than_the_dashboard() {
    let dash = Dashboard::dedicated(DashboardOptions::default());
    let expected = dashboard_permissions(&dash, POOLMGR).await;
    assert!(expected.get("prometheus").is_none(), "{expected}");
    dash.mgr(&["stop", "x"]);
    let gw = Gateway::with_dashboard_users()
        .upstream(&dash)
        .no_wait_active()
        .start();

    let early = gw.try_login(POOLMGR, POOLMGR_PW).await;
    assert_eq!(early.status, 503, "{}", early.text());
    assert!(
        early.json()["detail"]
            .as_str()
            .is_some_and(|d| d.contains("release is not known")),
        "{}",
        early.text()
    );

    dash.mgr(&["start", "x"]);
    let login = login_once_known(&gw, std::time::Duration::from_secs(120)).await;
    assert_eq!(login.status, 201, "{}\n{}", login.text(), gw.logs());
    let login = login.json();
    assert_eq!(sorted(&login["permissions"]), expected, "login");
    let token = login["token"].as_str().expect("a token").to_string();
    assert_eq!(
        sorted(&gw.check(&token).await.json()["permissions"]),
        expected
    );

    // Down again: the release it was last seen to run still applies.
    dash.mgr(&["stop", "x"]);
    let check = gw.check(&token).await;
    assert_eq!(check.status, 503, "no manager serves: {}", check.text());
    assert_eq!(sorted(&check.json()["permissions"]), expected, "check");
    let login = gw.try_login(POOLMGR, POOLMGR_PW).await;
    assert_eq!(login.status, 201, "{}", login.text());
    assert_eq!(sorted(&login.json()["permissions"]), expected, "login");
}
