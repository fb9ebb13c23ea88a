//! `[server]` and `[metrics]`: where the gateway listens, its TLS, its threads, its state
//! directory, the proxies it believes about client addresses, and the admin listener.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use pingora::tls::sign::CertifiedKey;

use super::file::{MetricsSection, ServerSection};
use super::parse::Source;
use super::upstream::parse_base_url;
use super::ConfigErrors;
use crate::client_addr::TrustedProxies;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Port 0: one the kernel chooses (`state_dir/listening` names it).
    pub listen: SocketAddr,
    pub tls: TlsMode,
    pub state_dir: PathBuf,
    /// Worker threads for the proxy service.
    pub threads: usize,
    /// Whether the worker threads steal each other's tasks (tokio's multi-threaded
    /// runtime) or each runs its own connections (one single-threaded runtime per thread,
    /// fewer cross-thread wake-ups: bench/README.md has the measurements).
    pub work_stealing: bool,
    /// How long SIGTERM waits for in-flight requests (pingora's default is 300 s).
    pub shutdown_grace: Duration,
    /// How long SIGTERM first answers "not ready" to balancers, serving meanwhile.
    pub drain: Duration,
    /// The gateway's address as clients see it (for the docs' `servers`); `None`: "/".
    pub public_url: Option<String>,
    pub clients: ClientLimits,
    /// Bytes of request bodies held at once, all requests together
    /// (`server.body_budget_bytes`); `None`: derived at start from the memory the process
    /// is given (`edge::body_budget`).
    pub body_budget: Option<usize>,
    /// Peers whose `X-Forwarded-For` names the client.
    pub trusted_proxies: TrustedProxies,
}

/// What one client may hold of the gateway before a request is parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientLimits {
    /// A request head (request line and headers) larger than this is refused (431).
    pub max_header_bytes: usize,
    /// A request head with more header lines than this is refused (431).
    pub max_header_count: usize,
    /// A request head must arrive whole this soon after the connection opened or its
    /// first byte came (408, or closed when nothing came).
    pub header_timeout: Duration,
    /// A request body the gateway reads (to forward it, or an auth endpoint's) must
    /// arrive whole this soon after its head (408, and the connection is closed).
    pub body_timeout: Duration,
    /// Every write of an answer to a client must progress this soon (HTTP/2: a stream's
    /// window must open), else the connection is closed.
    pub write_timeout: Duration,
    /// Bytes per second every write of an answer to a client must reach (a write of n
    /// bytes may take n / rate, at least 1 s); `None`: only `write_timeout`.
    pub min_send_rate: Option<usize>,
    /// An idle keep-alive connection is closed after this.
    pub keepalive_timeout: Duration,
    /// Open connections per client address (IPv6: per /64); `None`: no cap. Connections
    /// from `server.trusted_proxies` are not counted: they carry many clients.
    pub max_connections_per_ip: Option<usize>,
}

/// pingora's HTTP/1 parser reads request heads up to 1 MiB and 256 header lines.
const PINGORA_MAX_HEADER_BYTES: usize = 1_048_575;
const PINGORA_MAX_HEADER_COUNT: usize = 256;
/// The auth endpoints read bodies of up to 64 KiB (`auth::BODY_LIMIT`).
const MIN_BODY_BUDGET: usize = 64 * 1024;

/// `server.min_send_bytes_per_second` at most: no client link needs a higher floor.
const MAX_SEND_RATE: usize = 1 << 30;

#[derive(Debug, Clone)]
pub enum TlsMode {
    /// Plain HTTP, behind a TLS-terminating balancer.
    Off,
    /// A certificate chain and key the operator provides, loaded and matched once.
    Files {
        cert: PathBuf,
        key: PathBuf,
        certified: Arc<CertifiedKey>,
    },
    /// A certificate generated into `state_dir/tls` on first start and reused.
    Generated,
}

#[derive(Debug, Clone)]
pub struct MetricsConfig {
    /// Port 0: one the kernel chooses (`state_dir/listening` names it).
    pub listen: SocketAddr,
}

