//! The Schemathesis CLI that `deploy/install-deps.sh --test` installs (pinned in
//! `requirements.txt`, in `.test-venv/` or `$CG_TEST_VENV`), run against a gateway with a
//! bound on examples and on time, and what its reports say.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::exchanges::{read_har, Exchange};

/// One run: which operations, how generated, and how much.
pub struct RunSpec {
    pub name: &'static str,
    /// Schemathesis's operation filters (`--include-method GET`, ...).
    pub filters: &'static [&'static str],
    /// `positive`, `negative` or `all`.
    pub mode: &'static str,
    /// Examples per operation in the fuzzing phase (the coverage phase adds its own
    /// edge cases, a few dozen per operation).
    pub max_examples: u32,
    /// Killed, and the test failed, past this.
    pub deadline: Duration,
}

/// What a finished run reported.
pub struct Run {
    pub name: &'static str,
    pub exchanges: Vec<Exchange>,
    /// `Err`: the run did not finish, or left no report.
    pub report: Result<JsonReport, String>,
    pub elapsed: Duration,
    /// The end of Schemathesis's own output, for failure messages.
    pub output_tail: String,
}

/// The fields of Schemathesis's JSON report the test reads.
#[derive(Debug, Deserialize)]
pub struct JsonReport {
    pub schemathesis_version: String,
    pub complete: bool,
    pub operations: Operations,
    pub test_cases: TestCases,
    pub errors: Vec<ReportedError>,
}

#[derive(Debug, Deserialize)]
pub struct Operations {
    pub selected: u64,
    pub tested: u64,
    pub errored: u64,
}

#[derive(Debug, Deserialize)]
pub struct TestCases {
    pub generated: u64,
    pub errored: u64,
}

#[derive(Debug, Deserialize)]
pub struct ReportedError {
    pub title: String,
    pub count: u64,
}

/// Requests that get no answer in this long are errors (the dashboard answers every
/// operation the runs use in well under a second).
const REQUEST_TIMEOUT_SECONDS: &str = "30";

pub struct Schemathesis {
    program: PathBuf,
}

impl Schemathesis {
    /// The installed CLI. A missing one fails the test: the suite installs it.
    pub fn installed() -> Schemathesis {
        let venv = std::env::var_os("CG_TEST_VENV")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo().join(".test-venv"));
        let program = venv.join("bin/schemathesis");
        assert!(
            program.is_file(),
            "Schemathesis is not installed at {}: run deploy/install-deps.sh --test \
             (tests/run.sh does)",
            program.display()
        );
        Schemathesis { program }
    }

    /// Runs `spec` against the gateway at `origin_url` (`http://host:port`) with `token`
    /// as the operations' bearer token, writing its reports into `dir`.
    pub fn run(&self, spec: &RunSpec, origin_url: &str, token: &str, seed: u64, dir: &Path) -> Run {
        let har = dir.join(format!("{}.har.json", spec.name));
        let json = dir.join(format!("{}.json", spec.name));
        let output = dir.join(format!("{}.out", spec.name));
        let mut cmd = Command::new(&self.program);
        cmd.arg("--config-file")
            .arg(fuzz_dir().join("schemathesis.toml"))
            .arg("run")
            .arg(format!("{origin_url}/docs/api.json"))
            .args(["--url", origin_url])
            .args(spec.filters)
            .args(["--mode", spec.mode])
            .args(["--max-examples", &spec.max_examples.to_string()])
            .args(["--seed", &seed.to_string()])
            // One worker: as fast as two here (the runs are CPU-bound on two cores), and
            // with two, Schemathesis 4.32 ends some operations' examples early.
            .args(["--workers", "1", "--continue-on-failure", "--no-color"])
            .args(["--request-timeout", REQUEST_TIMEOUT_SECONDS])
            .args(["--report", "json,har"])
            .arg("--report-json-path")
            .arg(&json)
            .arg("--report-har-path")
            .arg(&har)
            .env("SCHEMATHESIS_HOOKS", fuzz_dir().join("hooks.py"))
            // Read by schemathesis.toml: never on the command line, where `ps` shows it.
            .env("CG_FUZZ_TOKEN", token)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(fs::File::create(&output).unwrap())
            .stderr(fs::File::create(dir.join(format!("{}.err", spec.name))).unwrap());
        let started = Instant::now();
        let report = run_bounded(cmd, spec.deadline).and_then(|status| {
            // 0: no failure by its own checks; 1: some (the dashboard's 5xx count as such).
            if !matches!(status.code(), Some(0 | 1)) {
                return Err(format!("schemathesis exited with {status}"));
            }
            let text = fs::read_to_string(&json).map_err(|e| format!("no JSON report: {e}"))?;
            serde_json::from_str(&text).map_err(|e| format!("unreadable JSON report: {e}"))
        });
        Run {
            name: spec.name,
            exchanges: if har.exists() {
                read_har(&har, origin_url)
            } else {
                Vec::new()
            },
            report,
            elapsed: started.elapsed(),
            output_tail: tail(&output, 30) + &tail(&dir.join(format!("{}.err", spec.name)), 10),
        }
    }
}

/// Runs `cmd` to its end, or kills it (by its pid) past `deadline`.
fn run_bounded(mut cmd: Command, deadline: Duration) -> Result<ExitStatus, String> {
    let mut child = cmd.spawn().expect("start schemathesis");
    let until = Instant::now() + deadline;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Ok(status);
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "schemathesis did not finish within {deadline:?}; killed"
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The last `lines` lines of a file, each cut to 300 characters (failure output can
/// quote whole request bodies).
fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|l| l.chars().take(300).collect::<String>() + "\n")
        .collect()
}

/// The version `requirements.txt` pins, which the reports must come from.
pub fn pinned_version() -> String {
    let text = fs::read_to_string(fuzz_dir().join("requirements.txt")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("schemathesis=="))
        .expect("schemathesis pinned in requirements.txt")
        .trim()
        .to_string()
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fuzz_dir() -> PathBuf {
    repo().join("tests/api_fuzz")
}
