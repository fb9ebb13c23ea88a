//! A real Redis for the tests of several gateways: the server the stores' own unit tests
//! use (`redis_server`), and the `[state]` lines that point a gateway at it as
//! the shipped ACL's user, with the test deployment's encryption key. Also a deployment as
//! Redis Sentinel runs it (a primary, its replicas, sentinels watching it), and the lines
//! that point a gateway at its sentinels.

use crate::redis_server::{self, RedisServer, SentinelServer};

use std::process::Command;
use std::time::{Duration, Instant};

use super::Gateway;

/// The primary's name in the sentinels' `sentinel monitor` line.
pub const MASTER_NAME: &str = "clustergate";
/// How long a topology may take to be whole: replicas synced, sentinels aware of each other
/// (they announce themselves every 2 s) and of every replica.
const TOPOLOGY_DEADLINE: Duration = Duration::from_secs(20);

/// A primary, its replicas and the sentinels that watch them, on 127.0.0.1.
pub struct SentinelTopology {
    /// Every data server, the first primary first.
    pub servers: Vec<RedisServer>,
    pub sentinels: Vec<SentinelServer>,
}

impl SentinelTopology {
    /// Starts a primary with `replicas` replicas and `sentinels` sentinels (a majority of
    /// them agreeing that the primary is down), and waits until it is whole.
    pub fn start(replicas: usize, sentinels: usize) -> SentinelTopology {
        let primary = RedisServer::start();
        let mut servers = vec![];
        for _ in 0..replicas {
            servers.push(RedisServer::start_replica_of(&primary));
        }
        servers.insert(0, primary);
        let quorum = u32::try_from(sentinels / 2 + 1).unwrap();
        let sentinels = (0..sentinels)
            .map(|_| SentinelServer::start(MASTER_NAME, &servers[0], quorum))
            .collect();
        let topology = SentinelTopology { servers, sentinels };
        topology.wait_whole(replicas);
        topology
    }

    /// Waits until the primary has `replicas` replicas online and every running sentinel
    /// knows them and the other running sentinels.
    pub fn wait_whole(&self, replicas: usize) {
        let deadline = Instant::now() + TOPOLOGY_DEADLINE;
        let primary = self.primary_port();
        let others = self.sentinels.iter().filter(|s| s.running()).count() - 1;
        loop {
            let info = redis_cli(primary, &["INFO", "replication"]);
            let online = info.matches("state=online").count();
            let sentinels_agree = self.sentinels.iter().filter(|s| s.running()).all(|s| {
                let known = |what: &str| sentinel_cli(s, &["SENTINEL", what, MASTER_NAME]);
                known("REPLICAS").matches("master-link-status").count() >= replicas
                    && known("SENTINELS").matches("runid").count() >= others
            });
            if online >= replicas && sentinels_agree {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the sentinel topology is not whole: {online} replicas online\n{info}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The primary's port as the first running sentinel names it.
    pub fn primary_port(&self) -> u16 {
        let sentinel = self.sentinels.iter().find(|s| s.running());
        let sentinel = sentinel.expect("a running sentinel");
        let addr = sentinel_cli(
            sentinel,
            &["SENTINEL", "get-master-addr-by-name", MASTER_NAME],
        );
        let port = addr.lines().nth(1).expect("the primary's port");
        port.parse().expect("a port")
    }

    /// The data server on `port`.
    pub fn server(&mut self, port: u16) -> &mut RedisServer {
        let found = self.servers.iter_mut().find(|s| s.port == port);
        found.expect("a server of the topology")
    }

    /// The replicas, as the sentinels name the primary now.
    pub fn replica_ports(&self) -> Vec<u16> {
        let primary = self.primary_port();
        let ports = self.servers.iter().map(|s| s.port);
        ports.filter(|p| *p != primary).collect()
    }
}

/// `redis-cli --raw` against a data server as its `default` user.
pub fn redis_cli(port: u16, args: &[&str]) -> String {
    cli(&["-p", &port.to_string()], args)
}

/// `redis-cli --raw` against a sentinel as its own user.
pub fn sentinel_cli(sentinel: &SentinelServer, args: &[&str]) -> String {
    let port = sentinel.port.to_string();
    let user = redis_server::SENTINEL_USER;
    let password = redis_server::SENTINEL_PASSWORD;
    cli(
        &[
            "-p",
            &port,
            "--user",
            user,
            "--pass",
            password,
            "--no-auth-warning",
        ],
        args,
    )
}

fn cli(connection: &[&str], args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "--raw"])
        .args(connection)
        .args(args)
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Gateway {
    /// Keep revocations, lockouts and the service account's token in `redis`.
    pub fn redis_state(self, redis: &RedisServer) -> Self {
        let key = format!(
            "{{ kid = {:?}, secret_file = {:?} }}",
            redis_server::ENCRYPTION_KID,
            redis.encryption_key_file()
        );
        self.extra_toml("state", "backend = \"redis\"")
            .extra_toml("state.redis", &format!("url = {:?}", redis.url()))
            .extra_toml(
                "state.redis",
                &format!("username = {:?}", redis_server::GATEWAY_USER),
            )
            .extra_toml(
                "state.redis",
                &format!("password_file = {:?}", redis.gateway_password_file()),
            )
            .extra_toml("state.redis", &format!("encryption_keys = [{key}]"))
            .extra_toml("state.redis", "connect_timeout_ms = 300")
            .extra_toml("state.redis", "command_timeout_ms = 300")
    }
}

impl Gateway {
    /// Find the primary through `topology`'s sentinels (as their user), and talk to it as
    /// the shipped ACL's user, each change acknowledged by `min_replicas` replicas.
    pub fn sentinel_state(self, topology: &SentinelTopology, min_replicas: u32) -> Self {
        let primary = &topology.servers[0];
        let key = format!(
            "{{ kid = {:?}, secret_file = {:?} }}",
            redis_server::ENCRYPTION_KID,
            primary.encryption_key_file()
        );
        let sentinels: Vec<String> = topology
            .sentinels
            .iter()
            .map(|s| format!("\"127.0.0.1:{}\"", s.port))
            .collect();
        let lines = [
            format!("sentinels = [{}]", sentinels.join(", ")),
            format!("master_name = {MASTER_NAME:?}"),
            format!("sentinel_username = {:?}", redis_server::SENTINEL_USER),
            format!(
                "sentinel_password_file = {:?}",
                topology.sentinels[0].password_file()
            ),
            format!("username = {:?}", redis_server::GATEWAY_USER),
            format!("password_file = {:?}", primary.gateway_password_file()),
            format!("encryption_keys = [{key}]"),
            format!("min_replicas = {min_replicas}"),
            "connect_timeout_ms = 300".into(),
            "command_timeout_ms = 300".into(),
            // Room for an acknowledgement while three gateways, a dashboard and six Redis
            // processes share two cores.
            "replication_timeout_ms = 1000".into(),
        ];
        let mut gateway = self.extra_toml("state", "backend = \"redis\"");
        for line in lines {
            gateway = gateway.extra_toml("state.redis", &line);
        }
        gateway
    }
}
