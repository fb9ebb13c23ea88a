//! The API description through the gateway: `/docs/api.json` is the real dashboard's
//! document rewritten to describe the gateway (its servers, its auth operations, no backend
//! address), and `/docs` is a page a browser (headless Chromium) renders into the list of
//! operations, without a token and without the internet.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};

/// Every string in a JSON document, keys included.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| strings(i, out)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                strings(v, out);
            }
        }
        _ => {}
    }
}

async fn docs_json(gw: &RunningGateway) -> Value {
    let r = gw
        .send(gw.request(Method::GET, "/docs/api.json", None, None))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.content_type().starts_with("application/json"),
        "{}",
        r.content_type()
    );
    r.json()
}

#[tokio::test]
async fn the_document_has_the_backends_paths_the_gateways_auth_and_no_backend_address() {
    let dash = Dashboard::shared();
    let gw = Gateway::new().user(User::admin()).upstream(dash).start();
    let doc = docs_json(&gw).await;
    assert_eq!(doc["servers"], json!([{"url": "/"}]));

    let direct = dash
        .send(Method::GET, "/docs/openapi.json", None, "*/*", None)
        .await;
    assert_eq!(
        direct.status,
        200,
        "the dashboard's own document: {}",
        direct.text()
    );
    let backend = direct.json();
    let backend_paths = backend["paths"].as_object().unwrap();
    let paths = doc["paths"].as_object().unwrap();
    assert!(backend_paths.len() > 100, "{} paths", backend_paths.len());
    // Every operation of the dashboard's, but those the gateway refuses whoever asks.
    let mut left_out = Vec::new();
    for (path, item) in backend_paths {
        for method in item.as_object().unwrap().keys() {
            if paths.get(path).and_then(|ours| ours.get(method)).is_none() {
                left_out.push(format!("{method} {path}"));
            }
        }
    }
    assert_eq!(left_out, ["post /api/user/{username}/change_password"]);
    for path in ["/api/auth", "/api/auth/check", "/api/auth/logout"] {
        assert!(
            doc["paths"][path]["post"].is_object(),
            "POST {path} missing"
        );
    }

    let mut all = Vec::new();
    strings(&doc, &mut all);
    for host in dash.host_ports() {
        let leaks: Vec<&String> = all.iter().filter(|s| s.contains(&host)).collect();
        assert!(
            leaks.is_empty(),
            "the document names the backend {host}: {leaks:?}"
        );
    }
}

#[tokio::test]
async fn the_documents_server_is_the_configured_public_url_never_the_host_header() {
    let dash = Dashboard::shared();
    let public = "https://ceph.example.test:8443";
    let gw = Gateway::new()
        .user(User::admin())
        .upstream(dash)
        .public_url(public)
        .start();
    let req = gw
        .request(Method::GET, "/docs/api.json", None, None)
        .header("Host", "evil.example.test");
    let r = gw.send(req).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let servers = r.json()["servers"].clone();
    let urls: Vec<&str> = servers
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["url"].as_str().unwrap().trim_end_matches('/'))
        .collect();
    assert_eq!(urls, [public], "servers {servers}");
    assert!(!r.text().contains("evil.example.test"));
}

/// Where tests keep artifacts (not committed): `target/tmp/<name>`.
fn artifact_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Headless Chromium on `url`, with `extra` arguments; returns its stdout.
fn chromium(url: &str, extra: &[String]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new("timeout")
        .args([
            "120",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
        ])
        .args([
            "--disable-background-networking",
            "--disable-component-update",
        ])
        .args([
            "--disable-sync",
            "--no-first-run",
            "--virtual-time-budget=15000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run chromium ({e}): install it with `apt-get install -y chromium`")
        });
    assert!(
        out.status.success(),
        "chromium failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn the_docs_page_renders_the_operations_in_headless_chromium() {
    let dash = Dashboard::shared();
    let gw = Gateway::new().user(User::admin()).upstream(dash).start();
    let page = gw.send(gw.request(Method::GET, "/docs", None, None)).await;
    assert_eq!(page.status, 200);
    assert!(
        page.content_type().starts_with("text/html"),
        "{}",
        page.content_type()
    );
    // No CDN, no internet: nothing is loaded from another origin.
    for needle in ["src=\"http", "href=\"http", "src=\"//", "href=\"//"] {
        assert!(!page.text().contains(needle), "the page loads {needle}...");
    }

    let url = gw.url("/docs");
    let dom = chromium(&url, &["--dump-dom".to_string()]);
    // The page's status line, "N operations" (its script has the words too, without N).
    let operations = dom
        .match_indices(" operations")
        .filter_map(|(at, _)| dom[..at].rsplit(|c: char| !c.is_ascii_digit()).next())
        .find_map(|n| n.parse::<usize>().ok())
        .unwrap_or_else(|| {
            panic!(
                "no \"N operations\" in the page: {}",
                &dom[..dom.len().min(2000)]
            )
        });
    assert!(operations >= 193, "{operations} operations shown");
    for path in ["/api/pool", "/api/auth/check", "/api/host"] {
        assert!(dom.contains(path), "{path} not shown");
    }

    let screenshot = artifact_dir("docs").join("docs.png");
    let _ = std::fs::remove_file(&screenshot);
    chromium(
        &url,
        &[
            format!("--screenshot={}", screenshot.display()),
            "--window-size=1280,900".to_string(),
        ],
    );
    let png = std::fs::read(&screenshot).expect("screenshot written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    println!("screenshot: {}", screenshot.display());
}
