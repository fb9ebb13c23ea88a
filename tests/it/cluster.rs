//! Several gateways as they are deployed: three gateways sharing their state in a real
//! Redis, behind a real HAProxy running the shipped configuration (which health-checks each
//! with `POST /api/auth/check`), in front of the real Ceph dashboard.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use crate::unsealed;
use serde_json::json;

/// Long enough for HAProxy (checks every 1 s, out after 2 failures) to take a draining
/// gateway out of rotation before it stops.
const DRAIN_SECONDS: f64 = 3.0;
const LOCKOUT_ATTEMPTS: u32 = 5;
const PROXIED: &str = "/api/health/minimal";

/// One cluster at a time: three gateways, HAProxy and Redis each are a lot for two cores.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Cluster {
    _turn: tokio::sync::MutexGuard<'static, ()>,
    redis: RedisServer,
    gateways: Vec<RunningGateway>,
    haproxy: Haproxy,
    client: reqwest::Client,
}

async fn cluster() -> Cluster {
    let turn = TURN.lock().await;
    let redis = RedisServer::start_persistent();
    // Fixed ports: the rolling restart starts each gateway again where HAProxy expects it.
    let spec = Gateway::with_dashboard_users()
        .fixed_ports()
        .known_secret()
        .tls(true)
        .lockout(LOCKOUT_ATTEMPTS, 60)
        .upstream(Dashboard::shared())
        .redis_state(&redis)
        .drain_seconds(DRAIN_SECONDS);
    // Every gateway shows the same certificate: the first one's, generated at its start.
    let first = spec.clone().start();
    let tls = first.state_dir().join("tls");
    let ca = std::fs::read_to_string(tls.join("ca.pem")).unwrap();
    let shared_certificate = spec
        .extra_toml("server", &format!("cert_file = {:?}", tls.join("cert.pem")))
        .extra_toml("server", &format!("key_file = {:?}", tls.join("key.pem")))
        // Where the tests' own clients of each gateway look for the CA to trust.
        .file("state/tls/ca.pem", &ca);
    let mut gateways = vec![first];
    gateways.extend((0..2).map(|_| shared_certificate.clone().start()));
    let haproxy = Haproxy::start(&gateways.iter().collect::<Vec<_>>());
    let client = haproxy.client();
    Cluster {
        _turn: turn,
        redis,
        gateways,
        haproxy,
        client,
    }
}

impl Cluster {
    async fn login(&self, user: &str, password: &str) -> String {
        let reply = self
            .post(
                "/api/auth",
                &json!({"username": user, "password": password}),
            )
            .await;
        assert_eq!(reply.status, 201, "login through HAProxy: {}", reply.text());
        reply.json()["token"].as_str().unwrap().to_string()
    }

    async fn logout(&self, token: &str) -> u16 {
        let req = self
            .client
            .post(self.haproxy.url("/api/auth/logout"))
            .header("Accept", V1)
            .header("Authorization", format!("Bearer {token}"));
        req.send().await.unwrap().status().as_u16()
    }

    async fn post(&self, path: &str, body: &serde_json::Value) -> Reply {
        let req = self
            .client
            .post(self.haproxy.url(path))
            .header("Accept", V1)
            .json(body);
        Reply::from_reqwest(req.send().await.unwrap()).await
    }

    async fn get(&self, token: &str) -> Result<u16, String> {
        let req = self
            .client
            .get(self.haproxy.url(PROXIED))
            .header("Accept", V1)
            .header("Authorization", format!("Bearer {token}"));
        match req.send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                resp.bytes().await.map_err(|e| format!("body: {e}"))?;
                Ok(status)
            }
            Err(e) => Err(format!("transport: {e}")),
        }
    }
}

