//! Redis Sentinel under three gateways (issue 27): one primary, two replicas and three
//! sentinels (Debian's `redis-server` and `redis-sentinel`), three gateways finding the
//! primary through the sentinels, in front of the real dashboard, under a steady bounded
//! load of logins, proxied calls and logouts. Each logout is answered only once a replica
//! has it (`min_replicas = 1`), so none answered 200 is forgotten when the primary dies.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::json;

const PROXIED: &str = "/api/health/minimal";
/// Clients of the load, each a login, a proxied call and a logout, on three gateways in turn.
const CLIENTS: usize = 3;
/// The pause of each client between its rounds: a steady, bounded load.
const PAUSE: Duration = Duration::from_millis(20);
/// How long the gateways may answer 503 once the sentinels named the new primary.
const RECOVERY: Duration = Duration::from_secs(2);
/// Deadline of each wait for the load to make progress, or for the sentinels.
const PROGRESS_DEADLINE: Duration = Duration::from_secs(30);

/// One deployment at a time: six Redis processes and three gateways are a lot for two cores.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Deployment {
    _turn: tokio::sync::MutexGuard<'static, ()>,
    topology: SentinelTopology,
    gateways: Vec<RunningGateway>,
}

async fn deployment() -> Deployment {
    let turn = TURN.lock().await;
    let topology = SentinelTopology::start(2, 3);
    let spec = Gateway::with_dashboard_users()
        .known_secret()
        .upstream(Dashboard::shared())
        .sentinel_state(&topology, 1);
    let gateways = (0..3).map(|_| spec.clone().start()).collect();
    Deployment {
        _turn: turn,
        topology,
        gateways,
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Login,
    Proxied,
    Logout,
}

/// One answer of the load: when, from which gateway, to what, with which status
/// (0: no answer at all).
#[derive(Debug)]
struct Answer {
    at: Instant,
    gateway: usize,
    kind: Kind,
    status: u16,
}

/// A logout answered 200: the token must be refused everywhere from then on.
struct Acknowledged {
    at: Instant,
    token: String,
}

#[derive(Default)]
struct Tally {
    answers: Vec<Answer>,
    acknowledged: Vec<Acknowledged>,
}

impl Tally {
    fn acknowledged_since(&self, since: Instant) -> usize {
        self.acknowledged.iter().filter(|a| a.at >= since).count()
    }

    fn count(&self, since: Instant, kind: Kind, status: u16) -> usize {
        let answers = self.answers.iter().filter(|a| a.at >= since);
        answers
            .filter(|a| a.kind == kind && a.status == status)
            .count()
    }

    /// Answers that are neither what the request asks for nor a 503.
    fn failures(&self) -> Vec<&Answer> {
        let expected = |a: &Answer| match a.kind {
            Kind::Login => a.status == 201,
            Kind::Proxied | Kind::Logout => a.status == 200,
        };
        let failed = |a: &&Answer| !expected(a) && a.status != 503;
        self.answers.iter().filter(failed).collect()
    }

    fn unavailable(&self) -> Vec<&Answer> {
        self.answers.iter().filter(|a| a.status == 503).collect()
    }
}

/// The load: `CLIENTS` tasks until `stop`, recording every answer in the tally.
struct Load {
    tally: Arc<Mutex<Tally>>,
    stop: Arc<AtomicBool>,
    clients: Vec<tokio::task::JoinHandle<()>>,
}

/// How a client reaches one gateway.
#[derive(Clone)]
struct Target {
    client: reqwest::Client,
    base: String,
}

impl Target {
    async fn send(&self, request: reqwest::RequestBuilder) -> (u16, Option<serde_json::Value>) {
        match request.header("Accept", V1).send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.json().await.ok())
            }
            Err(_) => (0, None),
        }
    }
}

