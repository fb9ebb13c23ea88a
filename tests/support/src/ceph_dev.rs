//! How the project's real-dashboard harness (`deploy/ceph-dev`) is run from tests: its
//! scripts with a clean environment, the `dashboard.env` it writes, and the two locks that
//! keep dashboards from starting at once (test binaries sharing `target/test-ceph`, and the
//! tests of one binary that each start their own).

use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a test waits for another test binary that is starting the shared dashboard.
const SHARED_LOCK_DEADLINE: Duration = Duration::from_secs(600);

pub(super) fn repo() -> &'static Path {
    Path::new(crate::REPO_ROOT)
}

pub(super) fn script(name: &str) -> PathBuf {
    repo().join("deploy/ceph-dev").join(name)
}

/// The harness's own variables are set per call, never inherited from the test's environment.
pub(super) fn harness_command(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("CG_CEPH_") {
            cmd.env_remove(key);
        }
    }
    cmd.stdin(Stdio::null());
    cmd
}

pub(super) fn output_text(out: &Output) -> String {
    format!(
        "exit {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `KEY=value` lines as env_write writes them: plain, or single-quoted with `'\''` escapes.
pub fn parse_env(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            let v = match v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
                Some(inner) => inner.replace("'\\''", "'"),
                None => v.to_string(),
            };
            (k.trim().to_string(), v)
        })
        .collect()
}

/// A lock file created with `create_new`, holding our pid; removed on drop. A lock whose
/// pid is gone is stale and taken over.
pub(super) struct LockFile(PathBuf);

impl LockFile {
    pub(super) fn acquire(path: PathBuf) -> LockFile {
        let deadline = Instant::now() + SHARED_LOCK_DEADLINE;
        loop {
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(_) => {
                    fs::write(&path, std::process::id().to_string()).unwrap();
                    return LockFile(path);
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    let holder = fs::read_to_string(&path).unwrap_or_default();
                    let alive = holder.trim().parse::<u32>().ok().is_some_and(|pid| {
                        pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists()
                    });
                    // An empty file is a holder between create_new and write: wait.
                    if !alive && !holder.trim().is_empty() {
                        let _ = fs::remove_file(&path);
                        continue;
                    }
                }
                Err(e) => panic!("cannot create {}: {e}", path.display()),
            }
            assert!(
                Instant::now() < deadline,
                "{} still held after {SHARED_LOCK_DEADLINE:?}",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for LockFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// One test binary's turn to run a dedicated dashboard; the next waits until it is dropped.
#[derive(Debug)]
pub(super) struct Turn;

static TURN_TAKEN: Mutex<bool> = Mutex::new(false);
static TURN_FREED: Condvar = Condvar::new();

impl Turn {
    pub(super) fn take() -> Turn {
        let mut taken = TURN_TAKEN.lock().unwrap_or_else(|e| e.into_inner());
        while *taken {
            taken = TURN_FREED.wait(taken).unwrap_or_else(|e| e.into_inner());
        }
        *taken = true;
        Turn
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        *TURN_TAKEN.lock().unwrap_or_else(|e| e.into_inner()) = false;
        TURN_FREED.notify_one();
    }
}
