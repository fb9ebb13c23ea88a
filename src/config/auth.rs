//! `[api]` and `[auth]`: the API's vendor name, tokens, the signing secret, lockout, the
//! limit on failed logins per client, and the password hasher's bounds.

use std::time::Duration;

use super::file::{ApiSection, AuthSection, SigningKeyEntry};
use super::parse::Source;
use super::server::default_threads;
use super::ConfigErrors;
use crate::secrets::Secret;
use crate::state::BucketRate;
use crate::tokens::SigningKey;

#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// The `<vendor>` in `application/vnd.<vendor>.api.vX.Y+json`.
    pub vendor: String,
}

/// Who checks passwords at login (`auth.source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthSource {
    /// The users file (`auth.users_file`).
    Local,
    /// The active dashboard: its users, roles and password checks.
    Dashboard,
}

/// The dashboard disables an account at the attempt after this many consecutive failures
/// (its `ACCOUNT_LOCKOUT_ATTEMPTS`, default 10): the gateway's lockout must come first, or
/// any guesser could disable `admin` on the dashboard through the gateway.
pub const DASHBOARD_LOCKOUT_ATTEMPTS: u32 = 10;

/// The most `auth.lockout_attempts` can be with the dashboard source: past it the gateway
/// sends only the password that last succeeded, up to one failure short of the
/// dashboard's limit, so at least one such attempt must remain.
const DASHBOARD_MODE_MAX_LOCKOUT_ATTEMPTS: u32 = DASHBOARD_LOCKOUT_ATTEMPTS - 2;

/// The gateway's lockout with `auth.source = "dashboard"`, when not configured.
const DASHBOARD_MODE_LOCKOUT_ATTEMPTS: u32 = 5;

/// The gateway's lockout with its own users file, when not configured.
const LOCAL_LOCKOUT_ATTEMPTS: u32 = 10;

#[derive(Debug, Clone)]
pub struct AuthConfig {
    pub source: AuthSource,
    pub token_ttl: Duration,
    pub issuer: String,
    pub lockout: Option<LockoutPolicy>,
    /// The signing keys (`auth.signing_keys`, or `auth.secret_file` as the one key
    /// "default"), read once; the first signs. Empty: one generated into
    /// `state_dir/jwt-secret` at start.
    pub signing_keys: Vec<SigningKey>,
    pub max_concurrent_hashes: usize,
    pub max_queued_logins: usize,
    /// Each client's bucket of failed logins (`None`: no limit).
    pub failed_logins_per_client: Option<BucketRate>,
}

/// After `attempts` consecutive failures a username is refused for `duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockoutPolicy {
    pub attempts: u32,
    pub duration: Duration,
}

pub(super) fn api(errors: &mut ConfigErrors, at: &Source<'_>, api: ApiSection) -> ApiConfig {
    let valid = !api.vendor.is_empty()
        && api
            .vendor
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !valid {
        errors.push(
            at.file,
            "api.vendor",
            "must be lowercase letters, digits and '-', like \"ceph\"",
        );
    }
    ApiConfig { vendor: api.vendor }
}

pub(super) fn validate(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    auth: AuthSection,
) -> AuthConfig {
    let f = at.file;
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
    let source = source(errors, at, &auth.source);
    let attempts = lockout_attempts(errors, at, source, auth.lockout_attempts);
    let lockout = lockout(errors, at, attempts, auth.lockout_seconds);
    let signing_keys = signing_keys(errors, at, auth.secret_file.as_deref(), &auth.signing_keys);
    let max_concurrent_hashes = auth
        .max_concurrent_hashes
        .unwrap_or_else(|| (default_threads() / 2).max(1));
    if max_concurrent_hashes == 0 {
        errors.push(f, "auth.max_concurrent_hashes", "must be at least 1");
    }
    let failed_logins_per_client =
        failed_logins_per_client(errors, at, auth.max_failed_logins_per_ip_per_minute);
    AuthConfig {
        source,
        token_ttl: Duration::from_secs(auth.token_ttl_seconds),
        issuer: auth.issuer,
        lockout,
        signing_keys,
        max_concurrent_hashes,
        max_queued_logins: auth.max_queued_logins,
        failed_logins_per_client,
    }
}

fn source(errors: &mut ConfigErrors, at: &Source<'_>, text: &str) -> AuthSource {
    match text {
        "local" => AuthSource::Local,
        "dashboard" => AuthSource::Dashboard,
        other => {
            errors.push(
                at.file,
                "auth.source",
                format!("{other:?} is not \"local\" (the users file) or \"dashboard\" (the dashboard's own accounts)"),
            );
            AuthSource::Local
        }
    }
}

