//! Each release's scope table against that release's real dashboard: for every operation
//! of the table that needs a token (`/ui-api` included), the gateway refuses a read-only
//! and a pool-manager user with 403 exactly when the dashboard itself refuses its users of
//! those roles (the probe is tests/common/scope_probe.rs). 16.2's table is the shipped
//! default and its users have the gateway's system roles; 18.2's and 20.2's tables are
//! named in `access.scopes_file`, and their users have custom roles granting exactly what
//! that dashboard's login answer lists for its users of those roles (20.2's read-only
//! role reads `nvme-of` and `smb`, which the gateway's system roles do not grant).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
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
    r.json()["permissions"].clone()
}

/// A gateway in front of `release`'s shared dashboard with that release's table, its
/// probed users holding custom roles copied from the dashboard's login answers.
async fn probe_release(release: &'static str) {
    let dash = Dashboard::shared_release(release);
    let table = scope_table(release);
    let mut roles = String::new();
    let mut gw = Gateway::new();
    for (user, password) in PROBED {
        let role = format!("ceph-{release}-{user}");
        let permissions = dashboard_permissions(dash, user).await;
        roles.push_str(&format!(
            "[[roles]]\nname = {role:?}\n[roles.scopes_permissions]\n"
        ));
        for (scope, granted) in permissions.as_object().expect("a permissions object") {
            roles.push_str(&format!("{scope:?} = {granted}\n"));
        }
        gw = gw.user(User::new(user, password, &[role.as_str()]));
    }
    let gw = gw
        .file("roles.toml", &roles)
        .extra_toml("auth", "roles_file = \"roles.toml\"")
        .upstream(dash)
        .extra_toml(
            "access",
            &format!("scopes_file = {:?}", table.display().to_string()),
        )
        .start();
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
