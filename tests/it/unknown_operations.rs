//! Operations the gateway's table does not know are the dashboard's to decide (issue 32,
//! item 3), tried as a newer release would look: a gateway held to 16.2's table
//! (`access.release = "16.2"`) in front of the real 20.2 dashboard, its users acting
//! upstream as accounts holding their roles (`upstream.identity = "roles"`). A read-only
//! user's write to an operation 16.2 lacks is refused by the dashboard itself and never
//! performed; each such request is counted and logged once per operation, and
//! `/docs/api.json` lists the operations 16.2's table lacks. (The web UI held to 16.2's
//! table: tests/it/ui_releases.rs.)

use std::collections::BTreeSet;

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};

/// The RGW user of the shared dashboards' data (`CG_RGW_USER`).
const RGW_USER: &str = "cg-user";

/// A gateway held to 16.2's table in front of `dash`, admin and viewer acting upstream as
/// role accounts; `access.unknown_operations` left to its default.
fn held_to_16_2(dash: &Dashboard) -> RunningGateway {
    Gateway::with_admin_and_viewer()
        .upstream(dash)
        .role_identity(ROLE_ACCOUNTS_KEY)
        .extra_toml("access", "release = \"16.2\"")
        .start()
}

/// `RGW_USER`'s rate limit, as the dashboard's administrator reads it directly.
async fn rate_limit(dash: &Dashboard, admin: &str) -> Value {
    let path = format!("/api/rgw/user/{RGW_USER}/ratelimit");
    let r = dash.send(Method::GET, &path, Some(admin), V1, None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// `PUT /api/rgw/user/{uid}/ratelimit` (new since 16.2; rgw update) by a read-only user:
/// the dashboard answers 403 as that user's roles, and the rate limit stays as it was.
/// With `access.unknown_operations = "refuse"` the gateway answers 404; with the service
/// account the dashboard would set it.
#[tokio::test]
async fn a_read_only_write_unknown_to_the_table_is_refused_by_the_dashboard() {
    let dash = Dashboard::shared_release("20.2");
    assert!(
        dash.has_data(),
        "the 20.2 dashboard needs its data (--data)"
    );
    let gw = held_to_16_2(dash);
    let admin = dash.login(ADMIN).await;
    let before = rate_limit(dash, &admin).await;
    let viewer = gw.login(VIEWER, VIEWER_PW).await;
    let path = format!("/api/rgw/user/{RGW_USER}/ratelimit");
    let limit = json!({"enabled": true, "max_read_ops": 7, "max_write_ops": 7,
        "max_read_bytes": 0, "max_write_bytes": 0});
    let write = gw
        .send(
            gw.request(Method::PUT, &path, Some(&viewer), Some(V1))
                .json(&limit),
        )
        .await;
    let after = rate_limit(dash, &admin).await;
    if after != before {
        // (the dashboard's PUT leaves a limit of 0 unset: the tool sets it back)
        let was = &before["user_ratelimit"];
        let count = |key: &str| was[key].as_u64().unwrap().to_string();
        let (read, write) = (count("max_read_ops"), count("max_write_ops"));
        let uid = format!("--uid={RGW_USER}");
        dash.radosgw_admin(&[
            "ratelimit",
            "set",
            "--ratelimit-scope=user",
            &uid,
            "--max-read-ops",
            &read,
            "--max-write-ops",
            &write,
        ]);
        let enabled = if was["enabled"] == true {
            "enable"
        } else {
            "disable"
        };
        dash.radosgw_admin(&["ratelimit", enabled, "--ratelimit-scope=user", &uid]);
    }
    assert_eq!(write.status, 403, "{}", write.text());
    assert_eq!(after, before, "the read-only user's write was performed");

    // Read, the same object is the read-only user's (rgw read).
    let read = gw.api_get(&path, Some(&viewer)).await;
    assert_eq!(read.status, 200, "{}", read.text());
    assert_eq!(read.json(), before);
}

/// Operations in `METHOD /template` form, each template's parameter names folded to `{}`
/// (16.2 and 20.2 name some parameters differently).
fn folded(operations: impl IntoIterator<Item = (String, String)>) -> BTreeSet<String> {
    let fold = |path: &str| {
        let segments = path
            .split('/')
            .map(|s| if s.starts_with('{') { "{}" } else { s });
        segments.collect::<Vec<_>>().join("/")
    };
    operations
        .into_iter()
        .map(|(method, path)| format!("{} {}", method.to_uppercase(), fold(&path)))
        .collect()
}

/// The operations of an OpenAPI document.
fn document_operations(doc: &Value) -> Vec<(String, String)> {
    let methods = ["get", "post", "put", "delete", "patch"];
    let paths = doc["paths"].as_object().unwrap();
    paths
        .iter()
        .flat_map(|(path, item)| {
            let item = item.as_object().unwrap();
            methods
                .iter()
                .filter(|m| item.contains_key(**m))
                .map(|m| (m.to_string(), path.clone()))
        })
        .collect()
}

/// Whether the table's template serves `path` (a path of the document: a table's
/// parameter takes any one segment, `{name:.*}` the rest, the web UI's catch-all
/// `/{path:.*}` no API path). The gateway checks a path its table knows under another
/// method by that operation's scope (e.g. POST as create): only paths no operation of the
/// table serves are unknown.
fn serves(template: &str, path: &str) -> bool {
    let api = path.starts_with("/api/") || path.starts_with("/ui-api/");
    if api && template.starts_with("/{") {
        return false;
    }
    let mut segments = path.split('/');
    for expected in template.split('/') {
        if expected.ends_with(":.*}") {
            return true;
        }
        match segments.next() {
            Some(segment) if expected.starts_with('{') || segment == expected => {}
            _ => return false,
        }
    }
    segments.next().is_none()
}

/// The operations of 16.2's built-in table.
fn table_16_2() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/conf/scopes/16.2.toml"
    ))
    .unwrap();
    let table: toml::Value = toml::from_str(&text).unwrap();
    let operations = table["operation"].as_array().unwrap().iter();
    operations
        .map(|o| {
            let field = |k: &str| o[k].as_str().unwrap().to_string();
            (field("method"), field("path"))
        })
        .collect()
}

