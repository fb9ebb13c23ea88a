//! `[upstream]`: the dashboards behind the gateway, its account on them, how their TLS is
//! verified, and every time limit on the gateway's exchanges with them ([`Timeouts`]).

use std::path::PathBuf;
use std::time::Duration;

use super::file::UpstreamSection;
use super::parse::Source;
use super::ConfigErrors;
use crate::secrets::Secret;

/// `upstream.answer_buffers_total_bytes` at most.
const MAX_ANSWER_BUFFERS: usize = 4 << 30;

/// The dashboards behind the gateway, and how to talk to them.
#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    pub servers: Vec<BackendUrl>,
    pub health_path: String,
    pub health_interval: Duration,
    /// The gateway's own account on the dashboards.
    pub username: String,
    pub password: Secret,
    /// Whose token the dashboards see on a user's requests (`upstream.identity`).
    pub identity: UpstreamIdentity,
    /// The dashboard accounts the gateway manages (`upstream.identity = "roles"`).
    pub role_accounts: RoleAccountsConfig,
    pub trust: UpstreamTrust,
    pub docs_path: String,
    pub docs_refresh: Duration,
    pub timeouts: Timeouts,
    pub max_body_bytes: usize,
    /// The body limit of operations served without a token (`access.open_operations`):
    /// what anyone may make the gateway hold; at most `max_body_bytes`.
    pub max_open_body_bytes: usize,
    pub in_flight: InFlightLimits,
    pub login_backoff: LoginBackoff,
    pub answer_buffers: AnswerBufferLimits,
}

/// How long a refused service login waits before the next: `min`, doubling with each
/// consecutive refusal, up to `max` (`upstream.login_backoff_min_ms`, `_max_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginBackoff {
    pub min: Duration,
    pub max: Duration,
}

impl LoginBackoff {
    /// The wait after the `refusals`-th consecutive refusal (1: `min`).
    pub fn after(&self, refusals: u32) -> Duration {
        let doublings = refusals.saturating_sub(1).min(31);
        self.min.saturating_mul(1 << doublings).min(self.max)
    }
}

/// How much of the dashboards' answers the gateway reads ahead of slow clients, so that a
/// place on the dashboard is given back when its answer has been read, not when the client
/// has taken it (`dashboards::answer_buffer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerBufferLimits {
    /// One answer (`upstream.answer_buffer_bytes`); a larger one is streamed, holding its
    /// place until its client has taken it.
    pub per_answer: usize,
    /// All answers being held at once (`upstream.answer_buffers_total_bytes`); past it the
    /// next answers are streamed.
    pub total: usize,
}

/// How many forwarded requests one dashboard gets at once, and how long the others wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlightLimits {
    /// Requests at once per dashboard (`upstream.max_in_flight`): below its thread pool,
    /// so that a burst never takes every thread from the health checks.
    pub max: usize,
    /// Requests waiting for one of those places (`upstream.max_queued`); past it 503.
    pub queued: usize,
    /// How long a request waits for a place (`upstream.queue_timeout_ms`); then 503.
    pub wait: Duration,
}

/// Whom the dashboards see on a logged-in user's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamIdentity {
    /// The gateway's service account (`upstream.username`).
    Service,
    /// The user's own dashboard account, logged in with the user's password at login.
    User,
    /// An account the gateway manages that holds exactly the user's roles.
    Roles,
}

/// The accounts the gateway makes on the dashboards for `upstream.identity = "roles"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleAccountsConfig {
    /// Distinct sets of roles with an account (`upstream.max_role_accounts`); past it 503.
    pub max: usize,
    /// The key their passwords are derived from (`upstream.accounts_key_file`); `None`:
    /// generated into `server.state_dir` on first start.
    pub key_file: Option<PathBuf>,
}

/// Every time limit on the gateway's exchanges with the dashboards, derived once from
/// `upstream.connect_timeout_ms` and `upstream.read_timeout_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Connecting to a dashboard (`connect_timeout_ms`).
    pub connect: Duration,
    /// Waiting for a forwarded request's answer (`read_timeout_ms`): some dashboard
    /// operations take minutes.
    pub read: Duration,
    /// Writing a request to a dashboard: the connect timeout, at least 10 s (a body takes
    /// longer to send than a handshake).
    pub write: Duration,
    /// How long an idle connection to a dashboard is kept for reuse.
    pub idle: Duration,
    /// A background health check: twice the connect timeout, at least 1 s.
    pub health_probe: Duration,
    /// Re-checking a dashboard that answered a request with a redirect or an error, while
    /// that request waits: the connect timeout, at least 1 s.
    pub standby_probe: Duration,
    /// Waiting for the answer to the service account's login: the connect timeout, at
    /// least 10 s (the dashboard hashes the password first).
    pub login_answer: Duration,
    /// A whole service-account login: five connect timeouts.
    pub login: Duration,
    /// Fetching the API document (a large answer): ten connect timeouts.
    pub docs_fetch: Duration,
}

