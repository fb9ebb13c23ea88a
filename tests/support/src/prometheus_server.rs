//! A real Prometheus (Debian's package) scraping a gateway with the shipped scrape config
//! (deploy/prometheus/prometheus.yml) and alert rules, with only what is site-specific
//! rewritten: the target (the gateway's metrics address), the intervals (1 s, so that a
//! test does not wait 15 s for a sample) and the rules file's absolute path. Its own TSDB
//! in a temp dir, its web listener on 127.0.0.1 and a free port; stopped by pid on drop.
//! Also `promtool`, the package's checker, for the tests of the files themselves.

use std::collections::BTreeMap;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{client_builder, free_port, try_raw_http};

/// The shipped Prometheus files.
pub const PROMETHEUS_DEPLOY: &str = crate::repo_path!("deploy/prometheus");
const PROMETHEUS: &str = "/usr/bin/prometheus";
const PROMTOOL: &str = "/usr/bin/promtool";
const READY_DEADLINE: Duration = Duration::from_secs(30);

/// A shipped Prometheus file, by name.
pub fn prometheus_file(name: &str) -> PathBuf {
    Path::new(PROMETHEUS_DEPLOY).join(name)
}

/// Runs `promtool` in `deploy/prometheus` and returns its output; panics with that output
/// unless it succeeds. Missing promtool fails, never skips.
pub fn promtool(args: &[&str]) -> String {
    assert!(
        Path::new(PROMTOOL).exists(),
        "{PROMTOOL} is missing: deploy/install-deps.sh --test installs Debian's prometheus"
    );
    let out = Command::new(PROMTOOL)
        .args(args)
        .current_dir(PROMETHEUS_DEPLOY)
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(out.status.success(), "promtool {}:\n{text}", args.join(" "));
    text
}

fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub struct Prometheus {
    dir: tempfile::TempDir,
    child: Option<Child>,
    pub addr: SocketAddr,
    client: reqwest::Client,
}

impl Prometheus {
    /// Starts Prometheus scraping `target` (a gateway's metrics listener) and waits until
    /// it is ready. A port taken between `free_port` and the bind is retried on new ports.
    pub fn start(target: SocketAddr) -> Prometheus {
        assert!(
            Path::new(PROMETHEUS).exists(),
            "{PROMETHEUS} is missing: deploy/install-deps.sh --test installs Debian's prometheus"
        );
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        fs::write(&config, site_config(target)).unwrap();
        let mut prometheus = Prometheus {
            dir,
            child: None,
            addr: SocketAddr::from(([127, 0, 0, 1], 1)),
            client: client_builder().build().unwrap(),
        };
        let mut attempt = 1;
        loop {
            prometheus.addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
            match prometheus.spawn_and_wait(&config) {
                Ok(()) => return prometheus,
                Err(why) if attempt < 3 && prometheus.log().contains("address already in use") => {
                    eprintln!("prometheus start attempt {attempt} failed ({why}); new port");
                    attempt += 1;
                }
                Err(why) => panic!("{why}\n{}", prometheus.log()),
            }
        }
    }

    fn spawn_and_wait(&mut self, config: &Path) -> Result<(), String> {
        let log = fs::File::create(self.dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                self.dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={}", self.addr))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + READY_DEADLINE;
        loop {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                return Err(format!("prometheus exited during start-up ({status})"));
            }
            let ready = try_raw_http(
                self.addr,
                b"GET /-/ready HTTP/1.1\r\nHost: prometheus\r\nConnection: close\r\n\r\n",
            );
            if ready.is_ok_and(|r| r.status == 200) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("prometheus not ready after {READY_DEADLINE:?}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What Prometheus logged.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// `GET /api/v1/<path>` with query parameters; returns `data`, panicking unless the
    /// status is `success`.
    pub async fn api(&self, path: &str, params: &[(&str, &str)]) -> Value {
        let url = format!("http://{}/api/v1/{path}", self.addr);
        let reply = self.client.get(url).query(params).send().await.unwrap();
        let body: Value = reply.json().await.unwrap();
        assert_eq!(body["status"], "success", "{path} {params:?}: {body}");
        body["data"].clone()
    }

    /// The instant vector `expr` evaluates to now.
    pub async fn query(&self, expr: &str) -> Vec<Value> {
        let data = self.api("query", &[("query", expr)]).await;
        data["result"].as_array().cloned().unwrap_or_default()
    }

    /// Every rule Prometheus has loaded, with its health and last evaluation.
    pub async fn rules(&self) -> Vec<Value> {
        let data = self.api("rules", &[]).await;
        data["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect()
    }

    /// The rules once each has been evaluated again since `before` (so an evaluation
    /// that started after `before` was read is recorded), at most `limit`.
    pub async fn rules_evaluated_after(&self, before: &[Value], limit: Duration) -> Vec<Value> {
        let last = |rules: &[Value]| -> BTreeMap<String, String> {
            rules
                .iter()
                .map(|r| (r["name"].to_string(), r["lastEvaluation"].to_string()))
                .collect()
        };
        let before = last(before);
        let deadline = Instant::now() + limit;
        loop {
            let rules = self.rules().await;
            let now = last(&rules);
            if !now.is_empty() && now.iter().all(|(name, at)| before.get(name) != Some(at)) {
                return rules;
            }
            assert!(Instant::now() < deadline, "rules not evaluated: {rules:?}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Evaluates `expr` until its result satisfies `done`, at most `limit`.
    pub async fn query_until(
        &self,
        expr: &str,
        limit: Duration,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + limit;
        loop {
            let result = self.query(expr).await;
            if done(&result) {
                return result;
            }
            assert!(
                Instant::now() < deadline,
                "{expr} after {limit:?}: {result:?}\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// The shipped scrape config with the target, the intervals and the rules' path rewritten.
fn site_config(target: SocketAddr) -> String {
    let shipped = fs::read_to_string(prometheus_file("prometheus.yml")).unwrap();
    let mut config: serde_yaml::Value = serde_yaml::from_str(&shipped).unwrap();
    config["global"]["scrape_interval"] = "1s".into();
    config["global"]["evaluation_interval"] = "1s".into();
    let rule_files = config["rule_files"].as_sequence_mut().unwrap();
    for file in rule_files.iter_mut() {
        let absolute = prometheus_file(file.as_str().unwrap());
        *file = absolute.to_string_lossy().into_owned().into();
    }
    let jobs = config["scrape_configs"].as_sequence_mut().unwrap();
    let job = jobs
        .iter_mut()
        .find(|j| j["job_name"] == "clustergate")
        .expect("a scrape job named clustergate");
    job["static_configs"] = serde_yaml::from_str(&format!("[{{targets: ['{target}']}}]")).unwrap();
    serde_yaml::to_string(&config).unwrap()
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("prometheus log:\n{}", self.log());
        }
    }
}
