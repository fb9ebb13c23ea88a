//! The stores in one Redis, shared by every gateway of a deployment.
//!
//! - Revocations: each revoked token id is a key that expires when its token would have.
//!   Every gateway keeps a local copy, fed by a push (`PUBLISH` on revoke, followed by
//!   [`RevocationFeed`]), so a token check costs no round trip. On every (re)connection the
//!   feed subscribes first and then reads the live set, and until it has, the copy is not
//!   trusted: checks fail closed. Messages and keys are signed with the deployment's key
//!   (`sealed`): what anyone else publishes or writes is dropped and counted.
//! - Lockouts: one hash per username, counted by a Lua script so that gateways count as one.
//! - The dashboard's count of failed logins per username: one hash per username and a
//!   set bounding how many hold a count (`dashboard_attempts`).
//! - Failed logins per client: one key per client's bucket, expiring once it is full
//!   again (`failed_logins`).
//! - The service account's token: one key, kept locally until due; one gateway logs in at a
//!   time (a short `SET NX` claim).
//! - API keys: one sealed record per key, expiring with it, and two hashes: the index that
//!   bounds and lists them, and their last uses (`api_keys`).
//! - Tokens (the service account's, the users' sessions) are sealed with the deployment's
//!   key (`sealed`): Redis never holds a credential in clear.
//!
//! Each store has its file; `connection` (the primary in use, every command bounded) and
//! `sentinel` (finding the primary, following a failover) are what they share.
//!
//! Every command is bounded by `command_timeout`; a Redis that is down is `Unavailable`,
//! never a hang, and the connection comes back by itself.

mod account_use;
mod api_keys;
mod connection;
mod credential_resets;
mod dashboard_attempts;
mod failed_logins;
mod feed;
mod lockouts;
mod revocations;
mod sealed;
mod sentinel;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
mod upstream_tokens;
mod used_tokens;
mod user_sessions;

#[cfg(feature = "test-support")]
pub use sealed::open_sealed;

use std::sync::Arc;
use std::time::Duration;

use self::connection::Redis;
pub use self::feed::RevocationFeed;
use self::revocations::RedisRevocations;
pub use self::sentinel::SentinelSettings;
use super::{StateError, Stores, MEMORY_MAX_ENTRIES};
use crate::secrets::Secret;

/// How to reach the Redis, as `[state.redis]` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisSettings {
    pub target: RedisTarget,
    /// A Redis ACL user, with `password`.
    pub username: Option<String>,
    pub password: Option<Secret>,
    /// The CA certificates (PEM) that signed the servers' certificates, with TLS.
    pub ca_pem: Option<Vec<u8>>,
    /// Put before every key, so one Redis serves several deployments.
    pub key_prefix: String,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    /// Replicas that must acknowledge a revocation, a lock or a session's end before it is
    /// answered (`WAIT`), within `replication_timeout`.
    pub min_replicas: u32,
    pub replication_timeout: Duration,
    /// `state.redis.encryption_keys`, the sealing one first; never empty.
    pub encryption_keys: Vec<EncryptionKey>,
}

/// Where the primary is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// `redis://host:port[/db]` or `rediss://` (TLS): one Redis.
    Url(String),
    /// Whatever primary the sentinels name.
    Sentinels(Box<SentinelSettings>),
}

impl RedisTarget {
    pub fn uses_tls(&self) -> bool {
        match self {
            RedisTarget::Url(url) => url.starts_with("rediss://"),
            RedisTarget::Sentinels(s) => s.tls || s.sentinel_tls,
        }
    }
}

/// One key file of `state.redis.encryption_keys`, shared by every gateway of a deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncryptionKey {
    pub kid: String,
    pub secret: Secret,
}

/// The stores on one Redis connection, with at most `max_api_keys` API keys.
pub(super) fn stores(settings: RedisSettings, max_api_keys: usize) -> Result<Stores, StateError> {
    stores_keeping(settings, MEMORY_MAX_ENTRIES, max_api_keys)
}

/// The stores, with at most `kept` revocations in the local copy.
fn stores_keeping(
    settings: RedisSettings,
    kept: usize,
    max_api_keys: usize,
) -> Result<Stores, StateError> {
    let redis = Arc::new(Redis::new(settings)?);
    let revocations = Arc::new(RedisRevocations::new(redis.clone(), kept));
    Ok(Stores {
        revocations: revocations.clone(),
        lockouts: Arc::new(lockouts::RedisLockouts {
            redis: redis.clone(),
        }),
        dashboard_attempts: Arc::new(dashboard_attempts::RedisDashboardAttempts {
            redis: redis.clone(),
        }),
        failed_logins: Arc::new(failed_logins::RedisFailedLogins {
            redis: redis.clone(),
        }),
        upstream_tokens: Arc::new(upstream_tokens::RedisUpstreamTokens::new(
            redis.clone(),
            "upstream".into(),
        )),
        account_tokens: Arc::new(upstream_tokens::RedisAccountTokens {
            redis: redis.clone(),
        }),
        user_sessions: Arc::new(user_sessions::RedisUserSessions {
            redis: redis.clone(),
        }),
        credential_resets: Arc::new(credential_resets::RedisCredentialResets {
            redis: redis.clone(),
        }),
        used_tokens: Arc::new(used_tokens::RedisUsedTokens {
            redis: redis.clone(),
        }),
        account_use: Arc::new(account_use::RedisAccountUse {
            redis: redis.clone(),
        }),
        api_keys: Arc::new(api_keys::RedisApiKeys::new(redis.clone(), max_api_keys)),
        health: redis.health.clone(),
        feed: Some(RevocationFeed { revocations }),
    })
}
