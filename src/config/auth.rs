//! `[api]` and `[auth]`: the API's vendor name, tokens, the signing secret, lockout and
//! the password hasher's bounds.

use std::time::Duration;

use super::file::{ApiSection, AuthSection};
use super::parse::Source;
use super::server::default_threads;
use super::ConfigErrors;
use crate::secrets::Secret;

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
    /// The signing secret read from `auth.secret_file`; `None`: generated into
    /// `state_dir/jwt-secret` at start.
    pub secret: Option<Secret>,
    pub max_concurrent_hashes: usize,
    pub max_queued_logins: usize,
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
    let lockout = lockout(errors, at, auth.lockout_attempts, auth.lockout_seconds);
    let secret = auth
        .secret_file
        .as_deref()
        .and_then(|path| secret(errors, at, path));
    let max_concurrent_hashes = auth
        .max_concurrent_hashes
        .unwrap_or_else(|| (default_threads() / 2).max(1));
    if max_concurrent_hashes == 0 {
        errors.push(f, "auth.max_concurrent_hashes", "must be at least 1");
    }
    AuthConfig {
        token_ttl: Duration::from_secs(auth.token_ttl_seconds),
        issuer: auth.issuer,
        lockout,
        secret,
        max_concurrent_hashes,
        max_queued_logins: auth.max_queued_logins,
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

fn secret(errors: &mut ConfigErrors, at: &Source<'_>, path: &str) -> Option<Secret> {
    match crate::secrets::read_secret(&at.resolve(path)) {
        Ok(secret) => Some(secret),
        Err(e) => {
            errors.push(
                at.file,
                "auth.secret_file",
                format!("{e} (or remove the key to have one generated)"),
            );
            None
        }
    }
}
