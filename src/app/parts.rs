//! The parts of a running gateway that a configuration makes and a reload replaces: the
//! users, the token service and the admission table. Start-up and reload build them here
//! with the same code. What a reload cannot replace (the state directory, the login
//! source) is read from the configuration the process started with, and
//! `reload::needs_restart` names each such setting that changed.

use std::path::Path;

use crate::access::ReleaseTables;
use crate::config::{AccessConfig, AuthConfig, AuthSource, Config, UsersConfig};
use crate::secrets::{self, SecretError};
use crate::tokens::{SigningKey, TokenService};
use crate::users::bootstrap::{self, BootstrapError};
use crate::users::password::HashError;
use crate::users::UserDb;

#[derive(Debug, thiserror::Error)]
pub enum PartsError {
    #[error("signing secret: {0}")]
    Secret(SecretError),
    #[error("initial admin: {0}")]
    Bootstrap(#[from] BootstrapError),
    #[error("password hashing: {0}")]
    Hash(#[from] HashError),
}

/// What a reload replaces.
pub struct Reloadable {
    pub users: UserDb,
    pub tokens: TokenService,
    pub tables: ReleaseTables,
}

impl Reloadable {
    /// The parts `config` makes; `started` is the configuration the process started with
    /// (the same one at start-up), for the settings only a restart changes.
    pub fn build(config: &Config, started: &Config) -> Result<Reloadable, PartsError> {
        let state_dir = &started.server.state_dir;
        let keys = signing_keys(&config.auth, state_dir)?;
        Ok(Reloadable {
            users: user_db(&config.users, started.auth.source, state_dir)?,
            tokens: TokenService::new(&keys, config.auth.issuer.clone(), config.auth.token_ttl),
            tables: tables(&config.access),
        })
    }
}

/// The configured signing keys, or one generated into `state_dir` on first start.
fn signing_keys(auth: &AuthConfig, state_dir: &Path) -> Result<Vec<SigningKey>, PartsError> {
    if !auth.signing_keys.is_empty() {
        return Ok(auth.signing_keys.clone());
    }
    let secret =
        secrets::read_or_create(&state_dir.join("jwt-secret")).map_err(PartsError::Secret)?;
    Ok(vec![SigningKey {
        kid: SigningKey::DEFAULT_KID.into(),
        secret,
    }])
}

/// The users, with the initial admin created first when none is enabled; none when the
/// dashboard's accounts log in (`auth.source = "dashboard"`).
fn user_db(
    users: &UsersConfig,
    source: AuthSource,
    state_dir: &Path,
) -> Result<UserDb, PartsError> {
    if source == AuthSource::Dashboard {
        tracing::info!("auth.source = \"dashboard\": the dashboard's accounts log in; the users and roles files are not read");
        return Ok(UserDb::new(Vec::new())?);
    }
    let (user_specs, created) = bootstrap::ensure_admin(users.users.clone(), state_dir)?;
    if let Some(path) = created {
        tracing::warn!(
            password_file = %path.display(),
            users_file = %users.file.display(),
            "no enabled user is configured: user 'admin' (administrator) can log in with the password in password_file; add users to users_file to replace it"
        );
    }
    let user_db = UserDb::new(user_specs)?;
    tracing::info!(users = user_db.len(), "users loaded");
    Ok(user_db)
}

fn tables(access: &AccessConfig) -> ReleaseTables {
    let tables = ReleaseTables::new(access);
    tracing::info!(
        operations = %tables.describe(),
        file = %access
            .scopes_file
            .as_deref()
            .map_or("built in".into(), |f| f.display().to_string()),
        "scope tables loaded"
    );
    tables
}
