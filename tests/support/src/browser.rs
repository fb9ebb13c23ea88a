//! Headless Chromium through the Node drivers in `tests/ui/` (playwright-core driving
//! Debian's chromium): what they need installed, and running one with a deadline.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const CHROMIUM: &str = "/usr/bin/chromium";

/// `tests/ui`, where the drivers and their node_modules are.
pub fn ui_dir() -> PathBuf {
    Path::new(crate::REPO_ROOT).join("tests/ui")
}

fn found(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What the browser tests run with, installed by `deploy/install-deps.sh --test` (never
/// here: a test installs nothing): Debian's chromium and node, and playwright-core (which
/// downloads no browser) in tests/ui/node_modules.
pub fn assert_browser_installed() {
    let driver = ui_dir().join("node_modules/playwright-core/package.json");
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

/// A `node tests/ui/<script>` command, without the Ceph harness's own variables (set per
/// call, never inherited, as in common).
pub fn driver_command(script: &str) -> Command {
    let mut cmd = Command::new("node");
    cmd.arg(ui_dir().join(script)).current_dir(ui_dir());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("CG_CEPH_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("CG_UI_CHROMIUM", CHROMIUM);
    cmd
}

/// Runs a driver with a deadline; its process group (node and the browser it started) is
/// killed when the deadline passes. Returns the exit status and everything it printed.
pub fn run_driver(mut cmd: Command, deadline: Duration) -> (Option<i32>, String) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(log.reopen().unwrap())
        .stderr(log.reopen().unwrap())
        .process_group(0)
        .spawn()
        .expect("run node with a driver of tests/ui");
    let deadline = Instant::now() + deadline;
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
