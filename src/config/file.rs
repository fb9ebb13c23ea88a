//! The configuration file as written: serde structs, private to `config`.
//! Defaults live here; meaning and validation live in `config::load`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct FileConfig {
    pub server: ServerSection,
    pub metrics: MetricsSection,
    pub api: ApiSection,
    pub auth: AuthSection,
    pub upstream: Option<UpstreamSection>,
    pub oidc: Option<OidcSection>,
    pub access: AccessSection,
    pub state: StateSection,
    pub log: LogSection,
    pub answer_cache: AnswerCacheSection,
    pub api_keys: ApiKeysSection,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct ServerSection {
    pub listen: String,
    pub tls: bool,
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    pub state_dir: String,
    pub threads: Option<usize>,
    pub work_stealing: bool,
    pub shutdown_grace_seconds: u64,
    pub drain_seconds: f64,
    pub public_url: Option<String>,
    pub max_header_bytes: usize,
    pub max_header_count: usize,
    pub header_timeout_ms: u64,
    pub body_timeout_ms: u64,
    pub write_timeout_ms: u64,
    pub min_send_bytes_per_second: usize,
    pub keepalive_timeout_s: u64,
    pub max_connections_per_ip: usize,
    pub body_budget_bytes: Option<usize>,
    pub trusted_proxies: Vec<String>,
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
            work_stealing: false,
            shutdown_grace_seconds: 1,
            drain_seconds: 5.0,
            public_url: None,
            max_header_bytes: 32 * 1024,
            max_header_count: 100,
            header_timeout_ms: 10_000,
            body_timeout_ms: 30_000,
            write_timeout_ms: 10_000,
            // A 3.5 MB answer (the UI's main script) then has 3.5 minutes: a phone on a
            // poor link sends faster.
            min_send_bytes_per_second: 16 * 1024,
            keepalive_timeout_s: 60,
            // A browser opens at most 6 HTTP/1 connections to a host (1 over HTTP/2): room
            // for several behind one address, and a bound on what one address holds.
            max_connections_per_ip: 64,
            body_budget_bytes: None,
            trusted_proxies: Vec::new(),
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
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

#[derive(Debug, Deserialize, Serialize)]
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

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct AuthSection {
    pub source: String,
    pub users_file: String,
    pub roles_file: Option<String>,
    pub token_ttl_seconds: u64,
    /// `None`: the default of the source (10 local, 5 with the dashboard).
    pub lockout_attempts: Option<u32>,
    pub lockout_seconds: u64,
    pub issuer: String,
    pub secret_file: Option<String>,
    pub signing_keys: Vec<SigningKeyEntry>,
    pub max_concurrent_hashes: Option<usize>,
    pub max_queued_logins: usize,
    pub max_failed_logins_per_ip_per_minute: u32,
}

impl Default for AuthSection {
    fn default() -> Self {
        Self {
            source: "local".into(),
            users_file: "users.toml".into(),
            roles_file: None,
            token_ttl_seconds: 28800,
            lockout_attempts: None,
            lockout_seconds: 300,
            issuer: "clustergate".into(),
            secret_file: None,
            signing_keys: Vec::new(),
            max_concurrent_hashes: None,
            max_queued_logins: 64,
            max_failed_logins_per_ip_per_minute: 30,
        }
    }
}

/// One of `auth.signing_keys`: the first signs, all verify.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SigningKeyEntry {
    pub kid: String,
    pub secret_file: String,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct UpstreamSection {
    pub servers: Vec<String>,
    pub health_path: String,
    pub health_interval_ms: u64,
    pub username: String,
    pub password_file: String,
    pub identity: String,
    pub max_role_accounts: usize,
    pub accounts_key_file: Option<String>,
    pub ca_file: Option<String>,
    pub insecure_skip_verify: bool,
    pub docs_path: String,
    pub docs_refresh_seconds: u64,
    pub connect_timeout_ms: u64,
    pub read_timeout_ms: u64,
    pub max_body_bytes: usize,
    pub max_open_body_bytes: usize,
    pub max_in_flight: usize,
    pub max_queued: usize,
    pub queue_timeout_ms: u64,
    pub login_backoff_min_ms: u64,
    pub login_backoff_max_ms: u64,
    pub answer_buffer_bytes: usize,
    pub answer_buffers_total_bytes: usize,
}

impl Default for UpstreamSection {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            health_path: "/".into(),
            health_interval_ms: 1000,
            username: "clustergate".into(),
            password_file: "upstream.pass".into(),
            identity: "roles".into(),
            max_role_accounts: 32,
            accounts_key_file: None,
            ca_file: None,
            insecure_skip_verify: false,
            docs_path: "/docs/openapi.json".into(),
            docs_refresh_seconds: 300,
            connect_timeout_ms: 2000,
            read_timeout_ms: 450_000,
            max_body_bytes: 10 * 1024 * 1024,
            // What the web UI posts without a token, `{url, message, stack}` to
            // /ui-api/logging/js-error, is a few KB: Firefox keeps up to 128 stack frames.
            max_open_body_bytes: 16 * 1024,
            // The dashboard's CherryPy serves with 10 threads (CherryPy's default
            // `server.thread_pool`; the dashboard does not set it): 2 stay free for the
            // gateways' health checks and service logins, and for direct clients.
            max_in_flight: 8,
            max_queued: 64,
            queue_timeout_ms: 5000,
            // A refused service login waits 10 s, then 20, 40, ... up to 10 minutes.
            login_backoff_min_ms: 10_000,
            login_backoff_max_ms: 600_000,
            // The largest answer a dashboard gives is the UI's main script (3.5 MB in 16.2).
            answer_buffer_bytes: 8 * 1024 * 1024,
            answer_buffers_total_bytes: 64 * 1024 * 1024,
        }
    }
}

