//! The only reader of configuration files: TOML is parsed into private file structs,
//! validated once, and turned into the typed [`Config`] the rest of the gateway uses.
//! Every problem is collected and reported together, naming the file and the key.

mod error;
mod file;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use error::{ConfigError, ConfigErrors};
use file::{FileConfig, ScopesFile, UsersFile};

use crate::secrets::Secret;
use crate::users::{PasswordHash, Permission, Role, Scope, UserSpec};

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it came from; relative paths in it were resolved against its folder.
    pub source: PathBuf,
    pub server: ServerConfig,
    pub metrics: MetricsConfig,
    pub api: ApiConfig,
    pub auth: AuthConfig,
    pub users: UsersConfig,
    /// `None`: no backends; every API path other than auth is answered 404.
    pub upstream: Option<UpstreamConfig>,
    pub access: AccessConfig,
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub tls: TlsMode,
    pub state_dir: PathBuf,
    /// Worker threads for the proxy service.
    pub threads: usize,
    /// How long SIGTERM waits for in-flight requests (pingora's default is 300 s).
    pub shutdown_grace: Duration,
    /// The gateway's address as clients see it (for the docs' `servers`); `None`: "/".
    pub public_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain HTTP, behind a TLS-terminating balancer.
    Off,
    /// A certificate chain and key the operator provides.
    Files { cert: PathBuf, key: PathBuf },
    /// A certificate generated into `state_dir/tls` on first start and reused.
    Generated,
}

#[derive(Debug, Clone)]
pub struct MetricsConfig {
    pub listen: SocketAddr,
}

#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// The `<vendor>` in `application/vnd.<vendor>.api.vX.Y+json`.
    pub vendor: String,
}

#[derive(Debug, Clone)]
pub struct AuthConfig {
    pub token_ttl: Duration,
    pub issuer: String,
    pub lockout: Option<LockoutPolicy>,
    /// `None`: generated into `state_dir/jwt-secret`.
    pub secret_file: Option<PathBuf>,
    pub max_concurrent_hashes: usize,
    pub max_queued_logins: usize,
}

/// After `attempts` consecutive failures a username is refused for `duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockoutPolicy {
    pub attempts: u32,
    pub duration: Duration,
}

#[derive(Debug, Clone)]
pub struct UsersConfig {
    pub file: PathBuf,
    /// Empty when the file does not exist: the first start then creates an admin.
    pub users: Vec<UserSpec>,
}

/// The dashboards behind the gateway, and how to talk to them.
#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    pub servers: Vec<BackendUrl>,
    pub health_path: String,
    pub health_interval: Duration,
    /// The gateway's own account on the dashboards.
    pub username: String,
    pub password: Secret,
    pub trust: UpstreamTrust,
    pub docs_path: String,
    pub docs_refresh: Duration,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub max_body_bytes: usize,
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

/// Which dashboard operations need which scope and permission.
#[derive(Debug, Clone, Default)]
pub struct AccessConfig {
    pub scopes_file: PathBuf,
    pub ceph_version: Option<String>,
    pub operations: Vec<OperationRule>,
}

/// One dashboard operation: `method path` needs `permission` on `scope`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationRule {
    pub method: http::Method,
    /// The OpenAPI path template, e.g. `/api/pool/{pool_name}`.
    pub path: String,
    /// `None`: a valid token is enough.
    pub scope: Option<(Scope, Permission)>,
    /// The dashboard serves it without any token.
    pub public: bool,
    /// The gateway serves it without a token too (`access.open_operations`); public
    /// operations not opened stay closed.
    pub open: bool,
    /// The gateway refuses it whoever asks (`access.closed_operations`).
    pub closed: bool,
}

/// Reads and validates the configuration file and the users file it names.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let mut errors = ConfigErrors::default();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            errors.push(path, "file", format!("cannot read: {e}"));
            return Err(errors);
        }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    Config::from_toml_str(&text, path, dir)
}

