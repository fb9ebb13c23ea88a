//! The shipped scope table against the real dashboard: for every operation of
//! conf/scopes.toml that needs a token, the gateway refuses a read-only and a pool-manager
//! user with 403 exactly when the dashboard itself refuses its users of those roles (the
//! probe is tests/common/scope_probe.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;

#[tokio::test]
async fn the_gateway_refuses_exactly_what_the_dashboard_refuses_for_every_operation() {
    let dash = Dashboard::shared();
    let gw = Gateway::with_dashboard_users().upstream(dash).start();
    let mut subjects = Vec::new();
    for (user, password) in [(VIEWER, VIEWER_PW), (POOLMGR, POOLMGR_PW)] {
        subjects.push(Subject {
            name: user.to_string(),
            gateway_token: gw.login(user, password).await,
            dashboard_token: dash.login(user).await,
        });
    }

    let outcome = probe_scopes(&gw, dash, &subjects).await;
    let summary = outcome.summary();
    println!("{summary}");
    for line in &outcome.mismatches {
        println!("MISMATCH {line}");
    }
    assert!(
        outcome.refused.iter().all(|n| *n > 0),
        "the dashboard refused nothing: {summary}"
    );
    assert!(
        outcome.mismatches.is_empty(),
        "{summary}\n{}",
        outcome.mismatches.join("\n")
    );
}
