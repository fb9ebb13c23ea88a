//! A real `redis-server` for tests (Debian's package), on 127.0.0.1 and a free port, in its
//! own folder, stopped by its pid. Shared by the unit tests of the Redis stores and by the
//! integration tests (`redis` builds deployments of them).
//!
//! Its users: `default` (everything, for the tests' own reads) and the gateways' user as
//! shipped in `deploy/redis/clustergate.acl`, with [`GATEWAY_PASSWORD`]. The folder also
//! holds what every gateway of the test deployment shares: that password's file and the
//! encryption key file (both owner-only).

use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a started server may take to accept connections.
const START_DEADLINE: Duration = Duration::from_secs(10);

/// The Redis user the gateways use, as the README tells operators to create it.
pub const GATEWAY_ACL: &str = include_str!(crate::repo_path!("deploy/redis/clustergate.acl"));
pub const GATEWAY_USER: &str = "clustergate";
pub const GATEWAY_PASSWORD: &str = "the-gateways-redis-password";
/// The key prefix the shipped ACL allows (`state.redis.key_prefix`'s default).
pub const GATEWAY_PREFIX: &str = "clustergate:";
/// The test deployment's encryption key (`state.redis.encryption_keys`).
pub const ENCRYPTION_KID: &str = "test-1";
pub const ENCRYPTION_SECRET: &str = "a test deployment's redis key, 32 bytes or more";

pub struct RedisServer {
    pub port: u16,
    dir: tempfile::TempDir,
    persistent: bool,
    /// The port of the primary this server starts as a replica of.
    replica_of: Option<u16>,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server that keeps nothing on disk.
    pub fn start() -> RedisServer {
        RedisServer::start_with(false, None)
    }

    /// Starts a server with an append-only file, so a restart keeps what it had.
    pub fn start_persistent() -> RedisServer {
        RedisServer::start_with(true, None)
    }

    /// Starts a replica of `primary` (the same users), keeping nothing on disk.
    pub fn start_replica_of(primary: &RedisServer) -> RedisServer {
        RedisServer::start_with(false, Some(primary.port))
    }

    fn start_with(persistent: bool, replica_of: Option<u16>) -> RedisServer {
        let port = crate::free_port();
        let dir = tempfile::tempdir().expect("a temp dir for redis");
        let mut server = RedisServer {
            port,
            dir,
            persistent,
            replica_of,
            child: None,
        };
        server.launch();
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The file with [`GATEWAY_PASSWORD`], as `state.redis.password_file` reads it.
    pub fn gateway_password_file(&self) -> PathBuf {
        self.private_file("gateway.pass", GATEWAY_PASSWORD)
    }

    /// The file with [`ENCRYPTION_SECRET`], as `state.redis.encryption_keys` reads it.
    pub fn encryption_key_file(&self) -> PathBuf {
        self.private_file("gateway.key", ENCRYPTION_SECRET)
    }

    fn private_file(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        write_private(&path, contents);
        path
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
        let users = self.dir.path().join("users.acl");
        let gateway = GATEWAY_ACL.trim_end();
        write_private(
            &users,
            &format!("user default on nopass ~* &* +@all\n{gateway} >{GATEWAY_PASSWORD}\n"),
        );
        let mut command = Command::new(Self::binary());
        if let Some(primary) = self.replica_of {
            command.args(["--replicaof", "127.0.0.1", &primary.to_string()]);
        }
        let child = command
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args([
                "--save",
                "",
                "--appendonly",
                append_only,
                "--appendfsync",
                "always",
                // A replica syncs at once, not after the default 5 s wait for others.
                "--repl-diskless-sync-delay",
                "0",
            ])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--aclfile")
            .arg(&users)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        wait_listening("redis-server", self.port);
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

/// How quickly the sentinels of the tests act: a primary silent for this long is down.
pub const SENTINEL_DOWN_AFTER_MS: u64 = 1000;
/// The sentinels' own user (`state.redis.sentinel_username`); their `default` user is off.
pub const SENTINEL_USER: &str = "sentinels";
pub const SENTINEL_PASSWORD: &str = "the-sentinels-password";

/// A real `redis-sentinel` (Debian's package) on 127.0.0.1 and a free port, watching one
/// primary as `master_name`, with its own user; stopped by its pid.
pub struct SentinelServer {
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl SentinelServer {
    /// Starts a sentinel of `primary`; `quorum` sentinels must agree that it is down.
    pub fn start(master_name: &str, primary: &RedisServer, quorum: u32) -> SentinelServer {
        let binary = PathBuf::from("/usr/bin/redis-sentinel");
        assert!(
            binary.exists(),
            "redis-sentinel is not installed: deploy/install-deps.sh --test installs it"
        );
        let port = crate::free_port();
        let dir = tempfile::tempdir().expect("a temp dir for redis-sentinel");
        // The sentinel rewrites its file: one of its own. Sentinels reach each other as
        // SENTINEL_USER; the data servers' `default` user needs no password.
        let config = dir.path().join("sentinel.conf");
        let down_after = SENTINEL_DOWN_AFTER_MS;
        write_private(
            &config,
            &format!(
                "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                 user default off\nuser {SENTINEL_USER} on >{SENTINEL_PASSWORD} ~* &* +@all\n\
                 sentinel sentinel-user {SENTINEL_USER}\nsentinel sentinel-pass {SENTINEL_PASSWORD}\n\
                 sentinel monitor {master_name} 127.0.0.1 {primary} {quorum}\n\
                 sentinel down-after-milliseconds {master_name} {down_after}\n\
                 sentinel failover-timeout {master_name} {failover}\n\
                 sentinel parallel-syncs {master_name} 2\n",
                dir = dir.path().display(),
                primary = primary.port,
                failover = down_after * 3,
            ),
        );
        let mut sentinel = SentinelServer {
            port,
            dir,
            child: None,
        };
        sentinel.launch();
        sentinel
    }

    fn launch(&mut self) {
        // Its file holds what it learnt (the primary now, replicas, other sentinels).
        let child = Command::new("/usr/bin/redis-sentinel")
            .arg(self.dir.path().join("sentinel.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-sentinel starts");
        self.child = Some(child);
        wait_listening("redis-sentinel", self.port);
    }

    // This and `restart`: for the integration tests (tests/it/common/redis.rs).
    #[allow(dead_code)]
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// Starts it again on the same port, with what it had learnt.
    #[allow(dead_code)]
    pub fn restart(&mut self) {
        self.stop();
        self.launch();
    }

    /// The file with [`SENTINEL_PASSWORD`], as `state.redis.sentinel_password_file` reads it.
    pub fn password_file(&self) -> PathBuf {
        let path = self.dir.path().join("sentinel.pass");
        write_private(&path, SENTINEL_PASSWORD);
        path
    }

    /// Stops it (SIGKILL to its pid).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for SentinelServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn wait_listening(what: &str, port: u16) {
    let deadline = Instant::now() + START_DEADLINE;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn write_private(path: &Path, contents: &str) {
    std::fs::write(path, contents).expect("a file in the redis folder");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .expect("an owner-only file");
}
