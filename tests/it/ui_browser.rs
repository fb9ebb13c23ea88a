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
//! `tests/ui/driver.js`). See the driver's output with `cargo test --test it ui_browser:: --
//! --nocapture`.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::*;

/// `auth.lockout_attempts` and `auth.lockout_seconds` of the gateway under test.
const LOCKOUT_ATTEMPTS: u32 = 3;
const LOCKOUT_SECONDS: u64 = 4;
/// The user scenario 3 locks out (an administrator, apart from the other scenarios' users).
const LOCKED: &str = "locked";
const LOCKED_PW: &str = "L0cked-Ceph-Pass";
/// The whole driver run; it normally takes 1.5-2 minutes.
const DRIVER_DEADLINE: Duration = Duration::from_secs(600);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The screenshots' folder, emptied.
fn screenshot_dir() -> PathBuf {
    let dir = repo().join("target/ui-screenshots");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_dashboards_web_ui_works_through_the_gateway() {
    let started = Instant::now();
    assert_browser_installed();

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

    let mut cmd = driver_command("driver.js");
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
        .env("CG_UI_OUT", &shots);
    if update_shot {
        cmd.env("CG_UI_README_SCREENSHOT", &readme_shot);
    }
    let (status, output) = run_driver(cmd, DRIVER_DEADLINE);
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
