//! The gateway builder: config, users file and extra files for one run, written into a temp dir.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::process::READY_DEADLINE;
use super::users::UsersFile;
use super::{bin, cli, free_ports, Dashboard, RunningGateway, User, TEST_SECRET};

/// What `Gateway::upstream` writes: the `[upstream]` and `[access]` sections.
#[derive(Clone, Debug)]
pub struct UpstreamSpec {
    pub servers: Vec<String>,
    /// `upstream.username`.
    pub username: String,
    pub password: String,
    /// Wait at start until `/readyz` says an active backend is known.
    pub wait_active: bool,
}

/// Every forwarding test gateway is one deployment for the dashboard accounts it manages
/// (`upstream.identity = "roles"`, the default): they derive the same names and passwords,
/// so the gateways of the tests that run at once against a shared dashboard use its
/// accounts in turn rather than set each other's passwords.
pub const SHARED_ACCOUNTS_KEY: &str = "clustergate-tests-shared-accounts-key-0123456789";
const SHARED_ACCOUNTS_KEY_FILE: &str = "accounts-shared.key";

/// Builder for a gateway run: `Gateway::new().user(User::admin()).tls(true).start()`.
#[derive(Clone, Debug)]
pub struct Gateway {
    pub(super) users: Vec<User>,
    pub(super) users_file: UsersFile,
    pub(super) tls: bool,
    pub(super) lockout: (u32, u64),
    pub(super) ttl: u64,
    pub(super) issuer: String,
    pub(super) secret: Option<String>,
    pub(super) extra: Vec<(String, String)>,
    pub(super) files: Vec<(String, String)>,
    pub(super) upstream: Option<UpstreamSpec>,
    /// `server.drain_seconds`: 0 unless a test drains (SIGTERM then stops at once).
    pub(super) drain_seconds: f64,
    /// Environment variables of the process.
    pub(super) env: Vec<(String, String)>,
    /// Environment variables the process does not inherit from the test's.
    pub(super) env_removed: Vec<String>,
    /// Ports chosen before the start (`fixed_ports`), instead of port 0.
    pub(super) fixed_ports: bool,
}

impl Default for Gateway {
    fn default() -> Self {
        Self::new()
    }
}

impl Gateway {
    pub fn new() -> Self {
        Self {
            users: Vec::new(),
            users_file: UsersFile::Users,
            tls: false,
            lockout: (10, 300),
            ttl: 28800,
            issuer: "clustergate".into(),
            secret: None,
            // The answer cache changes what reaches the dashboard (repeated GETs of polled
            // operations within a second do not): off, but in the tests about it
            // (`answer_cache`).
            extra: vec![("answer_cache".into(), "enabled = false".into())],
            files: Vec::new(),
            upstream: None,
            drain_seconds: 0.0,
            env: Vec::new(),
            env_removed: Vec::new(),
            fixed_ports: false,
        }
    }
    /// Admin (administrator) and viewer (read-only), the dashboard transcripts' two users.
    pub fn with_admin_and_viewer() -> Self {
        Self::new().user(User::admin()).user(User::viewer())
    }
    pub fn user(mut self, user: User) -> Self {
        self.users.push(user);
        self
    }
    pub fn users(mut self, users: impl IntoIterator<Item = User>) -> Self {
        self.users.extend(users);
        self
    }
    /// Replace the users (for restarts with a changed users file).
    pub fn set_users(&mut self, users: Vec<User>) {
        self.users = users;
    }
    pub fn no_users_file(mut self) -> Self {
        self.users_file = UsersFile::Absent;
        self
    }
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
    /// `key` unset in the process even when the test runs with it (`RUST_LOG`).
    pub fn env_removed(mut self, key: &str) -> Self {
        self.env_removed.push(key.into());
        self
    }

    pub fn without_user(mut self, name: &str) -> Self {
        self.users.retain(|u| u.name != name);
        self
    }

    /// Replaces the extra lines of `section` that set `key` with `line`.
    pub fn set_toml(mut self, section: &str, key: &str, line: &str) -> Self {
        self.extra
            .retain(|(s, l)| !(s == section && l.trim_start().starts_with(key)));
        self.extra_toml(section, line)
    }

    /// Writes the users file from the users again (after `raw_users_file`).
    pub fn listed_users(mut self) -> Self {
        self.users_file = UsersFile::Users;
        self
    }

