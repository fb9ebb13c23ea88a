//! A real HAProxy (Debian's 2.6) in front of gateways, running the shipped configuration
//! (deploy/haproxy/haproxy.cfg) with only what is site-specific rewritten: its listener
//! (127.0.0.1 and a free port), its certificate and CA file (the gateways share the first
//! one's generated certificate, as the README says to deploy them), the stats socket and
//! the server lines. Stopped by its pid on drop.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{client_builder, free_port, RunningGateway};

const SHIPPED: &str = crate::repo_path!("deploy/haproxy/haproxy.cfg");
const HAPROXY: &str = "/usr/sbin/haproxy";

pub struct Haproxy {
    dir: tempfile::TempDir,
    child: Option<Child>,
    pub port: u16,
    client_ca: Vec<u8>,
}

impl Haproxy {
    /// Starts HAProxy in front of `gateways` (TLS on, all with the first one's generated
    /// certificate).
    pub fn start(gateways: &[&RunningGateway]) -> Haproxy {
        assert!(
            Path::new(HAPROXY).exists(),
            "haproxy is not installed: tests/run.sh installs Debian's haproxy"
        );
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let first = gateways[0].state_dir().join("tls");
        let mut front = fs::read(first.join("cert.pem")).unwrap();
        front.extend(fs::read(first.join("key.pem")).unwrap());
        fs::write(dir.path().join("front.pem"), &front).unwrap();
        fs::copy(first.join("ca.pem"), dir.path().join("gateways-ca.pem")).unwrap();
        let config = dir.path().join("haproxy.cfg");
        fs::write(&config, site_config(dir.path(), port, gateways)).unwrap();
        let check = Command::new(HAPROXY)
            .arg("-c")
            .arg("-f")
            .arg(&config)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "haproxy -c: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        let child = Command::new(HAPROXY)
            .arg("-db")
            .arg("-f")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(fs::File::create(dir.path().join("haproxy.log")).unwrap())
            .stderr(fs::File::create(dir.path().join("haproxy.err")).unwrap())
            .spawn()
            .unwrap();
        let haproxy = Haproxy {
            client_ca: fs::read(first.join("ca.pem")).unwrap(),
            dir,
            child: Some(child),
            port,
        };
        haproxy.wait_servers_up(gateways.len(), Duration::from_secs(20));
        haproxy
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.port)
    }

    /// A client of HAProxy's listener (it shows the first gateway's certificate).
    pub fn client(&self) -> reqwest::Client {
        client_builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&self.client_ca).unwrap())
            .resolve("localhost", ([127, 0, 0, 1], self.port).into())
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap()
    }

    /// A command on the stats socket, e.g. `show servers state` (an error until HAProxy
    /// has opened the socket).
    pub fn admin(&self, command: &str) -> std::io::Result<String> {
        let mut socket = UnixStream::connect(self.dir.path().join("admin.sock"))?;
        socket.set_read_timeout(Some(Duration::from_secs(5)))?;
        socket.write_all(format!("{command}\n").as_bytes())?;
        let mut out = String::new();
        socket.read_to_string(&mut out)?;
        Ok(out)
    }

    fn servers_state(&self) -> String {
        self.admin("show servers state clustergate_gateways")
            .unwrap_or_else(|e| format!("(stats socket: {e})"))
    }

    /// How many gateways HAProxy has in rotation (operational state 2: UP).
    pub fn servers_up(&self) -> usize {
        self.servers_state()
            .lines()
            .filter(|l| !l.starts_with('#') && l.split_whitespace().count() > 5)
            .filter(|l| l.split_whitespace().nth(5) == Some("2"))
            .count()
    }

    pub fn wait_servers_up(&self, count: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.servers_up() != count {
            assert!(
                Instant::now() < deadline,
                "HAProxy has {} gateways up, not {count}, after {limit:?}\n{}\n{}",
                self.servers_up(),
                self.servers_state(),
                fs::read_to_string(self.dir.path().join("haproxy.err")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The shipped configuration with the site-specific lines for these gateways.
fn site_config(dir: &Path, port: u16, gateways: &[&RunningGateway]) -> String {
    let shipped = fs::read_to_string(SHIPPED).unwrap();
    let mut out = String::new();
    for line in shipped.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("server ") || trimmed.starts_with("log /dev/log") {
            continue;
        }
        let line = if trimmed.starts_with("stats socket") {
            format!(
                "    stats socket {}/admin.sock mode 600 level admin",
                dir.display()
            )
        } else {
            line.replace("bind :8443", &format!("bind 127.0.0.1:{port}"))
                .replace(
                    "/etc/haproxy/clustergate.pem",
                    &dir.join("front.pem").to_string_lossy(),
                )
                .replace(
                    "/etc/haproxy/clustergate-ca.pem",
                    &dir.join("gateways-ca.pem").to_string_lossy(),
                )
        };
        out.push_str(&line);
        out.push('\n');
    }
    for (i, gateway) in gateways.iter().enumerate() {
        out.push_str(&format!("    server gateway{} {}\n", i + 1, gateway.addr));
    }
    out
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
