//! Reloading on SIGHUP: users and custom roles, signing keys, the TLS certificate and the upstream servers
//! change without a restart; a bad file keeps the running configuration; settings that
//! cannot change live are named; requests in flight are not disturbed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;

/// Token checks the loop of [`checks_until`] sends however soon it is stopped: on a loaded
/// machine few fit in the time the reloads take.
const MIN_CHECKS: usize = 20;

/// What the token checks of [`checks_until`] saw.
struct Checks {
    sent: usize,
    /// Sent before `stop`: while the reloads ran.
    during_reloads: usize,
    /// The statuses that were not 200 with the user.
    refused: Vec<u16>,
}

/// Token checks in a loop until `stop`, and at least [`MIN_CHECKS`] of them.
fn checks_until(
    gw: &RunningGateway,
    token: String,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Checks> {
    let client = gw.build_client(false);
    let url = gw.url("/api/auth/check");
    tokio::spawn(async move {
        let (mut sent, mut during_reloads, mut refused) = (0, 0, Vec::new());
        loop {
            let stopped = stop.load(Ordering::Relaxed);
            if (stopped && sent >= MIN_CHECKS) || sent >= 20_000 {
                break;
            }
            during_reloads += usize::from(!stopped);
            let reply = client
                .post(&url)
                .header("Accept", V1)
                .json(&serde_json::json!({ "token": token }))
                .send()
                .await;
            sent += 1;
            match reply {
                Ok(r) if r.status() == 200 => {
                    let body = r.text().await.unwrap_or_default();
                    if !body.contains("\"username\"") {
                        refused.push(200);
                    }
                }
                Ok(r) => refused.push(r.status().as_u16()),
                Err(_) => refused.push(0),
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Checks {
            sent,
            during_reloads,
            refused,
        }
    })
}

/// On port 0 (the harness's default) the running configuration keeps port 0, not the ports
/// the kernel chose: a reload of the same listeners names neither as needing a restart.
#[tokio::test]
async fn a_reload_on_port_0_names_no_listener_as_needing_a_restart() {
    let mut gw = Gateway::with_admin_and_viewer().tls(false).start();
    assert!(gw
        .listening()
        .is_some_and(|[s, m]| s.port() != 0 && m.port() != 0));
    let threads_named = |logs: &str| {
        logs.lines()
            .any(|l| l.contains("needs a restart") && l.contains("server.threads"))
    };
    // A setting that needs a restart, so that the reload's lines are known to be written.
    assert!(
        gw.reload(|g| *g = g.clone().set_toml("server", "threads", "threads = 3"))
            .await
    );
    assert!(gw.logs_come_to(threads_named).await, "{}", gw.logs());
    let listen_named = gw.logs().lines().any(|l| {
        l.contains("needs a restart")
            && (l.contains("server.listen") || l.contains("metrics.listen"))
    });
    assert!(!listen_named, "{}", gw.logs());
}

#[tokio::test]
async fn users_change_at_once_a_bad_file_keeps_the_running_configuration_and_restart_settings_are_named(
) {
    let mut gw = Gateway::with_admin_and_viewer().tls(false).start();
    let admin = gw.login(ADMIN, ADMIN_PW).await;
    let viewer = gw.login(VIEWER, VIEWER_PW).await;
    assert_eq!(gw.try_login(POOLMGR, POOLMGR_PW).await.status, 400);
    let stop = Arc::new(AtomicBool::new(false));
    let in_flight = checks_until(&gw, admin.clone(), stop.clone());

    // A user added and one removed: the removed one's token is refused at once.
    assert!(
        gw.reload(|g| *g = g.clone().user(User::poolmgr()).without_user(VIEWER))
            .await,
        "{}",
        gw.logs()
    );
    assert_eq!(gw.try_login(POOLMGR, POOLMGR_PW).await.status, 201);
    assert!(!valid(&gw, &viewer).await, "a removed user's token");

    // A users file that is not TOML: refused, named, and the running users stay.
    assert!(
        !gw.reload(|g| *g = g.clone().raw_users_file("[[users]\n"))
            .await
    );
    assert!(
        gw.logs_come_to(|l| l.contains("users.toml: line 1")).await,
        "{}",
        gw.logs()
    );
    assert_eq!(gw.try_login(POOLMGR, POOLMGR_PW).await.status, 201);
    let last_successful = "clustergate_config_last_reload_successful";
    assert_eq!(gw.metric(last_successful, &[]).await, 0.0);

    // Back to a good file, with a setting that needs a restart.
    assert!(
        gw.reload(|g| {
            *g = g
                .clone()
                .listed_users()
                .set_toml("server", "threads", "threads = 3")
        })
        .await
    );
    let named = |logs: &str| {
        logs.lines()
            .any(|l| l.contains("needs a restart") && l.contains("server.threads"))
    };
    assert!(gw.logs_come_to(named).await, "{}", gw.logs());
    stop.store(true, Ordering::Relaxed);
    let checks = in_flight.await.unwrap();
    assert!(
        checks.sent >= MIN_CHECKS && checks.during_reloads > 0,
        "{} checks, {} of them during the reloads",
        checks.sent,
        checks.during_reloads
    );
    assert!(
        checks.refused.is_empty(),
        "checks during reloads: {:?}",
        checks.refused
    );
    let metrics = gw.metrics().await;
    let reloads = |result| {
        metric_sum(
            &metrics,
            "clustergate_config_reloads_total",
            &[("result", result)],
        )
    };
    assert_eq!((reloads("success"), reloads("failure")), (2.0, 1.0));
    assert_eq!(metric_sum(&metrics, last_successful, &[]), 1.0);
    let last_success = metric_sum(
        &metrics,
        "clustergate_config_last_reload_success_timestamp_seconds",
        &[],
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!((now - 60.0..=now).contains(&last_success), "{last_success}");
}

/// The notAfter of the first certificate of a PEM chain, in Unix seconds.
fn not_after(chain: &str) -> f64 {
    let (_, pem) = x509_parser::pem::parse_x509_pem(chain.as_bytes()).unwrap();
    pem.parse_x509().unwrap().validity().not_after.timestamp() as f64
}

/// Whether the token check accepts `token` (it answers 200 either way, with the user or
/// the login page).
async fn valid(gw: &RunningGateway, token: &str) -> bool {
    let reply = gw.check(token).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.json().get("username").is_some()
}

fn trusting(ca: &str) -> reqwest::Client {
    client_builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
        .build()
        .unwrap()
}

/// A roles file whose one role grants `pool` the permissions `pool`.
fn roles_file(pool: &str) -> String {
    format!("[[roles]]\nname = \"pool-auditor\"\n[roles.scopes_permissions]\npool = {pool}\n")
}

#[tokio::test]
async fn a_custom_roles_grants_change_on_reload_and_a_bad_roles_file_keeps_them() {
    let mut gw = Gateway::new()
        .user(User::new(
            "auditor",
            "Aud1tor-Pass",
            &["pool-auditor", "rgw-manager"],
        ))
        .file("roles.toml", &roles_file("[\"read\"]"))
        .extra_toml("auth", "roles_file = \"roles.toml\"")
        .start();
    let token = gw.login("auditor", "Aud1tor-Pass").await;
    let rgw = serde_json::json!(["create", "delete", "read", "update"]);
    let permissions =
        |pool: &[&str]| serde_json::json!({"grafana": ["read"], "pool": pool, "rgw": rgw});
    assert_check_ok(&gw.check(&token).await, "auditor", &permissions(&["read"]));

    let grown = roles_file("[\"read\", \"update\"]");
    assert!(
        gw.reload(|spec| *spec = spec.clone().file("roles.toml", &grown))
            .await
    );
    let grown_permissions = permissions(&["read", "update"]);
    assert_check_ok(&gw.check(&token).await, "auditor", &grown_permissions);

    let bad = roles_file("[\"read\", \"fly\"]");
    assert!(
        !gw.reload(|spec| *spec = spec.clone().file("roles.toml", &bad))
            .await
    );
    let problem = "roles.toml: roles[0] (\"pool-auditor\").scopes_permissions.pool";
    assert!(
        gw.logs_come_to(|l| l.contains(problem)).await,
        "{}",
        gw.logs()
    );
    assert_check_ok(&gw.check(&token).await, "auditor", &grown_permissions);
}

#[tokio::test]
async fn signing_keys_rotate_and_the_certificate_is_replaced_on_reload() {
    let (ca1, chain1, key1) = operator_certificate();
    let (ca2, chain2, key2) = operator_certificate_until(rcgen::date_time_ymd(2031, 5, 17));
    let secret = |c: char| c.to_string().repeat(40);
    let keys = |list: &str| format!("signing_keys = [{list}]");
    let k1 = r#"{ kid = "k1", secret_file = "k1.secret" }"#;
    let k2 = r#"{ kid = "k2", secret_file = "k2.secret" }"#;
    let mut gw = Gateway::new()
        .user(User::admin())
        .tls(true)
        .file("certs/server.pem", &chain1)
        .file("certs/server.key", &key1)
        .file("k1.secret", &secret('a'))
        .file("k2.secret", &secret('b'))
        .extra_toml("server", "cert_file = \"certs/server.pem\"")
        .extra_toml("server", "key_file = \"certs/server.key\"")
        .extra_toml("auth", &keys(k1))
        .start();
    let (old_ca, new_ca) = (trusting(&ca1), trusting(&ca2));
    gw.use_client(trusting(&ca1));
    let url = gw.url("/api/auth/check");
    assert!(old_ca.post(&url).send().await.is_ok());
    assert!(new_ca.post(&url).send().await.is_err());
    let token1 = gw.login(ADMIN, ADMIN_PW).await;
    let expiry = "clustergate_tls_cert_expiry_timestamp_seconds";
    assert_eq!(gw.metric(expiry, &[]).await, not_after(&chain1));

    // A new certificate, and a new key that signs first while the old one still verifies.
    assert!(
        gw.reload(|g| {
            *g = g
                .clone()
                .file("certs/server.pem", &chain2)
                .file("certs/server.key", &key2)
                .set_toml("auth", "signing_keys", &keys(&format!("{k2}, {k1}")))
        })
        .await,
        "{}",
        gw.logs()
    );
    let fresh = |ca: &str| {
        client_builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
            .pool_max_idle_per_host(0)
            .build()
            .unwrap()
    };
    assert!(
        fresh(&ca2).post(&url).send().await.is_ok(),
        "new handshakes get the new certificate"
    );
    assert!(fresh(&ca1).post(&url).send().await.is_err());
    assert_eq!(gw.metric(expiry, &[]).await, not_after(&chain2));
    assert_ne!(not_after(&chain1), not_after(&chain2));
    gw.use_client(trusting(&ca2));
    let token2 = gw.login(ADMIN, ADMIN_PW).await;
    assert_eq!(jwt_header(&token2)["kid"], "k2");
    assert!(valid(&gw, &token1).await, "k1 still verifies");

    // The old key taken off the list takes its tokens with it.
    assert!(
        gw.reload(|g| *g = g.clone().set_toml("auth", "signing_keys", &keys(k2)))
            .await
    );
    assert!(
        !valid(&gw, &token1).await,
        "k1's token after k1 was removed"
    );
    assert!(valid(&gw, &token2).await);
}

#[tokio::test]
async fn upstream_servers_change_on_reload() {
    let dash = Dashboard::shared();
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    let mut gw = Gateway::with_admin_and_viewer()
        .tls(false)
        .upstream_via(dash, vec![nowhere.clone()])
        .no_wait_active()
        .start();
    // No manager was ever seen: its release, and so its roles, are not known.
    let refused = gw.try_login(ADMIN, ADMIN_PW).await;
    assert_eq!(refused.status, 503, "{}", refused.text());

    assert!(
        gw.reload(|g| *g = g.clone().upstream(dash)).await,
        "{}",
        gw.logs()
    );
    gw.wait_readyz(200);
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let reply = gw.api_get("/api/health/minimal", Some(&token)).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let metrics = gw.metrics().await;
    assert!(
        !metrics.contains(&format!("server=\"{nowhere}\"")),
        "a removed server's series go"
    );
}
