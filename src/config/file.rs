//! The configuration file as written: serde structs, private to `config`.
//! Defaults live here; meaning and validation live in `config::load`.

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct FileConfig {
    pub server: ServerSection,
    pub metrics: MetricsSection,
    pub api: ApiSection,
    pub auth: AuthSection,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct ServerSection {
    pub listen: String,
    pub tls: bool,
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    pub state_dir: String,
    pub threads: Option<usize>,
    pub shutdown_grace_seconds: u64,
}

impl Default for ServerSection {
    fn default() -> Self {
        Self {
            listen: "0.0.0.0:8443".into(),
            tls: true,
            cert_file: None,
            key_file: None,
            state_dir: "state".into(),
            threads: None,
            shutdown_grace_seconds: 1,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct MetricsSection {
    pub listen: String,
}

impl Default for MetricsSection {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9464".into(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct ApiSection {
    pub vendor: String,
}

impl Default for ApiSection {
    fn default() -> Self {
        Self {
            vendor: "ceph".into(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct AuthSection {
    pub users_file: String,
    pub token_ttl_seconds: u64,
    pub lockout_attempts: u32,
    pub lockout_seconds: u64,
    pub issuer: String,
    pub secret_file: Option<String>,
    pub max_concurrent_hashes: Option<usize>,
    pub max_queued_logins: usize,
}

impl Default for AuthSection {
    fn default() -> Self {
        Self {
            users_file: "users.toml".into(),
            token_ttl_seconds: 28800,
            lockout_attempts: 10,
            lockout_seconds: 300,
            issuer: "clustergate".into(),
            secret_file: None,
            max_concurrent_hashes: None,
            max_queued_logins: 64,
        }
    }
}

/// The users file: `[[users]]` entries.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UsersFile {
    #[serde(default)]
    pub users: Vec<UserEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UserEntry {
    pub username: String,
    pub password_hash: String,
    #[serde(default)]
    pub roles: Vec<String>,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
}

fn enabled_by_default() -> bool {
    true
}