/// `[oidc]`: single sign-on with an OpenID Connect provider. Absent: none.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct OidcSection {
    pub issuer: String,
    pub client_id: String,
    pub client_secret_file: Option<String>,
    pub scopes: Vec<String>,
    pub redirect_path: String,
    pub username_claim: String,
    pub roles_claim: String,
    /// Provider group or role -> dashboard roles (system or the roles file's).
    pub role_map: BTreeMap<String, Vec<String>>,
    pub algorithms: Vec<String>,
    /// `None`: the client id.
    pub audience: Option<String>,
    pub clock_skew_seconds: u64,
    pub access_token_types: Vec<String>,
    pub local_login: bool,
    pub ca_file: Option<String>,
    pub jwks_refresh_seconds: u64,
    pub jwks_min_refresh_seconds: u64,
    pub jwks_max_stale_seconds: u64,
}

impl Default for OidcSection {
    fn default() -> Self {
        Self {
            issuer: String::new(),
            client_id: String::new(),
            client_secret_file: None,
            scopes: vec!["openid".into(), "profile".into(), "email".into()],
            redirect_path: "/auth/oidc/callback".into(),
            username_claim: "preferred_username".into(),
            roles_claim: "groups".into(),
            role_map: BTreeMap::new(),
            algorithms: vec!["RS256".into(), "ES256".into(), "EdDSA".into()],
            audience: None,
            clock_skew_seconds: 60,
            access_token_types: vec!["at+jwt".into()],
            local_login: true,
            ca_file: None,
            jwks_refresh_seconds: 300,
            jwks_min_refresh_seconds: 10,
            jwks_max_stale_seconds: 86_400,
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct StateSection {
    pub backend: String,
    pub redis: Option<RedisSection>,
}

impl Default for StateSection {
    fn default() -> Self {
        Self {
            backend: "memory".into(),
            redis: None,
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RedisSection {
    pub url: Option<String>,
    pub sentinels: Vec<String>,
    pub master_name: Option<String>,
    pub sentinel_username: Option<String>,
    pub sentinel_password_file: Option<String>,
    /// With `sentinels`: TLS to the primary (`url` says it with `rediss://`).
    pub tls: bool,
    pub sentinel_tls: bool,
    /// Unset: 1 with `sentinels`, 0 with `url`.
    pub min_replicas: Option<u32>,
    pub replication_timeout_ms: u64,
    pub username: Option<String>,
    pub password_file: Option<String>,
    pub ca_file: Option<String>,
    pub key_prefix: String,
    pub connect_timeout_ms: u64,
    pub command_timeout_ms: u64,
    pub encryption_keys: Vec<EncryptionKeyEntry>,
}

/// One of `state.redis.encryption_keys`: a key id and the file of its secret.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EncryptionKeyEntry {
    pub kid: String,
    pub secret_file: String,
}

impl Default for RedisSection {
    fn default() -> Self {
        Self {
            url: None,
            sentinels: Vec::new(),
            master_name: None,
            sentinel_username: None,
            sentinel_password_file: None,
            tls: false,
            sentinel_tls: false,
            min_replicas: None,
            replication_timeout_ms: 500,
            username: None,
            password_file: None,
            ca_file: None,
            key_prefix: "clustergate:".into(),
            connect_timeout_ms: 1000,
            command_timeout_ms: 500,
            encryption_keys: Vec::new(),
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct LogSection {
    pub format: String,
    pub level: String,
    pub audit_file: Option<String>,
}

impl Default for LogSection {
    fn default() -> Self {
        Self {
            format: "text".into(),
            level: "info".into(),
            audit_file: None,
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct AccessSection {
    pub scopes_file: Option<String>,
    pub release: Option<String>,
    pub unknown_operations: Option<String>,
    pub open_operations: Vec<String>,
    pub closed_operations: Vec<String>,
}

impl Default for AccessSection {
    fn default() -> Self {
        Self {
            scopes_file: None,
            release: None,
            unknown_operations: None,
            // The web UI's files and what its login page needs before anyone logged in.
            open_operations: vec![
                "GET /{path:.*}".into(),
                "GET /ui-api/langs".into(),
                "GET /ui-api/login/custom_banner".into(),
                "POST /ui-api/logging/js-error".into(),
            ],
            // It acts on the dashboard account making the call: through the gateway, that is
            // the service account (a way to guess or change its password).
            closed_operations: vec!["POST /api/user/{username}/change_password".into()],
        }
    }
}

/// The scope table: one entry per dashboard operation.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ScopesFile {
    #[serde(default)]
    pub ceph_version: Option<String>,
    #[serde(default)]
    pub operation: Vec<OperationEntry>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OperationEntry {
    pub method: String,
    pub path: String,
    #[serde(default)]
    pub scope: String,
    #[serde(default)]
    pub permission: String,
    #[serde(default)]
    pub public: bool,
    /// `""` or absent: the table does not say (the dashboard checks).
    #[serde(default)]
    pub version: String,
}

/// The users file: `[[users]]` entries. Also written, by `users import`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UsersFile {
    #[serde(default)]
    pub users: Vec<UserEntry>,
}

#[derive(Debug, Deserialize, Serialize)]
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

/// The roles file: `[[roles]]` entries shaped after the dashboard's role JSON
/// (`ceph dashboard ac-role-show NAME`). Also written, by `users import`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RolesFile {
    #[serde(default)]
    pub roles: Vec<RoleEntry>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RoleEntry {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Scope name to permission names, e.g. `pool = ["read", "update"]`.
    #[serde(default)]
    pub scopes_permissions: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct AnswerCacheSection {
    pub enabled: bool,
    /// `None`: the operations the web UI polls (`config::answer_cache`).
    pub ttl_ms: Option<BTreeMap<String, u64>>,
    pub max_entries: usize,
    pub max_bytes: usize,
    pub max_answer_bytes: usize,
    pub max_wait_ms: u64,
    pub max_followers: usize,
    pub ui_files: bool,
    pub ui_files_ttl_ms: u64,
    pub ui_hashed_files_ttl_ms: u64,
}

impl Default for AnswerCacheSection {
    fn default() -> Self {
        Self {
            enabled: true,
            ttl_ms: None,
            max_entries: 4096,
            max_bytes: 64 * 1024 * 1024,
            max_answer_bytes: 8 * 1024 * 1024,
            max_wait_ms: 5000,
            max_followers: 256,
            ui_files: true,
            ui_files_ttl_ms: 10_000,
            ui_hashed_files_ttl_ms: 3_600_000,
        }
    }
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct ApiKeysSection {
    pub max_keys: usize,
    pub max_lifetime_days: u64,
    pub rate_per_second: u32,
    pub burst: u32,
}

impl Default for ApiKeysSection {
    fn default() -> Self {
        Self {
            max_keys: 10_000,
            max_lifetime_days: 90,
            rate_per_second: 20,
            burst: 40,
        }
    }
}
