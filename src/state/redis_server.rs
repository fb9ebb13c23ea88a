//! A real `redis-server` for tests (Debian's package), on 127.0.0.1 and a free port, in its
//! own folder, stopped by its pid. Shared by the unit tests of the Redis stores and by the
//! integration tests (`tests/common/redis.rs` includes this file).

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a started server may take to accept connections.
const START_DEADLINE: Duration = Duration::from_secs(10);

pub struct RedisServer {
    pub port: u16,
    dir: tempfile::TempDir,
    persistent: bool,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server that keeps nothing on disk.
    pub fn start() -> RedisServer {
        RedisServer::start_with(false)
    }

    /// Starts a server with an append-only file, so a restart keeps what it had.
    pub fn start_persistent() -> RedisServer {
        RedisServer::start_with(true)
    }

    fn start_with(persistent: bool) -> RedisServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let dir = tempfile::tempdir().expect("a temp dir for redis");
        let mut server = RedisServer {
            port,
            dir,
            persistent,
            child: None,
        };
        server.launch();
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn binary() -> PathBuf {
        let path = PathBuf::from("/usr/bin/redis-server");
        assert!(
            path.exists(),
            "redis-server is not installed: tests/run.sh installs Debian's redis-server"
        );
        path
    }

    fn launch(&mut self) {
        let append_only = if self.persistent { "yes" } else { "no" };
        let child = Command::new(Self::binary())
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args([
                "--save",
                "",
                "--appendonly",
                append_only,
                "--appendfsync",
                "always",
            ])
            .arg("--dir")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        let deadline = Instant::now() + START_DEADLINE;
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not listen on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the server (SIGKILL to its pid: an outage, not a shutdown).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and folder.
    pub fn restart(&mut self) {
        self.stop();
        self.launch();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
