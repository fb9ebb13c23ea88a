//! A real API fuzzer against the gateway: Schemathesis, driven by the gateway's own
//! `/docs/api.json` (the dashboard's document, rewritten), against the gateway in front of
//! the real dashboard. Two bounded runs: every GET operation with a read-only user's token
//! (negative cases, broken tokens and unexpected methods included), and invalid bodies to
//! the gateway's own auth endpoints. What must hold: the gateway answers no 5xx of its own
//! (the dashboard's, passed through, are counted apart), its errors are in the dashboard's
//! shapes, every write the read-only user tries is refused and the dashboard's state reads
//! the same afterwards, and the gateway is still running and answering.
//!
//! `CG_API_FUZZ_SEED` replays a run (every summary prints its seed).

mod cluster_state;
mod exchanges;
mod schemathesis;

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common::*;
use cluster_state::ClusterState;
use exchanges::{Exchange, Origin};
use schemathesis::{Run, RunSpec, Schemathesis};

/// Every GET operation with the read-only user's token. Left out: the two operations that
/// ask the monitor `device ls-by-daemon` about an OSD, which never answers for an id with a
/// character outside Unicode's first plane (Ceph 16.2), so each such request would hold
/// one of the dashboard's threads for good.
const VIEWER_GETS: RunSpec = RunSpec {
    name: "viewer-gets",
    filters: &[
        "--include-method",
        "GET",
        "--exclude-name",
        "GET /api/osd/{svc_id}/smart",
        "--exclude-name",
        "GET /api/osd/{svc_id}/devices",
    ],
    mode: "all",
    max_examples: 50,
    deadline: Duration::from_secs(300),
};

/// The gateway's own auth endpoints, with bodies that are invalid by their schemas, and
/// (from hooks.py) raw bodies: any bytes, JSON cut short, nesting past any depth limit,
/// sizes around the 64 KiB limit, under JSON and other content types.
const AUTH_BODIES: RunSpec = RunSpec {
    name: "auth-bodies",
    filters: &[
        "--include-name",
        "POST /api/auth",
        "--include-name",
        "POST /api/auth/check",
        "--include-name",
        "POST /api/auth/logout",
    ],
    mode: "negative",
    max_examples: 300,
    deadline: Duration::from_secs(180),
};

#[tokio::test]
async fn schemathesis_finds_no_gateway_5xx_no_viewer_write_and_no_crash() {
    let fuzzer = Schemathesis::installed();
    let seed = seed();
    let dashboard = Dashboard::shared();
    let mut gw = Gateway::new()
        .user(User::viewer())
        .upstream(dashboard)
        .start();
    let origin_url = gw.url("");
    let reports = tempfile::tempdir().unwrap();
    let before = ClusterState::read(dashboard).await;

    let token = gw.login(VIEWER, VIEWER_PW).await;
    // A session of its own: the auth run logs its token out.
    let auth_token = gw.login(VIEWER, VIEWER_PW).await;
    let gets = fuzzer.run(&VIEWER_GETS, &origin_url, &token, seed, reports.path());
    let auth = fuzzer.run(&AUTH_BODIES, &origin_url, &auth_token, seed, reports.path());

    let after = ClusterState::read(dashboard).await;
    let mut findings = still_serving(&mut gw, &token).await;
    // The document as the runs read it; none when the gateway stopped answering.
    let doc = if findings.is_empty() {
        gw.send(gw.client().get(gw.url("/docs/api.json")))
            .await
            .json()
    } else {
        serde_json::Value::Null
    };
    for run in [&gets, &auth] {
        findings.extend(run_findings(run));
        findings.extend(exchanges::gateway_answers_well(&run.exchanges));
    }
    findings.extend(exchanges::writes_refused(&gets.exchanges));
    findings.extend(exchanges::auth_answers_local(&auth.exchanges));
    findings.extend(exchanges::statuses_documented(&auth.exchanges, &doc));
    findings.extend(after.changes_since(&before));

    let summary = summary(&[&gets, &auth], seed, &before, &exchanges::templates(&doc));
    if findings.is_empty() {
        eprintln!("{summary}");
        return;
    }
    let tails: String = [&gets, &auth]
        .iter()
        .map(|r| format!("--- schemathesis {} ---\n{}", r.name, r.output_tail))
        .collect();
    panic!(
        "{summary}\n{} finding(s):\n- {}\n{tails}",
        findings.len(),
        counted(&findings).join("\n- ")
    );
}

/// Each distinct finding once, in first-seen order, with how often it came.
fn counted(findings: &[String]) -> Vec<String> {
    let mut distinct: Vec<(&str, usize)> = Vec::new();
    for finding in findings {
        match distinct.iter_mut().find(|(f, _)| *f == finding.as_str()) {
            Some((_, n)) => *n += 1,
            None => distinct.push((finding, 1)),
        }
    }
    distinct
        .into_iter()
        .map(|(f, n)| {
            if n == 1 {
                f.to_string()
            } else {
                format!("{f} (x{n})")
            }
        })
        .collect()
}

/// `CG_API_FUZZ_SEED`, or a new one each run.
fn seed() -> u64 {
    match std::env::var("CG_API_FUZZ_SEED") {
        Ok(text) => text.parse().expect("CG_API_FUZZ_SEED: an unsigned integer"),
        Err(_) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    }
}

