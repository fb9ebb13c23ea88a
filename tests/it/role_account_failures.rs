//! `upstream.identity = "roles"` when making the accounts fails (issue 32 item 6), against
//! a real 16.2 dashboard with a standby manager of its own (its settings are changed and
//! its active manager failed over, which the shared dashboard's other tests must not see):
//! the dashboard's password policy refusing the gateway's password, and a manager failover
//! while several accounts are being made. Either way the answer is in the dashboard's shape
//! and says what to do, nothing half made blocks the next request, and no account holds
//! other roles than the ones asked.
//!
//! One test runs both cases one after the other on one dashboard: each start of a dashboard
//! with a standby costs the suite tens of seconds, and the cases need nothing the other
//! leaves out of place (the policy is set back before the failover).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};

/// The deployment key of this file's gateways.
const KEY: &str = "role-account-failures-test-key-0123456789";

/// A role's permissions: scope, and what it may do there.
type Scopes = &'static [(&'static str, &'static [&'static str])];

/// The roles file's roles: name and permissions, as the dashboard lists them.
const CUSTOM_ROLES: [(&str, Scopes); 3] = [
    ("pool-reader", &[("pool", &["read"])]),
    ("osd-auditor", &[("osd", &["read"]), ("monitor", &["read"])]),
    ("policy-test", &[("hosts", &["read"])]),
];

/// The users and their roles (the roles file's and the dashboard's system roles): each a
/// distinct set of roles, so each acts as an account of its own.
const USERS: [(&str, &[&str]); 6] = [
    ("reader", &["read-only"]),
    ("pools", &["pool-manager"]),
    ("blocks", &["block-manager", "pool-reader"]),
    ("poolread", &["pool-reader"]),
    ("files", &["cephfs-manager", "osd-auditor"]),
    ("both", &["osd-auditor", "pool-reader"]),
];

/// Whose first request meets the password policy.
const POLICY_USER: (&str, &[&str]) = ("refused", &["policy-test"]);

const PASSWORD: &str = "Us3r-Pass-word";

/// A user's requests must be served again this long after the new active manager accepts
/// logins.
const RECOVERY_DEADLINE: Duration = Duration::from_secs(30);

/// Users whose first requests start this far apart, the failover issued as the first one
/// starts: the accounts are being made while the active manager goes away.
const STAGGER: Duration = Duration::from_millis(350);

#[tokio::test]
async fn a_refused_account_or_a_failover_while_making_accounts_leaves_nothing_half_made() {
    let dash = Dashboard::dedicated(DashboardOptions {
        standby: true,
        ..Default::default()
    });
    let gw = gateway(&dash).start();
    the_password_policy_refusing_the_account_is_a_502_saying_what_to_do(&dash, &gw).await;
    a_failover_while_accounts_are_made_leaves_each_with_exactly_its_roles(&dash, &gw).await;
}

fn gateway(dash: &Dashboard) -> Gateway {
    let users = USERS
        .iter()
        .chain([&POLICY_USER])
        .map(|(name, roles)| User::new(name, PASSWORD, roles));
    Gateway::new()
        .users(users)
        .file("roles.toml", &roles_file())
        .extra_toml("auth", "roles_file = \"roles.toml\"")
        .upstream(dash)
        .role_identity(KEY)
}

fn roles_file() -> String {
    let mut text = String::new();
    for (name, scopes) in CUSTOM_ROLES {
        text.push_str(&format!(
            "[[roles]]\nname = {name:?}\n[roles.scopes_permissions]\n"
        ));
        for (scope, permissions) in scopes {
            text.push_str(&format!("{scope:?} = {permissions:?}\n"));
        }
    }
    text
}

/// The dashboard's names of `roles`: system roles as they are, the roles file's mirrored.
fn dashboard_roles(roles: &[&str]) -> BTreeSet<String> {
    roles
        .iter()
        .map(
            |role| match CUSTOM_ROLES.iter().any(|(name, _)| name == role) {
                true => mirrored_role_name(KEY, role),
                false => role.to_string(),
            },
        )
        .collect()
}

/// The account users of `roles` act as.
fn account_name(roles: &[&str]) -> String {
    let names = dashboard_roles(roles);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    role_account_name(KEY, &names)
}

async fn accounts_metric(gw: &RunningGateway, action: &str, result: &str) -> f64 {
    gw.metric(
        "clustergate_dashboard_accounts_total",
        &[("action", action), ("result", result)],
    )
    .await
}

/// The dashboard's administrator on whichever manager is active now.
struct ActiveAdmin {
    url: String,
    token: String,
    client: reqwest::Client,
}

