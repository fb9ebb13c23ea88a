//! The deploy kit's monitoring files against the real tools and a running gateway:
//! promtool checks the scrape config and the alert rules and runs their unit tests (every
//! alert fired, then cleared); a real Prometheus scrapes a gateway with the shipped config,
//! evaluates the rules (none fires for a healthy gateway) and every dashboard query; and
//! every metric the Grafana dashboard and the alert rules read is one the gateway exposes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::common::*;
use serde_json::Value;

const GRAFANA_DASHBOARD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/deploy/grafana/clustergate.json"
);
/// Series Prometheus records itself for every target it scrapes.
const PROMETHEUS_SERIES: [&str; 1] = ["up"];
const SCRAPED_DEADLINE: Duration = Duration::from_secs(30);

/// Each alert of the shipped rules file: its name and its expression.
fn alert_rules() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(prometheus_file("clustergate-alerts.yml")).unwrap();
    let rules: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let groups = rules["groups"].as_sequence().unwrap();
    groups
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap())
        .map(|r| {
            let name = r["alert"].as_str().expect("only alerting rules");
            (name.to_string(), r["expr"].as_str().unwrap().to_string())
        })
        .collect()
}

fn grafana_dashboard() -> Value {
    serde_json::from_str(&std::fs::read_to_string(GRAFANA_DASHBOARD).unwrap())
        .expect("deploy/grafana/clustergate.json is JSON")
}

/// Every panel of the dashboard, those inside collapsed rows included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut all = Vec::new();
    let mut stack: Vec<&Value> = dashboard["panels"].as_array().unwrap().iter().collect();
    while let Some(panel) = stack.pop() {
        if let Some(inner) = panel["panels"].as_array() {
            stack.extend(inner);
        }
        all.push(panel);
    }
    all
}

/// Every PromQL expression of the dashboard: its panels' targets, and the selectors of
/// its `label_values(selector, label)` variables.
fn dashboard_queries(dashboard: &Value) -> Vec<String> {
    let mut queries: Vec<String> = panels(dashboard)
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| {
            t["expr"]
                .as_str()
                .expect("every target has an expr")
                .to_string()
        })
        .collect();
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if let Some(query) = variable["query"]["query"].as_str() {
            let args = query
                .strip_prefix("label_values(")
                .and_then(|q| q.strip_suffix(')'))
                .unwrap_or_else(|| panic!("variable query {query}: not label_values(..)"));
            let (selector, _label) = args.rsplit_once(',').unwrap();
            queries.push(selector.trim().to_string());
        }
    }
    queries
}

/// A dashboard query as Grafana sends it to Prometheus for job `clustergate`, every gateway.
fn with_variables(query: &str) -> String {
    query
        .replace("$__rate_interval", "1m")
        .replace("$job", "clustergate")
        .replace("$instance", ".+")
}

/// The metric family a series name belongs to: `x_bucket`, `x_sum` and `x_count` are of
/// histogram (or summary) `x`; every other name is its own family.
fn family<'a>(name: &'a str, kinds: &BTreeMap<String, String>) -> &'a str {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if kinds
                .get(base)
                .is_some_and(|k| k == "histogram" || k == "summary")
            {
                return base;
            }
        }
    }
    name
}

/// The families of a `/metrics` text that have samples, and every family's kind.
fn exposed_families(text: &str) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let kinds: BTreeMap<String, String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, kind)| (name.to_string(), kind.to_string()))
        .collect();
    let families = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap())
        .map(|name| family(name, &kinds).to_string())
        .collect();
    (families, kinds)
}

/// A gateway with TLS in front of the real dashboard, after a login, a failed login, a
/// token check and a forwarded call.
async fn gateway_with_traffic() -> RunningGateway {
    let gw = Gateway::with_admin_and_viewer()
        .tls(true)
        .upstream(Dashboard::shared())
        .start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    gw.try_login(ADMIN, "wrong").await;
    assert_eq!(gw.check(&token).await.status, 200);
    let forwarded = gw.api_get("/api/summary", Some(&token)).await;
    assert_eq!(forwarded.status, 200, "{}", forwarded.text());
    gw
}

