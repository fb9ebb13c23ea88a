//! The cluster's own accounts (docs/accounts.md) against the real
//! dashboard: logins checked by the dashboard (`auth.source = "dashboard"`) with its
//! permissions, custom roles included; the user's own dashboard token upstream (its 401
//! ends the session, logout logs it out there too, another gateway on the same Redis
//! serves it); refusals (400), no dashboard (503); the gateway's lockout before the
//! dashboard's own; local users as their own dashboard accounts (`upstream.identity =
//! "user"`), or 403 without one; what the dashboard's and the gateway's audits show in
//! each mode; gateway tokens that never outlive the user's dashboard token; and
//! `check-config` refusing a lockout the dashboard's own would reach first.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::common::*;
use crate::unsealed;
use reqwest::Method;
use serde_json::{json, Value};

/// A name no other test, or earlier run on the shared dashboard, has used.
fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

/// A permissions object as sets, so that the order of lists does not matter.
fn permission_sets(permissions: &Value) -> BTreeMap<String, BTreeSet<String>> {
    permissions
        .as_object()
        .unwrap()
        .iter()
        .map(|(scope, list)| {
            let names = list.as_array().unwrap().iter();
            (
                scope.clone(),
                names.map(|p| p.as_str().unwrap().to_string()).collect(),
            )
        })
        .collect()
}

async fn dashboard_login(dash: &Dashboard, user: &str, password: &str) -> Reply {
    let body = json!({"username": user, "password": password});
    dash.send(Method::POST, "/api/auth", None, V1, Some(&body))
        .await
}

/// Waits (up to 20 s) until `ready` holds for what `read` returns, and returns it.
async fn eventually<T: std::fmt::Debug, F: std::future::Future<Output = T>>(
    what: &str,
    read: impl Fn() -> F,
    ready: impl Fn(&T) -> bool,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = read().await;
        if ready(&got) {
            return got;
        }
        assert!(Instant::now() < deadline, "{what}: {got:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_custom_role_gets_the_dashboards_own_permissions_and_403s_for_every_operation() {
    let dash = Dashboard::shared();
    let role = unique("cg-role");
    dash.create_role(
        &role,
        &[
            ("pool", &["read", "update"]),
            ("osd", &["read"]),
            ("rgw", &["read", "create", "delete"]),
        ],
    );
    let user = unique("cg-custom");
    let password = "Cust0m-Role-Pass!";
    dash.create_user(&user, password, &[&role]);
    let gw = Gateway::new().dashboard_accounts(5).upstream(dash).start();

    let login = gw.try_login(&user, password).await;
    assert_eq!(login.status, 201, "{}", login.text());
    let own = dashboard_login(dash, &user, password).await;
    assert_eq!(own.status, 201, "{}", own.text());
    let expected = permission_sets(&own.json()["permissions"]);
    assert_eq!(permission_sets(&login.json()["permissions"]), expected);
    // The client holds the gateway's token, never the dashboard's.
    let token = login.json()["token"].as_str().unwrap().to_string();
    assert_eq!(jwt_payload(&token)["iss"], "clustergate");
    let check = gw.check(&token).await;
    assert_eq!(check.json()["username"], user.as_str());
    assert_eq!(permission_sets(&check.json()["permissions"]), expected);

    let subject = Subject {
        name: user.clone(),
        gateway_token: token,
        dashboard_token: own.json()["token"].as_str().unwrap().to_string(),
    };
    let outcome = probe_scopes(&gw, dash, &[subject]).await;
    let summary = outcome.summary();
    println!("{summary}");
    assert!(
        outcome.refused[0] > 0,
        "the dashboard refused nothing: {summary}"
    );
    assert!(
        outcome.mismatches.is_empty(),
        "{summary}\n{}",
        outcome.mismatches.join("\n")
    );
}

#[tokio::test]
async fn the_dashboard_refusing_is_400_for_both_kinds_and_no_dashboard_is_503() {
    let dash = Dashboard::shared();
    let gw = Gateway::new().dashboard_accounts(5).upstream(dash).start();
    assert_invalid_credentials(&gw.try_login(VIEWER, "not-the-password").await);
    assert_invalid_credentials(&gw.try_login(&unique("cg-nobody"), "whatever").await);
    gw.login(VIEWER, dash.password(VIEWER)).await;

    let nothing_there = format!("http://127.0.0.1:{}", free_port());
    let down = Gateway::new()
        .dashboard_accounts(5)
        .upstream_via(dash, vec![nothing_there])
        .no_wait_active()
        .start();
    let refused = down.try_login(VIEWER, dash.password(VIEWER)).await;
    assert_status_shape(&refused, 503, "503 Service Unavailable", None);
}

#[test]
fn check_config_refuses_a_lockout_the_dashboards_own_would_reach_first() {
    let dash = Dashboard::shared();
    for attempts in [0, 9, 10, 25] {
        let (_dir, out) = Gateway::new()
            .dashboard_accounts(attempts)
            .upstream(dash)
            .check_config();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{attempts}: {stderr}");
        assert!(
            stderr
                .lines()
                .any(|l| l.contains("clustergate.toml: auth.lockout_attempts: ")
                    && l.contains("before the dashboard disables the account")),
            "{attempts}: {stderr}"
        );
    }
    let (_dir, out) = Gateway::new()
        .dashboard_accounts(8)
        .upstream(dash)
        .check_config();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("logins checked by the dashboard"),
        "{stdout}"
    );
}