impl ActiveAdmin {
    async fn of(dash: &Dashboard) -> ActiveAdmin {
        let url = dash.mgr(&["active-url"]);
        let client = client_builder().build().unwrap();
        let body = json!({"username": ADMIN, "password": dash.password(ADMIN)});
        let login = client
            .post(format!("{url}/api/auth"))
            .header("Accept", V1)
            .json(&body)
            .send()
            .await
            .unwrap();
        let login = Reply::from_reqwest(login).await;
        assert_eq!(login.status, 201, "admin login at {url}: {}", login.text());
        let token = login.json()["token"].as_str().unwrap().to_string();
        ActiveAdmin { url, token, client }
    }

    async fn get(&self, path: &str) -> Reply {
        let request = self
            .client
            .get(format!("{}{path}", self.url))
            .header("Accept", V1)
            .bearer_auth(&self.token);
        Reply::from_reqwest(request.send().await.unwrap()).await
    }

    /// Every account the gateway manages (`cg-` and 16 hex digits), by name: its roles.
    async fn managed_accounts(&self) -> BTreeMap<String, BTreeSet<String>> {
        let reply = self.get("/api/user").await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        let mut accounts = BTreeMap::new();
        for user in reply.json().as_array().unwrap() {
            let name = user["username"].as_str().unwrap();
            let digits = name.strip_prefix("cg-").unwrap_or_default();
            if digits.len() != 16 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
                continue;
            }
            assert_eq!(user["enabled"], true, "{user}");
            assert_eq!(user["pwdUpdateRequired"], false, "{user}");
            let roles = user["roles"].as_array().unwrap().iter();
            let roles = roles.map(|r| r.as_str().unwrap().to_string()).collect();
            accounts.insert(name.to_string(), roles);
        }
        accounts
    }

    /// Every role the gateway mirrored (`cg-role-`), by name: its permissions.
    async fn mirrored_roles(&self) -> BTreeMap<String, Value> {
        let reply = self.get("/api/role").await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        reply
            .json()
            .as_array()
            .unwrap()
            .iter()
            .filter(|role| role["name"].as_str().unwrap().starts_with("cg-role-"))
            .map(|role| {
                let name = role["name"].as_str().unwrap().to_string();
                (name, role["scopes_permissions"].clone())
            })
            .collect()
    }
}

/// The dashboard refuses the derived password (its policy asks 40 characters, the
/// gateway's have 32): a 502 in the dashboard's shape naming the refusal and the policy,
/// the refusal counted, no account made; with the policy set back the same request is
/// served.
async fn the_password_policy_refusing_the_account_is_a_502_saying_what_to_do(
    dash: &Dashboard,
    gw: &RunningGateway,
) {
    let (user, roles) = POLICY_USER;
    let name = account_name(roles);
    let token = gw.login(user, PASSWORD).await;
    dash.ceph_ok(&["dashboard", "set-pwd-policy-min-length", "40"]);
    let refused = gw.api_get("/api/summary", Some(&token)).await;
    dash.ceph_ok(&["dashboard", "set-pwd-policy-min-length", "8"]);

    assert_eq!(refused.status, 502, "{}", refused.text());
    let answer = refused.json();
    assert_eq!(answer["status"], "502 Bad Gateway", "{answer}");
    assert!(answer["request_id"].is_string(), "{answer}");
    let detail = answer["detail"].as_str().unwrap();
    for says in [
        "The dashboard refused to create the account",
        &name,
        "Password is too weak",
        "password policy",
        "pwd-policy-min-length",
    ] {
        assert!(detail.contains(says), "says {says:?}: {detail}");
    }
    assert_eq!(accounts_metric(gw, "create", "refused").await, 1.0);
    assert_eq!(accounts_metric(gw, "create", "ok").await, 0.0);
    let admin = ActiveAdmin::of(dash).await;
    let path = format!("/api/user/{name}");
    assert_eq!(admin.get(&path).await.status, 404, "nothing half made");

    let served = gw.api_get("/api/summary", Some(&token)).await;
    assert_eq!(served.status, 200, "{}", served.text());
    assert_eq!(accounts_metric(gw, "create", "ok").await, 1.0);
    assert_eq!(
        admin.managed_accounts().await,
        BTreeMap::from([(name, dashboard_roles(roles))])
    );
}

