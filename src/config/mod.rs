//! The only reader of configuration files: TOML is parsed into private file structs,
//! validated once, and turned into the typed [`Config`] the rest of the gateway uses.
//! Every problem is collected and reported together, naming the file and the key. One
//! module per section validates it (`server`, `auth`, `users`, `upstream`, `access`,
//! `state`, `log`, `answer_cache`, `api_keys`);
//! files a section names (secret, certificate, users, roles, scope table) are read here,
//! once. `export` writes the users and roles files from the same structs.

mod access;
mod answer_cache;
mod api_keys;
mod auth;
mod error;
mod export;
mod file;
mod log;
mod oidc;
mod parse;
mod roles;
mod server;
mod state;
mod upstream;
mod users;

use std::path::{Path, PathBuf};

pub use access::{AccessConfig, OperationRule, ReleaseRules, UnknownOperations};
pub use answer_cache::{AnswerCacheConfig, POLLED_OPERATIONS};
pub use api_keys::ApiKeysConfig;
pub use auth::{ApiConfig, AuthConfig, AuthSource, LockoutPolicy, DASHBOARD_LOCKOUT_ATTEMPTS};
pub use error::{ConfigError, ConfigErrors};
pub use export::{roles_file_text, users_file_text, ExportError, RoleRecord, UserRecord};
pub use log::{LogConfig, LogFormat};
pub use oidc::{normal_token_type, ClaimPath, KeyPolicy, Mapped, OidcConfig, ProviderUrl, RoleMap};
pub use roles::RolesConfig;
pub use server::{ClientLimits, MetricsConfig, ServerConfig, TlsMode};
pub use upstream::{
    AnswerBufferLimits, BackendUrl, InFlightLimits, LoginBackoff, RoleAccountsConfig, Timeouts,
    UpstreamConfig, UpstreamIdentity, UpstreamTrust,
};
pub use users::UsersConfig;

use crate::state::StateConfig;
use parse::Source;

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
    /// Single sign-on with an OpenID Connect provider; `None`: none.
    pub oidc: Option<OidcConfig>,
    pub access: AccessConfig,
    /// Where revocations, lockouts and the service account's token live.
    pub state: StateConfig,
    pub log: LogConfig,
    /// What answers are shared and kept a moment (`answer_cache`).
    pub answer_cache: AnswerCacheConfig,
    /// How many API keys are kept, how long they may live, how fast each may be used.
    pub api_keys: ApiKeysConfig,
}

/// Reads and validates the configuration file and the files it names.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        let mut errors = ConfigErrors::default();
        errors.push(path, "file", format!("cannot read: {e}"));
        errors
    })?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    Config::from_toml_str(&text, path, dir)
}

impl Config {
    /// Whom the dashboards see on a logged-in user's requests: with `auth.source =
    /// "dashboard"` always the user.
    pub fn identity(&self) -> UpstreamIdentity {
        match (self.auth.source, &self.upstream) {
            (AuthSource::Dashboard, _) => UpstreamIdentity::User,
            (AuthSource::Local, Some(u)) => u.identity,
            (AuthSource::Local, None) => UpstreamIdentity::Service,
        }
    }

