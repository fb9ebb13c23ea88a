//! Replacing the running binary without dropping a request, under a supervisor too.
//!
//! pingora's graceful upgrade: a new process started with `run --upgrade` waits for the
//! listening sockets, and the running one hands them over on SIGQUIT, then finishes its
//! requests and exits. An operator can run those two steps by hand; under systemd the new
//! process must start inside the service and become its main process, so SIGUSR2 does both
//! steps from the running gateway itself (as nginx's binary upgrade does): it starts the
//! binary now at its path as its own successor, then hands over. Each gateway tells systemd
//! when it is ready and that it is the main process (`sd_notify`, `Type=notify`).

use std::ffi::OsString;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tokio::signal::unix::{signal, SignalKind};

/// How this process was started, to start its successor the same way.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// The binary's path when this process started: an upgrade replaces the file there.
    pub program: PathBuf,
    /// The arguments after `run`, `--upgrade` left out.
    pub run_args: Vec<OsString>,
}

impl Invocation {
    /// This process's own invocation (`None` when its binary cannot be found).
    pub fn current() -> Option<Invocation> {
        let program = std::env::current_exe().ok()?;
        let run_args = std::env::args_os()
            .skip(1)
            .filter(|a| a != "--upgrade")
            .collect();
        Some(Invocation { program, run_args })
    }
}

/// Tells systemd (when it started us with `Type=notify`) that this process is ready and is
/// the service's main process. Without `NOTIFY_SOCKET` it does nothing.
pub fn notify_ready() {
    let Some(socket) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let message = format!("READY=1\nMAINPID={}\n", std::process::id());
    let sent = UnixDatagram::unbound().and_then(|s| s.send_to(message.as_bytes(), &socket));
    if let Err(e) = sent {
        tracing::warn!(error = %e, "cannot notify systemd");
    }
}

/// On SIGUSR2, starts the successor and hands the listening sockets over to it.
pub struct SelfUpgrade {
    pub invocation: Invocation,
}

impl SelfUpgrade {
    #[allow(unsafe_code)] // kill(2) on our own pid: see its SAFETY note
    fn upgrade(&self) {
        let Invocation { program, run_args } = &self.invocation;
        let started = Command::new(program)
            .args(run_args.iter().take(1))
            .arg("--upgrade")
            .args(run_args.iter().skip(1))
            .stdin(Stdio::null())
            .spawn();
        match started {
            Ok(child) => {
                tracing::info!(pid = child.id(), program = %program.display(), "SIGUSR2: started the successor; handing the listening sockets over");
                // SAFETY: kill(2) on our own pid with a signal pingora handles (SIGQUIT:
                // send the sockets over the upgrade socket, then stop gracefully).
                unsafe {
                    libc::kill(libc::getpid(), libc::SIGQUIT);
                }
            }
            Err(e) => {
                tracing::error!(error = %e, program = %program.display(), "SIGUSR2: cannot start the successor; this gateway keeps serving");
            }
        }
    }
}

#[async_trait]
impl BackgroundService for SelfUpgrade {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut requests = match signal(SignalKind::user_defined2()) {
            Ok(requests) => requests,
            Err(e) => {
                tracing::error!(error = %e, "cannot handle SIGUSR2: self-upgrade is off");
                return;
            }
        };
        tokio::select! {
            _ = shutdown.changed() => {}
            got = requests.recv() => {
                if got.is_some() {
                    self.upgrade();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ready_message_reaches_the_notify_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        // The variable is read only by notify_ready; tests run in one process, so it is
        // set and removed around the one call.
        std::env::set_var("NOTIFY_SOCKET", &path);
        notify_ready();
        std::env::remove_var("NOTIFY_SOCKET");
        let mut buf = [0u8; 128];
        let n = listener.recv(&mut buf).unwrap();
        let text = std::str::from_utf8(&buf[..n]).unwrap();
        assert_eq!(text, format!("READY=1\nMAINPID={}\n", std::process::id()));
    }
}
