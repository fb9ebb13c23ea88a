//! Each release's web UI (16.2, 18.2, 20.2) in headless Chromium, directly from its real
//! dashboard and through the gateway, side by side (`tests/ui/compare.js`): the same login
//! lands on the dashboard's landing page, and no API call that succeeds directly fails
//! through the gateway (the two network logs compared call by call). The gateway side's
//! screenshot is the README's `deploy/screenshots/landing-page-<release>.png` (written when
//! missing or with `CG_UI_UPDATE_SCREENSHOT=1`); both sides' are in
//! `target/ui-releases/<release>/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use common::*;
use serde_json::Value;

/// How long each side stays on the landing page: several rounds of its polling.
const DWELL_MS: u64 = 15_000;

/// `(method, path)` of each call a side made, with every status it got.
fn calls(side: &Value) -> BTreeMap<(String, String), BTreeSet<u64>> {
    let mut calls: BTreeMap<(String, String), BTreeSet<u64>> = BTreeMap::new();
    for call in side["calls"].as_array().expect("calls") {
        let key = (
            call["method"].as_str().unwrap().to_string(),
            call["path"].as_str().unwrap().to_string(),
        );
        calls
            .entry(key)
            .or_default()
            .insert(call["status"].as_u64().unwrap());
    }
    calls
}

fn succeeded(statuses: &BTreeSet<u64>) -> bool {
    statuses.iter().all(|s| (200..300).contains(s) || *s == 304)
}

fn compare(release: &'static str) {
    assert_browser_installed();
    let dash = Dashboard::shared_release(release);
    let gw = Gateway::with_admin_and_viewer().upstream(dash).start();
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("target/ui-releases/{release}"));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();

    let mut cmd = driver_command("compare.js");
    cmd.env("CG_UI_DIRECT_URL", dash.url())
        .env("CG_UI_DIRECT_USER", ADMIN)
        .env("CG_UI_DIRECT_PASSWORD", dash.password(ADMIN))
        .env("CG_UI_GATEWAY_URL", gw.url("").trim_end_matches('/'))
        .env("CG_UI_GATEWAY_USER", ADMIN)
        .env("CG_UI_GATEWAY_PASSWORD", ADMIN_PW)
        .env("CG_UI_DWELL_MS", DWELL_MS.to_string())
        .env("CG_UI_OUT", &out);
    let (status, output) = run_driver(cmd, Duration::from_secs(300));
    assert_eq!(status, Some(0), "compare.js (Ceph {release}):\n{output}");
    let line = output
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .expect("a JSON line");
    let seen: Value = serde_json::from_str(line).unwrap();
    let (direct, through) = (calls(&seen["direct"]), calls(&seen["gateway"]));

    let landing = seen["gateway"]["landing"].as_str().unwrap();
    assert_eq!(
        landing,
        seen["direct"]["landing"].as_str().unwrap(),
        "Ceph {release}: the gateway's UI landed elsewhere"
    );
    let mut failed = Vec::new();
    let mut missing = Vec::new();
    for (call, statuses) in &direct {
        match through.get(call) {
            _ if !succeeded(statuses) => {}
            Some(gateway) if !succeeded(gateway) => {
                failed.push(format!(
                    "{} {}: direct {statuses:?}, gateway {gateway:?}",
                    call.0, call.1
                ));
            }
            Some(_) => {}
            None => missing.push(format!("{} {}", call.0, call.1)),
        }
    }
    println!(
        "Ceph {release}: landing {landing}; {} distinct API calls directly, {} through the gateway; failing only through the gateway: {failed:?}; made only directly: {missing:?}",
        direct.len(),
        through.len()
    );
    assert!(failed.is_empty(), "Ceph {release}: {failed:#?}");
    // Polling calls may fall either side of the window; the landing page's own calls may not.
    assert!(
        missing.len() * 5 <= direct.len(),
        "Ceph {release}: calls never made through the gateway: {missing:#?}"
    );

    let readme_shot = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("deploy/screenshots/landing-page-{release}.png"));
    if !readme_shot.exists() || std::env::var("CG_UI_UPDATE_SCREENSHOT").as_deref() == Ok("1") {
        std::fs::copy(out.join("gateway.png"), &readme_shot).unwrap();
    }
}

#[test]
fn ceph_16_2_web_ui_through_the_gateway_as_directly() {
    compare("16.2");
}

#[test]
fn ceph_18_2_web_ui_through_the_gateway_as_directly() {
    compare("18.2");
}

#[test]
fn ceph_20_2_web_ui_through_the_gateway_as_directly() {
    compare("20.2");
}