/// `[server]` and `[metrics]`; `None` when a problem was reported.
pub(super) fn validate(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    server: ServerSection,
    metrics: MetricsSection,
) -> Option<(ServerConfig, MetricsConfig)> {
    let f = at.file;
    let listen = parse_addr(errors, f, "server.listen", &server.listen);
    let metrics_listen = parse_addr(errors, f, "metrics.listen", &metrics.listen);
    if let (Some(a), Some(b)) = (listen, metrics_listen) {
        // Port 0 twice is two ports, each chosen by the kernel.
        if a.port() == b.port()
            && a.port() != 0
            && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
        {
            errors.push(f, "metrics.listen", "must differ from server.listen");
        }
    }
    let tls = tls_mode(errors, at, &server);
    let threads = server.threads.unwrap_or_else(default_threads);
    if threads == 0 {
        errors.push(f, "server.threads", "must be at least 1");
    }
    let drain = Duration::try_from_secs_f64(server.drain_seconds).ok();
    if drain.is_none_or(|d| d > Duration::from_secs(3600)) {
        errors.push(
            f,
            "server.drain_seconds",
            "must be between 0 and 3600 (0: stop without draining)",
        );
    }
    if let Some(url) = &server.public_url {
        if parse_base_url(url).is_none() {
            errors.push(
                f,
                "server.public_url",
                format!(
                    "{url:?} is not an absolute http(s) URL like \"https://ceph.example.com:8443\""
                ),
            );
        }
    }
    let clients = client_limits(errors, f, &server);
    let body_budget = body_budget(errors, f, server.body_budget_bytes);
    let trusted_proxies = trusted_proxies(errors, f, &server.trusted_proxies);
    let server = ServerConfig {
        listen: listen?,
        tls: tls?,
        state_dir: at.resolve(&server.state_dir),
        threads,
        work_stealing: server.work_stealing,
        shutdown_grace: Duration::from_secs(server.shutdown_grace_seconds),
        drain: drain?,
        public_url: server.public_url,
        clients: clients?,
        body_budget: body_budget?,
        trusted_proxies,
    };
    let metrics = MetricsConfig {
        listen: metrics_listen?,
    };
    Some((server, metrics))
}

fn client_limits(
    errors: &mut ConfigErrors,
    f: &std::path::Path,
    server: &ServerSection,
) -> Option<ClientLimits> {
    let before = errors.0.len();
    if !(1024..=PINGORA_MAX_HEADER_BYTES).contains(&server.max_header_bytes) {
        errors.push(
            f,
            "server.max_header_bytes",
            format!("must be between 1024 and {PINGORA_MAX_HEADER_BYTES} (pingora's own bound)"),
        );
    }
    if !(1..=PINGORA_MAX_HEADER_COUNT).contains(&server.max_header_count) {
        errors.push(
            f,
            "server.max_header_count",
            format!("must be between 1 and {PINGORA_MAX_HEADER_COUNT} (pingora's own bound)"),
        );
    }
    if !(100..=600_000).contains(&server.header_timeout_ms) {
        errors.push(
            f,
            "server.header_timeout_ms",
            "must be between 100 and 600000 (10 minutes)",
        );
    }
    if !(100..=600_000).contains(&server.body_timeout_ms) {
        errors.push(
            f,
            "server.body_timeout_ms",
            "must be between 100 and 600000 (10 minutes)",
        );
    }
    if !(100..=600_000).contains(&server.write_timeout_ms) {
        errors.push(
            f,
            "server.write_timeout_ms",
            "must be between 100 and 600000 (10 minutes)",
        );
    }
    if server.min_send_bytes_per_second > MAX_SEND_RATE {
        errors.push(
            f,
            "server.min_send_bytes_per_second",
            format!("must be between 0 (no minimum) and {MAX_SEND_RATE} (1 GiB/s)"),
        );
    }
    if !(1..=3600).contains(&server.keepalive_timeout_s) {
        errors.push(
            f,
            "server.keepalive_timeout_s",
            "must be between 1 and 3600",
        );
    }
    (errors.0.len() == before).then(|| ClientLimits {
        max_header_bytes: server.max_header_bytes,
        max_header_count: server.max_header_count,
        header_timeout: Duration::from_millis(server.header_timeout_ms),
        body_timeout: Duration::from_millis(server.body_timeout_ms),
        write_timeout: Duration::from_millis(server.write_timeout_ms),
        min_send_rate: (server.min_send_bytes_per_second > 0)
            .then_some(server.min_send_bytes_per_second),
        keepalive_timeout: Duration::from_secs(server.keepalive_timeout_s),
        max_connections_per_ip: (server.max_connections_per_ip > 0)
            .then_some(server.max_connections_per_ip),
    })
}

