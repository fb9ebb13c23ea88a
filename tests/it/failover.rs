//! Active-manager routing against real managers (each test has its own dashboard with a
//! standby, one at a time: `Dashboard::dedicated` takes turns): a failover under load never shows clients a
//! standby's answer and service recovers; with no manager at all the gateway says so (503)
//! and resumes by itself when they come back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use reqwest::Method;
use serde_json::json;

/// Requests must be served again this long after the new active manager accepts logins.
const RECOVERY_DEADLINE: Duration = Duration::from_secs(30);
/// Recovered: this many answers in a row are 200, for each kind of request.
const RECOVERED_STREAK: usize = 5;
/// How a body cut short is recorded.
const CUT: &str = "body cut short";

#[derive(Debug, Clone)]
struct Answer {
    kind: &'static str,
    status: u16,
    location: Option<String>,
    body: String,
    /// The answer says `Connection: close`.
    closes: bool,
    /// Sent after `mgr fail` returned (the new active manager accepts logins).
    after_failover: bool,
}

impl Answer {
    fn reply(&self) -> Reply {
        Reply {
            status: self.status,
            version: reqwest::Version::HTTP_11,
            headers: Default::default(),
            body: self.body.clone().into_bytes(),
        }
    }

    fn acceptable(&self) -> bool {
        self.location.is_none() && (self.status == 200 || is_no_active_backend(&self.reply()))
    }

    /// A request in flight when the active manager went away: a POST may have run there,
    /// so the gateway cannot resend it and answers 502 (its JSON); an answer already
    /// streaming (head sent) is cut short, whatever the method. Only one per loop can be
    /// in flight.
    fn lost_in_flight(&self) -> bool {
        let bad_gateway = self.kind.starts_with("POST")
            && self.location.is_none()
            && self.status == 502
            && serde_json::from_str::<serde_json::Value>(&self.body)
                .is_ok_and(|b| b["status"] == "502 Bad Gateway");
        !self.after_failover && (bad_gateway || self.cut_short())
    }

    fn cut_short(&self) -> bool {
        self.body.starts_with(CUT)
    }
}

/// Loops one kind of request until `stop`, recording every answer.
fn spawn_load(
    client: reqwest::Client,
    kind: &'static str,
    request: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder + Send + 'static,
    stop: Arc<AtomicBool>,
    failed_over: Arc<AtomicBool>,
    answers: Arc<Mutex<Vec<Answer>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.load(Ordering::SeqCst) {
            let after_failover = failed_over.load(Ordering::SeqCst);
            let answer = match request(&client).send().await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let header = |name: &str| {
                        resp.headers()
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_string)
                    };
                    let (location, closes) = (
                        header("location"),
                        header("connection").as_deref() == Some("close"),
                    );
                    // The manager may go away while its answer streams through: the body
                    // is then cut short (see `lost_in_flight`).
                    let body = match resp.bytes().await {
                        Ok(body) => String::from_utf8_lossy(&body).into_owned(),
                        Err(e) => format!("{CUT}: {e:?}"),
                    };
                    Answer {
                        kind,
                        status,
                        location,
                        closes,
                        body,
                        after_failover,
                    }
                }
                Err(e) => Answer {
                    kind,
                    status: 0,
                    location: None,
                    closes: false,
                    body: format!("transport error: {e:?}"),
                    after_failover,
                },
            };
            answers.lock().unwrap().push(answer);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}

/// Whether the last `RECOVERED_STREAK` answers after the failover are 200 for every kind.
fn recovered(answers: &[Answer], kinds: &[&str]) -> bool {
    kinds.iter().all(|kind| {
        let mine: Vec<&Answer> = answers
            .iter()
            .filter(|a| a.after_failover && a.kind == *kind)
            .collect();
        mine.len() >= RECOVERED_STREAK
            && mine[mine.len() - RECOVERED_STREAK..]
                .iter()
                .all(|a| a.status == 200)
    })
}

fn count_statuses(answers: &[Answer]) -> String {
    let mut counts = std::collections::BTreeMap::new();
    for a in answers {
        *counts.entry((a.kind, a.status)).or_insert(0) += 1;
    }
    format!("{counts:?}")
}