    pub fn raw_users_file(mut self, text: &str) -> Self {
        self.users_file = UsersFile::Raw(text.into());
        self
    }
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }
    pub fn lockout(mut self, attempts: u32, seconds: u64) -> Self {
        self.lockout = (attempts, seconds);
        self
    }
    pub fn token_ttl(mut self, seconds: u64) -> Self {
        self.ttl = seconds;
        self
    }
    pub fn issuer(mut self, issuer: &str) -> Self {
        self.issuer = issuer.into();
        self
    }
    /// Use `TEST_SECRET` as `auth.secret_file` (a relative path), so tests can forge tokens.
    pub fn known_secret(mut self) -> Self {
        self.secret = Some(TEST_SECRET.into());
        self
    }
    /// Listen on ports chosen before the start (`free_ports`) instead of port 0, for a test
    /// that must know them beforehand or starts the gateway again on them
    /// (`start_again_in_place`). A config line with `{PORT}` implies it.
    pub fn fixed_ports(mut self) -> Self {
        self.fixed_ports = true;
        self
    }

    /// Whether the ports are chosen before the start: asked for, or named in the config.
    pub(super) fn needs_fixed_ports(&self) -> bool {
        self.fixed_ports || self.extra.iter().any(|(_, line)| line.contains("{PORT}"))
    }

    /// The ports to write in the config of a run: port 0 for both listeners (the gateway
    /// says which it got, in `state_dir/listening`), or free ones chosen now.
    pub(super) fn ports_for_a_run(&self) -> [u16; 2] {
        if self.needs_fixed_ports() {
            free_ports()
        } else {
            [0, 0]
        }
    }

    /// Drain this long on SIGTERM before stopping (`server.drain_seconds`).
    pub fn drain_seconds(mut self, seconds: f64) -> Self {
        self.drain_seconds = seconds;
        self
    }
    /// A raw TOML line added to `[section]`.
    pub fn extra_toml(mut self, section: &str, line: &str) -> Self {
        assert!(
            Self::SECTIONS.contains(&section),
            "extra_toml: config_text writes no [{section}] section"
        );
        self.extra.push((section.into(), line.into()));
        self
    }

    /// Admin (administrator), viewer (read-only) and poolmgr (pool-manager).
    pub fn with_dashboard_users() -> Self {
        Self::with_admin_and_viewer().user(User::poolmgr())
    }

    /// Forward to `dashboard`: every one of its manager URLs, the service account
    /// `clustergate` with a copy of its password, health checks every 500 ms, and the
    /// shipped scope table. `start` then waits until `/readyz` is 200.
    pub fn upstream(mut self, dashboard: &Dashboard) -> Self {
        self.upstream = Some(UpstreamSpec {
            servers: dashboard.urls(),
            username: "clustergate".into(),
            password: dashboard.service_password(),
            wait_active: true,
        });
        self
    }

    /// Forward to `servers` instead of the dashboard's own managers (e.g. through a relay),
    /// with the dashboard's service account.
    pub fn upstream_via(mut self, dashboard: &Dashboard, servers: Vec<String>) -> Self {
        self = self.upstream(dashboard);
        if let Some(upstream) = &mut self.upstream {
            upstream.servers = servers;
        }
        self
    }

    /// The service account `username` with `password` (written to `upstream.pass`).
    pub fn service_account(mut self, username: &str, password: &str) -> Self {
        if let Some(upstream) = &mut self.upstream {
            upstream.username = username.into();
            upstream.password = password.into();
        }
        self
    }

    /// Start without waiting for an active backend (e.g. none is running).
    pub fn no_wait_active(mut self) -> Self {
        if let Some(upstream) = &mut self.upstream {
            upstream.wait_active = false;
        }
        self
    }

    pub fn max_body_bytes(self, bytes: usize) -> Self {
        self.extra_toml("upstream", &format!("max_body_bytes = {bytes}"))
    }

    /// `auth.max_failed_logins_per_ip_per_minute`.
    pub fn failed_logins_per_minute(self, per_minute: u32) -> Self {
        self.extra_toml(
            "auth",
            &format!("max_failed_logins_per_ip_per_minute = {per_minute}"),
        )
    }

    /// `server.trusted_proxies`.
    pub fn trusted_proxies(self, nets: &[&str]) -> Self {
        self.extra_toml("server", &format!("trusted_proxies = {nets:?}"))
    }

    pub fn public_url(self, url: &str) -> Self {
        self.extra_toml("server", &format!("public_url = {url:?}"))
    }

    /// The answer cache on, with `ttl_ms` for these operations instead of the defaults.
    pub fn answer_cache(self, ttl_ms: &[(&str, u64)]) -> Self {
        let table: Vec<String> = ttl_ms
            .iter()
            .map(|(op, ms)| format!("{op:?} = {ms}"))
            .collect();
        self.set_toml("answer_cache", "enabled", "enabled = true")
            .extra_toml(
                "answer_cache",
                &format!("ttl_ms = {{ {} }}", table.join(", ")),
            )
    }

    /// Another file written beside the config (relative name), e.g. an operator's certificate.
    pub fn file(mut self, name: &str, contents: &str) -> Self {
        self.files.push((name.into(), contents.into()));
        self
    }

    fn section_extras(&self, section: &str) -> String {
        let lines: Vec<&str> = self
            .extra
            .iter()
            .filter(|(s, _)| s == section)
            .map(|(_, l)| l.as_str())
            .collect();
        lines.join("\n")
    }

    /// The config text for the given ports (0: the kernel chooses).
    pub fn config_text(&self, port: u16, metrics_port: u16) -> String {
        let secret = if self.secret.is_some() {
            "secret_file = \"jwt.secret\""
        } else {
            ""
        };
        let (attempts, seconds) = self.lockout;
        format!(
            "[server]\nlisten = \"127.0.0.1:{port}\"\ntls = {tls}\nstate_dir = \"state\"\ndrain_seconds = {drain:?}\n{server}\n\n\
             [metrics]\nlisten = \"127.0.0.1:{metrics_port}\"\n{metrics}\n\n\
             [api]\nvendor = \"ceph\"\n{api}\n\n\
             [auth]\nusers_file = \"users.toml\"\ntoken_ttl_seconds = {ttl}\n\
             lockout_attempts = {attempts}\nlockout_seconds = {seconds}\nissuer = {issuer:?}\n{secret}\n{auth}\n",
            tls = self.tls,
            drain = self.drain_seconds,
            ttl = self.ttl,
            issuer = self.issuer,
            server = self.section_extras("server"),
            metrics = self.section_extras("metrics"),
            api = self.section_extras("api"),
            auth = self.section_extras("auth"),
        ) + &self.upstream_text()
            + &self.optional_section("state")
            + &self.optional_section("state.redis")
            + &self.optional_section("log")
            + &self.optional_section("oidc")
            + &self.optional_section("oidc.role_map")
            + &self.optional_section("answer_cache")
            + &self.optional_section("api_keys")
    }

    /// Every section `config_text` writes: an extra line for another would be dropped.
    const SECTIONS: [&str; 13] = [
        "server",
        "metrics",
        "api",
        "auth",
        "upstream",
        "access",
        "state",
        "state.redis",
        "log",
        "oidc",
        "oidc.role_map",
        "answer_cache",
        "api_keys",
    ];

    /// `[name]` with its extra lines, when a test added any.
    fn optional_section(&self, name: &str) -> String {
        let lines = self.section_extras(name);
        if lines.is_empty() {
            return String::new();
        }
        format!("\n[{name}]\n{lines}\n")
    }

    /// The `[upstream]` and `[access]` sections, when forwarding is configured.
    fn upstream_text(&self) -> String {
        let Some(upstream) = &self.upstream else {
            return String::new();
        };
        let servers: Vec<String> = upstream.servers.iter().map(|s| format!("{s:?}")).collect();
        let accounts_key = match self.own_accounts_key() {
            true => String::new(),
            false => format!("accounts_key_file = {SHARED_ACCOUNTS_KEY_FILE:?}"),
        };
        // The binary's built-in scope table: a configuration file alone starts the gateway.
        format!(
            "\n[upstream]\nservers = [{servers}]\nusername = {username:?}\n\
             password_file = \"upstream.pass\"\nhealth_interval_ms = 500\n{accounts_key}\n{extra}\n\n\
             [access]\n{access}\n",
            servers = servers.join(", "),
            username = upstream.username,
            extra = self.section_extras("upstream"),
            access = self.section_extras("access"),
        )
    }

    /// Whether the test gave the gateway a key for its dashboard accounts of its own.
    fn own_accounts_key(&self) -> bool {
        self.extra
            .iter()
            .any(|(section, line)| section == "upstream" && line.starts_with("accounts_key_file"))
    }

    /// Write `clustergate.toml`, the users file and the secret into `dir`; returns the config path.
    pub fn write_files(&self, dir: &Path, port: u16, metrics_port: u16) -> PathBuf {
        let config = dir.join("clustergate.toml");
        // `{PORT}` in a line stands for the listening port (`server.public_url`).
        let text = self
            .config_text(port, metrics_port)
            .replace("{PORT}", &port.to_string());
        fs::write(&config, text).unwrap();
        let users = dir.join("users.toml");
        match &self.users_file {
            UsersFile::Users => {
                let text: String = self.users.iter().map(User::to_toml).collect();
                fs::write(&users, text).unwrap();
            }
            UsersFile::Raw(text) => fs::write(&users, text).unwrap(),
            UsersFile::Absent => {}
        }
        if let Some(secret) = &self.secret {
            write_owner_only(&dir.join("jwt.secret"), secret);
        }
        if let Some(upstream) = &self.upstream {
            write_owner_only(&dir.join("upstream.pass"), &upstream.password);
            if !self.own_accounts_key() {
                write_owner_only(&dir.join(SHARED_ACCOUNTS_KEY_FILE), SHARED_ACCOUNTS_KEY);
            }
        }
        // Keys among them: the gateway refuses secret files others may read.
        for (name, contents) in &self.files {
            let path = dir.join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            write_owner_only(&path, contents);
        }
        config
    }

    /// Write the files into a fresh temp dir and run `clustergate check-config` on them.
    pub fn check_config(&self) -> (tempfile::TempDir, Output) {
        let dir = tempfile::tempdir().unwrap();
        let [port, metrics_port] = self.ports_for_a_run();
        let config = self.write_files(dir.path(), port, metrics_port);
        let out = cli(
            &["check-config", "--config", config.to_str().unwrap()],
            None,
        );
        (dir, out)
    }

    /// Write the files and `clustergate run` them, expecting the process to exit by itself
    /// (a refused start-up) within the start-up deadline; killed and failed otherwise.
    pub fn run_expecting_exit(&self) -> (tempfile::TempDir, Output) {
        let dir = tempfile::tempdir().unwrap();
        let [port, metrics_port] = self.ports_for_a_run();
        let config = self.write_files(dir.path(), port, metrics_port);
        let mut child = Command::new(bin())
            .args(["run", "--config"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + READY_DEADLINE;
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!(
                    "clustergate kept running\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        (dir, child.wait_with_output().unwrap())
    }

    /// Start the gateway and wait until `/healthz` answers and the main port accepts
    /// connections; on port 0 unless `fixed_ports`.
    pub fn start(self) -> RunningGateway {
        let dir = tempfile::tempdir().unwrap();
        // A working directory apart from the config's folder: relative paths must resolve
        // against the config file, not the cwd.
        fs::create_dir_all(dir.path().join("cwd")).unwrap();
        let mut gw = RunningGateway {
            dir,
            spec: self,
            child: None,
            successor: None,
            addr: "127.0.0.1:1".parse().unwrap(),
            metrics_addr: "127.0.0.1:1".parse().unwrap(),
            configured_ports: [0, 0],
            client: reqwest::Client::new(),
            runs: 0,
        };
        gw.launch();
        gw
    }
}

/// Writes `contents` to `path` with mode 0600, as a secret file must be.
pub fn write_owner_only(path: &Path, contents: &str) {
    use std::os::unix::fs::PermissionsExt;
    fs::write(path, contents).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
}

/// A CA and a leaf for 127.0.0.1 made with rcgen: (ca pem, leaf chain pem, leaf key pem).
pub fn operator_certificate() -> (String, String, String) {
    operator_certificate_until(rcgen::CertificateParams::default().not_after)
}

/// `operator_certificate` with a leaf that expires at `not_after`.
pub fn operator_certificate_until(not_after: time::OffsetDateTime) -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let mut leaf_params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    leaf_params.not_after = not_after;
    let leaf = leaf_params
        .signed_by(&leaf_key, &Issuer::new(ca_params, ca_key))
        .unwrap();
    (ca.pem(), leaf.pem(), leaf_key.serialize_pem())
}