/// Waits (bounded) until every gateway answers `token` on a proxied path with `status`.
async fn on_every_gateway(cluster: &Cluster, token: &str, status: u16) {
    for (i, gateway) in cluster.gateways.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let got = gateway.api_get(PROXIED, Some(token)).await.status;
            if got == status {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "gateway {i} answers {got}, not {status}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logout_through_the_balancer_holds_on_every_gateway() {
    let cluster = cluster().await;
    let token = cluster.login(ADMIN, ADMIN_PW).await;
    assert_eq!(cluster.get(&token).await, Ok(200));
    on_every_gateway(&cluster, &token, 200).await;
    // The service account's dashboard token they share is sealed in Redis (item 10).
    let key = "clustergate:upstream:token";
    let stored = redis_cli(&cluster.redis, &["GET", key]);
    let opened = unsealed(key, &stored).expect("sealed with the deployment's key");
    let (_renew_at, service_token) = opened.split_once(' ').unwrap();
    assert_eq!(service_token.split('.').count(), 3, "a JWT");
    assert!(
        !stored.contains(service_token),
        "in clear in redis: {stored}"
    );
    // A PUBLISH without the deployment's key revokes nothing: each gateway drops it.
    let claims = jwt_payload(&token);
    let forged = format!("{} {}", claims["exp"], claims["jti"].as_str().unwrap());
    redis_cli(
        &cluster.redis,
        &["PUBLISH", "clustergate:revocations", &forged],
    );
    let refused = "clustergate_state_revocations_refused_total";
    for gateway in &cluster.gateways {
        let text = gateway
            .metrics_until(|m| metric_sum(m, refused, &[]) >= 1.0)
            .await;
        assert_eq!(metric_sum(&text, refused, &[]), 1.0);
    }
    on_every_gateway(&cluster, &token, 200).await;

    assert_eq!(cluster.logout(&token).await, 200);
    on_every_gateway(&cluster, &token, 401).await;
    assert_eq!(cluster.get(&token).await, Ok(401));
}

/// `redis-cli` as Redis' `default` user: what anyone reading the store sees.
fn redis_cli(redis: &RedisServer, args: &[&str]) -> String {
    let out = std::process::Command::new("redis-cli")
        .args(["-u", &redis.url(), "--raw"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "redis-cli: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_passwords_spread_over_the_gateways_lock_the_user_on_all_of_them() {
    let cluster = cluster().await;
    for attempt in 0..LOCKOUT_ATTEMPTS as usize {
        let gateway = &cluster.gateways[attempt % 3];
        assert_eq!(
            gateway.try_login(POOLMGR, "wrong-password").await.status,
            400
        );
    }
    for (i, gateway) in cluster.gateways.iter().enumerate() {
        let reply = gateway.try_login(POOLMGR, POOLMGR_PW).await;
        assert_eq!(reply.status, 400, "gateway {i} let the locked user in");
    }
    // Other users are not affected.
    assert_eq!(
        cluster.gateways[1]
            .try_login(VIEWER, VIEWER_PW)
            .await
            .status,
        201
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_takes_every_gateway_out_of_rotation_and_back() {
    let mut cluster = cluster().await;
    let kept = cluster.login(ADMIN, ADMIN_PW).await;
    let revoked = cluster.login(VIEWER, VIEWER_PW).await;
    assert_eq!(cluster.logout(&revoked).await, 200);

    cluster.redis.stop();
    cluster.haproxy.wait_servers_up(0, Duration::from_secs(10));
    // Clients get an answer, not a hang: HAProxy's 503 with no gateway in rotation.
    let started = Instant::now();
    assert_eq!(cluster.get(&kept).await, Ok(503));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Asked directly, a gateway fails closed with the dashboard's JSON shape.
    let direct = cluster.gateways[0].api_get(PROXIED, Some(&kept)).await;
    assert_eq!(direct.status, 503);
    assert_eq!(direct.json()["detail"], "session store unavailable");

    cluster.redis.restart();
    cluster.haproxy.wait_servers_up(3, Duration::from_secs(10));
    assert_eq!(
        cluster.get(&kept).await,
        Ok(200),
        "a token from before the outage"
    );
    on_every_gateway(&cluster, &revoked, 401).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_under_load_fails_no_request() {
    let mut cluster = cluster().await;
    let token = cluster.login(ADMIN, ADMIN_PW).await;
    let cluster_client = cluster.client.clone();
    let url = cluster.haproxy.url(PROXIED);
    let stop = Arc::new(AtomicBool::new(false));
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    // A steady, bounded load: one request every 10 ms (about 100 per second) until stopped.
    let load = {
        let (stop, outcomes) = (stop.clone(), outcomes.clone());
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(Duration::from_millis(10));
            while !stop.load(Ordering::SeqCst) {
                ticks.tick().await;
                let req = cluster_client
                    .get(&url)
                    .header("Accept", V1)
                    .header("Authorization", format!("Bearer {token}"));
                let outcome = match req.send().await {
                    Ok(resp) => {
                        let status = resp.status().as_u16();
                        match resp.bytes().await {
                            Ok(_) => Ok(status),
                            Err(e) => Err(format!("body: {e}")),
                        }
                    }
                    Err(e) => Err(format!("transport: {e}")),
                };
                outcomes.lock().unwrap().push(outcome);
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    for i in 0..cluster.gateways.len() {
        let gateway = &mut cluster.gateways[i];
        tokio::task::block_in_place(|| gateway.stop());
        tokio::task::block_in_place(|| gateway.start_again_in_place());
        let haproxy = &cluster.haproxy;
        tokio::task::block_in_place(|| haproxy.wait_servers_up(3, Duration::from_secs(15)));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::SeqCst);
    load.await.unwrap();
    let outcomes = outcomes.lock().unwrap();
    let failed: Vec<&Result<u16, String>> = outcomes.iter().filter(|o| **o != Ok(200)).collect();
    println!(
        "rolling restart: {} requests, {} failed",
        outcomes.len(),
        failed.len()
    );
    assert!(
        outcomes.len() > 500,
        "the load ran: {} requests",
        outcomes.len()
    );
    assert!(failed.is_empty(), "failed requests: {failed:?}");
}
