//! The real Ceph dashboards forwarding tests run against, started with the project's own
//! harness (`deploy/ceph-dev`): one shared instance for the whole run, or a dedicated one
//! per test (standby manager, short JWT lifetime, standby behaviour), stopped and purged
//! when dropped.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use reqwest::Method;
use serde_json::{json, Value};

use super::ceph_dev::{harness_command, output_text, parse_env, repo, script, LockFile, Turn};
use super::{client_builder, raw_exchange, raw_request_bytes, Reply, V1};

/// `ceph` CLI calls are bounded by the `timeout` command.
const CEPH_CLI_TIMEOUT: &str = "90";

/// Settings of a dedicated dashboard (the `CG_CEPH_*` variables of start-dashboard.sh).
#[derive(Clone, Debug, Default)]
pub struct DashboardOptions {
    /// The Ceph release (`--release`); `None`: 16.2.
    pub release: Option<&'static str>,
    /// A standby manager "y" beside the active "x".
    pub standby: bool,
    /// The dashboard's JWT lifetime in seconds (default 28800).
    pub jwt_ttl: Option<u32>,
    /// `redirect` (303, the default) or `error`.
    pub standby_behaviour: Option<&'static str>,
    /// The standby's status in `error` mode (default 500).
    pub standby_status: Option<u16>,
    /// A cluster that holds data (`--data`): an OSD, a radosgw, a pool, an image, an RGW user.
    pub data: bool,
}

/// A running dashboard instance, as its `dashboard.env` describes it.
#[derive(Debug)]
pub struct Dashboard {
    pub dir: PathBuf,
    env: BTreeMap<String, String>,
    /// Dedicated instances are stopped and purged on drop; the shared one is left running.
    owned: bool,
    /// Dedicated instances of one test binary run one at a time (see `dedicated`).
    _turn: Option<Turn>,
}