/// The run itself went as asked: the pinned version, every selected operation tested,
/// no test case that errored (a connection closed or timed out: the report says which).
fn run_findings(run: &Run) -> Vec<String> {
    let mut findings = exchanges::answered(&run.exchanges);
    let report = match &run.report {
        Ok(report) => report,
        Err(why) => {
            findings.push(format!("{}: {why}", run.name));
            return findings;
        }
    };
    let pinned = schemathesis::pinned_version();
    if report.schemathesis_version != pinned {
        findings.push(format!(
            "{}: Schemathesis {} ran, {pinned} is pinned: run deploy/install-deps.sh --test",
            run.name, report.schemathesis_version
        ));
    }
    let ops = &report.operations;
    if !report.complete || ops.selected == 0 || ops.tested != ops.selected || ops.errored > 0 {
        findings.push(format!("{}: incomplete run: {ops:?}", run.name));
    }
    if report.test_cases.errored > 0 || !report.errors.is_empty() {
        let errors: Vec<String> = report
            .errors
            .iter()
            .map(|e| format!("{} x{}", e.title, e.count))
            .collect();
        findings.push(format!(
            "{}: {} test case(s) errored: {}",
            run.name,
            report.test_cases.errored,
            errors.join(", ")
        ));
    }
    findings
}

/// The process is alive, answers the read-only user, logged no panic, and answered no
/// more 5xx of any status than the dashboard sent it.
async fn still_serving(gw: &mut RunningGateway, token: &str) -> Vec<String> {
    let mut findings = Vec::new();
    if let Some(status) = gw.child_mut().try_wait().unwrap() {
        return vec![format!(
            "the gateway exited: {status}\n{}",
            last_chars(&gw.logs(), 2000)
        )];
    }
    let r = gw.api_get("/api/summary", Some(token)).await;
    if r.status != 200 {
        findings.push(format!(
            "GET /api/summary afterwards: {} {}",
            r.status,
            r.text()
        ));
    }
    if gw.logs().contains("panicked") {
        findings.push(format!(
            "the gateway logged a panic:\n{}",
            last_chars(&gw.logs(), 2000)
        ));
    }
    let metrics = gw.metrics().await;
    for status in 500..600u16 {
        let label = [("status", &*status.to_string())];
        let answered = metric_sum(&metrics, "clustergate_requests_total", &label);
        let received = metric_sum(&metrics, "clustergate_upstream_requests_total", &label);
        if answered > received {
            findings.push(format!(
                "metrics: the gateway answered {answered} x {status}, the dashboard sent {received}"
            ));
        }
    }
    findings
}

fn summary(runs: &[&Run], seed: u64, state: &ClusterState, templates: &[String]) -> String {
    let mut out = format!(
        "API fuzz: Schemathesis {}, seed {seed} (CG_API_FUZZ_SEED replays it)\n",
        schemathesis::pinned_version()
    );
    for run in runs {
        let cases = match &run.report {
            Ok(r) => format!(
                "{} of {} operations, {} test cases",
                r.operations.tested, r.operations.selected, r.test_cases.generated
            ),
            Err(why) => format!("no report ({why})"),
        };
        let _ = writeln!(
            out,
            "{}: {cases}, {} requests, {:.1} s",
            run.name,
            run.exchanges.len(),
            run.elapsed.as_secs_f64()
        );
        for origin in [Origin::Gateway, Origin::Dashboard, Origin::NoAnswer] {
            let _ = writeln!(out, "  {origin:?}: {}", statuses(&run.exchanges, origin));
        }
        let writes: Vec<&Exchange> = run
            .exchanges
            .iter()
            .filter(|e| e.with_credentials && !matches!(e.method.as_str(), "GET" | "HEAD"))
            .collect();
        let by_dashboard = writes
            .iter()
            .filter(|e| e.origin == Origin::Dashboard)
            .count();
        let _ = writeln!(
            out,
            "  methods but GET with credentials: {} (answered by the gateway {}, by the dashboard {by_dashboard})",
            writes.len(),
            writes.len() - by_dashboard
        );
        for (what, select) in [
            (
                "writes handed on to the dashboard",
                exchanges::handed_on_write as fn(&Exchange) -> bool,
            ),
            (
                "the dashboard's own 5xx, passed through (not the gateway's)",
                exchanges::from_dashboard_5xx,
            ),
        ] {
            let counts = exchanges::by_operation(&run.exchanges, templates, select);
            if !counts.is_empty() {
                let list: Vec<String> = counts.iter().map(|(k, n)| format!("{k} x{n}")).collect();
                let _ = writeln!(out, "  {what}: {}", list.join(", "));
            }
        }
    }
    let _ = writeln!(
        out,
        "dashboard state: {} reads compared before and after",
        state.len()
    );
    out
}

/// `401 x12, 403 x3`: the statuses one side answered.
fn statuses(exchanges: &[Exchange], origin: Origin) -> String {
    let list: Vec<String> = exchanges::tally(exchanges)
        .into_iter()
        .filter(|((o, _), _)| *o == origin)
        .map(|((_, status), n)| format!("{status} x{n}"))
        .collect();
    if list.is_empty() {
        "none".into()
    } else {
        list.join(", ")
    }
}

fn last_chars(text: &str, n: usize) -> String {
    let skip = text.chars().count().saturating_sub(n);
    text.chars().skip(skip).collect()
}