impl Timeouts {
    pub fn derive(connect: Duration, read: Duration) -> Timeouts {
        Timeouts {
            connect,
            read,
            write: connect.max(Duration::from_secs(10)),
            idle: Duration::from_secs(60),
            health_probe: (connect * 2).max(Duration::from_secs(1)),
            standby_probe: connect.max(Duration::from_secs(1)),
            login_answer: connect.max(Duration::from_secs(10)),
            login: connect * 5,
            docs_fetch: connect * 10,
        }
    }
}

/// One dashboard's base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendUrl {
    pub tls: bool,
    pub host: String,
    pub port: u16,
}

impl BackendUrl {
    /// `scheme://host:port`, as the dashboard writes its own address.
    pub fn base(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        if self.host.contains(':') {
            format!("{scheme}://[{}]:{}", self.host, self.port)
        } else {
            format!("{scheme}://{}:{}", self.host, self.port)
        }
    }
}

/// How https backends are verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamTrust {
    /// The system's trust store.
    System,
    /// These CA certificates (DER), from `ca_file`.
    CaFile {
        path: PathBuf,
        certificates: Vec<Vec<u8>>,
    },
    /// No verification: an explicit opt-in, logged at start.
    InsecureSkipVerify,
}

/// `http(s)://host[:port][/]`: the parts of a base URL, without a path.
pub(super) fn parse_base_url(text: &str) -> Option<BackendUrl> {
    let uri: http::Uri = text.parse().ok()?;
    let tls = match uri.scheme_str()? {
        "http" => false,
        "https" => true,
        _ => return None,
    };
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return None;
    }
    let host = uri
        .host()?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    Some(BackendUrl { tls, host, port })
}

/// `[upstream]`; `None` when a problem was reported.
pub(super) fn validate(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    u: UpstreamSection,
) -> Option<UpstreamConfig> {
    let before = errors.0.len();
    let servers = servers(errors, at, &u.servers);
    check_values(errors, at, &u);
    let password = at.password_file(
        errors,
        "upstream.password_file",
        &u.password_file,
        " (write the service account's password there)",
    );
    let trust = trust(errors, at, u.ca_file.as_deref(), u.insecure_skip_verify);
    let identity = identity(errors, at, &u.identity);
    let role_accounts = role_accounts(errors, at, &u);
    if errors.0.len() > before {
        return None;
    }
    Some(UpstreamConfig {
        servers,
        health_path: u.health_path,
        health_interval: Duration::from_millis(u.health_interval_ms),
        username: u.username,
        password: password?,
        identity,
        role_accounts,
        trust: trust?,
        docs_path: u.docs_path,
        docs_refresh: Duration::from_secs(u.docs_refresh_seconds),
        timeouts: Timeouts::derive(
            Duration::from_millis(u.connect_timeout_ms),
            Duration::from_millis(u.read_timeout_ms),
        ),
        max_body_bytes: u.max_body_bytes,
        // Never more than a token holder may send.
        max_open_body_bytes: u.max_open_body_bytes.min(u.max_body_bytes),
        in_flight: InFlightLimits {
            max: u.max_in_flight,
            queued: u.max_queued,
            wait: Duration::from_millis(u.queue_timeout_ms),
        },
        login_backoff: LoginBackoff {
            min: Duration::from_millis(u.login_backoff_min_ms),
            max: Duration::from_millis(u.login_backoff_max_ms),
        },
        answer_buffers: AnswerBufferLimits {
            per_answer: u.answer_buffer_bytes,
            total: u.answer_buffers_total_bytes,
        },
    })
}

fn servers(errors: &mut ConfigErrors, at: &Source<'_>, texts: &[String]) -> Vec<BackendUrl> {
    let f = at.file;
    if texts.is_empty() {
        errors.push(
            f,
            "upstream.servers",
            "list at least one dashboard, like [\"http://127.0.0.1:8080\"] (or remove [upstream])",
        );
    }
    let mut servers = Vec::with_capacity(texts.len());
    for (i, text) in texts.iter().enumerate() {
        match parse_base_url(text) {
            Some(url) if servers.contains(&url) => errors.push(f, format!("upstream.servers[{i}]"), format!("{text:?} is listed twice")),
            Some(url) => servers.push(url),
            None => errors.push(f, format!("upstream.servers[{i}]"), format!("{text:?} is not a base URL like \"http://127.0.0.1:8080\" (scheme, host, port; no path)")),
        }
    }
    servers
}

