//! `upstream.identity = "roles"` against the real dashboards (docs/what-the-dashboard-sees.md, "What the dashboard
//! sees"): each user's requests act as an account the gateway manages holding exactly the
//! user's roles, so the dashboard's own per-field permissions apply inside its answers
//! (the health report, the summary); the account and the mirrored custom role as the
//! dashboard keeps them; an account deleted or disabled behind the gateway's back made
//! again; two gateways on one Redis making the same account at once; the accounts the
//! gateway manages closed to changes through it; past `upstream.max_role_accounts` a 503.
//! Each test uses roles of its own (a custom role with a fresh name), so its account is
//! its own on the shared dashboard.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};

/// The deployment key of these tests' gateways.
const KEY: &str = "role-accounts-test-key-0123456789abcdef";

/// A name no other test, or earlier run on the shared dashboard, has used.
fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

/// A roles file with one role, `name`, granting `scopes` (TOML lines `scope = [...]`).
fn roles_file(name: &str, scopes: &str) -> String {
    format!("[[roles]]\nname = {name:?}\n[roles.scopes_permissions]\n{scopes}\n")
}

/// The top-level keys of an answer.
fn keys(answer: &Value) -> BTreeSet<String> {
    answer.as_object().unwrap().keys().cloned().collect()
}

/// The dashboard's own view of an account, asked as its administrator.
async fn account(dash: &Dashboard, name: &str) -> Reply {
    let admin = dash.login(ADMIN).await;
    dash.send(
        Method::GET,
        &format!("/api/user/{name}"),
        Some(&admin),
        V1,
        None,
    )
    .await
}