impl Config {
    /// Validates configuration text as if read from `source`, resolving paths against `dir`.
    pub fn from_toml_str(text: &str, source: &Path, dir: &Path) -> Result<Config, ConfigErrors> {
        let mut errors = ConfigErrors::default();
        let file = match parse_sections(text, source, &mut errors) {
            Some(file) => file,
            None => return Err(errors),
        };
        let FileConfig {
            server,
            metrics,
            api,
            auth,
            upstream,
            access,
        } = file;
        let f = source;
        let resolve = |p: &str| {
            let p = Path::new(p);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                dir.join(p)
            }
        };

        let listen = parse_addr(&mut errors, f, "server.listen", &server.listen);
        let metrics_listen = parse_addr(&mut errors, f, "metrics.listen", &metrics.listen);
        if let (Some(a), Some(b)) = (listen, metrics_listen) {
            if a.port() == b.port()
                && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
            {
                errors.push(f, "metrics.listen", "must differ from server.listen");
            }
        }
        let state_dir = resolve(&server.state_dir);
        let tls = tls_mode(&mut errors, f, &server, &resolve);
        let threads = server.threads.unwrap_or_else(default_threads);
        if threads == 0 {
            errors.push(f, "server.threads", "must be at least 1");
        }

        if api.vendor.is_empty()
            || !api
                .vendor
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            errors.push(
                f,
                "api.vendor",
                "must be lowercase letters, digits and '-', like \"ceph\"",
            );
        }

        if auth.token_ttl_seconds == 0 {
            errors.push(
                f,
                "auth.token_ttl_seconds",
                "must be > 0 (the dashboard uses 28800)",
            );
        }
        if auth.issuer.trim().is_empty() {
            errors.push(f, "auth.issuer", "must not be empty");
        }
        let lockout = match (auth.lockout_attempts, auth.lockout_seconds) {
            (0, _) => None,
            (_, 0) => {
                errors.push(f, "auth.lockout_seconds", "must be > 0 when lockout_attempts > 0 (or set lockout_attempts = 0 to disable lockout)");
                None
            }
            (attempts, secs) => Some(LockoutPolicy {
                attempts,
                duration: Duration::from_secs(secs),
            }),
        };
        let secret_file = auth.secret_file.as_deref().map(resolve);
        if let Some(path) = &secret_file {
            if let Err(e) = crate::secrets::read_secret(path) {
                errors.push(
                    f,
                    "auth.secret_file",
                    format!("{e} (or remove the key to have one generated)"),
                );
            }
        }
        let max_concurrent_hashes = auth
            .max_concurrent_hashes
            .unwrap_or_else(|| (default_threads() / 2).max(1));
        if max_concurrent_hashes == 0 {
            errors.push(f, "auth.max_concurrent_hashes", "must be at least 1");
        }

        let users_file = resolve(&auth.users_file);
        let users = load_users(&mut errors, &users_file);

        let public_url = server.public_url.clone();
        if let Some(url) = &public_url {
            if parse_base_url(url).is_none() {
                errors.push(f, "server.public_url", format!("{url:?} is not an absolute http(s) URL like \"https://ceph.example.com:8443\""));
            }
        }
        let upstream = upstream.map(|u| upstream_config(&mut errors, f, u, &resolve));
        let scopes_file = resolve(&access.scopes_file);
        let access = match &upstream {
            Some(_) => load_scopes(
                &mut errors,
                f,
                &scopes_file,
                &access.open_operations,
                &access.closed_operations,
            ),
            None => AccessConfig {
                scopes_file,
                ..AccessConfig::default()
            },
        };

        if !errors.is_empty() {
            return Err(errors);
        }
        let (Some(listen), Some(metrics_listen), Some(tls)) = (listen, metrics_listen, tls) else {
            return Err(errors);
        };
        let upstream = match upstream {
            Some(Some(u)) => Some(u),
            Some(None) => return Err(errors),
            None => None,
        };
        Ok(Config {
            source: source.to_path_buf(),
            server: ServerConfig {
                listen,
                tls,
                state_dir,
                threads,
                shutdown_grace: Duration::from_secs(server.shutdown_grace_seconds),
                public_url,
            },
            metrics: MetricsConfig {
                listen: metrics_listen,
            },
            api: ApiConfig { vendor: api.vendor },
            auth: AuthConfig {
                token_ttl: Duration::from_secs(auth.token_ttl_seconds),
                issuer: auth.issuer,
                lockout,
                secret_file,
                max_concurrent_hashes,
                max_queued_logins: auth.max_queued_logins,
            },
            users: UsersConfig {
                file: users_file,
                users,
            },
            upstream,
            access,
        })
    }
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn parse_addr(errors: &mut ConfigErrors, f: &Path, key: &str, value: &str) -> Option<SocketAddr> {
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

fn tls_mode(
    errors: &mut ConfigErrors,
    f: &Path,
    server: &file::ServerSection,
    resolve: &dyn Fn(&str) -> PathBuf,
) -> Option<TlsMode> {
    if !server.tls {
        return Some(TlsMode::Off);
    }
    match (&server.cert_file, &server.key_file) {
        (None, None) => Some(TlsMode::Generated),
        (Some(cert), Some(key)) => {
            let (cert, key) = (resolve(cert), resolve(key));
            if let Err(e) = crate::tls::check_files(&cert, &key) {
                errors.push(f, "server.cert_file", format!("{e}"));
                return None;
            }
            Some(TlsMode::Files { cert, key })
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

/// Parses the file section by section, so that one section's problem (an unknown key, a
/// wrong type) does not hide the others'. Unknown keys are reported and skipped; a
/// section of the wrong type falls back to its defaults after its problem is reported.
fn parse_sections(text: &str, source: &Path, errors: &mut ConfigErrors) -> Option<FileConfig> {
    let mut table: toml::Table = match text.parse() {
        Ok(table) => table,
        Err(e) => {
            errors.push_toml(source, text, &e);
            return None;
        }
    };
    let mut section = |name: &str| table.remove(name);
    let file = FileConfig {
        server: typed_section(errors, source, "server", section("server")).unwrap_or_default(),
        metrics: typed_section(errors, source, "metrics", section("metrics")).unwrap_or_default(),
        api: typed_section(errors, source, "api", section("api")).unwrap_or_default(),
        auth: typed_section(errors, source, "auth", section("auth")).unwrap_or_default(),
        upstream: typed_section(errors, source, "upstream", section("upstream")),
        access: typed_section(errors, source, "access", section("access")).unwrap_or_default(),
    };
    for key in table.keys() {
        errors.push(
            source,
            key.as_str(),
            "unknown section or key (sections: server, metrics, api, auth, upstream, access)",
        );
    }
    Some(file)
}

/// One section as its struct; `None` when absent or unusable (its problems are reported).
fn typed_section<T: serde::de::DeserializeOwned>(
    errors: &mut ConfigErrors,
    source: &Path,
    name: &str,
    value: Option<toml::Value>,
) -> Option<T> {
    let mut value = value?;
    // Each pass removes one unknown key; a section has only so many keys.
    for _ in 0..=64 {
        match value.clone().try_into::<T>() {
            Ok(parsed) => return Some(parsed),
            Err(e) => {
                let message = e.message().trim().to_string();
                let unknown = message
                    .strip_prefix("unknown field `")
                    .and_then(|rest| rest.split_once('`'))
                    .map(|(key, _)| key.to_string());
                let removed = match (&unknown, value.as_table_mut()) {
                    (Some(key), Some(table)) => table.remove(key).is_some(),
                    _ => false,
                };
                match unknown {
                    Some(key) if removed => {
                        errors.push(
                            source,
                            format!("{name}.{key}"),
                            format!("unknown key; {message}"),
                        );
                    }
                    _ => {
                        errors.push(source, name, message);
                        return None;
                    }
                }
            }
        }
    }
    None
}

/// `http(s)://host[:port][/]`: the parts of a base URL, without a path.
fn parse_base_url(text: &str) -> Option<BackendUrl> {
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

fn upstream_config(
    errors: &mut ConfigErrors,
    f: &Path,
    u: file::UpstreamSection,
    resolve: &dyn Fn(&str) -> PathBuf,
) -> Option<UpstreamConfig> {
    let before = errors.0.len();
    if u.servers.is_empty() {
        errors.push(
            f,
            "upstream.servers",
            "list at least one dashboard, like [\"http://127.0.0.1:8080\"] (or remove [upstream])",
        );
    }
    let mut servers = Vec::with_capacity(u.servers.len());
    for (i, text) in u.servers.iter().enumerate() {
        match parse_base_url(text) {
            Some(url) if servers.contains(&url) => errors.push(f, format!("upstream.servers[{i}]"), format!("{text:?} is listed twice")),
            Some(url) => servers.push(url),
            None => errors.push(f, format!("upstream.servers[{i}]"), format!("{text:?} is not a base URL like \"http://127.0.0.1:8080\" (scheme, host, port; no path)")),
        }
    }
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
    if u.username.is_empty() {
        errors.push(
            f,
            "upstream.username",
            "must name the gateway's account on the dashboards",
        );
    }
    let password_file = resolve(&u.password_file);
    let password = match std::fs::read_to_string(&password_file) {
        Ok(text) if !text.trim_end_matches(['\n', '\r']).is_empty() => Some(Secret::new(
            text.trim_end_matches(['\n', '\r']).as_bytes().to_vec(),
        )),
        Ok(_) => {
            errors.push(
                f,
                "upstream.password_file",
                format!("{} is empty", password_file.display()),
            );
            None
        }
        Err(e) => {
            errors.push(
                f,
                "upstream.password_file",
                format!(
                    "cannot read {}: {e} (write the service account's password there)",
                    password_file.display()
                ),
            );
            None
        }
    };
    let trust = match (&u.ca_file, u.insecure_skip_verify) {
        (Some(_), true) => {
            errors.push(
                f,
                "upstream.insecure_skip_verify",
                "cannot be combined with ca_file: remove one",
            );
            None
        }
        (None, true) => Some(UpstreamTrust::InsecureSkipVerify),
        (None, false) => Some(UpstreamTrust::System),
        (Some(ca), false) => {
            let path = resolve(ca);
            match crate::tls::read_ca_file(&path) {
                Ok(certificates) => Some(UpstreamTrust::CaFile { path, certificates }),
                Err(e) => {
                    errors.push(f, "upstream.ca_file", e.to_string());
                    None
                }
            }
        }
    };
    if errors.0.len() > before {
        return None;
    }
    Some(UpstreamConfig {
        servers,
        health_path: u.health_path,
        health_interval: Duration::from_millis(u.health_interval_ms),
        username: u.username,
        password: password?,
        trust: trust?,
        docs_path: u.docs_path,
        docs_refresh: Duration::from_secs(u.docs_refresh_seconds),
        connect_timeout: Duration::from_millis(u.connect_timeout_ms),
        read_timeout: Duration::from_millis(u.read_timeout_ms),
        max_body_bytes: u.max_body_bytes,
    })
}

/// Reads the scope table; forwarding needs it, so a missing file is an error.
fn load_scopes(
    errors: &mut ConfigErrors,
    f: &Path,
    path: &Path,
    open: &[String],
    closed: &[String],
) -> AccessConfig {
    let mut access = AccessConfig {
        scopes_file: path.to_path_buf(),
        ..AccessConfig::default()
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            errors.push(path, "file", format!("cannot read the scope table: {e} (access.scopes_file; the project ships conf/scopes.toml)"));
            return access;
        }
    };
    let file: ScopesFile = match toml::from_str(&text) {
        Ok(file) => file,
        Err(e) => {
            errors.push_toml(path, &text, &e);
            return access;
        }
    };
    access.ceph_version = file.ceph_version;
    for (i, op) in file.operation.into_iter().enumerate() {
        let key = format!("operation[{i}] ({} {})", op.method, op.path);
        let method = match op.method.as_str() {
            "GET" | "POST" | "PUT" | "DELETE" | "PATCH" => {
                http::Method::from_bytes(op.method.as_bytes()).ok()
            }
            _ => None,
        };
        let Some(method) = method else {
            errors.push(path, &key, "method must be GET, POST, PUT, DELETE or PATCH");
            continue;
        };
        if !op.path.starts_with('/') {
            errors.push(path, &key, "path must start with '/'");
            continue;
        }
        let scope = match (op.scope.as_str(), op.permission.as_str()) {
            ("", "") => None,
            (scope, permission) => {
                match (Scope::from_name(scope), Permission::from_name(permission)) {
                    (Some(s), Some(p)) => Some((s, p)),
                    _ => {
                        errors.push(
                            path,
                            &key,
                            format!("unknown scope {scope:?} or permission {permission:?}"),
                        );
                        continue;
                    }
                }
            }
        };
        let operation = format!("{} {}", op.method, op.path);
        let opened = open.contains(&operation);
        let rule = OperationRule {
            method,
            path: op.path,
            scope,
            public: op.public,
            open: op.public && opened,
            closed: closed.contains(&operation),
        };
        if access
            .operations
            .iter()
            .any(|r| r.method == rule.method && r.path == rule.path)
        {
            errors.push(path, &key, "listed twice");
            continue;
        }
        access.operations.push(rule);
    }
    for (i, entry) in open.iter().enumerate() {
        let known = access
            .operations
            .iter()
            .any(|r| r.open && format!("{} {}", r.method, r.path) == *entry);
        if !known {
            let public: Vec<String> = access
                .operations
                .iter()
                .filter(|r| r.public)
                .map(|r| format!("{} {}", r.method, r.path))
                .collect();
            errors.push(
                f,
                format!("access.open_operations[{i}]"),
                format!(
                "{entry:?} is not an operation the dashboard serves without a token; those are: {}",
                public.join(", ")
            ),
            );
        }
    }
    for (i, entry) in closed.iter().enumerate() {
        if !access
            .operations
            .iter()
            .any(|r| r.closed && format!("{} {}", r.method, r.path) == *entry)
        {
            errors.push(f, format!("access.closed_operations[{i}]"), format!(
                "{entry:?} is not an operation of the scope table (write it as \"METHOD /path/{{template}}\")"
            ));
        }
    }
    access
}

/// Reads the users file; a missing file means no users (the first start creates an admin).
fn load_users(errors: &mut ConfigErrors, path: &Path) -> Vec<UserSpec> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            errors.push(path, "file", format!("cannot read: {e}"));
            return Vec::new();
        }
    };
    let file: UsersFile = match toml::from_str(&text) {
        Ok(file) => file,
        Err(e) => {
            errors.push_toml(path, &text, &e);
            return Vec::new();
        }
    };
    let mut users: Vec<UserSpec> = Vec::with_capacity(file.users.len());
    for (i, entry) in file.users.into_iter().enumerate() {
        let key = format!("users[{i}] ({:?})", entry.username);
        if entry.username.is_empty() || entry.username.chars().any(char::is_control) {
            errors.push(
                path,
                &key,
                "username must be non-empty, without control characters",
            );
        }
        if users.iter().any(|u| u.username == entry.username) {
            errors.push(path, &key, "duplicate username: each user must appear once");
        }
        let password_hash = match PasswordHash::parse(&entry.password_hash) {
            Ok(hash) => Some(hash),
            Err(e) => {
                errors.push(path, format!("{key}.password_hash"), e.to_string());
                None
            }
        };
        let mut roles = Vec::with_capacity(entry.roles.len());
        for name in &entry.roles {
            match Role::from_name(name) {
                Some(role) => roles.push(role),
                None => errors.push(
                    path,
                    format!("{key}.roles"),
                    format!(
                        "unknown role {name:?}; the dashboard's system roles are {}",
                        Role::ALL.map(Role::name).join(", ")
                    ),
                ),
            }
        }
        if let Some(password_hash) = password_hash {
            users.push(UserSpec {
                username: entry.username,
                password_hash,
                roles,
                enabled: entry.enabled,
            });
        }
    }
    users
}

#[cfg(test)]
mod tests;