/// With GETs and POSTs running through the gateway, fail the active manager over.
async fn failover_under_load(options: DashboardOptions) {
    let dash = Dashboard::dedicated(DashboardOptions {
        standby: true,
        ..options
    });
    let gw = Gateway::new().user(User::admin()).upstream(&dash).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let (summary_url, validate_url) = (
        gw.url("/api/summary"),
        gw.url("/api/user/validate_password"),
    );
    let auth = format!("Bearer {token}");
    let stop = Arc::new(AtomicBool::new(false));
    let failed_over = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(Mutex::new(Vec::new()));
    let get_auth = auth.clone();
    let loads = [
        spawn_load(
            gw.client().clone(),
            "GET /api/summary",
            move |c| {
                c.get(&summary_url)
                    .header("Accept", V1)
                    .header("Authorization", &get_auth)
            },
            stop.clone(),
            failed_over.clone(),
            answers.clone(),
        ),
        spawn_load(
            gw.client().clone(),
            "POST /api/user/validate_password",
            move |c| {
                c.post(&validate_url)
                    .header("Accept", V1)
                    .header("Authorization", &auth)
                    .json(&json!({"password": "Cg-test-pass-123"}))
            },
            stop.clone(),
            failed_over.clone(),
            answers.clone(),
        ),
    ];
    let kinds = ["GET /api/summary", "POST /api/user/validate_password"];

    // Served before the failover.
    wait_until("answers before the failover", || {
        answers
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.status == 200)
            .count()
            >= 4
    })
    .await;
    let dir = dash.dir.clone();
    let new_active = tokio::task::spawn_blocking(move || Dashboard::mgr_in(&dir, &["fail"]))
        .await
        .unwrap();
    failed_over.store(true, Ordering::SeqCst);
    assert_eq!(new_active, "y", "the standby should have taken over");

    let deadline = Instant::now() + RECOVERY_DEADLINE;
    while !recovered(&answers.lock().unwrap(), &kinds) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::SeqCst);
    for load in loads {
        load.await.unwrap();
    }
    let answers = answers.lock().unwrap().clone();
    let summary = count_statuses(&answers);
    println!("{} answers: {summary}", answers.len());
    let lost: Vec<&Answer> = answers.iter().filter(|a| a.lost_in_flight()).collect();
    assert!(
        lost.len() <= kinds.len(),
        "{} requests lost: only one in flight per loop when the manager went away may be; \
         one that reached no manager (refused connection, no other active) is the gateway's \
         503 \"no active dashboard backend\": {lost:#?}\n{}",
        lost.len(),
        gw.logs()
    );
    assert!(
        lost.iter().filter(|a| !a.cut_short()).all(|a| a.closes),
        "the gateway does not reuse a connection after a failed attempt, and must say so with \
         Connection: close, or the client may send its next request on it: {lost:#?}"
    );
    let bad: Vec<&Answer> = answers
        .iter()
        .filter(|a| !a.acceptable() && !a.lost_in_flight())
        .collect();
    assert!(
        bad.is_empty(),
        "clients saw {} answers other than 200 or the gateway's 503 ({summary}); first ones: {:#?}\n{}",
        bad.len(),
        &bad[..bad.len().min(5)],
        gw.logs()
    );
    assert!(
        recovered(&answers, &kinds),
        "requests did not recover within {RECOVERY_DEADLINE:?} of the failover: {summary}\n{}",
        gw.logs()
    );
    let active_url = dash.mgr(&["active-url"]);
    let metrics = gw.metrics().await;
    for name in ["clustergate_upstream_up", "clustergate_upstream_active"] {
        assert_eq!(
            metric_sum(&metrics, name, &[("server", &active_url)]),
            1.0,
            "{name}: {metrics}"
        );
    }
    assert_eq!(
        metric_sum(&metrics, "clustergate_upstream_active", &[]),
        1.0,
        "one active manager after the failover: {metrics}"
    );
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + BACKEND_CHANGE_DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_failover_under_load_never_shows_clients_a_redirect_and_service_recovers() {
    failover_under_load(DashboardOptions::default()).await;
}

#[tokio::test]
async fn a_failover_with_standbys_in_error_mode_never_shows_clients_their_errors() {
    failover_under_load(DashboardOptions {
        standby_behaviour: Some("error"),
        standby_status: Some(503),
        ..Default::default()
    })
    .await;
}

/// Send `GET /api/summary` until `done` holds for the answer, at most the deadline.
async fn summary_until(
    gw: &RunningGateway,
    token: &str,
    what: &str,
    done: impl Fn(&Reply) -> bool,
) -> Reply {
    let deadline = Instant::now() + BACKEND_CHANGE_DEADLINE;
    loop {
        let r = gw.api(Method::GET, "/api/summary", Some(token), None).await;
        assert!(
            !(300..400).contains(&r.status) && r.header("location").is_none(),
            "a redirect reached the client: {} {:?}",
            r.status,
            r.headers
        );
        if done(&r) {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still {} {} after {BACKEND_CHANGE_DEADLINE:?}\n{}",
            r.status,
            r.text(),
            gw.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn with_every_manager_stopped_the_gateway_answers_503_and_resumes_by_itself() {
    let dash = Dashboard::dedicated(DashboardOptions {
        standby: true,
        ..Default::default()
    });
    let gw = Gateway::new().user(User::admin()).upstream(&dash).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    summary_until(&gw, &token, "served at first", |r| r.status == 200).await;

    dash.mgr(&["stop", "all"]);
    let r = summary_until(&gw, &token, "no active backend", is_no_active_backend).await;
    assert_no_active_backend(&r);
    gw.wait_readyz(503);
    // Still at once, and for writes too.
    let r = gw
        .api(
            Method::POST,
            "/api/pool",
            Some(&token),
            Some(&json!({"pool": "cg-test"})),
        )
        .await;
    assert_no_active_backend(&r);
    // A load balancer's health check takes this gateway out of rotation.
    let check = gw
        .post_json("/api/auth/check", None, &json!({"token": ""}))
        .await;
    assert_eq!(check.status, 503, "{}", check.text());
    assert_eq!(
        check.json(),
        json!({"login_url": "#/login", "cluster_status": "UNAVAILABLE"})
    );
    let check = gw.check(&token).await;
    assert_eq!(check.status, 503, "{}", check.text());
    assert_eq!(check.json()["username"], ADMIN);
    let metrics = gw.metrics().await;
    assert_eq!(
        metric_sum(&metrics, "clustergate_upstream_up", &[]),
        0.0,
        "{metrics}"
    );

    dash.mgr(&["start", "all"]);
    summary_until(&gw, &token, "service resumed", |r| r.status == 200).await;
    gw.wait_readyz(200);
    assert_check_ok(&gw.check(&token).await, ADMIN, &admin_permissions());
    let check = gw
        .post_json("/api/auth/check", None, &json!({"token": ""}))
        .await;
    assert_login_url(&check);
}