impl Load {
    fn start(gateways: &[RunningGateway]) -> Load {
        let targets: Vec<Target> = gateways
            .iter()
            .map(|g| Target {
                client: g.client().clone(),
                base: g.url(""),
            })
            .collect();
        let tally = Arc::new(Mutex::new(Tally::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let clients = (0..CLIENTS)
            .map(|client| {
                let (targets, tally, stop) = (targets.clone(), tally.clone(), stop.clone());
                tokio::spawn(async move { run_client(client, &targets, &tally, &stop).await })
            })
            .collect();
        Load {
            tally,
            stop,
            clients,
        }
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap()
    }

    /// Waits (bounded) until `more` logouts were acknowledged after `since`.
    async fn until_acknowledged(&self, since: Instant, more: usize) {
        let deadline = Instant::now() + PROGRESS_DEADLINE;
        while self.tally().acknowledged_since(since) < more {
            assert!(Instant::now() < deadline, "the load made no progress");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits (bounded) until `more` logouts were answered with `status` after `since`.
    async fn until_logouts(&self, since: Instant, status: u16, more: usize) {
        let deadline = Instant::now() + PROGRESS_DEADLINE;
        while self.tally().count(since, Kind::Logout, status) < more {
            assert!(
                Instant::now() < deadline,
                "no {more} logouts answered {status}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn stop(self) -> Tally {
        self.stop.store(true, Ordering::Release);
        for client in self.clients {
            client.await.unwrap();
        }
        Arc::try_unwrap(self.tally)
            .ok()
            .unwrap()
            .into_inner()
            .unwrap()
    }
}

/// Rounds of login, proxied call and logout, each on the next gateway.
async fn run_client(client: usize, targets: &[Target], tally: &Mutex<Tally>, stop: &AtomicBool) {
    for round in client.. {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let on = |step: usize| (round + step) % targets.len();
        let record = |gateway: usize, kind: Kind, status: u16| {
            let answer = Answer {
                at: Instant::now(),
                gateway,
                kind,
                status,
            };
            tally.lock().unwrap().answers.push(answer);
        };
        let login = &targets[on(0)];
        let body = json!({"username": ADMIN, "password": ADMIN_PW});
        let request = login
            .client
            .post(format!("{}/api/auth", login.base))
            .json(&body);
        let (status, reply) = login.send(request).await;
        record(on(0), Kind::Login, status);
        let token = reply.and_then(|r| Some(r.get("token")?.as_str()?.to_string()));
        let Some(token) = token.filter(|_| status == 201) else {
            tokio::time::sleep(PAUSE).await;
            continue;
        };
        let proxied = &targets[on(1)];
        let request = proxied.client.get(format!("{}{PROXIED}", proxied.base));
        let (status, _) = proxied.send(request.bearer_auth(&token)).await;
        record(on(1), Kind::Proxied, status);
        let logout = &targets[on(2)];
        let request = logout
            .client
            .post(format!("{}/api/auth/logout", logout.base));
        let (status, _) = logout.send(request.bearer_auth(&token).body("")).await;
        record(on(2), Kind::Logout, status);
        if status == 200 {
            let at = Instant::now();
            tally
                .lock()
                .unwrap()
                .acknowledged
                .push(Acknowledged { at, token });
        }
        tokio::time::sleep(PAUSE).await;
    }
}

/// The acknowledged logouts some gateway does not refuse, or the primary does not hold.
async fn forgotten(deployment: &Deployment, tally: &Tally) -> Vec<String> {
    let primary = deployment.topology.primary_port();
    let mut forgotten = Vec::new();
    for Acknowledged { token, .. } in &tally.acknowledged {
        let jti = jwt_payload(token)["jti"].as_str().unwrap().to_string();
        let key = format!("clustergate:revoked:{jti}");
        if redis_cli(primary, &["EXISTS", &key]) != "1" {
            forgotten.push(format!("{jti}: not in the primary"));
        }
        for (i, gateway) in deployment.gateways.iter().enumerate() {
            let status = gateway.api_get(PROXIED, Some(token)).await.status;
            if status != 401 {
                forgotten.push(format!("{jti}: gateway {i} answers {status}"));
            }
        }
    }
    forgotten
}

/// Waits until every gateway's `/readyz` is 200, by `deadline`.
async fn ready_by(gateways: &[RunningGateway], deadline: Instant) -> Instant {
    loop {
        let ready = gateways.iter().filter(|g| g.readyz() == 200).count();
        if ready == gateways.len() {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "{ready} of {} gateways ready by the deadline",
            gateways.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Item 3: `kill -9` of the primary under load. Every logout answered 200 before or during
/// the failover is refused by every gateway afterwards and held by the new primary; the
/// gateways answer 503 only until shortly after the sentinels name the new primary, and
/// recover by themselves; 503s are the only failures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_primary_under_load_forgets_no_acknowledged_logout() {
    let mut deployment = deployment().await;
    let load = Load::start(&deployment.gateways);
    let started = Instant::now();
    load.until_acknowledged(started, 20).await;

    let old = deployment.topology.primary_port();
    let killed = Instant::now();
    deployment.topology.server(old).stop();
    let deadline = killed + PROGRESS_DEADLINE;
    while deployment.topology.primary_port() == old {
        assert!(
            Instant::now() < deadline,
            "the sentinels named no new primary"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let switched = Instant::now();
    let recovered = ready_by(&deployment.gateways, switched + RECOVERY).await;
    load.until_acknowledged(recovered, 20).await;
    let tally = load.stop().await;

    let unavailable = tally.unavailable();
    let last_503 = unavailable.iter().map(|a| a.at).max();
    let window = last_503.map(|at| at.saturating_duration_since(killed));
    let before = tally.acknowledged.iter().filter(|a| a.at < killed).count();
    let during = tally
        .acknowledged
        .iter()
        .filter(|a| a.at >= killed && a.at < recovered)
        .count();
    let forgotten = forgotten(&deployment, &tally).await;
    let per_kind = |kind: Kind| unavailable.iter().filter(|a| a.kind == kind).count();
    let per_gateway = |i: usize| unavailable.iter().filter(|a| a.gateway == i).count();
    println!(
        "failover: sentinels switched {:?} after kill -9, all gateways ready {:?} after the switch; \
         logouts acknowledged {} ({before} before the kill, {during} during the failover), forgotten {}; \
         answers {}, 503s {} (logins {}, proxied {}, logouts {}; gateways {}/{}/{}), last 503 {:?} after the kill",
        switched - killed,
        recovered - switched,
        tally.acknowledged.len(),
        forgotten.len(),
        tally.answers.len(),
        unavailable.len(),
        per_kind(Kind::Login),
        per_kind(Kind::Proxied),
        per_kind(Kind::Logout),
        per_gateway(0),
        per_gateway(1),
        per_gateway(2),
        window,
    );
    assert!(forgotten.is_empty(), "forgotten logouts: {forgotten:#?}");
    assert!(tally.failures().is_empty(), "{:#?}", tally.failures());
    assert!(
        unavailable.iter().all(|a| a.at >= killed),
        "503 before the kill"
    );
    if let Some(last) = last_503 {
        assert!(
            last <= switched + RECOVERY,
            "503 {:?} after the sentinels switched",
            last - switched
        );
    }
}

/// Item 3: a sentinel down, then a replica down (two replicas, `min_replicas = 1`): nothing
/// changes. Both replicas down: logouts are refused (503), never acknowledged, while
/// logins and proxied calls go on; back to normal once the replicas are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_or_a_replica_down_changes_nothing_and_without_replicas_logouts_wait() {
    let mut deployment = deployment().await;
    let load = Load::start(&deployment.gateways);
    load.until_acknowledged(Instant::now(), 5).await;

    let sentinel_down = Instant::now();
    deployment.topology.sentinels[0].stop();
    load.until_acknowledged(sentinel_down, 20).await;
    deployment.topology.sentinels[0].restart();

    let replica_down = Instant::now();
    let replicas = deployment.topology.replica_ports();
    deployment.topology.server(replicas[0]).stop();
    load.until_acknowledged(replica_down, 20).await;
    {
        let tally = load.tally();
        assert!(tally.failures().is_empty(), "{:#?}", tally.failures());
        let unavailable = tally.unavailable();
        assert!(unavailable.is_empty(), "{unavailable:#?}");
    }

    let replicas_down = Instant::now();
    deployment.topology.server(replicas[1]).stop();
    // A logout that had reached one replica before may still be answered 200: from the
    // first refused one on, none is.
    load.until_logouts(replicas_down, 503, 6).await;
    // The answer says why (src/errors.rs maps the store's NotReplicated).
    let gateway = &deployment.gateways[0];
    let reply = gateway.logout(&gateway.login(ADMIN, ADMIN_PW).await).await;
    assert_eq!(reply.status, 503, "{}", reply.text());
    let detail = reply.json()["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("replicas"), "{detail}");
    // Not an outage: every gateway stays in the balancer's rotation.
    for (i, gateway) in deployment.gateways.iter().enumerate() {
        assert_eq!(gateway.readyz(), 200, "gateway {i} out of rotation");
    }
    let first_refused = {
        let tally = load.tally();
        let refused = tally
            .answers
            .iter()
            .filter(|a| a.at >= replicas_down && a.kind == Kind::Logout && a.status == 503);
        refused.map(|a| a.at).min().unwrap()
    };
    {
        let tally = load.tally();
        let late = tally
            .acknowledged
            .iter()
            .filter(|a| a.at > first_refused)
            .count();
        assert_eq!(late, 0, "logouts acknowledged without a replica");
        for kind in [Kind::Login, Kind::Proxied] {
            assert!(
                tally.count(replicas_down, kind, 503) == 0,
                "{kind:?} refused"
            );
        }
        assert!(tally.count(replicas_down, Kind::Proxied, 200) > 0);
    }

    for port in &replicas {
        deployment.topology.server(*port).restart();
    }
    deployment.topology.wait_whole(2);
    let back = Instant::now();
    load.until_acknowledged(back, 10).await;
    let tally = load.stop().await;
    assert!(tally.failures().is_empty(), "{:#?}", tally.failures());
    let forgotten = forgotten(&deployment, &tally).await;
    assert!(forgotten.is_empty(), "forgotten logouts: {forgotten:#?}");
    println!(
        "sentinel, replica, replicas down: logouts acknowledged {}, forgotten {}; \
         without replicas: first logout refused {:?} after the second replica stopped, \
         logouts refused {}, proxied calls answered 200 {}",
        tally.acknowledged.len(),
        forgotten.len(),
        first_refused - replicas_down,
        tally.count(replicas_down, Kind::Logout, 503),
        tally.count(replicas_down, Kind::Proxied, 200),
    );
}