/// `server.body_budget_bytes`: at least the largest body the auth endpoints take (the
/// forwarded bodies' limit is checked against it with `[upstream]`). `Some(None)`: derived.
fn body_budget(
    errors: &mut ConfigErrors,
    f: &std::path::Path,
    bytes: Option<usize>,
) -> Option<Option<usize>> {
    match bytes {
        Some(n) if n < MIN_BODY_BUDGET => {
            errors.push(
                f,
                "server.body_budget_bytes",
                format!("must be at least {MIN_BODY_BUDGET} (the auth endpoints' largest body), or removed to derive it from the memory limit"),
            );
            None
        }
        _ => Some(bytes),
    }
}

/// The number of cores, as pingora and the password hasher size themselves by it.
pub(super) fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `server.trusted_proxies`: CIDRs (`10.0.0.0/8`, `2001:db8::/32`) or single addresses.
fn trusted_proxies(
    errors: &mut ConfigErrors,
    f: &std::path::Path,
    entries: &[String],
) -> TrustedProxies {
    let mut nets = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let key = format!("server.trusted_proxies[{i}]");
        let parsed = entry
            .parse::<IpNet>()
            .or_else(|_| entry.parse::<std::net::IpAddr>().map(IpNet::from));
        match parsed {
            Ok(net) if net == net.trunc() => nets.push(net),
            Ok(net) => errors.push(
                f,
                key,
                format!("{entry:?} has bits set after the prefix; write {:?}", net.trunc().to_string()),
            ),
            Err(_) => errors.push(
                f,
                key,
                format!("{entry:?} is not a CIDR like \"10.0.0.0/8\" or \"2001:db8::/32\", or an address like \"10.0.0.5\""),
            ),
        }
    }
    TrustedProxies::new(nets)
}

fn parse_addr(
    errors: &mut ConfigErrors,
    f: &std::path::Path,
    key: &str,
    value: &str,
) -> Option<SocketAddr> {
    match value.parse() {
        Ok(addr) => Some(addr),
        Err(_) => {
            errors.push(
                f,
                key,
                format!("{value:?} is not an address like \"0.0.0.0:8443\" or \"[::]:8443\""),
            );
            None
        }
    }
}

fn tls_mode(errors: &mut ConfigErrors, at: &Source<'_>, server: &ServerSection) -> Option<TlsMode> {
    let f = at.file;
    if !server.tls {
        return Some(TlsMode::Off);
    }
    match (&server.cert_file, &server.key_file) {
        (None, None) => Some(TlsMode::Generated),
        (Some(cert), Some(key)) => {
            let (cert, key) = (at.resolve(cert), at.resolve(key));
            // pingora's error names neither file: a file that cannot be read is named
            // here by its own key.
            let mut readable = true;
            for (name, path) in [("server.cert_file", &cert), ("server.key_file", &key)] {
                if let Err(e) = readable_file(path) {
                    errors.push(f, name, format!("cannot read {}: {e}", path.display()));
                    readable = false;
                }
            }
            if !readable {
                return None;
            }
            at.owner_only_file(errors, "server.key_file", &key);
            match crate::tls::load_certified_key(&cert, &key) {
                Ok(certified) => Some(TlsMode::Files {
                    cert,
                    key,
                    certified,
                }),
                Err(e) => {
                    errors.push(f, "server.cert_file", format!("{e}"));
                    None
                }
            }
        }
        (Some(_), None) => {
            errors.push(f, "server.key_file", "must be set together with server.cert_file (or remove both to generate a certificate)");
            None
        }
        (None, Some(_)) => {
            errors.push(f, "server.cert_file", "must be set together with server.key_file (or remove both to generate a certificate)");
            None
        }
    }
}

/// Whether `path` is a file this process can open.
fn readable_file(path: &std::path::Path) -> std::io::Result<()> {
    let metadata = std::fs::File::open(path)?.metadata()?;
    if metadata.is_file() {
        Ok(())
    } else {
        Err(std::io::Error::other("not a file"))
    }
}