    /// Validates configuration text as if read from `source`, resolving paths against `dir`.
    pub fn from_toml_str(text: &str, source: &Path, dir: &Path) -> Result<Config, ConfigErrors> {
        let mut errors = ConfigErrors::default();
        let Some(file) = parse::sections(text, source, &mut errors) else {
            return Err(errors);
        };
        let at = Source { file: source, dir };
        let public_url = file.server.public_url.is_some();
        let listeners = server::validate(&mut errors, &at, file.server, file.metrics);
        let api = auth::api(&mut errors, &at, file.api);
        let users_file = at.resolve(&file.auth.users_file);
        let roles_file = file.auth.roles_file.as_deref().map(|f| at.resolve(f));
        let auth = auth::validate(&mut errors, &at, file.auth);
        // The dashboard's accounts log in: no users or roles file is read.
        let roles = match auth.source {
            AuthSource::Local => Some(roles::load(&mut errors, roles_file)),
            AuthSource::Dashboard => None,
        };
        // The provider's groups map to system roles, and to the roles file's custom roles.
        let custom = roles.as_ref().map_or(&[][..], |r| r.roles.as_slice());
        let oidc = file
            .oidc
            .map(|o| oidc::validate(&mut errors, &at, o, custom));
        let users = match roles {
            Some(roles) => users::load(&mut errors, users_file, roles),
            None => UsersConfig::none(users_file),
        };
        if oidc.is_some() && !public_url {
            errors.push(
                source,
                "server.public_url",
                "required with [oidc]: the provider sends browsers back to the gateway's address as they see it, e.g. \"https://ceph.example.com:8443\" (never taken from the Host header)",
            );
        }
        let upstream = file
            .upstream
            .map(|u| upstream::validate(&mut errors, &at, u));
        if auth.source == AuthSource::Dashboard && upstream.is_none() {
            errors.push(
                source,
                "auth.source",
                "\"dashboard\" needs the dashboards to check passwords: add [upstream] with servers (or use source = \"local\")",
            );
        }
        if let (Some((server, _)), Some(Some(upstream))) = (&listeners, &upstream) {
            check_body_budget(&mut errors, source, server, upstream);
        }
        let unknown_operations = access::unknown_operations(
            &mut errors,
            source,
            file.access.unknown_operations.as_deref(),
        );
        let mut access = access::validate(&mut errors, &at, file.access, upstream.is_some());
        let sees_user = auth.source == AuthSource::Dashboard
            || matches!(&upstream, Some(Some(u)) if u.identity != UpstreamIdentity::Service);
        access.unknown_operations =
            unknown_operations.unwrap_or(UnknownOperations::default_for(sees_user));
        if unknown_operations == Some(UnknownOperations::Forward) && !sees_user {
            errors.push(source, "access.unknown_operations", "\"forward\" needs the dashboard to see the real user or their roles (auth.source = \"dashboard\", upstream.identity = \"roles\" or \"user\"): with the service account it would hand anyone the service account's rights; use \"refuse\"");
        }
        let state = state::validate(&mut errors, &at, file.state);
        check_shared_accounts_key(&mut errors, source, auth.source, &upstream, &state);
        let log = log::validate(&mut errors, &at, file.log);
        let answer_cache = answer_cache::validate(&mut errors, &at, file.answer_cache);
        let api_keys = api_keys::validate(&mut errors, &at, file.api_keys);
        let (Some((server, metrics)), true) = (listeners, errors.is_empty()) else {
            return Err(errors);
        };
        let upstream = match upstream {
            Some(Some(upstream)) => Some(upstream),
            Some(None) => return Err(errors),
            None => None,
        };
        let oidc = match oidc {
            Some(Some(oidc)) => Some(oidc),
            Some(None) => return Err(errors),
            None => None,
        };
        Ok(Config {
            source: source.to_path_buf(),
            server,
            metrics,
            api,
            auth,
            users,
            upstream,
            oidc,
            access,
            state,
            log,
            answer_cache,
            api_keys,
        })
    }
}

/// With role accounts and state in Redis (several gateways of one deployment), each
/// gateway must derive the same passwords and names: a key generated by each into its own
/// `state_dir` would make them set each other's accounts' passwords over and over.
fn check_shared_accounts_key(
    errors: &mut ConfigErrors,
    source: &Path,
    auth: AuthSource,
    upstream: &Option<Option<UpstreamConfig>>,
    state: &StateConfig,
) {
    let Some(Some(upstream)) = upstream else {
        return;
    };
    let roles = auth == AuthSource::Local && upstream.identity == UpstreamIdentity::Roles;
    if roles && upstream.role_accounts.key_file.is_none() && *state != StateConfig::Memory {
        errors.push(source, "upstream.accounts_key_file", "the gateways sharing state in Redis must all be given the same key for the dashboard accounts they manage (upstream.identity = \"roles\", the default): create one with `head -c 32 /dev/urandom | base64 > accounts.key; chmod 600 accounts.key`, give every gateway a copy and set accounts_key_file = \"accounts.key\"");
    }
}

/// A configured body budget must hold the largest forwarded body, or that body could never
/// be read.
fn check_body_budget(
    errors: &mut ConfigErrors,
    source: &Path,
    server: &ServerConfig,
    upstream: &UpstreamConfig,
) {
    if server
        .body_budget
        .is_some_and(|budget| budget < upstream.max_body_bytes)
    {
        errors.push(
            source,
            "server.body_budget_bytes",
            format!(
                "must be at least upstream.max_body_bytes ({}): a body that large could never be read; raise it, or remove it to derive it from the memory limit",
                upstream.max_body_bytes
            ),
        );
    }
}

/// The shipped configuration (conf/clustergate.toml) as it validates in `dir`: a stand-in
/// service account password there, and no users file. For the tests of this module and of
/// the modules that use what it makes (the shipped scope table: `access`).
#[cfg(test)]
pub(crate) fn shipped_for_tests(dir: &Path) -> Config {
    let pass = dir.join("upstream.pass");
    crate::secrets::write_private(&pass, "stand-in".as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let conf = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf");
    let text =
        std::fs::read_to_string(conf.join("clustergate.toml")).unwrap_or_else(|e| panic!("{e}"));
    let text = text.replace("\"users.toml\"", "\"no-users.toml\"");
    Config::from_toml_str(&text, &dir.join("clustergate.toml"), dir)
        .unwrap_or_else(|e| panic!("{e}"))
}

#[cfg(test)]
mod tests;