/// The metric counts the forwarded requests 16.2's table lacks by the manager's release
/// and method; each operation is logged once, without its query; `/docs/api.json` lists
/// exactly the operations of 20.2's document that 16.2's table lacks, and keeps them
/// (marked) among the operations it describes.
#[tokio::test]
async fn the_drift_is_counted_logged_once_and_listed() {
    let dash = Dashboard::shared_release("20.2");
    let gw = held_to_16_2(dash);
    let admin = gw.login(ADMIN, ADMIN_PW).await;
    // New in 20.2: the health snapshot, a user's RGW rate limit.
    for _ in 0..2 {
        let r = gw.api_get("/api/health/snapshot", Some(&admin)).await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    // (a parameter it does not take: the dashboard's own 500)
    let queried = "/api/health/snapshot?cg_marker=query-never-logged";
    gw.api_get(queried, Some(&admin)).await;
    for uid in ["cg-user", "cg-other-user"] {
        // (the second user does not exist: the dashboard's own answer, whatever it is)
        gw.api_get(&format!("/api/rgw/user/{uid}/ratelimit"), Some(&admin))
            .await;
    }
    let metrics = gw
        .metrics_until(|m| {
            m.contains("clustergate_unknown_operations_total{method=\"GET\",release=\"20.2\"} 5")
        })
        .await;
    assert!(
        metrics.contains("clustergate_unknown_operations_total{method=\"GET\",release=\"20.2\"} 5"),
        "{metrics}"
    );
    let logs = gw.logs();
    let noted: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("an operation the gateway's table does not know"))
        .collect();
    assert_eq!(noted.len(), 2, "{noted:#?}");
    assert!(
        noted.iter().any(|l| l.contains("/api/health/snapshot")),
        "{noted:#?}"
    );
    assert!(
        noted
            .iter()
            .any(|l| l.contains("/api/rgw/user/{}/ratelimit")),
        "{noted:#?}"
    );
    assert!(
        !logs.contains("query-never-logged"),
        "a query string in the log"
    );

    let direct = dash
        .send(
            Method::GET,
            "/docs/openapi.json",
            None,
            "application/json",
            None,
        )
        .await;
    assert_eq!(direct.status, 200);
    let document = gw
        .send(gw.request(Method::GET, "/docs/api.json", None, None))
        .await;
    assert_eq!(document.status, 200, "{}", document.text());
    let document = document.json();
    let listed = document["x-clustergate-unknown-operations"]
        .as_array()
        .unwrap();
    let listed = folded(listed.iter().map(|o| {
        let (method, path) = o.as_str().unwrap().split_once(' ').unwrap();
        (method.to_string(), path.to_string())
    }));
    let table = table_16_2();
    let lacking = folded(
        document_operations(&direct.json())
            .into_iter()
            .filter(|(_, path)| !table.iter().any(|(_, template)| serves(template, path))),
    );
    let only_listed: Vec<_> = listed.difference(&lacking).collect();
    let only_lacking: Vec<_> = lacking.difference(&listed).collect();
    assert!(
        only_listed.is_empty() && only_lacking.is_empty(),
        "listed but known to 16.2: {only_listed:#?}; lacking but not listed: {only_lacking:#?}"
    );
    assert!(
        listed.contains("POST /api/block/pool/{}/group"),
        "{listed:#?}"
    );
    let group = &document["paths"]["/api/block/pool/{pool_name}/group"]["post"];
    assert_eq!(group["x-clustergate-unknown"], true, "{group}");
    let pool = &document["paths"]["/api/pool"]["get"];
    assert!(pool.get("x-clustergate-unknown").is_none(), "{pool}");
}
