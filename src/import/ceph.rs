//! The dashboard's accounts as the `ceph` CLI shows them (Ceph 16.2's `ceph dashboard
//! ac-user-show [NAME]` and `ac-role-show [NAME]`: JSON on stdout, the user's bcrypt hash
//! in `password`). Its output is never logged or put in an error: it holds the hashes.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

/// One `ceph` call may take this long (a manager failing over answers within it).
const CALL_DEADLINE: Duration = Duration::from_secs(120);
/// The most of a call's output read; a user or role is a few hundred bytes.
const MAX_OUTPUT_BYTES: u64 = 16 * 1024 * 1024;
/// How much of `ceph`'s stderr an error quotes.
const MAX_QUOTED_STDERR: usize = 400;

/// How to run `ceph`: the program and the cluster configuration it reads.
#[derive(Debug, Clone)]
pub struct CephCli {
    pub program: PathBuf,
    /// `-c FILE`; `None`: ceph's default (`/etc/ceph/ceph.conf`).
    pub conf: Option<PathBuf>,
}

/// A dashboard user as `ac-user-show NAME` prints it (`User.to_dict`); `name`, `email` and
/// `lastUpdate` are not kept. No `Debug`: it holds the hash.
#[derive(Deserialize)]
pub struct DashboardUser {
    pub username: String,
    /// The bcrypt hash; `null` for a user without a password.
    pub password: Option<String>,
    pub roles: Vec<String>,
    pub enabled: bool,
    /// Unix seconds after which the dashboard refuses the password.
    #[serde(rename = "pwdExpirationDate")]
    pub pwd_expiration_date: Option<i64>,
    /// The dashboard refuses every request of this user until it changes its password.
    #[serde(rename = "pwdUpdateRequired", default)]
    pub pwd_update_required: bool,
}

/// A role as `ac-role-show NAME` prints it (`Role.to_dict`).
#[derive(Debug, Deserialize)]
pub struct DashboardRole {
    pub name: String,
    pub description: Option<String>,
    #[serde(default)]
    pub scopes_permissions: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, thiserror::Error)]
pub enum CephError {
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error("`{command}` did not finish within {}s", CALL_DEADLINE.as_secs())]
    Timeout { command: String },
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    /// The position only: the output holds hashes.
    #[error("`{command}` printed something other than the JSON expected (Ceph 16.2's): {reason}")]
    Json { command: String, reason: String },
}

impl CephCli {
    pub fn user_names(&self) -> Result<Vec<String>, CephError> {
        self.json(&["ac-user-show"])
    }

    pub fn user(&self, name: &str) -> Result<DashboardUser, CephError> {
        self.json(&["ac-user-show", name])
    }

    /// Custom roles first, then the system roles.
    pub fn role_names(&self) -> Result<Vec<String>, CephError> {
        self.json(&["ac-role-show"])
    }

    pub fn role(&self, name: &str) -> Result<DashboardRole, CephError> {
        self.json(&["ac-role-show", name])
    }

    /// `ceph dashboard ARGS` parsed as JSON.
    fn json<T: serde::de::DeserializeOwned>(&self, args: &[&str]) -> Result<T, CephError> {
        let command = format!("{} dashboard {}", self.program.display(), args.join(" "));
        let stdout = self.run(&command, args)?;
        serde_json::from_slice(&stdout).map_err(|e| CephError::Json {
            command,
            reason: format!(
                "{:?} at line {} column {}",
                e.classify(),
                e.line(),
                e.column()
            ),
        })
    }

    fn run(&self, command: &str, args: &[&str]) -> Result<Vec<u8>, CephError> {
        let mut cmd = Command::new(&self.program);
        if let Some(conf) = &self.conf {
            cmd.arg("-c").arg(conf);
        }
        cmd.args(["--connect-timeout", "30", "dashboard"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|source| CephError::Spawn {
            command: command.to_string(),
            source,
        })?;
        let stdout = reader(child.stdout.take());
        let stderr = reader(child.stderr.take());
        let status = wait(&mut child, command)?;
        let stdout = stdout.join().unwrap_or_default();
        let stderr = stderr.join().unwrap_or_default();
        if !status.success() {
            let text = String::from_utf8_lossy(&stderr);
            return Err(CephError::Failed {
                command: command.to_string(),
                status,
                stderr: text.trim().chars().take(MAX_QUOTED_STDERR).collect(),
            });
        }
        Ok(stdout)
    }
}

/// Reads a pipe to its end (at most `MAX_OUTPUT_BYTES`) on its own thread, so that neither
/// pipe fills while the other is read.
fn reader(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            // A read error leaves what was read; the JSON parse then says it is cut short.
            let _ = (&mut pipe).take(MAX_OUTPUT_BYTES).read_to_end(&mut bytes);
            // The rest is drained, not kept, so that `ceph` never blocks on a full pipe.
            let _ = std::io::copy(&mut pipe, &mut std::io::sink());
        }
        bytes
    })
}

/// Waits for `child` until `CALL_DEADLINE`, then kills it.
fn wait(child: &mut Child, command: &str) -> Result<std::process::ExitStatus, CephError> {
    let deadline = Instant::now() + CALL_DEADLINE;
    let spawn_error = |source| CephError::Spawn {
        command: command.to_string(),
        source,
    };
    loop {
        if let Some(status) = child.try_wait().map_err(spawn_error)? {
            return Ok(status);
        }
        if Instant::now() >= deadline {
            // Already gone is fine: either way it is reaped below.
            let _ = child.kill();
            let _ = child.wait();
            return Err(CephError::Timeout {
                command: command.to_string(),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
