//! What the integration tests (`tests/it/`) and the state stores' unit tests share: the
//! builder for a gateway run (`gateway`, `users`), the real `clustergate` process it starts
//! (`process`), the requests tests send and the `Reply` they get (`requests`), JWT decoding
//! and forging (`jwt`), the dashboard's response shapes as assertions (`expect`), the real
//! Ceph dashboards forwarding tests run against (`dashboard`, started through `ceph_dev`;
//! their accounts, custom roles and audit in `dashboard_accounts`), the requests and
//! metrics of forwarding (`forwarding`), a real Prometheus with the metric names PromQL
//! reads (`prometheus_server`, `promql`), the scope probe comparing the gateway's 403s with
//! the dashboard's (`scope_probe`), real Redis servers and Sentinel deployments
//! (`redis_server`, `redis`), HAProxy, Chromium and an OpenID provider, and the ports they
//! listen on (`ports`).
//!
//! A crate of its own so it is compiled once for every test target, and so the unit tests
//! of `src/` use the same Redis server and ports as the integration tests. It does not
//! depend on the gateway's library: it drives the binary, as a client would.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::missing_panics_doc)]

mod browser;
mod ceph_dev;
mod dashboard;
mod dashboard_accounts;
mod expect;
mod fault;
mod forwarding;
mod gateway;
mod haproxy;
mod jwt;
mod oidc;
mod ports;
mod process;
mod prometheus_server;
mod promql;
mod redis;
pub mod redis_server;
mod requests;
mod scope_probe;
mod source_contract;
mod users;

pub use browser::*;
pub use dashboard::*;
pub use dashboard_accounts::{mirrored_role_name, role_account_name, ROLE_ACCOUNTS_KEY};
pub use expect::*;
pub use fault::*;
pub use forwarding::*;
pub use gateway::*;
pub use haproxy::*;
pub use jwt::*;
pub use oidc::*;
pub use ports::{free_port, free_ports};
pub use process::*;
pub use prometheus_server::*;
pub use promql::*;
pub use redis::*;
pub use redis_server::{RedisServer, SentinelServer};
pub use requests::*;
pub use scope_probe::*;
pub use source_contract::*;
pub use users::*;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const V1: &str = "application/vnd.ceph.api.v1.0+json";
/// The repository's root: the shipped files tests read (`conf/`, `deploy/`, `tests/ui`).
pub const REPO_ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// A file of the repository, as a literal (for `include_str!`).
#[macro_export]
macro_rules! repo_path {
    ($relative:literal) => {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../", $relative)
    };
}

/// The `clustergate` binary of this build: cargo puts a package's binaries beside the
/// `deps/` folder that holds its test executables. `CLUSTERGATE_BIN` names another.
pub fn bin() -> std::path::PathBuf {
    if let Some(path) = std::env::var_os("CLUSTERGATE_BIN") {
        return path.into();
    }
    let test_executable = std::env::current_exe().expect("the test executable's path");
    let profile_dir = test_executable
        .parent()
        .and_then(Path::parent)
        .expect("the test executable sits in <target>/<profile>/deps/");
    profile_dir.join("clustergate")
}
pub const ADMIN: &str = "admin";
pub const ADMIN_PW: &str = "Adm1n-Ceph-Pass";
pub const VIEWER: &str = "viewer";
pub const VIEWER_PW: &str = "V1ewer-Ceph-Pass";
pub const POOLMGR: &str = "poolmgr";
pub const POOLMGR_PW: &str = "P00lmgr-Ceph-Pass";
/// The secret `Gateway::known_secret` writes; tests forge tokens with it.
pub const TEST_SECRET: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Polls `done` every `every` until it holds; fails after `deadline`. For what a test
/// waits on (a token's expiry, a lock's end): a fixed sleep is either too short on a busy
/// machine or longer than needed.
pub async fn eventually<F, Fut>(what: &str, every: Duration, deadline: Duration, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !done().await {
        assert!(
            started.elapsed() < deadline,
            "{what}: not after {deadline:?}"
        );
        tokio::time::sleep(every).await;
    }
}

/// Returns once the wall clock's second has changed: the dashboard compares token times in
/// whole seconds (a password change or a revocation refuses the tokens of earlier seconds).
pub async fn next_wall_clock_second() {
    let second = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    };
    let now = second();
    eventually(
        "the next second",
        Duration::from_millis(10),
        Duration::from_secs(2),
        || async { second() > now },
    )
    .await;
}

/// Run the binary with arguments and optional stdin.
pub fn cli(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).unwrap();
        }
    }
    child.wait_with_output().unwrap()
}