/// One user's requests: the first one starting `delay` after the failover was issued,
/// then one after another until one is served after the failover ended (at most
/// [`RECOVERY_DEADLINE`] after it).
async fn requests_through_a_failover(
    gw: &RunningGateway,
    user: &'static str,
    token: String,
    delay: Duration,
    failed_over: &tokio::sync::watch::Receiver<Option<Instant>>,
) -> Vec<(&'static str, bool, Reply)> {
    tokio::time::sleep(delay).await;
    let mut answers = Vec::new();
    loop {
        let ended = *failed_over.borrow();
        let reply = gw.api_get("/api/summary", Some(&token)).await;
        let served = reply.status == 200;
        answers.push((user, ended.is_some(), reply));
        match ended {
            Some(at) if served || at.elapsed() > RECOVERY_DEADLINE => return answers,
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// What a request may be answered while the active manager goes away: served, the
/// gateway's 503 "no active dashboard backend" or "the dashboard's Ceph release is not known
/// yet" (the new active manager not checked yet), or a request in flight on the manager that
/// went away (see [`in_flight`]); never a 500, a standby's answer, or a refusal of the
/// account.
fn failover_answer(reply: &Reply) -> bool {
    let release_unknown = reply.status == 503
        && serde_json::from_slice::<Value>(&reply.body).is_ok_and(|b| {
            b["status"] == "503 Service Unavailable"
                && b["detail"]
                    == "the dashboard's Ceph release is not known yet; try again in a few seconds"
        });
    reply.status == 200 || is_no_active_backend(reply) || release_unknown || in_flight(reply)
}

/// The gateway's 502 for a request whose exchange with the manager (forwarding it, or the
/// gateway's own calls making or logging in to its account) was cut when the manager went
/// away. Only one request of each user can be in flight then.
fn in_flight(reply: &Reply) -> bool {
    reply.status == 502
        && serde_json::from_slice::<Value>(&reply.body).is_ok_and(|b| {
            b["status"] == "502 Bad Gateway"
                && b["request_id"].is_string()
                && [
                    "the dashboard closed the connection",
                    "the dashboard backend could not be reached",
                    "the gateway could not log in to the dashboard backend",
                ]
                .contains(&b["detail"].as_str().unwrap_or_default())
        })
}

/// Six users, each of roles of their own, send their first requests while the active
/// manager fails over: each answer is served or one of the gateway's failover answers,
/// every user is served after it, and every account the gateway manages holds exactly its
/// roles, every mirrored role exactly the roles file's permissions.
async fn a_failover_while_accounts_are_made_leaves_each_with_exactly_its_roles(
    dash: &Dashboard,
    gw: &RunningGateway,
) {
    let mut tokens = Vec::new();
    for (user, _) in USERS {
        tokens.push(gw.login(user, PASSWORD).await);
    }
    let (ended, failed_over) = tokio::sync::watch::channel(None);
    let dir = dash.dir.clone();
    let failover = tokio::task::spawn_blocking(move || {
        let new_active = Dashboard::mgr_in(&dir, &["fail"]);
        ended.send_replace(Some(Instant::now()));
        new_active
    });
    let users = USERS
        .iter()
        .zip(tokens)
        .enumerate()
        .map(|(i, ((user, _), token))| {
            let delay = STAGGER * u32::try_from(i).unwrap();
            requests_through_a_failover(gw, user, token, delay, &failed_over)
        });
    let answers: Vec<_> = futures_util::future::join_all(users)
        .await
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(failover.await.unwrap(), "y", "the standby took over");

    let mut counts = BTreeMap::new();
    for (user, after, reply) in &answers {
        *counts.entry((*user, *after, reply.status)).or_insert(0) += 1;
    }
    println!("answers (user, after the failover, status): {counts:?}");
    let bad: Vec<_> = answers
        .iter()
        .filter(|(_, _, reply)| !failover_answer(reply))
        .map(|(user, after, reply)| {
            format!("{user} (after: {after}): {} {}", reply.status, reply.text())
        })
        .collect();
    assert!(bad.is_empty(), "{bad:#?}\n{}", gw.logs());
    for (user, _) in USERS {
        let lost = answers
            .iter()
            .filter(|(u, _, reply)| *u == user && in_flight(reply))
            .count();
        assert!(
            lost <= 1,
            "{user}: {lost} requests lost in flight\n{}",
            gw.logs()
        );
        let last = answers.iter().rev().find(|(u, _, _)| *u == user).unwrap();
        assert_eq!(
            (last.1, last.2.status),
            (true, 200),
            "{user} not served within {RECOVERY_DEADLINE:?} of the failover: {}\n{}",
            last.2.text(),
            gw.logs()
        );
    }

    let admin = ActiveAdmin::of(dash).await;
    let wanted: BTreeMap<String, BTreeSet<String>> = USERS
        .iter()
        .chain([&POLICY_USER])
        .map(|(_, roles)| (account_name(roles), dashboard_roles(roles)))
        .collect();
    assert_eq!(admin.managed_accounts().await, wanted);
    let mirrored: BTreeMap<String, Value> = CUSTOM_ROLES
        .iter()
        .map(|(name, scopes)| {
            let scopes: BTreeMap<&str, &[&str]> = scopes.iter().copied().collect();
            (mirrored_role_name(KEY, name), json!(scopes))
        })
        .collect();
    assert_eq!(admin.mirrored_roles().await, mirrored);
}
