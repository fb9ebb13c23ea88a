//! Graceful upgrade under load: a new process started with `run --upgrade` takes the
//! listening sockets over from the running one (SIGQUIT), while clients keep sending, over
//! plain HTTP and TLS, on kept-alive and on new connections. No request may fail.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::json;

/// Each client sends one request per this, so a kept-alive connection is never idle long.
const PACE: Duration = Duration::from_millis(20);
/// Load runs at most this long, whatever happens.
const MAX_LOAD: Duration = Duration::from_secs(40);

#[derive(Default, Debug)]
struct Tally {
    sent: usize,
    failures: Vec<String>,
}

/// One client: alternates a proxied GET and a token check until `stop`.
async fn client_load(
    client: reqwest::Client,
    base: String,
    token: String,
    stop: Arc<AtomicBool>,
) -> Tally {
    let mut tally = Tally::default();
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) && started.elapsed() < MAX_LOAD {
        let request = if tally.sent % 2 == 0 {
            client
                .get(format!("{base}/api/health/minimal"))
                .header("Accept", V1)
                .bearer_auth(&token)
        } else {
            client
                .post(format!("{base}/api/auth/check"))
                .header("Accept", V1)
                .json(&json!({ "token": token }))
        };
        tally.sent += 1;
        match request.send().await {
            Ok(reply) if reply.status() == 200 => {
                // Read the body too: a connection closed under it is a failure.
                if let Err(e) = reply.bytes().await {
                    tally.failures.push(format!("body: {e}"));
                }
            }
            Ok(reply) => tally.failures.push(format!("status {}", reply.status())),
            Err(e) => tally.failures.push(format!("{e:?}")),
        }
        tokio::time::sleep(PACE).await;
    }
    tally
}

/// How the binary is replaced.
#[derive(Clone, Copy, Debug)]
enum Upgrade {
    /// `run --upgrade`, then SIGQUIT to the running process.
    ByHand,
    /// SIGUSR2: the gateway starts its successor itself (the systemd recipe).
    SelfStarted,
}

async fn upgrade_under_load(tls: bool, how: Upgrade) {
    let dash = Dashboard::shared();
    let notify_dir = tempfile::tempdir().unwrap();
    let notify_path = notify_dir.path().join("notify");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut gw = Gateway::with_admin_and_viewer()
        .tls(tls)
        .upstream(dash)
        .env("NOTIFY_SOCKET", notify_path.to_str().unwrap())
        .start();
    let ready = |notify: &std::os::unix::net::UnixDatagram| {
        let mut buf = [0u8; 256];
        let n = notify.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    assert_eq!(ready(&notify), format!("READY=1\nMAINPID={}\n", gw.pid()));
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let base = gw.url("");
    let fresh_connections = {
        let mut b = client_builder().pool_max_idle_per_host(0);
        if tls {
            b = b
                .tls_built_in_root_certs(false)
                .add_root_certificate(gw.ca_cert());
        }
        b.build().unwrap()
    };
    // Kept alive: HTTP/2 over TLS (HTTP/1.1 in plain), HTTP/1.1 kept alive, new connections.
    let clients = [
        ("kept-alive", gw.build_client(false)),
        ("kept-alive http/1.1", gw.build_client(true)),
        ("new connections", fresh_connections),
    ];
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|(name, client)| {
            let load = client_load(client, base.clone(), token.clone(), stop.clone());
            (name, tokio::spawn(load))
        })
        .collect();

    tokio::time::sleep(Duration::from_secs(1)).await;
    let old_pid = gw.pid();
    let started = Instant::now();
    let new_pid = tokio::task::block_in_place(|| match how {
        Upgrade::ByHand => {
            gw.upgrade_in_place();
            gw.pid()
        }
        Upgrade::SelfStarted => gw.self_upgrade(),
    });
    let upgrade_took = started.elapsed();
    assert_ne!(new_pid, old_pid);
    // The successor tells systemd it is the service's main process now.
    assert_eq!(ready(&notify), format!("READY=1\nMAINPID={new_pid}\n"));
    // Load goes on against the new process alone for a while.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);

    let mut sent = 0;
    let mut failures = Vec::new();
    for (name, task) in tasks {
        let tally = task.await.unwrap();
        eprintln!(
            "{name}: {} requests, {} failed",
            tally.sent,
            tally.failures.len()
        );
        sent += tally.sent;
        failures.extend(tally.failures.into_iter().map(|f| format!("{name}: {f}")));
    }
    eprintln!(
        "upgrade {how:?} (tls: {tls}) took {upgrade_took:?}; {sent} requests, {} failed",
        failures.len()
    );
    assert!(sent > 300, "too little load to tell: {sent} requests");
    assert!(
        failures.is_empty(),
        "{} of {sent} requests failed: {:#?}\n{}",
        failures.len(),
        &failures[..failures.len().min(10)],
        gw.logs()
    );
    // The new process serves, with the same signing key: the old token still works.
    assert_eq!(gw.check(&token).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_over_plain_http_fails_no_request() {
    upgrade_under_load(false, Upgrade::ByHand).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_upgrade_on_sigusr2_fails_no_request_and_tells_systemd_its_new_main_pid() {
    upgrade_under_load(false, Upgrade::SelfStarted).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_over_tls_fails_no_request() {
    upgrade_under_load(true, Upgrade::ByHand).await;
}