/// `3m`, `7d`: an eval_time of promtool's tests, in seconds.
fn promtool_duration(text: &str) -> u64 {
    let (number, unit) = text.split_at(text.len() - 1);
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => panic!("duration {text}: unit not s, m, h or d"),
    };
    number.parse::<u64>().unwrap() * scale
}

#[test]
fn promtool_accepts_the_scrape_config_and_the_alert_rules() {
    let config = promtool(&["check", "config", "prometheus.yml"]);
    assert!(
        config.contains("SUCCESS: 1 rule files found"),
        "the scrape config must load the alert rules:\n{config}"
    );
    let rules = promtool(&["check", "rules", "clustergate-alerts.yml"]);
    let found = format!("SUCCESS: {} rules found", alert_rules().len());
    assert!(rules.contains(&found), "{rules}");
}

#[test]
fn promtool_unit_tests_fire_and_clear_every_alert() {
    let out = promtool(&["test", "rules", "tests.yml"]);
    assert!(out.contains("SUCCESS"), "{out}");
    // promtool checks what the tests expect; that each alert is expected to fire and to
    // clear afterwards is checked here.
    let text = std::fs::read_to_string(prometheus_file("tests.yml")).unwrap();
    let tests: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let mut expectations: BTreeMap<String, Vec<(u64, bool)>> = BTreeMap::new();
    for test in tests["tests"].as_sequence().unwrap() {
        for check in test["alert_rule_test"].as_sequence().unwrap() {
            let firing = !check["exp_alerts"].as_sequence().unwrap().is_empty();
            let at = promtool_duration(check["eval_time"].as_str().unwrap());
            let alert = check["alertname"].as_str().unwrap().to_string();
            expectations.entry(alert).or_default().push((at, firing));
        }
    }
    for (alert, _) in alert_rules() {
        let checks = expectations.get(&alert).cloned().unwrap_or_default();
        let fires = checks
            .iter()
            .filter(|(_, firing)| *firing)
            .map(|(at, _)| *at);
        let clears_after = fires
            .min()
            .is_some_and(|first| checks.iter().any(|(at, firing)| !firing && *at > first));
        assert!(
            clears_after,
            "tests.yml must expect {alert} to fire, then to clear: {checks:?}"
        );
    }
}

#[test]
fn metric_names_are_read_from_promql() {
    let cases: [(&str, &[&str]); 6] = [
        (
            r#"sum by (job, instance) (rate(a_total{status=~"5..", x='}'}[5m])) / sum by (job) (rate(b_total[$__rate_interval])) > 0.05 and c == 0"#,
            &["a_total", "b_total", "c"],
        ),
        (
            "histogram_quantile(0.99, sum by (le, route) (rate(d_seconds_bucket[1m])))",
            &["d_seconds_bucket"],
        ),
        ("e_seconds - time() < 14 * 86400", &["e_seconds"]),
        ("max by (job, instance) (f) == 0", &["f"]),
        (
            "up{job=\"$job\"} == bool 0 or on (instance) g offset 5m",
            &["g", "up"],
        ),
        (
            "sum without (server) (h:rate5m) # comment naming i",
            &["h:rate5m"],
        ),
    ];
    for (expr, want) in cases {
        let got = metric_names(expr);
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(got, want, "{expr}");
    }
}

#[test]
fn the_dashboard_shows_requests_logins_upstreams_tokens_and_the_state_store() {
    let dashboard = grafana_dashboard();
    let read: BTreeSet<String> = dashboard_queries(&dashboard)
        .iter()
        .flat_map(|q| metric_names(q))
        .collect();
    for name in [
        "clustergate_requests_total",
        "clustergate_request_duration_seconds_bucket",
        "clustergate_logins_total",
        "clustergate_lockouts_total",
        "clustergate_upstream_up",
        "clustergate_upstream_active",
        "clustergate_token_checks_total",
        "clustergate_state_up",
    ] {
        assert!(read.contains(name), "no panel reads {name}: {read:?}");
    }
    let ids: Vec<u64> = panels(&dashboard)
        .iter()
        .map(|p| p["id"].as_u64().unwrap())
        .collect();
    let unique: BTreeSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "panel ids repeat: {ids:?}");
}

