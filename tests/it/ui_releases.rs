//! Each release's web UI (16.2, 18.2, 20.2) in headless Chromium, directly from its real
//! dashboard and through the gateway, side by side (`tests/ui/compare.js`): the same login
//! lands on the dashboard's landing page, and no API call that succeeds directly fails
//! through the gateway (the two network logs compared call by call). The gateway side's
//! screenshot is the README's `deploy/screenshots/landing-page-<release>.png` (written when
//! missing or with `CG_UI_UPDATE_SCREENSHOT=1`); both sides' are in
//! `target/ui-releases/<release>/`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use crate::common::*;
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

/// One comparison: a release's web UI directly and through a gateway, as one user.
struct Run {
    release: &'static str,
    /// `access.release`: the gateway held to an older release's table (as in front of a
    /// release newer than its tables), its users acting upstream as accounts holding their
    /// roles (`upstream.identity = "roles"`), the operations the table lacks left to the
    /// dashboard (`access.unknown_operations`' default there).
    held_to: Option<&'static str>,
    /// `ADMIN` or `VIEWER`: the same name on the dashboard and in the gateway's users.
    user: &'static str,
}

impl Run {
    fn of(release: &'static str) -> Run {
        Run {
            release,
            held_to: None,
            user: ADMIN,
        }
    }

    fn gateway_password(&self) -> &'static str {
        if self.user == VIEWER {
            VIEWER_PW
        } else {
            ADMIN_PW
        }
    }

    /// Where its screenshots go.
    fn out_dir(&self) -> String {
        match self.held_to {
            None => self.release.to_string(),
            Some(table) => format!("{}-table-{table}-{}", self.release, self.user),
        }
    }
}

fn compare(run: Run) {
    let release = run.release;
    assert_browser_installed();
    let dash = Dashboard::shared_release(release);
    let mut gw = Gateway::with_admin_and_viewer().upstream(dash);
    if let Some(table) = run.held_to {
        gw = gw
            .role_identity(ROLE_ACCOUNTS_KEY)
            .extra_toml("access", &format!("release = {table:?}"));
    }
    let gw = gw.start();
    let out =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("target/ui-releases/{}", run.out_dir()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();

    let mut cmd = driver_command("compare.js");
    cmd.env("CG_UI_DIRECT_URL", dash.url())
        .env("CG_UI_DIRECT_USER", run.user)
        .env("CG_UI_DIRECT_PASSWORD", dash.password(run.user))
        .env("CG_UI_GATEWAY_URL", gw.url("").trim_end_matches('/'))
        .env("CG_UI_GATEWAY_USER", run.user)
        .env("CG_UI_GATEWAY_PASSWORD", run.gateway_password())
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

    if run.held_to.is_some() {
        return;
    }
    let readme_shot = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("deploy/screenshots/landing-page-{release}.png"));
    if !readme_shot.exists() || std::env::var("CG_UI_UPDATE_SCREENSHOT").as_deref() == Ok("1") {
        std::fs::copy(out.join("gateway.png"), &readme_shot).unwrap();
    }
}

#[test]
fn ceph_16_2_web_ui_through_the_gateway_as_directly() {
    compare(Run::of("16.2"));
}

#[test]
fn ceph_18_2_web_ui_through_the_gateway_as_directly() {
    compare(Run::of("18.2"));
}

#[test]
fn ceph_20_2_web_ui_through_the_gateway_as_directly() {
    compare(Run::of("20.2"));
}

/// Issue 32, item 3: a gateway held to 16.2's table in front of the 20.2 dashboard, as in
/// front of a release newer than its tables; the operations 16.2 lacks are the dashboard's
/// to decide, so the UI works as directly (with `access.unknown_operations = "refuse"`
/// they are 404s and the comparison fails).
#[test]
fn ceph_20_2_web_ui_through_a_gateway_held_to_16_2s_table_as_directly_for_an_administrator() {
    compare(Run {
        held_to: Some("16.2"),
        ..Run::of("20.2")
    });
}

/// The same for a read-only user: what the dashboard refuses it directly it refuses
/// through the gateway, what it allows works.
#[test]
fn ceph_20_2_web_ui_through_a_gateway_held_to_16_2s_table_as_directly_for_a_read_only_user() {
    compare(Run {
        held_to: Some("16.2"),
        user: VIEWER,
        ..Run::of("20.2")
    });
}
