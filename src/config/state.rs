//! `[state]`: where revocations, lockouts and the service account's token live: this
//! process's memory (one gateway), or a Redis every gateway of a deployment shares.

use std::path::Path;
use std::time::Duration;

use super::auth::valid_kid;
use super::file::{EncryptionKeyEntry, RedisSection, StateSection};
use super::parse::Source;
use super::ConfigErrors;
use crate::secrets::{Secret, SecretError};
use crate::state::{EncryptionKey, RedisSettings, StateConfig};

pub(super) fn validate(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    state: StateSection,
) -> StateConfig {
    match (state.backend.as_str(), state.redis) {
        ("memory", _) => StateConfig::Memory,
        ("redis", Some(redis)) => redis_settings(errors, at, redis)
            .map(StateConfig::Redis)
            .unwrap_or_default(),
        ("redis", None) => {
            errors.push(at.file, "state.redis", "backend = \"redis\" needs a [state.redis] section with url = \"redis://host:6379\"");
            StateConfig::Memory
        }
        (other, _) => {
            errors.push(at.file, "state.backend", format!("{other:?} is not a state backend: \"memory\" (one gateway) or \"redis\" (several)"));
            StateConfig::Memory
        }
    }
}

fn redis_settings(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    redis: RedisSection,
) -> Option<RedisSettings> {
    let before = errors.0.len();
    let f = at.file;
    let tls = redis.url.starts_with("rediss://");
    if !tls && !redis.url.starts_with("redis://") {
        errors.push(
            f,
            "state.redis.url",
            format!(
                "{:?} is not a redis:// or rediss:// URL, like \"redis://127.0.0.1:6379\"",
                redis.url
            ),
        );
    }
    if redis.url.contains('@') {
        errors.push(f, "state.redis.url", "must not carry credentials: set username and password_file instead (the URL is logged)");
    }
    if redis.username.is_some() && redis.password_file.is_none() {
        errors.push(
            f,
            "state.redis.password_file",
            "must be set with state.redis.username (the ACL user's password)",
        );
    }
    for (key, value) in [
        ("state.redis.connect_timeout_ms", redis.connect_timeout_ms),
        ("state.redis.command_timeout_ms", redis.command_timeout_ms),
    ] {
        if value == 0 {
            errors.push(f, key, "must be > 0");
        }
    }
    let password = redis
        .password_file
        .as_deref()
        .and_then(|file| at.password_file(errors, "state.redis.password_file", file, ""));
    let ca_pem = match (&redis.ca_file, tls) {
        (Some(file), true) => read_ca(errors, at, file),
        (Some(_), false) => {
            errors.push(f, "state.redis.ca_file", "only applies to rediss:// URLs");
            None
        }
        (None, _) => None,
    };
    let encryption_keys = encryption_keys(errors, at, &redis.encryption_keys);
    if errors.0.len() > before {
        return None;
    }
    Some(RedisSettings {
        url: redis.url,
        username: redis.username,
        password,
        ca_pem,
        key_prefix: redis.key_prefix,
        connect_timeout: Duration::from_millis(redis.connect_timeout_ms),
        command_timeout: Duration::from_millis(redis.command_timeout_ms),
        encryption_keys,
    })
}

const ENCRYPTION_KEYS: &str = "state.redis.encryption_keys";

/// The keys that seal tokens in Redis and sign revocations, the first sealing. Required:
/// every gateway of a deployment must read the same files, so none is generated.
fn encryption_keys(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    entries: &[EncryptionKeyEntry],
) -> Vec<EncryptionKey> {
    if entries.is_empty() {
        errors.push(at.file, ENCRYPTION_KEYS, "must list at least one key, the same on every gateway: `encryption_keys = [{ kid = \"1\", secret_file = \"redis.key\" }]`, with the file made by `head -c 32 /dev/urandom | base64 > redis.key && chmod 600 redis.key`");
    }
    let mut keys: Vec<EncryptionKey> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let key = format!("{ENCRYPTION_KEYS}[{i}]");
        if !valid_kid(&entry.kid) {
            let message = format!(
                "{:?} must be 1 to 64 letters, digits, '.', '_' or '-'",
                entry.kid
            );
            errors.push(at.file, format!("{key}.kid"), message);
        } else if keys.iter().any(|k| k.kid == entry.kid) {
            let message = format!("{:?} is listed twice", entry.kid);
            errors.push(at.file, format!("{key}.kid"), message);
        } else if let Some(secret) = private_secret(
            errors,
            at,
            &format!("{key}.secret_file"),
            &entry.secret_file,
        ) {
            keys.push(EncryptionKey {
                kid: entry.kid.clone(),
                secret,
            });
        }
    }
    keys
}

/// A secret file only its owner can use, of at least 32 bytes.
fn private_secret(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    key: &str,
    file: &str,
) -> Option<Secret> {
    let path = at.resolve(file);
    at.owner_only_file(errors, key, &path);
    crate::secrets::read_secret(&path)
        .map_err(|e| errors.push(at.file, key, secret_problem(&path, e)))
        .ok()
}

/// What is wrong with an encryption key file, with the fix.
fn secret_problem(path: &Path, e: SecretError) -> String {
    match e {
        SecretError::TooShort { len, min, .. } => {
            let path = path.display();
            format!("{path} holds {len} bytes; an encryption key needs at least {min}: `head -c 32 /dev/urandom | base64 > {path}`")
        }
        other => other.to_string(),
    }
}

/// The CA file's PEM text, as the Redis client takes it, once its certificates parse.
fn read_ca(errors: &mut ConfigErrors, at: &Source<'_>, file: &str) -> Option<Vec<u8>> {
    let path = at.resolve(file);
    let pem = crate::tls::read_ca_file(&path)
        .map_err(|e| e.to_string())
        .and_then(|_| std::fs::read(&path).map_err(|e| e.to_string()));
    match pem {
        Ok(pem) => Some(pem),
        Err(e) => {
            errors.push(at.file, "state.redis.ca_file", e);
            None
        }
    }
}
