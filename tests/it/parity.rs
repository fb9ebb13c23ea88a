//! Parity, per release (issue 32, item 2): every read (GET) of the release's scope table,
//! as each system role and two single-scope custom roles, once straight to the dashboard as
//! a real dashboard account holding that role and once through the gateway as a user of the
//! same role (`upstream.identity = "roles"`, the default). Both must decide alike (403 or
//! not), and a read both answer 200 must have the same key paths both ways: what the
//! dashboard filters by its caller's permissions (an RGW user's keys, the health report's
//! sections, the summary's tasks) is filtered through the gateway as directly. The writes'
//! decisions are tests/it/scope_table.rs's. The probe is tests/it/common/scope_probe.rs.

use crate::common::*;

/// The system roles every release from 16.2 to 20.2 has.
const SYSTEM_ROLES: [&str; 8] = [
    "administrator",
    "read-only",
    "block-manager",
    "rgw-manager",
    "cluster-manager",
    "pool-manager",
    "cephfs-manager",
    "ganesha-manager",
];

/// Two custom roles of one scope each: (name, scope), read only.
const CUSTOM_ROLES: [(&str, &str); 2] = [
    ("cg-parity-grafana", "grafana"),
    ("cg-parity-rgw-reader", "rgw"),
];

const PASSWORD: &str = "Parity-Probe-Pass-26!";

fn account(role: &str) -> String {
    format!("cg-parity-user-{role}")
}

/// A dashboard account holding `role` alone, made afresh.
fn dashboard_account(dash: &Dashboard, role: &str) {
    let _ = dash.ceph(&["dashboard", "ac-user-delete", &account(role)]);
    dash.create_user(&account(role), PASSWORD, &[role]);
}

async fn probe_release(dash: &'static Dashboard) {
    for (role, scope) in CUSTOM_ROLES {
        let _ = dash.ceph(&["dashboard", "ac-role-delete", role]);
        dash.create_role(role, &[(scope, &["read"])]);
    }
    let roles: Vec<&str> = SYSTEM_ROLES
        .iter()
        .copied()
        .chain(CUSTOM_ROLES.iter().map(|(role, _)| *role))
        .collect();
    let roles_file: String = CUSTOM_ROLES
        .iter()
        .map(|(role, scope)| {
            format!(
                "[[roles]]\nname = \"{role}\"\n[roles.scopes_permissions]\n{scope} = [\"read\"]\n"
            )
        })
        .collect();
    let mut gateway = Gateway::new()
        .file("roles.toml", &roles_file)
        .extra_toml("auth", "roles_file = \"roles.toml\"");
    for role in &roles {
        dashboard_account(dash, role);
        gateway = gateway.user(User::new(&account(role), PASSWORD, &[role]));
    }
    let gw = gateway.upstream(dash).start();
    let mut subjects = Vec::new();
    for role in &roles {
        subjects.push(Subject {
            name: role.to_string(),
            gateway_token: gw.login(&account(role), PASSWORD).await,
            dashboard_token: dash.login_as(&account(role), PASSWORD).await,
        });
    }

    let outcome = probe_reads(&gw, dash, &subjects).await;
    let summary = outcome.summary();
    println!(
        "Ceph {}: {} roles, {summary}",
        dash.release(),
        subjects.len()
    );
    for line in &outcome.mismatches {
        println!("DIFFERENCE {line}");
    }
    for role in &roles {
        let _ = dash.ceph(&["dashboard", "ac-user-delete", &account(role)]);
    }
    for (role, _) in CUSTOM_ROLES {
        let _ = dash.ceph(&["dashboard", "ac-role-delete", role]);
    }
    outcome.assert_clean();
}

#[tokio::test]
async fn ceph_16_2_gives_every_role_the_same_reads_through_the_gateway_as_directly() {
    probe_release(Dashboard::shared()).await;
}

#[tokio::test]
async fn ceph_18_2_gives_every_role_the_same_reads_through_the_gateway_as_directly() {
    probe_release(Dashboard::shared_release("18.2")).await;
}

#[tokio::test]
async fn ceph_20_2_gives_every_role_the_same_reads_through_the_gateway_as_directly() {
    probe_release(Dashboard::shared_release("20.2")).await;
}