impl Dashboard {
    /// The dashboard shared by the whole run: the one `CG_TEST_DASHBOARD_ENV` names (tests/run.sh
    /// starts it), or else one started (or reused) in `target/test-ceph` and left running.
    pub fn shared() -> &'static Dashboard {
        static SHARED: OnceLock<Dashboard> = OnceLock::new();
        SHARED.get_or_init(|| {
            if let Some(env_file) = std::env::var_os("CG_TEST_DASHBOARD_ENV") {
                return Dashboard::from_env_file(Path::new(&env_file), false);
            }
            let dir = repo().join("target/test-ceph");
            let _lock = LockFile::acquire(repo().join("target/test-ceph.lock"));
            // Idempotent: a live, healthy instance in `dir` is reused.
            Dashboard::start(&dir, &DashboardOptions::default(), false)
        })
    }

    /// The dashboard of Ceph `release` shared by the whole run: 16.2's is `shared()`; for
    /// 18.2 and 20.2 the one `CG_TEST_DASHBOARD_ENV_18_2` or `_20_2` names (tests/run.sh
    /// starts them), or else one started (or reused) in `target/test-ceph-<release>`.
    pub fn shared_release(release: &'static str) -> &'static Dashboard {
        static SHARED: Mutex<BTreeMap<&str, &'static Dashboard>> = Mutex::new(BTreeMap::new());
        if release == "16.2" {
            return Dashboard::shared();
        }
        let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        shared.entry(release).or_insert_with(|| {
            let var = format!("CG_TEST_DASHBOARD_ENV_{}", release.replace('.', "_"));
            let dashboard = match std::env::var_os(&var) {
                Some(env_file) => Dashboard::from_env_file(Path::new(&env_file), false),
                None => {
                    let dir = repo().join(format!("target/test-ceph-{release}"));
                    let _lock =
                        LockFile::acquire(repo().join(format!("target/test-ceph-{release}.lock")));
                    let options = DashboardOptions {
                        release: Some(release),
                        ..DashboardOptions::default()
                    };
                    Dashboard::start(&dir, &options, false)
                }
            };
            assert_eq!(
                dashboard.release(),
                release,
                "{var} names another release's dashboard"
            );
            Box::leak(Box::new(dashboard))
        })
    }

    /// A dashboard of its own in a fresh temp dir, stopped and purged on drop. Tests of one
    /// binary that need one take turns (whatever `--test-threads` says): on two cores, two
    /// managers starting while another fails over would turn timing into failures.
    pub fn dedicated(options: DashboardOptions) -> Dashboard {
        let turn = Turn::take();
        let mut dashboard = Dashboard::start_dedicated(&options);
        dashboard._turn = Some(turn);
        dashboard
    }

    fn start_dedicated(options: &DashboardOptions) -> Dashboard {
        let dir = tempfile::Builder::new()
            .prefix("cg-test-ceph.")
            .tempdir_in(std::env::temp_dir())
            .unwrap()
            .keep();
        Dashboard::start(&dir, options, true)
    }

    fn start(dir: &Path, options: &DashboardOptions, owned: bool) -> Dashboard {
        let mut cmd = harness_command(&script("start-dashboard.sh"));
        cmd.arg(dir);
        if let Some(release) = options.release {
            cmd.args(["--release", release]);
        }
        if options.standby {
            cmd.env("CG_CEPH_STANDBY", "1");
        }
        if let Some(ttl) = options.jwt_ttl {
            cmd.env("CG_CEPH_JWT_TTL", ttl.to_string());
        }
        if let Some(behaviour) = options.standby_behaviour {
            cmd.env("CG_CEPH_STANDBY_BEHAVIOUR", behaviour);
        }
        if let Some(status) = options.standby_status {
            cmd.env("CG_CEPH_STANDBY_STATUS", status.to_string());
        }
        if options.data {
            cmd.env("CG_CEPH_DATA", "1");
        }
        let started = Instant::now();
        let out = cmd
            .output()
            .expect("run deploy/ceph-dev/start-dashboard.sh");
        if !out.status.success() {
            if owned {
                let _ = harness_command(&script("stop-dashboard.sh"))
                    .arg(dir)
                    .arg("--purge")
                    .output();
            }
            panic!(
                "cannot start the Ceph dashboard in {}: {}",
                dir.display(),
                output_text(&out)
            );
        }
        eprintln!(
            "dashboard in {} ready after {:.1?}",
            dir.display(),
            started.elapsed()
        );
        Dashboard::from_env_file(&dir.join("dashboard.env"), owned)
    }

    fn from_env_file(path: &Path, owned: bool) -> Dashboard {
        let text = fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read the dashboard env {}: {e}", path.display()));
        let env = parse_env(&text);
        let dir = PathBuf::from(
            env.get("CG_CEPH_DIR")
                .expect("CG_CEPH_DIR in dashboard.env"),
        );
        Dashboard {
            dir,
            env,
            owned,
            _turn: None,
        }
    }

    /// A dashboard of `release` whose cluster holds data: the shared one when it was started
    /// with data (tests/run.sh does), else one of its own, stopped when dropped.
    pub fn with_data(release: &'static str) -> WithData {
        let shared = Dashboard::shared_release(release);
        if shared.has_data() {
            return WithData::Shared(shared);
        }
        WithData::Own(Dashboard::dedicated(DashboardOptions {
            release: Some(release),
            data: true,
            ..DashboardOptions::default()
        }))
    }

    /// Whether its cluster holds data (`start-dashboard.sh --data`).
    pub fn has_data(&self) -> bool {
        self.env.get("CG_CEPH_DATA").is_some_and(|v| v == "1")
    }

    /// A key of dashboard.env; panics when it is missing.
    /// Whether its cluster holds data (`start-dashboard.sh --data`).
    pub fn holds_data(&self) -> bool {
        self.env.get("CG_CEPH_DATA").is_some_and(|v| v == "1")
    }

    pub fn get(&self, key: &str) -> &str {
        self.env
            .get(key)
            .unwrap_or_else(|| panic!("{key} missing from {}/dashboard.env", self.dir.display()))
    }

    /// The Ceph release it runs (`16.2`, `18.2` or `20.2`).
    pub fn release(&self) -> &str {
        self.env
            .get("CG_CEPH_RELEASE")
            .map_or("16.2", String::as_str)
    }

    /// The first manager's dashboard (`mgr.x`, active at start).
    pub fn url(&self) -> &str {
        self.get("CG_DASH_URL")
    }

    /// Every manager's dashboard, active and standby.
    pub fn urls(&self) -> Vec<String> {
        self.get("CG_DASH_URLS")
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }

    /// `host:port` of every manager's dashboard, for "never names a backend" checks.
    pub fn host_ports(&self) -> Vec<String> {
        self.urls()
            .iter()
            .map(|u| {
                u.split_once("://")
                    .map_or(u.as_str(), |(_, h)| h)
                    .to_string()
            })
            .collect()
    }

    pub fn service_password(&self) -> String {
        fs::read_to_string(self.get("CG_SERVICE_PASSWORD_FILE")).unwrap()
    }

    /// The dashboard's password of `admin`, `viewer` or `poolmgr`.
    pub fn password(&self, user: &str) -> &str {
        self.get(&format!("CG_{}_PASSWORD", user.to_uppercase()))
    }

    /// A request straight to the first manager's dashboard (`accept` as given).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        accept: &str,
        body: Option<&Value>,
    ) -> Reply {
        self.try_send(method, path, token, accept, body)
            .await
            .expect("request to the dashboard")
    }

    /// `send`, the transport's error returned: e.g. the dashboard closed the connection
    /// before its answer was complete.
    pub async fn try_send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        accept: &str,
        body: Option<&Value>,
    ) -> reqwest::Result<Reply> {
        let client = client_builder().build().unwrap();
        let mut req = client
            .request(method, format!("{}{path}", self.url()))
            .header("Accept", accept);
        if let Some(token) = token {
            req = req.header("Authorization", format!("Bearer {token}"));
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        Ok(Reply::from_reqwest(req.send().await?).await)
    }

    /// A raw HTTP/1.1 request to the first manager's dashboard, target and method as given.
    pub fn raw_request(
        &self,
        method: &str,
        target: &str,
        token: Option<&str>,
        body: &[u8],
    ) -> Reply {
        let host = self.host_ports().remove(0);
        let addr = host
            .parse()
            .expect("the dashboard listens on an IP address");
        let headers = [("Content-Type", "application/json")];
        let request = raw_request_bytes(method, target, &host, token, &headers, body);
        raw_exchange(addr, &request).unwrap_or_else(|e| panic!("raw request to the dashboard: {e}"))
    }

    /// Log in on the dashboard itself as one of its users; panics unless it answers 201.
    pub async fn login(&self, user: &str) -> String {
        self.login_as(user, self.password(user)).await
    }

    /// Log in on the dashboard itself as `user` with `password`; panics unless it answers
    /// 201.
    pub async fn login_as(&self, user: &str, password: &str) -> String {
        let body = json!({"username": user, "password": password});
        let r = self
            .send(Method::POST, "/api/auth", None, V1, Some(&body))
            .await;
        assert_eq!(r.status, 201, "dashboard login {user}: {}", r.text());
        r.json()["token"].as_str().unwrap().to_string()
    }

    /// `ceph -c DIR/ceph.conf ARGS` (bounded by `timeout`), that release's CLI.
    pub fn ceph(&self, args: &[&str]) -> Output {
        let mut cmd = self.cli("ceph");
        cmd.args(["--connect-timeout", "15"]).args(args);
        cmd.output().expect("run ceph")
    }

    /// `radosgw-admin -c DIR/ceph.conf ARGS` (bounded by `timeout`), which must succeed (a
    /// cluster with data: `has_data`).
    pub fn radosgw_admin(&self, args: &[&str]) {
        let out = self.cli("radosgw-admin").args(args).output();
        let out = out.expect("run radosgw-admin");
        assert!(
            out.status.success(),
            "radosgw-admin {args:?}: {}",
            output_text(&out)
        );
    }

    /// `program -c DIR/ceph.conf`, that release's, bounded by `timeout`.
    fn cli(&self, program: &str) -> Command {
        let mut cmd = harness_command(Path::new("timeout"));
        cmd.arg(CEPH_CLI_TIMEOUT);
        self.in_release_root(&mut cmd);
        cmd.arg(program).arg("-c").arg(self.dir.join("ceph.conf"));
        cmd
    }

    /// For 18.2 and 20.2, runs the command that follows inside the release's root, with the
    /// instance's directory mounted (`release-root.sh run`).
    fn in_release_root(&self, cmd: &mut Command) {
        if self.release() != "16.2" {
            cmd.arg(script("release-root.sh"))
                .args(["run", self.release(), "--bind"])
                .arg(&self.dir)
                .arg("--");
        }
    }

    /// `ceph ARGS`, which must succeed; returns its stdout.
    pub fn ceph_ok(&self, args: &[&str]) -> String {
        let out = self.ceph(args);
        assert!(out.status.success(), "ceph {args:?}: {}", output_text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `deploy/ceph-dev/mgr.sh DIR ARGS` (fail, stop, start, status, ...), which must succeed;
    /// returns its stdout.
    pub fn mgr(&self, args: &[&str]) -> String {
        Dashboard::mgr_in(&self.dir, args)
    }

    /// `mgr.sh DIR ARGS` for the instance in `dir` (e.g. from a blocking task).
    pub fn mgr_in(dir: &Path, args: &[&str]) -> String {
        let out = harness_command(&script("mgr.sh"))
            .arg(dir)
            .args(args)
            .output()
            .expect("run mgr.sh");
        assert!(
            out.status.success(),
            "mgr.sh {args:?}: {}",
            output_text(&out)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Set the service account's password again (the same one): the dashboard then refuses
    /// every token issued in an earlier second.
    pub fn revoke_service_tokens(&self) {
        self.set_password(self.get("CG_SERVICE_USER"), &self.service_password());
    }

    /// The last lines of every daemon log, for failure reports.
    pub fn log_tails(&self) -> String {
        let mut out = String::new();
        for name in ["mgr.x", "mgr.y", "mon.a"] {
            let path = self.dir.join("log").join(format!("{name}.log"));
            if let Ok(text) = fs::read_to_string(&path) {
                let lines: Vec<&str> = text.lines().collect();
                let tail = &lines[lines.len().saturating_sub(20)..];
                out.push_str(&format!(
                    "--- {} ---\n{}\n",
                    path.display(),
                    tail.join("\n")
                ));
            }
        }
        out
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        if std::thread::panicking() {
            eprintln!(
                "dashboard logs ({}):\n{}",
                self.dir.display(),
                self.log_tails()
            );
        }
        match harness_command(&script("stop-dashboard.sh"))
            .arg(&self.dir)
            .arg("--purge")
            .output()
        {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "stop-dashboard.sh {}: {}",
                self.dir.display(),
                output_text(&out)
            ),
            Err(e) => eprintln!("stop-dashboard.sh {}: {e}", self.dir.display()),
        }
    }
}

/// A dashboard whose cluster holds data (`Dashboard::with_data`).
pub enum WithData {
    Shared(&'static Dashboard),
    Own(Dashboard),
}

impl std::ops::Deref for WithData {
    type Target = Dashboard;

    fn deref(&self) -> &Dashboard {
        match self {
            WithData::Shared(dashboard) => dashboard,
            WithData::Own(dashboard) => dashboard,
        }
    }
}