/// The lockout's attempts: the source's default, and with the dashboard, below the
/// dashboard's own limit (it would disable the account first) and never off.
fn lockout_attempts(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    source: AuthSource,
    configured: Option<u32>,
) -> u32 {
    match (source, configured) {
        (AuthSource::Local, attempts) => attempts.unwrap_or(LOCAL_LOCKOUT_ATTEMPTS),
        (AuthSource::Dashboard, None) => DASHBOARD_MODE_LOCKOUT_ATTEMPTS,
        (AuthSource::Dashboard, Some(n)) if n == 0 || n > DASHBOARD_MODE_MAX_LOCKOUT_ATTEMPTS => {
            errors.push(
                at.file,
                "auth.lockout_attempts",
                format!("{n} with source = \"dashboard\": must be 1 to {DASHBOARD_MODE_MAX_LOCKOUT_ATTEMPTS} so that the gateway locks a guesser out before the dashboard disables the account after {DASHBOARD_LOCKOUT_ATTEMPTS} failures, with room left for the password that last succeeded (remove the key for the default, {DASHBOARD_MODE_LOCKOUT_ATTEMPTS})"),
            );
            DASHBOARD_MODE_LOCKOUT_ATTEMPTS
        }
        (AuthSource::Dashboard, Some(n)) => n,
    }
}

/// Above this, a token would refill in under a millisecond (the buckets' unit of time).
const MAX_FAILED_LOGINS_PER_MINUTE: u32 = 60_000;

/// `per_minute` failed logins in a burst, refilled evenly over a minute. The refill time is
/// rounded up: the limit is never looser than configured.
fn failed_logins_per_client(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    per_minute: u32,
) -> Option<BucketRate> {
    match per_minute {
        0 => None,
        n if n > MAX_FAILED_LOGINS_PER_MINUTE => {
            errors.push(
                at.file,
                "auth.max_failed_logins_per_ip_per_minute",
                format!("{n} is over {MAX_FAILED_LOGINS_PER_MINUTE} (1000 a second); use a lower number, or 0 to disable the limit"),
            );
            None
        }
        n => Some(BucketRate {
            burst: n,
            refill_ms: 60_000_u64.div_ceil(u64::from(n)),
        }),
    }
}

fn lockout(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    attempts: u32,
    seconds: u64,
) -> Option<LockoutPolicy> {
    match (attempts, seconds) {
        (0, _) => None,
        (_, 0) => {
            errors.push(at.file, "auth.lockout_seconds", "must be > 0 when lockout_attempts > 0 (or set lockout_attempts = 0 to disable lockout)");
            None
        }
        (attempts, secs) => Some(LockoutPolicy {
            attempts,
            duration: Duration::from_secs(secs),
        }),
    }
}

/// `auth.secret_file` (one key, "default") or `auth.signing_keys`, never both.
fn signing_keys(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    secret_file: Option<&str>,
    entries: &[SigningKeyEntry],
) -> Vec<SigningKey> {
    match (secret_file, entries.is_empty()) {
        (Some(_), false) => {
            errors.push(at.file, "auth.signing_keys", "cannot be combined with auth.secret_file: list that secret as one of the keys (kid = \"default\" keeps its tokens valid)");
            Vec::new()
        }
        (Some(path), true) => secret(errors, at, "auth.secret_file", path)
            .map(|secret| SigningKey {
                kid: SigningKey::DEFAULT_KID.into(),
                secret,
            })
            .into_iter()
            .collect(),
        (None, _) => listed_keys(errors, at, entries),
    }
}

fn listed_keys(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    entries: &[SigningKeyEntry],
) -> Vec<SigningKey> {
    let mut keys: Vec<SigningKey> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let key = format!("auth.signing_keys[{i}]");
        if !valid_kid(&entry.kid) {
            errors.push(
                at.file,
                format!("{key}.kid"),
                format!(
                    "{:?} must be 1 to 64 letters, digits, '.', '_' or '-'",
                    entry.kid
                ),
            );
            continue;
        }
        if keys.iter().any(|k| k.kid == entry.kid) {
            errors.push(
                at.file,
                format!("{key}.kid"),
                format!("{:?} is listed twice", entry.kid),
            );
            continue;
        }
        if let Some(secret) = secret(
            errors,
            at,
            &format!("{key}.secret_file"),
            &entry.secret_file,
        ) {
            keys.push(SigningKey {
                kid: entry.kid.clone(),
                secret,
            });
        }
    }
    keys
}

/// A key id (signing or encryption keys): 1 to 64 letters, digits, '.', '_' or '-'.
pub(super) fn valid_kid(kid: &str) -> bool {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"._-".contains(&b);
    !kid.is_empty() && kid.len() <= 64 && kid.bytes().all(plain)
}

fn secret(errors: &mut ConfigErrors, at: &Source<'_>, key: &str, path: &str) -> Option<Secret> {
    let path = at.resolve(path);
    at.owner_only_file(errors, key, &path);
    match crate::secrets::read_secret(&path) {
        Ok(secret) => Some(secret),
        Err(e) => {
            errors.push(
                at.file,
                key,
                format!("{e} (or remove the key to have one generated)"),
            );
            None
        }
    }
}