/// The roles the dashboard says `name` holds, and whether it is enabled.
async fn roles_of(dash: &Dashboard, name: &str) -> (BTreeSet<String>, bool) {
    let reply = account(dash, name).await;
    assert_eq!(reply.status, 200, "{name}: {}", reply.text());
    let body = reply.json();
    let roles = body["roles"].as_array().unwrap().iter();
    let roles = roles.map(|r| r.as_str().unwrap().to_string()).collect();
    assert_eq!(body["pwdUpdateRequired"], false, "{body}");
    (roles, body["enabled"].as_bool().unwrap())
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// A gateway in front of `dash` acting as role accounts, with `user` holding the roles
/// file's one role `role` (granting `scopes`) beside `system` roles.
fn gateway(dash: &Dashboard, role: &str, scopes: &str, system: &[&str]) -> Gateway {
    let mut roles = vec![role];
    roles.extend_from_slice(system);
    Gateway::new()
        .user(User::admin())
        .user(User::new("holder", "H0lder-Pass", &roles))
        .file("roles.toml", &roles_file(role, scopes))
        .extra_toml("auth", "roles_file = \"roles.toml\"")
        .upstream(dash)
        .role_identity(KEY)
}

/// What a dashboard account of its own holding only grafana read gets from the health
/// report and the summary, through the gateway as directly: no monitor, OSD or manager map.
async fn grafana_reader_sees_what_the_dashboard_gives_that_role(dash: &Dashboard) {
    let role = unique("grafana");
    let gw = gateway(dash, &role, "grafana = [\"read\"]", &[]).start();
    let token = gw.login("holder", "H0lder-Pass").await;

    // The same role on the dashboard itself, and an account of its own holding it.
    let direct_role = unique("cg-test-grafana");
    dash.create_role(&direct_role, &[("grafana", &["read"])]);
    let direct_user = unique("cg-test-reader");
    dash.create_user(&direct_user, "Gr4fana-Reader!", &[&direct_role]);
    let body = json!({"username": direct_user, "password": "Gr4fana-Reader!"});
    let login = dash
        .send(Method::POST, "/api/auth", None, V1, Some(&body))
        .await;
    assert_eq!(login.status, 201, "{}", login.text());
    let direct_token = login.json()["token"].as_str().unwrap().to_string();

    for path in ["/api/health/full", "/api/health/minimal", "/api/summary"] {
        let through = gw.api_get(path, Some(&token)).await;
        assert_eq!(through.status, 200, "{path}: {}", through.text());
        let direct = dash
            .send(Method::GET, path, Some(&direct_token), V1, None)
            .await;
        assert_eq!(direct.status, 200, "{path}: {}", direct.text());
        assert_eq!(keys(&through.json()), keys(&direct.json()), "{path}");
    }
    let health = gw.api_get("/api/health/full", Some(&token)).await.json();
    for hidden in [
        "mon_status",
        "osd_map",
        "mgr_map",
        "fs_map",
        "hosts",
        "pools",
    ] {
        assert!(
            health.get(hidden).is_none(),
            "{hidden} given to a grafana reader"
        );
    }

    // The account the dashboard saw holds exactly the mirrored role, which grants
    // exactly what the roles file says.
    let mirrored = mirrored_role_name(KEY, &role);
    let name = role_account_name(KEY, &[&mirrored]);
    assert_eq!(roles_of(dash, &name).await, (set(&[&mirrored]), true));
    let admin = dash.login(ADMIN).await;
    let path = format!("/api/role/{mirrored}");
    let role = dash.send(Method::GET, &path, Some(&admin), V1, None).await;
    assert_eq!(role.status, 200, "{}", role.text());
    assert_eq!(
        role.json()["scopes_permissions"],
        json!({"grafana": ["read"]})
    );
    let logs = gw.logs();
    assert!(!logs.contains(&token));
    // The account's logins are logged as the role account's, by name, never as the
    // service account's.
    assert!(
        logs.lines()
            .any(|l| l.contains("role account logged in") && l.contains(&name)),
        "{logs}"
    );
    assert!(
        !logs
            .lines()
            .any(|l| l.contains(&name) && l.contains("service account")),
        "{logs}"
    );
}

#[tokio::test]
async fn a_grafana_reader_sees_the_health_report_the_16_2_dashboard_gives_that_role() {
    grafana_reader_sees_what_the_dashboard_gives_that_role(Dashboard::shared()).await;
}

#[tokio::test]
async fn a_grafana_reader_sees_the_health_report_the_20_2_dashboard_gives_that_role() {
    grafana_reader_sees_what_the_dashboard_gives_that_role(Dashboard::shared_release("20.2")).await;
}

#[tokio::test]
async fn a_read_only_users_account_holds_read_only_and_what_it_may_not_do_is_refused_upstream() {
    let dash = Dashboard::shared();
    let role = unique("auditor");
    let gw = gateway(dash, &role, "pool = [\"read\"]", &["read-only"]).start();
    let token = gw.login("holder", "H0lder-Pass").await;
    assert_eq!(gw.api_get("/api/summary", Some(&token)).await.status, 200);
    let mirrored = mirrored_role_name(KEY, &role);
    let name = role_account_name(KEY, &["read-only", &mirrored]);
    assert_eq!(
        roles_of(dash, &name).await,
        (set(&["read-only", &mirrored]), true)
    );
    // No one changes the accounts the gateway manages through it, the administrator
    // included: every user of these roles would gain what was added.
    let admin = gw.login(ADMIN, ADMIN_PW).await;
    let grant = json!({"roles": ["administrator"]});
    let path = format!("/api/user/{name}");
    let refused = gw.api(Method::PUT, &path, Some(&admin), Some(&grant)).await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    let path = format!("/api/role/{mirrored}");
    let scopes = json!({"scopes_permissions": {"user": ["read", "update"]}});
    let refused = gw
        .api(Method::PUT, &path, Some(&admin), Some(&scopes))
        .await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert_eq!(
        roles_of(dash, &name).await,
        (set(&["read-only", &mirrored]), true)
    );
}

#[tokio::test]
async fn an_account_deleted_or_disabled_behind_the_gateways_back_is_made_again() {
    let dash = Dashboard::shared();
    let role = unique("mender");
    let gw = gateway(dash, &role, "pool = [\"read\"]", &[]).start();
    let token = gw.login("holder", "H0lder-Pass").await;
    assert_eq!(gw.api_get("/api/pool", Some(&token)).await.status, 200);
    let mirrored = mirrored_role_name(KEY, &role);
    let name = role_account_name(KEY, &[&mirrored]);

    dash.ceph_ok(&["dashboard", "ac-user-delete", &name]);
    assert_eq!(account(dash, &name).await.status, 404);
    let again = gw.api_get("/api/pool", Some(&token)).await;
    assert_eq!(again.status, 200, "{}", again.text());
    assert_eq!(roles_of(dash, &name).await, (set(&[&mirrored]), true));

    // A refused account token is replaced at most once per 10 s: the dashboard's 401
    // reaches the client until then, and the account is mended after.
    dash.ceph_ok(&["dashboard", "ac-user-disable", &name]);
    eventually(
        "served again",
        Duration::from_secs(1),
        Duration::from_secs(30),
        || async { gw.api_get("/api/pool", Some(&token)).await.status == 200 },
    )
    .await;
    assert_eq!(roles_of(dash, &name).await, (set(&[&mirrored]), true));
}

#[tokio::test]
async fn two_gateways_on_one_redis_make_the_same_account_at_once() {
    let dash = Dashboard::shared();
    let redis = RedisServer::start();
    let role = unique("racer");
    let deployment = || {
        gateway(dash, &role, "osd = [\"read\"]", &["read-only"])
            .known_secret()
            .redis_state(&redis)
    };
    let (a, b) = (deployment().start(), deployment().start());
    let token = a.login("holder", "H0lder-Pass").await;
    let requests = (0..6).map(|i| {
        let gw = if i % 2 == 0 { &a } else { &b };
        let token = token.clone();
        async move { gw.api_get("/api/summary", Some(&token)).await }
    });
    for reply in futures_util::future::join_all(requests).await {
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    let mirrored = mirrored_role_name(KEY, &role);
    let name = role_account_name(KEY, &["read-only", &mirrored]);
    assert_eq!(
        roles_of(dash, &name).await,
        (set(&["read-only", &mirrored]), true)
    );
    // Made by one of them, or by both when their creations cross: the dashboard checks
    // that a name is free and then saves, not at once, so two POSTs at the same moment can
    // both succeed (seen here once in six runs). Either way with the same roles and
    // password, and the one that lost the race does not set the account again.
    let made = created(&a).await + created(&b).await;
    assert!((1.0..=2.0).contains(&made), "made {made} times");
    let set_again = updated(&a).await + updated(&b).await;
    assert_eq!(set_again, 0.0, "an account made meanwhile was set again");
}

async fn updated(gw: &RunningGateway) -> f64 {
    gw.metric(
        "clustergate_dashboard_accounts_total",
        &[("action", "update"), ("result", "ok")],
    )
    .await
}

async fn created(gw: &RunningGateway) -> f64 {
    gw.metric(
        "clustergate_dashboard_accounts_total",
        &[("action", "create"), ("result", "ok")],
    )
    .await
}

#[tokio::test]
async fn past_the_limit_of_role_sets_a_new_one_is_a_503_saying_what_to_do() {
    let dash = Dashboard::shared();
    let role = unique("capped");
    let gw = gateway(dash, &role, "pool = [\"read\"]", &[])
        .user(User::viewer())
        .extra_toml("upstream", "max_role_accounts = 1")
        .start();
    let holder = gw.login("holder", "H0lder-Pass").await;
    assert_eq!(gw.api_get("/api/summary", Some(&holder)).await.status, 200);
    let viewer = gw.login(VIEWER, VIEWER_PW).await;
    let refused = gw.api_get("/api/summary", Some(&viewer)).await;
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert!(
        refused.json()["detail"]
            .as_str()
            .unwrap()
            .contains("upstream.max_role_accounts"),
        "{}",
        refused.text()
    );
    assert_eq!(
        gw.metric(
            "clustergate_dashboard_accounts_total",
            &[("action", "account"), ("result", "over_limit")],
        )
        .await,
        1.0
    );
}

/// A service account without the user scope (read-only): the dashboard refuses to make
/// the account; the user gets a 502 in the dashboard's shape saying what to do, the metric
/// counts the refusal, and no account holding more than the user's roles is left.
#[tokio::test]
async fn a_service_account_without_the_user_scope_is_a_502_saying_what_to_do() {
    let dash = Dashboard::shared();
    let service = unique("cg-svc-ro");
    let password = format!("Pw-{}", uuid::Uuid::new_v4().simple());
    dash.create_user(&service, &password, &["read-only"]);
    let role = unique("refused");
    let gw = gateway(dash, &role, "pool = [\"read\"]", &[])
        .service_account(&service, &password)
        .start();
    let token = gw.login("holder", "H0lder-Pass").await;
    let refused = gw.api_get("/api/summary", Some(&token)).await;
    assert_eq!(refused.status, 502, "{}", refused.text());
    let answer = refused.json();
    assert_eq!(answer["status"], "502 Bad Gateway", "{}", refused.text());
    assert!(answer["request_id"].is_string(), "{}", refused.text());
    assert!(
        answer["detail"]
            .as_str()
            .unwrap()
            .contains("needs the user scope"),
        "{}",
        refused.text()
    );
    let mut refusals = 0.0;
    for action in ["role", "create"] {
        refusals += gw
            .metric(
                "clustergate_dashboard_accounts_total",
                &[("action", action), ("result", "refused")],
            )
            .await;
    }
    assert!(refusals >= 1.0, "refusals counted: {refusals}");
    let name = role_account_name(KEY, &[&mirrored_role_name(KEY, &role)]);
    assert_eq!(account(dash, &name).await.status, 404, "nothing half made");
}

/// `clustergate accounts list|prune` against the real dashboard: this deployment's
/// accounts with their last use, its mirrored roles, and the accounts named like managed
/// ones its key does not name (other tests' gateways use other keys, and one made here by
/// hand); prune removes only this deployment's accounts unused for the given days and the
/// mirrored roles no account holds then; an account pruned while in use is made again on
/// its next request.
#[tokio::test]
async fn accounts_list_and_prune_touch_only_this_deployments_unused_accounts() {
    let dash = Dashboard::shared();
    let key = unique("accounts-command-key-0123456789");
    let role = unique("pruned");
    let gw = Gateway::new()
        .user(User::new("reader", "R3ader-Pass", &["read-only"]))
        .user(User::new("pooler", "P00ler-Pass", &["pool-manager"]))
        .user(User::new("holder", "H0lder-Pass", &[&role]))
        .file("roles.toml", &roles_file(&role, "grafana = [\"read\"]"))
        .extra_toml("auth", "roles_file = \"roles.toml\"")
        .upstream(dash)
        .role_identity(&key)
        .start();
    let mut tokens = Vec::new();
    for (user, password) in [
        ("reader", "R3ader-Pass"),
        ("pooler", "P00ler-Pass"),
        ("holder", "H0lder-Pass"),
    ] {
        let token = gw.login(user, password).await;
        let reply = gw.api_get("/api/summary", Some(&token)).await;
        assert_eq!(reply.status, 200, "{user}: {}", reply.text());
        tokens.push(token);
    }
    let mirrored = mirrored_role_name(&key, &role);
    let reader = role_account_name(&key, &["read-only"]);
    let pooler = role_account_name(&key, &["pool-manager"]);
    let holder = role_account_name(&key, &[&mirrored]);
    let foreign = role_account_name(&unique("another-deployment"), &["read-only"]);
    dash.create_user(&foreign, "F0reign-Pass!", &["read-only"]);

    // Two of the three unused for 40 days, as the gateway's record says.
    let uses = gw.state_dir().join("dashboard-accounts-use");
    let recorded = std::fs::read_to_string(&uses).unwrap();
    let long_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 40 * 86_400;
    let aged: String = recorded
        .lines()
        .map(|line| match line.split_once(' ') {
            Some((name, _)) if name == pooler || name == holder => format!("{name} {long_ago}\n"),
            _ => format!("{line}\n"),
        })
        .collect();
    assert_eq!(aged.lines().count(), 3, "{recorded}");
    std::fs::write(&uses, aged).unwrap();

    let list = accounts_command(&gw, &["list"]);
    for name in [&reader, &pooler, &holder] {
        assert!(
            list.contains(&format!("  {name}  used ")),
            "{name}:\n{list}"
        );
    }
    assert!(
        list.contains(&format!("  {mirrored}  held by 1 account(s)")),
        "{list}"
    );
    let (ours, others) = list.split_once("Accounts named like managed ones").unwrap();
    assert!(
        others.contains(&foreign) && !ours.contains(&foreign),
        "{list}"
    );

    let dry = accounts_command(&gw, &["prune", "--dry-run"]);
    assert!(dry.contains("Would remove 2 account(s)"), "{dry}");
    assert!(
        dry.contains(&pooler) && dry.contains(&holder) && dry.contains(&mirrored),
        "{dry}"
    );
    assert_eq!(
        account(dash, &pooler).await.status,
        200,
        "removed by a dry run"
    );

    let pruned = accounts_command(&gw, &["prune", "--unused-for-days", "30"]);
    assert!(pruned.contains("Removed 2 account(s)"), "{pruned}");
    assert!(pruned.contains("Removed 1 mirrored role(s)"), "{pruned}");
    for (name, status) in [
        (&pooler, 404),
        (&holder, 404),
        (&reader, 200),
        (&foreign, 200),
    ] {
        assert_eq!(account(dash, name).await.status, status, "{name}");
    }
    let admin = dash.login(ADMIN).await;
    let role_path = format!("/api/role/{mirrored}");
    let role_reply = dash
        .send(Method::GET, &role_path, Some(&admin), V1, None)
        .await;
    assert_eq!(role_reply.status, 404, "{}", role_reply.text());
    let left = std::fs::read_to_string(&uses).unwrap();
    assert!(!left.contains(&pooler) && left.contains(&reader), "{left}");

    // Pruned while in use: made again on the next request, with the same roles.
    for token in &tokens {
        let reply = gw.api_get("/api/summary", Some(token)).await;
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    assert_eq!(
        roles_of(dash, &pooler).await,
        (set(&["pool-manager"]), true)
    );
    assert_eq!(roles_of(dash, &holder).await, (set(&[&mirrored]), true));
    dash.ceph_ok(&["dashboard", "ac-user-delete", &foreign]);
}

/// Runs `clustergate accounts ARGS --config` on `gw`'s configuration; its standard output.
fn accounts_command(gw: &RunningGateway, args: &[&str]) -> String {
    let out = std::process::Command::new(bin())
        .arg("accounts")
        .args(args)
        .arg("--config")
        .arg(gw.dir().join("clustergate.toml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "accounts {args:?}: {stdout}{stderr}");
    stdout
}

/// Without `upstream.identity = "roles"` the gateway manages no account: the command says
/// so and exits 64, as for a configuration that does not fit.
#[test]
fn the_accounts_command_refuses_a_configuration_managing_no_account() {
    let gw = Gateway::new()
        .upstream(Dashboard::shared())
        .extra_toml("upstream", "identity = \"service\"");
    let dir = tempfile::tempdir().unwrap();
    let config = gw.write_files(dir.path(), 0, 0);
    let out = std::process::Command::new(bin())
        .args(["accounts", "list", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("manages no dashboard accounts"), "{stderr}");
}
