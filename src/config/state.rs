//! `[state]`: where revocations, lockouts and the service account's token live: this
//! process's memory (one gateway), or a Redis every gateway of a deployment shares.

use std::time::Duration;

use super::file::{RedisSection, StateSection};
use super::parse::Source;
use super::ConfigErrors;
use crate::state::{RedisSettings, StateConfig};

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
    })
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
