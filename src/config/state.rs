//! `[state]`: where revocations, lockouts and the service account's token live: this
//! process's memory (one gateway), or a Redis every gateway of a deployment shares.

use std::path::Path;
use std::time::Duration;

use super::auth::valid_kid;
use super::file::{EncryptionKeyEntry, RedisSection, StateSection};
use super::parse::Source;
use super::ConfigErrors;
use crate::secrets::{Secret, SecretError};
use crate::state::{EncryptionKey, RedisSettings, RedisTarget, SentinelSettings, StateConfig};

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
            errors.push(at.file, "state.redis", "backend = \"redis\" needs a [state.redis] section with url = \"redis://host:6379\" or sentinels = [\"host:26379\", ...] and master_name");
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
    let target = redis_target(errors, at, &redis);
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
        (
            "state.redis.replication_timeout_ms",
            redis.replication_timeout_ms,
        ),
    ] {
        if value == 0 {
            errors.push(f, key, "must be > 0");
        }
    }
    let sentinels = matches!(target, Some(RedisTarget::Sentinels(_)));
    let min_replicas = redis.min_replicas.unwrap_or(u32::from(sentinels));
    if min_replicas > MAX_MIN_REPLICAS {
        errors.push(
            f,
            "state.redis.min_replicas",
            format!("{min_replicas} is more replicas than a deployment has: 0 to {MAX_MIN_REPLICAS} (1 keeps a logout through the loss of the primary)"),
        );
    }
    let password = redis
        .password_file
        .as_deref()
        .and_then(|file| at.password_file(errors, "state.redis.password_file", file, ""));
    let tls = target.as_ref().is_some_and(RedisTarget::uses_tls);
    let ca_pem = match (&redis.ca_file, tls) {
        (Some(file), true) => read_ca(errors, at, file),
        (Some(_), false) => {
            errors.push(f, "state.redis.ca_file", "only applies with TLS: a rediss:// url, or tls = true or sentinel_tls = true with sentinels");
            None
        }
        (None, _) => None,
    };
    let encryption_keys = encryption_keys(errors, at, &redis.encryption_keys);
    if errors.0.len() > before {
        return None;
    }
    Some(RedisSettings {
        target: target?,
        username: redis.username,
        password,
        ca_pem,
        key_prefix: redis.key_prefix,
        connect_timeout: Duration::from_millis(redis.connect_timeout_ms),
        command_timeout: Duration::from_millis(redis.command_timeout_ms),
        min_replicas,
        replication_timeout: Duration::from_millis(redis.replication_timeout_ms),
        encryption_keys,
    })
}

/// More acknowledging replicas than this is a typo, not a deployment.
const MAX_MIN_REPLICAS: u32 = 16;

/// Where the primary is: `url`, or asked of `sentinels` by `master_name` (exactly one).
fn redis_target(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    redis: &RedisSection,
) -> Option<RedisTarget> {
    let f = at.file;
    let sentinel_only = [
        ("state.redis.master_name", redis.master_name.is_some()),
        (
            "state.redis.sentinel_username",
            redis.sentinel_username.is_some(),
        ),
        (
            "state.redis.sentinel_password_file",
            redis.sentinel_password_file.is_some(),
        ),
        ("state.redis.tls", redis.tls),
        ("state.redis.sentinel_tls", redis.sentinel_tls),
    ];
    match (&redis.url, redis.sentinels.is_empty()) {
        (Some(_), false) => {
            errors.push(f, "state.redis.sentinels", "is set with state.redis.url: set one of them, url = \"redis://host:6379\" (one Redis) or sentinels = [\"host:26379\", ...] with master_name (Redis Sentinel)");
            None
        }
        (None, true) => {
            errors.push(f, "state.redis.url", "one of url = \"redis://host:6379\" (one Redis) or sentinels = [\"host:26379\", ...] with master_name (Redis Sentinel) must be set");
            None
        }
        (Some(url), true) => {
            for (key, set) in sentinel_only {
                if set {
                    errors.push(f, key, "only applies with state.redis.sentinels: remove it, or replace url with sentinels and master_name");
                }
            }
            redis_url(errors, at, url).map(RedisTarget::Url)
        }
        (None, false) => {
            sentinel_settings(errors, at, redis).map(|s| RedisTarget::Sentinels(Box::new(s)))
        }
    }
}

fn redis_url(errors: &mut ConfigErrors, at: &Source<'_>, url: &str) -> Option<String> {
    let before = errors.0.len();
    if !url.starts_with("rediss://") && !url.starts_with("redis://") {
        errors.push(
            at.file,
            "state.redis.url",
            format!("{url:?} is not a redis:// or rediss:// URL, like \"redis://127.0.0.1:6379\""),
        );
    }
    if url.contains('@') {
        errors.push(at.file, "state.redis.url", "must not carry credentials: set username and password_file instead (the URL is logged)");
    }
    (errors.0.len() == before).then(|| url.to_string())
}

fn sentinel_settings(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    redis: &RedisSection,
) -> Option<SentinelSettings> {
    let before = errors.0.len();
    let f = at.file;
    let mut addresses = Vec::with_capacity(redis.sentinels.len());
    for (i, address) in redis.sentinels.iter().enumerate() {
        match sentinel_address(address) {
            Some(parsed) if addresses.contains(&parsed) => {
                errors.push(
                    f,
                    format!("state.redis.sentinels[{i}]"),
                    format!("{address:?} is listed twice"),
                );
            }
            Some(parsed) => addresses.push(parsed),
            None => errors.push(
                f,
                format!("state.redis.sentinels[{i}]"),
                format!("{address:?} is not host:port, like \"10.0.0.5:26379\""),
            ),
        }
    }
    let master_name = redis.master_name.clone().unwrap_or_default();
    if master_name.is_empty()
        || master_name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
    {
        errors.push(f, "state.redis.master_name", "must name the primary as the sentinels know it (their `sentinel monitor NAME ...` line), like master_name = \"clustergate\"");
    }
    if redis.sentinel_username.is_some() && redis.sentinel_password_file.is_none() {
        errors.push(
            f,
            "state.redis.sentinel_password_file",
            "must be set with state.redis.sentinel_username (the sentinels' ACL user's password)",
        );
    }
    let password = redis
        .sentinel_password_file
        .as_deref()
        .and_then(|file| at.password_file(errors, "state.redis.sentinel_password_file", file, ""));
    if errors.0.len() > before {
        return None;
    }
    Some(SentinelSettings {
        addresses,
        master_name,
        username: redis.sentinel_username.clone(),
        password,
        tls: redis.tls,
        sentinel_tls: redis.sentinel_tls,
    })
}

/// `host:port` (an IPv6 host in brackets), the port not 0.
fn sentinel_address(text: &str) -> Option<(String, u16)> {
    let (host, port) = text.rsplit_once(':')?;
    let port = port.parse::<u16>().ok().filter(|p| *p > 0)?;
    let host = match host.strip_prefix('[') {
        Some(v6) => v6
            .strip_suffix(']')?
            .parse::<std::net::Ipv6Addr>()
            .ok()?
            .to_string(),
        None if !host.is_empty()
            && !host.contains(':')
            && !host.contains('/')
            && !host.contains('@') =>
        {
            host.to_string()
        }
        None => return None,
    };
    Some((host, port))
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
