//! The running gateway process: port 0 and the addresses read back from
//! `state_dir/listening` (or free ports chosen before), a readiness deadline, logs in files,
//! SIGTERM and restart in the same directory, and a kill by pid on drop.

use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{bin, client_builder, free_ports, metric_sum, try_raw_http, Gateway};

pub(super) const READY_DEADLINE: Duration = Duration::from_secs(30);
const STOP_DEADLINE: Duration = Duration::from_secs(10);

/// A running gateway. Dropping it kills the process (by pid) and removes the temp dir.
pub struct RunningGateway {
    pub(super) dir: tempfile::TempDir,
    pub spec: Gateway,
    pub(super) child: Option<Child>,
    /// A successor this process started itself (SIGUSR2), killed by pid on drop.
    pub(super) successor: Option<u32>,
    pub addr: SocketAddr,
    pub metrics_addr: SocketAddr,
    /// The ports the config names: `[0, 0]`, or the fixed ones (`Gateway::fixed_ports`).
    pub(super) configured_ports: [u16; 2],
    pub(super) client: reqwest::Client,
    pub(super) runs: u32,
}

impl RunningGateway {
    /// Start: on port 0, with the addresses read back from `state_dir/listening`, or, with
    /// fixed ports, on fresh free ones (a port taken by someone else between `free_ports` and
    /// the gateway's bind, "address in use", is retried on new ports, twice at most).
    pub(super) fn launch(&mut self) {
        if !self.spec.needs_fixed_ports() {
            self.configured_ports = [0, 0];
            // The file of an earlier run in this directory names ports no longer held.
            let _ = fs::remove_file(self.listening_file());
            let started = self.spawn_and_wait();
            return self.started(started);
        }
        for attempt in 1..=3 {
            self.configured_ports = free_ports();
            let [port, metrics_port] = self.configured_ports;
            self.addr = SocketAddr::from(([127, 0, 0, 1], port));
            self.metrics_addr = SocketAddr::from(([127, 0, 0, 1], metrics_port));
            match self.spawn_and_wait() {
                Err(why)
                    if attempt < 3 && self.last_run_logs().to_lowercase().contains("in use") =>
                {
                    eprintln!(
                        "clustergate start attempt {attempt} failed ({why}); retrying on new ports"
                    );
                }
                started => return self.started(started),
            }
        }
    }