/// Paths, intervals, timeouts, the body and in-flight bounds and the account name.
fn check_values(errors: &mut ConfigErrors, at: &Source<'_>, u: &UpstreamSection) {
    let f = at.file;
    for (key, path) in [
        ("upstream.health_path", &u.health_path),
        ("upstream.docs_path", &u.docs_path),
    ] {
        if !path.starts_with('/') {
            errors.push(f, key, format!("{path:?} must start with '/'"));
        }
    }
    for (key, value) in [
        ("upstream.health_interval_ms", u.health_interval_ms),
        ("upstream.connect_timeout_ms", u.connect_timeout_ms),
        ("upstream.read_timeout_ms", u.read_timeout_ms),
        ("upstream.docs_refresh_seconds", u.docs_refresh_seconds),
    ] {
        if value == 0 {
            errors.push(f, key, "must be > 0");
        }
    }
    if u.max_body_bytes == 0 {
        errors.push(f, "upstream.max_body_bytes", "must be > 0");
    }
    if u.max_open_body_bytes == 0 {
        errors.push(
            f,
            "upstream.max_open_body_bytes",
            "must be > 0 (the web UI's error reports without a token are a few KB: 16384)",
        );
    }
    if !(1..=10_000).contains(&u.max_in_flight) {
        errors.push(
            f,
            "upstream.max_in_flight",
            "must be between 1 and 10000 (keep it below the dashboard's 10 threads: 8)",
        );
    }
    if u.max_queued > 100_000 {
        errors.push(
            f,
            "upstream.max_queued",
            "must be between 0 (no waiting) and 100000",
        );
    }
    if !(1..=600_000).contains(&u.queue_timeout_ms) {
        errors.push(
            f,
            "upstream.queue_timeout_ms",
            "must be between 1 and 600000 (10 minutes)",
        );
    }
    if !(100..=3_600_000).contains(&u.login_backoff_min_ms) {
        errors.push(
            f,
            "upstream.login_backoff_min_ms",
            "must be between 100 and 3600000 (an hour)",
        );
    }
    if !(u.login_backoff_min_ms..=86_400_000).contains(&u.login_backoff_max_ms) {
        errors.push(
            f,
            "upstream.login_backoff_max_ms",
            "must be between login_backoff_min_ms and 86400000 (a day)",
        );
    }
    if u.answer_buffer_bytes > u.answer_buffers_total_bytes {
        errors.push(
            f,
            "upstream.answer_buffer_bytes",
            "must be at most upstream.answer_buffers_total_bytes (0: stream every answer)",
        );
    }
    if u.answer_buffers_total_bytes > MAX_ANSWER_BUFFERS {
        errors.push(
            f,
            "upstream.answer_buffers_total_bytes",
            format!("must be at most {MAX_ANSWER_BUFFERS} (4 GiB)"),
        );
    }
    if u.username.is_empty() {
        errors.push(
            f,
            "upstream.username",
            "must name the gateway's account on the dashboards",
        );
    }
}

fn identity(errors: &mut ConfigErrors, at: &Source<'_>, text: &str) -> UpstreamIdentity {
    match text {
        "service" => UpstreamIdentity::Service,
        "user" => UpstreamIdentity::User,
        "roles" => UpstreamIdentity::Roles,
        other => {
            errors.push(
                at.file,
                "upstream.identity",
                format!("{other:?} is not \"roles\" (an account the gateway manages holding the user's roles), \"service\" (the gateway's account) or \"user\" (each user's own dashboard account)"),
            );
            UpstreamIdentity::Service
        }
    }
}

/// `upstream.max_role_accounts` and `upstream.accounts_key_file`.
fn role_accounts(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    u: &UpstreamSection,
) -> RoleAccountsConfig {
    if !(1..=1000).contains(&u.max_role_accounts) {
        errors.push(
            at.file,
            "upstream.max_role_accounts",
            "must be between 1 and 1000 (one dashboard account per distinct set of roles in use)",
        );
    }
    let key_file = u.accounts_key_file.as_deref().map(|file| at.resolve(file));
    if let Some(path) = &key_file {
        let key = "upstream.accounts_key_file";
        at.owner_only_file(errors, key, path);
        match std::fs::metadata(path) {
            Ok(m) if m.len() >= 32 => {}
            Ok(_) => errors.push(
                at.file,
                key,
                format!(
                    "{} must hold at least 32 bytes (e.g. head -c 32 /dev/urandom | base64 > {})",
                    path.display(),
                    path.display()
                ),
            ),
            Err(e) => errors.push(
                at.file,
                key,
                format!(
                    "cannot read {}: {e} (give every gateway of the deployment the same key file)",
                    path.display()
                ),
            ),
        }
    }
    RoleAccountsConfig {
        max: u.max_role_accounts,
        key_file,
    }
}

fn trust(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    ca_file: Option<&str>,
    insecure: bool,
) -> Option<UpstreamTrust> {
    match (ca_file, insecure) {
        (Some(_), true) => {
            errors.push(
                at.file,
                "upstream.insecure_skip_verify",
                "cannot be combined with ca_file: remove one",
            );
            None
        }
        (None, true) => Some(UpstreamTrust::InsecureSkipVerify),
        (None, false) => Some(UpstreamTrust::System),
        (Some(ca), false) => {
            let path = at.resolve(ca);
            match crate::tls::read_ca_file(&path) {
                Ok(certificates) => Some(UpstreamTrust::CaFile { path, certificates }),
                Err(e) => {
                    errors.push(at.file, "upstream.ca_file", e.to_string());
                    None
                }
            }
        }
    }
}