#[tokio::test]
async fn the_gateway_locks_a_guesser_out_before_the_dashboard_disables_the_account() {
    let dash = Dashboard::shared();
    let user = unique("cg-guessed");
    let password = "Guess3d-Acc0unt-Pass";
    dash.create_user(&user, password, &["read-only"]);
    let gw = Gateway::new().dashboard_accounts(5).upstream(dash).start();
    // More than the dashboard's 10: it would disable the account had it seen them all.
    for _ in 0..12 {
        assert_invalid_credentials(&gw.try_login(&user, "a-wrong-guess").await);
    }
    // Locked at the gateway: even the right password is refused there...
    assert_invalid_credentials(&gw.try_login(&user, password).await);
    // ...while the dashboard saw 5 failures and keeps the account enabled.
    assert!(dash.user_enabled(&user), "the dashboard disabled {user}");
    assert_eq!(dashboard_login(dash, &user, password).await.status, 201);
}

/// The session's stored form in Redis (`<prefix>session:<jti>`), as another gateway finds
/// it: sealed, so the dashboard token is not in clear in what Redis holds.
fn stored_session(redis: &RedisServer, token: &str) -> Option<Value> {
    let jti = jwt_payload(token)["jti"].as_str().unwrap().to_string();
    let key = format!("clustergate:session:{jti}");
    let out = std::process::Command::new("redis-cli")
        .args(["-u", &redis.url(), "--raw", "GET"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "redis-cli: {out:?}");
    let stored = String::from_utf8(out.stdout).unwrap();
    let session: Value = serde_json::from_str(&unsealed(&key, stored.trim())?).unwrap();
    let dashboard_token = session["token"].as_str().unwrap();
    assert!(
        !stored.contains(dashboard_token),
        "in clear in redis: {stored}"
    );
    Some(session)
}

#[tokio::test]
async fn a_session_opened_on_one_gateway_is_served_by_another_and_logout_ends_it_upstream() {
    let dash = Dashboard::shared();
    let redis = RedisServer::start();
    // One deployment: the same Redis and the same signing key.
    let gateway = || {
        Gateway::new()
            .known_secret()
            .dashboard_accounts(5)
            .upstream(dash)
            .redis_state(&redis)
    };
    let (a, b) = (gateway().start(), gateway().start());
    let login = a.try_login(POOLMGR, dash.password(POOLMGR)).await;
    assert_eq!(login.status, 201, "{}", login.text());
    let token = login.json()["token"].as_str().unwrap().to_string();
    let stored = stored_session(&redis, &token).expect("the session in redis");
    let dashboard_token = stored["token"].as_str().unwrap().to_string();
    assert_ne!(dashboard_token, token);
    assert!(
        !login.text().contains(&dashboard_token),
        "sent to the client"
    );
    assert!(!a.logs().contains(&dashboard_token), "logged");
    let direct = |t: String| async move {
        dash.send(Method::GET, "/api/pool", Some(&t), V1, None)
            .await
            .status
    };
    assert_eq!(direct(dashboard_token.clone()).await, 200);

    assert_eq!(b.api_get("/api/pool", Some(&token)).await.status, 200);
    assert_eq!(b.logout(&token).await.status, 200);
    // Logged out on the dashboard too, and gone from the store and from the other gateway.
    assert_eq!(direct(dashboard_token).await, 401);
    assert_eq!(stored_session(&redis, &token), None);
    eventually(
        "the other gateway still serves the token",
        || a.api_get("/api/pool", Some(&token)),
        |r| r.status == 401,
    )
    .await;
}

#[tokio::test]
async fn a_user_token_the_dashboard_refuses_ends_the_session_and_is_never_replaced() {
    let dash = Dashboard::shared();
    let user = unique("cg-changed");
    let password = "Chang3d-Acc0unt-Pass";
    dash.create_user(&user, password, &["pool-manager"]);
    let gw = Gateway::new().dashboard_accounts(5).upstream(dash).start();
    let token = gw.login(&user, password).await;
    assert_eq!(gw.api_get("/api/pool", Some(&token)).await.status, 200);
    // The dashboard refuses tokens issued before a password change (compared per second).
    next_wall_clock_second().await;
    dash.set_password(&user, password);
    // The dashboard's 401 reaches the client (the service account would have answered 200)...
    assert_eq!(gw.api_get("/api/pool", Some(&token)).await.status, 401);
    // ...and the session is over at the gateway too.
    assert_unauthorized(&gw.api_get("/api/pool", Some(&token)).await);
    assert_login_url(&gw.check(&token).await);
    let again = gw.login(&user, password).await;
    assert_eq!(gw.api_get("/api/pool", Some(&again)).await.status, 200);
}

#[tokio::test]
async fn with_user_identity_a_local_user_without_a_dashboard_account_gets_403() {
    let dash = Dashboard::shared();
    let gw = Gateway::new()
        .user(User::new(
            POOLMGR,
            dash.password(POOLMGR),
            &["pool-manager"],
        ))
        .user(User::new(
            "cg-local-only",
            "L0cal-Only-Pass",
            &["read-only"],
        ))
        .user_identity()
        .upstream(dash)
        .start();
    let token = gw.login(POOLMGR, dash.password(POOLMGR)).await;
    assert_eq!(gw.api_get("/api/pool", Some(&token)).await.status, 200);
    let refused = gw.try_login("cg-local-only", "L0cal-Only-Pass").await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    let body = refused.json();
    assert_eq!(body["code"], "no_dashboard_account", "{body}");
    assert_eq!(body["component"], "auth", "{body}");
    assert!(
        body["detail"].as_str().unwrap().contains("no account"),
        "{body}"
    );
    assert_no_token_cookie(&refused, "a refused login");
}

/// The `user='...'` of the dashboard's audit line for `path`.
fn dashboard_audit_user(line: &str) -> String {
    let start = line.find("user='").unwrap() + "user='".len();
    line[start..].split('\'').next().unwrap().to_string()
}

/// The user of the gateway's audit line of the call to `path`.
fn gateway_audit_user(gw: &RunningGateway, path: &str) -> Option<String> {
    gateway_audit_line(gw, path).map(|l| l["user"].as_str().unwrap_or("null").to_string())
}

/// The gateway's audit line of the call to `path`.
fn gateway_audit_line(gw: &RunningGateway, path: &str) -> Option<Value> {
    let text = std::fs::read_to_string(gw.dir().join("audit.log")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["event"] == "call" && l["path"] == path)
}

/// An API key of `token`'s user holding pool-manager, made through the key API.
async fn pool_manager_key(gw: &RunningGateway, token: &str) -> String {
    let body = json!({"name": "audited", "roles": ["pool-manager"], "expires_in_seconds": 600});
    let created = gw
        .api(
            Method::POST,
            "/api/clustergate/keys",
            Some(token),
            Some(&body),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    created.json()["key"].as_str().unwrap().to_string()
}

/// A PUT through `gw` as `token`, and the user each audit names for it. Ceph 16.2's
/// dashboard writes its audit line before it authenticates the request, naming the user its
/// worker thread authenticated last: every worker first serves one of this user's requests.
async fn audited_put(
    gw: &RunningGateway,
    dash: &Dashboard,
    token: &str,
    mode: &str,
) -> (String, String) {
    // One read first: with role accounts it makes the account and logs it in, which the
    // 40 at once would otherwise wait for while holding their places on the dashboard.
    let first = gw.api_get("/api/pool", Some(token)).await;
    assert_eq!(first.status, 200, "{mode}: {}", first.text());
    let reads = (0..40).map(|_| gw.api_get("/api/pool", Some(token)));
    for r in futures_util::future::join_all(reads).await {
        assert_eq!(r.status, 200, "{mode}: {}", r.text());
    }
    let path = format!("/api/pool/cg-audit-{mode}");
    let put = gw
        .api(Method::PUT, &path, Some(token), Some(&json!({})))
        .await;
    assert!(put.status < 500, "{mode}: {}", put.text());
    let wanted = format!("path='{path}' method='PUT'");
    let lines = eventually(
        "the dashboard's audit line",
        || async { dash.audit_lines() },
        |lines: &Vec<String>| lines.iter().any(|l| l.contains(&wanted)),
    )
    .await;
    let line = lines.iter().find(|l| l.contains(&wanted)).unwrap();
    let gateway_user = eventually(
        "the gateway's audit line",
        || async { gateway_audit_user(gw, &path) },
        Option::is_some,
    )
    .await;
    (dashboard_audit_user(line), gateway_user.unwrap())
}

/// `jwt_token_ttl` of the audit test's dashboard.
const DASHBOARD_TOKEN_SECONDS: u64 = 3600;

#[tokio::test]
async fn each_mode_names_who_acted_in_the_dashboards_audit_and_the_gateways() {
    // Dashboard tokens live an hour here; the gateway's 8 h tokens must not outlive them.
    let dash = Dashboard::dedicated(DashboardOptions {
        jwt_ttl: Some(DASHBOARD_TOKEN_SECONDS as u32),
        ..DashboardOptions::default()
    });
    dash.ceph_ok(&["dashboard", "set-audit-api-enabled", "true"]);
    let password = dash.password(POOLMGR).to_string();
    let audited = |gateway: Gateway| {
        gateway
            .upstream(&dash)
            .extra_toml("log", "audit_file = \"audit.log\"")
            // audited_put's 40 reads of one user fit that user's share of the places
            // (half: 10 at once, as many as CherryPy's threads) and of the queue (32).
            .extra_toml("upstream", "max_in_flight = 20")
    };
    let local = || Gateway::new().user(User::new(POOLMGR, &password, &["pool-manager"]));
    let modes = [
        ("local-roles", audited(local())),
        (
            "local-service",
            audited(local().extra_toml("upstream", "identity = \"service\"")),
        ),
        ("local-user", audited(local().user_identity())),
        ("dashboard", audited(Gateway::new().dashboard_accounts(5))),
        // An API key of the user's, holding their role: seen as the role's account (its
        // bucket holds audited_put's 42 requests at once).
        (
            "api-key",
            audited(local().extra_toml("api_keys", "burst = 100")),
        ),
    ];
    let mut seen = Vec::new();
    for (mode, gateway) in modes {
        let gw = gateway.start();
        let token = gw.login(POOLMGR, &password).await;
        if mode == "api-key" {
            let key = pool_manager_key(&gw, &token).await;
            let (dashboard_user, gateway_user) = audited_put(&gw, &dash, &key, mode).await;
            let line = gateway_audit_line(&gw, "/api/pool/cg-audit-api-key").unwrap();
            assert_eq!(line["api_key"]["id"], key[4..20], "{line}");
            assert_eq!(line["auth"], "api_key", "{line}");
            seen.push((mode, dashboard_user, gateway_user));
            continue;
        }
        let claims = jwt_payload(&token);
        let lifetime = claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap();
        match mode {
            "local-roles" | "local-service" => assert_eq!(lifetime, 28800, "{mode}"),
            // The dashboard's token ends an hour after its own `iat`, read during the login
            // (a second or two after the gateway's): the gateway's ends with it.
            _ => assert!(
                (DASHBOARD_TOKEN_SECONDS..DASHBOARD_TOKEN_SECONDS + 3).contains(&lifetime),
                "{mode}: the gateway's token lives {lifetime} s"
            ),
        }
        let (dashboard_user, gateway_user) = audited_put(&gw, &dash, &token, mode).await;
        println!(
            "{mode}: dashboard audit user='{dashboard_user}'; gateway audit user={gateway_user}"
        );
        seen.push((mode, dashboard_user, gateway_user));
    }
    let role_account = role_account_name(SHARED_ACCOUNTS_KEY, &["pool-manager"]);
    let expected = [
        ("local-roles", role_account.as_str(), POOLMGR),
        ("local-service", "clustergate", POOLMGR),
        ("local-user", POOLMGR, POOLMGR),
        ("dashboard", POOLMGR, POOLMGR),
        ("api-key", role_account.as_str(), POOLMGR),
    ];
    let seen: Vec<(&str, &str, &str)> = seen
        .iter()
        .map(|(m, d, g)| (*m, d.as_str(), g.as_str()))
        .collect();
    assert_eq!(seen, expected);
}