#[tokio::test]
async fn every_metric_the_dashboard_and_the_alert_rules_read_is_exposed_by_the_gateway() {
    let gw = gateway_with_traffic().await;
    let text = gw
        .metrics_until(|t| t.contains("clustergate_upstream_logins_total{"))
        .await;
    let (exposed, kinds) = exposed_families(&text);
    let dashboard = grafana_dashboard();
    let mut queries: Vec<(String, String)> = dashboard_queries(&dashboard)
        .into_iter()
        .map(|q| ("deploy/grafana/clustergate.json".to_string(), q))
        .collect();
    queries.extend(alert_rules());
    let mut unknown = Vec::new();
    for (source, query) in &queries {
        for name in metric_names(query) {
            let family = family(&name, &kinds);
            if !exposed.contains(family) && !PROMETHEUS_SERIES.contains(&family) {
                unknown.push(format!("{source}: {name} in {query}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "metrics the gateway does not expose:\n{}\n\nexposed: {exposed:?}",
        unknown.join("\n")
    );
}

#[tokio::test]
async fn prometheus_scrapes_a_gateway_with_the_shipped_config_and_evaluates_rules_and_panels() {
    let gw = gateway_with_traffic().await;
    let prometheus = Prometheus::start(gw.metrics_addr);

    let build = prometheus
        .query_until("clustergate_build_info", SCRAPED_DEADLINE, |r| {
            !r.is_empty()
        })
        .await;
    assert_eq!(build.len(), 1, "{build:?}");
    let labels = &build[0]["metric"];
    assert_eq!(labels["version"], env!("CARGO_PKG_VERSION"), "{build:?}");
    assert_eq!(labels["job"], "clustergate", "{build:?}");
    assert_eq!(labels["instance"], gw.metrics_addr.to_string(), "{build:?}");
    assert_eq!(build[0]["value"][1], "1", "{build:?}");
    let active = prometheus
        .query(&format!(
            "clustergate_upstream_active{{server=\"{}\"}}",
            Dashboard::shared().url()
        ))
        .await;
    assert_eq!(active.len(), 1, "{active:?}");
    assert_eq!(active[0]["value"][1], "1", "{active:?}");

    // The shipped rules are loaded and evaluate without error; a healthy gateway fires
    // none of them, nor has any pending. Twice evaluated after the first scrape was seen,
    // so that the last evaluation started after it.
    let mut rules = prometheus.rules().await;
    for _ in 0..2 {
        rules = prometheus
            .rules_evaluated_after(&rules, SCRAPED_DEADLINE)
            .await;
    }
    let loaded: BTreeSet<&str> = rules.iter().map(|r| r["name"].as_str().unwrap()).collect();
    let shipped = alert_rules();
    let shipped: BTreeSet<&str> = shipped.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(loaded, shipped);
    for rule in &rules {
        assert_eq!(rule["health"], "ok", "{rule}");
    }
    let alerts = prometheus.api("alerts", &[]).await;
    assert_eq!(alerts["alerts"], serde_json::json!([]), "{alerts}");

    // Every dashboard query evaluates (`api` fails on a query Prometheus refuses); the
    // overview's stat panels show this gateway.
    let dashboard = grafana_dashboard();
    for query in dashboard_queries(&dashboard) {
        prometheus.query(&with_variables(&query)).await;
    }
    for panel in panels(&dashboard) {
        if panel["type"] != "stat" {
            continue;
        }
        for target in panel["targets"].as_array().unwrap() {
            let query = with_variables(target["expr"].as_str().unwrap());
            let result = prometheus.query(&query).await;
            assert!(!result.is_empty(), "{}: {query} is empty", panel["title"]);
        }
    }
}
