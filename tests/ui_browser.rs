//! The Ceph dashboard's own web UI through the gateway, in a real headless browser: a real
//! dashboard (with a standby manager) behind the gateway (TLS on, its generated certificate),
//! and the Node driver in `tests/ui/` (playwright-core driving Debian's `/usr/bin/chromium`)
//! running the UI flows: login, landing page, Pools, logout; a read-only user; wrong
//! passwords and lockout; security headers and caching; a manager failover while the UI is
//! open; and the landing page screenshot for the README. The answer cache is on, as shipped:
//! the UI's files come from the gateway's memory (immutable hashed names, ETag, 304).
//!
//! Screenshots of every step go to `target/ui-screenshots/` (emptied first). The README's
//! `deploy/screenshots/landing-page.png` is written when it is missing, or when
//! `CG_UI_UPDATE_SCREENSHOT=1`. `CG_UI_SCENARIOS=1,2` runs only some scenarios (see
//! `tests/ui/driver.js`). See the driver's output with `cargo test --test ui_browser --
//! --nocapture`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// `auth.lockout_attempts` and `auth.lockout_seconds` of the gateway under test.
const LOCKOUT_ATTEMPTS: u32 = 3;
const LOCKOUT_SECONDS: u64 = 4;
/// The user scenario 3 locks out (an administrator, apart from the other scenarios' users).
const LOCKED: &str = "locked";
const LOCKED_PW: &str = "L0cked-Ceph-Pass";
const CHROMIUM: &str = "/usr/bin/chromium";
/// The whole driver run; it normally takes 1.5-2 minutes.
const DRIVER_DEADLINE: Duration = Duration::from_secs(600);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn found(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What the browser test runs with, installed by `deploy/install-deps.sh --test` (never
/// here: a test installs nothing): Debian's chromium and node, and playwright-core (which
/// downloads no browser) in tests/ui/node_modules.
fn assert_installed(ui: &Path) {
    let driver = ui.join("node_modules/playwright-core/package.json");
    for (present, what) in [
        (Path::new(CHROMIUM).exists(), CHROMIUM),
        (found("node"), "node"),
        (driver.exists(), "tests/ui/node_modules/playwright-core"),
    ] {
        assert!(
            present,
            "{what} is missing: run deploy/install-deps.sh --test"
        );
    }
}

/// The screenshots' folder, emptied.
fn screenshot_dir() -> PathBuf {
    let dir = repo().join("target/ui-screenshots");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the driver with a deadline; its process group (node and the browser it started) is
/// killed when the deadline passes. Returns the exit status and everything it printed.
fn run_driver(mut cmd: Command) -> (Option<i32>, String) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(log.reopen().unwrap())
        .stderr(log.reopen().unwrap())
        .process_group(0)
        .spawn()
        .expect("run node tests/ui/driver.js");
    let deadline = Instant::now() + DRIVER_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut output = String::new();
    log.reopen().unwrap().read_to_string(&mut output).unwrap();
    (status, output)
}

#[test]
fn the_dashboards_web_ui_works_through_the_gateway() {
    let started = Instant::now();
    let ui = repo().join("tests/ui");
    assert_installed(&ui);

    let dash = Dashboard::dedicated(DashboardOptions {
        standby: true,
        ..Default::default()
    });
    let gw = Gateway::new()
        .user(User::admin())
        .user(User::viewer())
        .user(User::new(LOCKED, LOCKED_PW, &["administrator"]))
        .tls(true)
        .lockout(LOCKOUT_ATTEMPTS, LOCKOUT_SECONDS)
        .upstream(&dash)
        // As shipped: the polled answers and the UI's files kept at the edge.
        .set_toml("answer_cache", "enabled", "enabled = true")
        .start();
    let shots = screenshot_dir();

    let readme_shot = repo().join("deploy/screenshots/landing-page.png");
    let update_shot =
        !readme_shot.exists() || std::env::var("CG_UI_UPDATE_SCREENSHOT").as_deref() == Ok("1");
    let failover = serde_json::json!([repo().join("deploy/ceph-dev/mgr.sh"), &dash.dir, "fail"]);

    let mut cmd = Command::new("node");
    cmd.arg(ui.join("driver.js")).current_dir(&ui);
    // The Ceph harness's own variables are set per call, never inherited (as in common).
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("CG_CEPH_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("CG_UI_URL", gw.url(""))
        .env("CG_UI_CERT_FILE", gw.state_dir().join("tls/cert.pem"))
        .env("CG_UI_DASHBOARD_URLS", dash.urls().join(" "))
        .env("CG_UI_ADMIN_USER", ADMIN)
        .env("CG_UI_ADMIN_PASSWORD", ADMIN_PW)
        .env("CG_UI_VIEWER_USER", VIEWER)
        .env("CG_UI_VIEWER_PASSWORD", VIEWER_PW)
        .env("CG_UI_LOCK_USER", LOCKED)
        .env("CG_UI_LOCK_PASSWORD", LOCKED_PW)
        .env("CG_UI_LOCKOUT_ATTEMPTS", LOCKOUT_ATTEMPTS.to_string())
        .env("CG_UI_LOCKOUT_SECONDS", LOCKOUT_SECONDS.to_string())
        .env("CG_UI_FAILOVER", failover.to_string())
        .env("CG_UI_OUT", &shots)
        .env("CG_UI_CHROMIUM", CHROMIUM);
    if update_shot {
        cmd.env("CG_UI_README_SCREENSHOT", &readme_shot);
    }
    let (status, output) = run_driver(cmd);
    println!("{output}");
    println!(
        "ui_browser: {:.1?} in all (dashboard with standby, gateway, browser); screenshots in {}",
        started.elapsed(),
        shots.display()
    );
    assert_eq!(
        status,
        Some(0),
        "tests/ui/driver.js failed (None: killed after {DRIVER_DEADLINE:?}):\n{output}"
    );
}