    /// After a start: the client, and the wait for an active backend; or the panic.
    fn started(&mut self, started: Result<(), String>) {
        if let Err(why) = started {
            panic!("{why}\n{}", self.logs());
        }
        self.client = self.build_client(false);
        if self.spec.upstream.as_ref().is_some_and(|u| u.wait_active) {
            self.wait_readyz(200);
        }
    }

    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let child = self.spawn(&[]);
        self.child = Some(child);
        if self.configured_ports == [0, 0] {
            [self.addr, self.metrics_addr] = self.wait_listening()?;
        }
        self.wait_ready()
    }

    fn listening_file(&self) -> PathBuf {
        self.state_dir().join("listening")
    }

    /// The addresses in `state_dir/listening`, once the gateway has written it.
    fn wait_listening(&mut self) -> Result<[SocketAddr; 2], String> {
        let what = format!("wrote no {}", self.listening_file().display());
        self.poll_start(Duration::from_millis(20), &what, Self::listening)
    }

    /// Polls `ready` every `every` until it gives a value; an error when our child exits
    /// first, or when `READY_DEADLINE` passes (`what`: what had not happened by then).
    fn poll_start<T>(
        &mut self,
        every: Duration,
        what: &str,
        ready: impl Fn(&Self) -> Option<T>,
    ) -> Result<T, String> {
        let deadline = Instant::now() + READY_DEADLINE;
        loop {
            if let Some(value) = ready(self) {
                return Ok(value);
            }
            self.still_running()?;
            if Instant::now() > deadline {
                return Err(format!("clustergate {what} after {READY_DEADLINE:?}"));
            }
            std::thread::sleep(every);
        }
    }

    /// `state_dir/listening` read: the main and the metrics listener's addresses; `None`
    /// while the file is absent (it is replaced whole, never seen half written).
    pub fn listening(&self) -> Option<[SocketAddr; 2]> {
        let text = fs::read_to_string(self.listening_file()).ok()?;
        let addr_of = |key: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(key)?.strip_prefix(' '))
                .unwrap_or_else(|| panic!("no {key} line in the listening file: {text:?}"))
                .parse()
                .unwrap()
        };
        Some([addr_of("server"), addr_of("metrics")])
    }

    /// An error when our child has exited (during start-up).
    fn still_running(&mut self) -> Result<(), String> {
        // A successor the gateway started itself is not our child to wait for.
        if let Some(child) = self.child.as_mut() {
            if let Some(status) = child.try_wait().unwrap() {
                self.child = None;
                return Err(format!("clustergate exited during start-up ({status})"));
            }
        }
        Ok(())
    }

    /// After an upgrade: the successor names, in its listening file, the addresses its
    /// predecessor listened on (with port 0 too).
    fn assert_same_addresses_after(&self, why: &str) {
        assert_eq!(
            self.listening(),
            Some([self.addr, self.metrics_addr]),
            "the successor listens elsewhere after {why}\n{}",
            self.logs()
        );
    }

    /// Writes the files and starts `clustergate run` with `extra` arguments.
    fn spawn(&mut self, extra: &[&str]) -> Child {
        let [port, metrics_port] = self.configured_ports;
        let config = self.spec.write_files(self.dir.path(), port, metrics_port);
        self.runs += 1;
        let stdout =
            fs::File::create(self.dir.path().join(format!("stdout.{}.log", self.runs))).unwrap();
        let stderr =
            fs::File::create(self.dir.path().join(format!("stderr.{}.log", self.runs))).unwrap();
        let mut command = Command::new(bin());
        for key in &self.spec.env_removed {
            command.env_remove(key);
        }
        command
            .args(["run", "--config"])
            .arg(&config)
            .args(extra)
            .envs(self.spec.env.iter().map(|(k, v)| (k, v)))
            .current_dir(self.dir.path().join("cwd"))
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("spawn clustergate")
    }

    /// Changes the spec, writes the files again and sends SIGHUP; returns whether the
    /// reload succeeded (`clustergate_config_reloads_total`), once the gateway counted it.
    pub async fn reload(&mut self, change: impl FnOnce(&mut Gateway)) -> bool {
        let reloads = |text: &str, result: &str| {
            metric_sum(
                text,
                "clustergate_config_reloads_total",
                &[("result", result)],
            )
        };
        let before = self.metrics().await;
        let (ok, failed) = (reloads(&before, "success"), reloads(&before, "failure"));
        change(&mut self.spec);
        let [port, metrics_port] = self.configured_ports;
        self.spec.write_files(self.dir.path(), port, metrics_port);
        self.signal("HUP");
        let after = self
            .metrics_until(|text| reloads(text, "success") + reloads(text, "failure") > ok + failed)
            .await;
        reloads(&after, "success") > ok
    }

    /// The self-upgrade as systemd runs it: SIGUSR2 to the gateway, which starts its
    /// successor and hands over. Returns the successor's pid (from the pid file) once the
    /// old process has exited and the successor answers.
    pub fn self_upgrade(&mut self) -> u32 {
        self.signal("USR2");
        let old = self.child.take().expect("gateway running");
        let old = self.handed_over(old, "SIGUSR2");
        let pid_file = self.state_dir().join("clustergate.pid");
        let pid: u32 = fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_ne!(pid, old, "the pid file names the successor");
        self.successor = Some(pid);
        self.wait_ready()
            .unwrap_or_else(|why| panic!("{why}\n{}", self.logs()));
        self.assert_same_addresses_after("SIGUSR2");
        pid
    }

    /// The graceful upgrade as an operator runs it: a new process with `--upgrade` on the
    /// same configuration, then SIGQUIT to the running one, which hands its listening
    /// sockets over and exits. Returns once the old process has exited and the new one
    /// answers.
    pub fn upgrade_in_place(&mut self) {
        let new = self.spawn(&["--upgrade"]);
        // The new process asks for the sockets once a second, five times at most.
        std::thread::sleep(Duration::from_millis(500));
        self.signal("QUIT");
        let old = self.child.replace(new).expect("gateway running");
        self.handed_over(old, "the upgrade");
        self.wait_ready()
            .unwrap_or_else(|why| panic!("{why}\n{}", self.logs()));
        self.assert_same_addresses_after("the upgrade");
    }

    /// Waits until `old`, which handed its sockets over after `why`, has exited; its pid.
    fn handed_over(&self, mut old: Child, why: &str) -> u32 {
        let deadline = Instant::now() + STOP_DEADLINE + Duration::from_secs(10);
        while old.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "the old process still runs after {why}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        old.id()
    }

    /// What the latest run wrote to stdout and stderr.
    fn last_run_logs(&self) -> String {
        ["stdout", "stderr"]
            .iter()
            .map(|s| fs::read_to_string(self.dir.path().join(format!("{s}.{}.log", self.runs))))
            .map(Result::unwrap_or_default)
            .collect()
    }

    /// Wait for `/healthz` on the metrics port and a connectable main port.
    fn wait_ready(&mut self) -> Result<(), String> {
        self.poll_start(Duration::from_millis(50), "not ready", |gw| {
            gw.is_ready().then_some(())
        })
    }

    fn is_ready(&self) -> bool {
        let healthy = try_raw_http(
            self.metrics_addr,
            b"GET /healthz HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n",
        )
        .is_ok_and(|r| r.status == 200);
        healthy && TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)).is_ok()
    }

    /// A client for this gateway: trusts only `state_dir/tls/ca.pem` when TLS is on; offers h2 via
    /// ALPN unless `http1_only`. Never follows redirects, never uses a proxy.
    pub fn build_client(&self, http1_only: bool) -> reqwest::Client {
        let mut b = client_builder();
        if self.spec.tls {
            // Only the generated CA (absent when the operator configured cert_file/key_file).
            b = b.tls_built_in_root_certs(false);
            if self.state_dir().join("tls/ca.pem").exists() {
                b = b.add_root_certificate(self.ca_cert());
            }
        }
        if http1_only {
            b = b.http1_only();
        }
        b.build().unwrap()
    }

    pub fn ca_cert(&self) -> reqwest::Certificate {
        let pem = fs::read(self.state_dir().join("tls/ca.pem")).expect("state_dir/tls/ca.pem");
        reqwest::Certificate::from_pem(&pem).unwrap()
    }

    /// Sends this gateway's requests with `client` from now on (e.g. one that trusts an
    /// operator's CA).
    pub fn use_client(&mut self, client: reqwest::Client) {
        self.client = client;
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("gateway running").id()
    }
    pub fn child_mut(&mut self) -> &mut Child {
        self.child.as_mut().expect("gateway running")
    }
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.spec.tls { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.addr)
    }

    /// Everything the gateway wrote to stdout and stderr, over all its runs.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for run in 1..=self.runs {
            for stream in ["stdout", "stderr"] {
                let path = self.dir.path().join(format!("{stream}.{run}.log"));
                let text = fs::read_to_string(&path).unwrap_or_default();
                out.push_str(&format!("--- run {run} {stream} ---\n{text}\n"));
            }
        }
        out
    }

    /// Whether the logs come to satisfy `ready` within 5 s: lines are written by the
    /// gateway's log worker, after the request or reload that caused them has finished.
    pub async fn logs_come_to(&self, ready: impl Fn(&str) -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !ready(&self.logs()) {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// What the latest run wrote to standard error.
    pub fn stderr(&self) -> String {
        fs::read_to_string(self.dir.path().join(format!("stderr.{}.log", self.runs)))
            .unwrap_or_default()
    }

    /// Send `signal` (`TERM`, `HUP`, ...) to our child, by pid.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([format!("-{signal}"), self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Send SIGTERM to our child, by pid.
    pub fn sigterm(&self) {
        self.signal("TERM");
    }

    /// Stop with SIGTERM (SIGKILL after a deadline) and reap.
    pub fn stop(&mut self) {
        if self.child.is_none() {
            return;
        }
        self.sigterm();
        let deadline = Instant::now() + STOP_DEADLINE;
        let child = self.child.as_mut().unwrap();
        while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        self.child = None;
    }

    /// Stop, change the spec, and start again in the same directory (so `state_dir` persists).
    pub fn restart(&mut self, change: impl FnOnce(&mut Gateway)) {
        self.stop();
        change(&mut self.spec);
        self.launch();
    }

    /// Start again after `stop`, on the same ports (a balancer knows it by its address):
    /// ports chosen before the first start (`Gateway::fixed_ports`), which no other test
    /// is given meanwhile.
    pub fn start_again_in_place(&mut self) {
        assert!(
            self.spec.needs_fixed_ports(),
            "start_again_in_place needs Gateway::fixed_ports(): a port 0 run gets a new port"
        );
        self.spawn_and_wait()
            .unwrap_or_else(|why| panic!("{why}\n{}", self.logs()));
        self.client = self.build_client(false);
    }
}

impl Drop for RunningGateway {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(pid) = self.successor.take() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        if std::thread::panicking() {
            eprintln!(
                "gateway logs ({}):\n{}",
                self.dir.path().display(),
                self.logs()
            );
        }
    }
}
