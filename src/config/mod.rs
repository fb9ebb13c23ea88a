//! The only reader of configuration files: TOML is parsed into private file structs,
//! validated once, and turned into the typed [`Config`] the rest of the gateway uses.
//! Every problem is collected and reported together, naming the file and the key.

mod error;
mod file;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use error::{ConfigError, ConfigErrors};
use file::{FileConfig, UsersFile};

use crate::users::{PasswordHash, Role, UserSpec};

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
        let file: FileConfig = match toml::from_str(text) {
            Ok(file) => file,
            Err(e) => {
                errors.push_toml(source, text, &e);
                return Err(errors);
            }
        };
        let FileConfig {
            server,
            metrics,
            api,
            auth,
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

        if !errors.is_empty() {
            return Err(errors);
        }
        let (Some(listen), Some(metrics_listen), Some(tls)) = (listen, metrics_listen, tls) else {
            return Err(errors);
        };
        Ok(Config {
            source: source.to_path_buf(),
            server: ServerConfig {
                listen,
                tls,
                state_dir,
                threads,
                shutdown_grace: Duration::from_secs(server.shutdown_grace_seconds),
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
