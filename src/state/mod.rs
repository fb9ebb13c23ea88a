//! State shared by every request, and by every gateway of a deployment through Redis:
//! token revocations, login lockouts, the dashboard's count of failed logins per username,
//! failed logins per client, the service account's dashboard token, each user's own
//! dashboard session, the resets of users' credentials and the ids of tokens good once,
//! each behind a narrow trait (here), in memory (`memory/<store>.rs`) or in Redis
//! (`redis/<store>.rs`), and when each dashboard account the gateway manages was last used
//! (with the memory backend in the state directory, where the `accounts` command finds
//! it). `failed_logins` holds the bucket arithmetic both backends share; `contract` the
//! behaviour every backend's stores are tested for. Time is passed in, so the stores hold
//! no clock and tests control it.
//! Policy (how many failures lock for how long, how fast a client's bucket refills) lives
//! in `auth` and `config`, not here.

mod failed_logins;
mod health;
mod memory;
mod redis;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

pub use self::redis::{
    EncryptionKey, RedisSettings, RedisTarget, RevocationFeed, SentinelSettings,
};
pub use failed_logins::{BucketRate, Take};
pub use health::StoreHealth;
pub use memory::{
    LocalAccountUse, MemoryAccountTokens, MemoryApiKeys, MemoryCredentialResets,
    MemoryDashboardAttempts, MemoryFailedLogins, MemoryLockouts, MemoryRevocations,
    MemoryUpstreamTokens, MemoryUsedTokens, MemoryUserSessions,
};

use crate::api_keys::{KeyRecord, StoredKey};
use crate::client_addr::ClientNet;

/// Seconds since the Unix epoch.
pub type UnixTime = u64;

/// Milliseconds since the Unix epoch.
pub type UnixMillis = u64;

/// The clock's time as the stores take it (0 if the clock is before 1970).
pub fn unix_now() -> UnixTime {
    unix_now_ms() / 1000
}

/// [`unix_now`] in milliseconds, for what refills continuously.
pub fn unix_now_ms() -> UnixMillis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state store unavailable: {0}")]
    Unavailable(String),
    #[error("state store is full ({0} entries)")]
    Full(usize),
    #[error("state store settings: {0}")]
    Settings(String),
    /// Written on the primary, but fewer replicas than `state.redis.min_replicas`
    /// acknowledged it in time: a failover could forget it, so it is not answered as done.
    #[error("state store: {acknowledged} of {wanted} replicas acknowledged the change in time")]
    NotReplicated { acknowledged: u32, wanted: u32 },
}

/// Revoked token ids, each kept until the token would have expired anyway.
#[async_trait]
pub trait Revocations: Send + Sync {
    /// Revokes token `jti` until `until` (its `exp`).
    async fn revoke(&self, jti: &str, until: UnixTime, now: UnixTime) -> Result<(), StateError>;
    async fn is_revoked(&self, jti: &str, now: UnixTime) -> Result<bool, StateError>;
    /// Whether the store can answer (for readiness).
    async fn ready(&self) -> Result<(), StateError>;
}

/// Consecutive login failures per username, and locks.
#[async_trait]
pub trait Lockouts: Send + Sync {
    /// When `username` is locked at `now`, the end of the lock.
    async fn locked_until(
        &self,
        username: &str,
        now: UnixTime,
    ) -> Result<Option<UnixTime>, StateError>;
    /// Counts one more attempt and returns the count; a lock that is over at `now` is
    /// forgotten first, with its count.
    async fn record_failure(&self, username: &str, now: UnixTime) -> Result<u32, StateError>;
    /// Locks `username` until `until`, keeping its count.
    async fn lock(&self, username: &str, until: UnixTime) -> Result<(), StateError>;
    /// Forgets failures and locks of `username` (after a successful login).
    async fn clear(&self, username: &str) -> Result<(), StateError>;
    async fn ready(&self) -> Result<(), StateError>;
}

/// The dashboard's own count of failed logins per username, as the gateway mirrors it
/// (`auth.source = "dashboard"`): consecutive failures since the last success, never
/// forgotten by time, plus the attempts in flight, so that the gateway never sends the
/// attempt that could be the dashboard's limit-th failure (it would disable the account).
#[async_trait]
pub trait DashboardAttempts: Send + Sync {
    /// Reserves one attempt at `username` if its failures plus the attempts in flight stay
    /// under `ceiling`, atomically across gateways: `None` when they do not. A hold not
    /// settled by `hold_until` (its gateway died mid-attempt) counts as a failure: the
    /// dashboard may have counted it.
    async fn reserve(
        &self,
        username: &str,
        ceiling: u32,
        now: UnixMillis,
        hold_until: UnixMillis,
    ) -> Result<Option<Hold>, StateError>;
    /// The held attempt failed, or its outcome is unknown: one more failure (none if the
    /// hold already expired into one). Returns the failures.
    async fn failed(&self, username: &str, hold: &Hold) -> Result<u32, StateError>;
    /// The held attempt reached no password check (a standby answered it): it counts
    /// for nothing.
    async fn cancel(&self, username: &str, hold: &Hold) -> Result<(), StateError>;
    /// The dashboard accepted the held attempt: no failures, and `verifier` (an argon2id
    /// hash of the password, never the password) kept for the attempts near the limit
    /// (`None`: none could be made; the last one stays).
    async fn succeeded(
        &self,
        username: &str,
        hold: &Hold,
        verifier: Option<&str>,
    ) -> Result<(), StateError>;
    /// The verifier of the last password that succeeded through a gateway.
    async fn verifier(&self, username: &str) -> Result<Option<String>, StateError>;
    /// Forgets everything about `username`: an administrator reset the dashboard's own
    /// count (`clustergate unlock`).
    async fn forget(&self, username: &str) -> Result<(), StateError>;
    async fn ready(&self) -> Result<(), StateError>;
}

/// One reserved attempt, settled with the answer it got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold(pub String);

impl Hold {
    pub fn new() -> Hold {
        Hold(uuid::Uuid::new_v4().simple().to_string())
    }
}

impl Default for Hold {
    fn default() -> Self {
        Hold::new()
    }
}

/// A token bucket of failed logins per client: a login takes a token before its password
/// is checked, and gets it back unless the password was wrong. An absent bucket is full.
#[async_trait]
pub trait FailedLogins: Send + Sync {
    /// Takes one token from `client`'s bucket at `now`, or says how long until one is there.
    async fn take(
        &self,
        client: &ClientNet,
        rate: BucketRate,
        now: UnixMillis,
    ) -> Result<Take, StateError>;
    /// Puts back a token taken at `now` (that login did not fail); a full bucket stays full.
    async fn give_back(
        &self,
        client: &ClientNet,
        rate: BucketRate,
        now: UnixMillis,
    ) -> Result<(), StateError>;
    async fn ready(&self) -> Result<(), StateError>;
}

/// The dashboards' token for the gateway's service account (one per cluster: the
/// managers share their signing secret).
#[derive(Clone, PartialEq, Eq)]
pub struct UpstreamToken {
    pub token: Arc<str>,
    /// When to log in again, ahead of the token's `exp` (when it could be read).
    pub renew_at: Option<UnixTime>,
}

impl UpstreamToken {
    /// Whether it is time to log in again.
    pub fn due(&self, now: UnixTime) -> bool {
        self.renew_at.is_some_and(|at| now >= at)
    }
}

impl std::fmt::Debug for UpstreamToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamToken")
            .field("token", &"[redacted]")
            .field("renew_at", &self.renew_at)
            .finish()
    }
}

#[async_trait]
pub trait UpstreamTokens: Send + Sync {
    /// The token, unless there is none or it is due for renewal at `now`.
    async fn current(&self, now: UnixTime) -> Result<Option<UpstreamToken>, StateError>;
    async fn store(&self, token: UpstreamToken) -> Result<(), StateError>;
    /// Drops `token` if it is still the current one (another request may have renewed it).
    async fn discard(&self, token: &str) -> Result<(), StateError>;
    /// Claims the one login of all gateways for at most `ttl`; `false`: another gateway
    /// is logging in, and its token will be stored.
    async fn claim_login(&self, ttl: Duration) -> Result<bool, StateError>;
    /// Gives up this gateway's claim (if it still holds it).
    async fn release_login(&self) -> Result<(), StateError>;
    /// The dashboard refused the last login: no gateway logs in again before `until`.
    /// `None`: logins may go at once (the last one succeeded).
    async fn set_login_backoff(&self, until: Option<UnixMillis>) -> Result<(), StateError>;
    /// When logins may go again, if that is after `now`.
    async fn login_backoff(&self, now: UnixMillis) -> Result<Option<UnixMillis>, StateError>;
    async fn ready(&self) -> Result<(), StateError>;
}

/// The tokens of the dashboard accounts the gateway manages (`dashboard_identity`): one
/// store per account, shared by every gateway of a deployment as the service account's is.
pub trait AccountTokens: Send + Sync {
    fn of(&self, account: &str) -> Arc<dyn UpstreamTokens>;
}

/// When each dashboard account the gateway manages was last used, so that the `accounts`
/// command can remove those no longer needed: a user's roles come from the users file or
/// from an identity provider's groups, so which sets of roles are still in use is known
/// only from their use.
#[async_trait]
pub trait AccountUse: Send + Sync {
    /// `account` was used at `at`; an earlier moment than the one recorded changes nothing.
    async fn record(&self, account: &str, at: UnixTime) -> Result<(), StateError>;
    /// Each account's last recorded use.
    async fn last_uses(&self) -> Result<BTreeMap<String, UnixTime>, StateError>;
    /// Forgets the records of `accounts` (removed from the dashboard).
    async fn forget(&self, accounts: &[String]) -> Result<(), StateError>;
}

/// At most this many accounts' uses are recorded (`upstream.max_role_accounts` bounds
/// each gateway's accounts far below it).
pub const MAX_RECORDED_ACCOUNTS: usize = 10_000;

/// A user's own dashboard session (`auth.source = "dashboard"` or `upstream.identity =
/// "user"`), kept for the gateway token it belongs to: the token id is the key.
#[derive(Clone, PartialEq, Eq)]
pub struct UserSession {
    pub username: String,
    /// The user's dashboard token: it goes upstream only, never to the client or a log.
    pub dashboard_token: Arc<str>,
    /// The dashboard's `permissions` object (JSON text) when the dashboard checked the
    /// login; `None`: the users file grants.
    pub permissions: Option<String>,
    /// When the session ends: the earlier of the two tokens' `exp`.
    pub until: UnixTime,
}

impl std::fmt::Debug for UserSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserSession")
            .field("username", &self.username)
            .field("dashboard_token", &"[redacted]")
            .field("permissions", &self.permissions)
            .field("until", &self.until)
            .finish()
    }
}

/// The API keys (`api_keys`), by id: every gateway of a deployment finds a key another
/// one created. A key's record is kept until it expires, then forgotten; its revocation is
/// a `Revocations` entry (`api_keys::revocation_id`), which every gateway learns within
/// the revocation feed's bound.
#[async_trait]
pub trait ApiKeys: Send + Sync {
    /// Keeps `record` until its `expires_at`; `StateError::Full` when the store holds its
    /// maximum of keys.
    async fn insert(&self, record: &KeyRecord, now: UnixTime) -> Result<(), StateError>;
    /// The key `id`, unless there is none or it expired at `now`.
    async fn get(&self, id: &str, now: UnixTime) -> Result<Option<KeyRecord>, StateError>;
    /// The keys of `owner` (`None`: everyone's) not expired at `now`, with when each was
    /// last used, oldest first.
    async fn list(&self, owner: Option<&str>, now: UnixTime) -> Result<Vec<StoredKey>, StateError>;
    /// Forgets key `id`; whether there was one.
    async fn remove(&self, id: &str) -> Result<bool, StateError>;
    /// Records that key `id` was used at `at` (a later use wins; an unknown id is ignored).
    async fn touch(&self, id: &str, at: UnixTime) -> Result<(), StateError>;
    async fn ready(&self) -> Result<(), StateError>;
}

/// The users' dashboard sessions, by gateway token id; any gateway of a deployment can
/// find the session another one opened.
#[async_trait]
pub trait UserSessions: Send + Sync {
    /// Keeps `session` for token `jti` until `session.until`.
    async fn open(&self, jti: &str, session: &UserSession, now: UnixTime)
        -> Result<(), StateError>;
    /// The session of token `jti`, unless there is none or it ended at `now`.
    async fn find(&self, jti: &str, now: UnixTime) -> Result<Option<UserSession>, StateError>;
    /// Forgets the session of token `jti` (logout, or the dashboard refused its token).
    async fn close(&self, jti: &str) -> Result<(), StateError>;
    async fn ready(&self) -> Result<(), StateError>;
}

/// When each user's earlier tokens stopped counting: a reload that removed, disabled or
/// changed a user records it, so that the same credential back in the users file (at a
/// later reload, on this gateway or another) does not revive the tokens issued before.
#[async_trait]
pub trait CredentialResets: Send + Sync {
    /// Tokens of `username` issued before `at` are refused; kept until `until`, when every
    /// such token has expired. A reset earlier than the one recorded changes nothing.
    async fn reset(
        &self,
        username: &str,
        at: UnixTime,
        until: UnixTime,
        now: UnixTime,
    ) -> Result<(), StateError>;
    /// The latest reset of `username`, unless there is none (or it was forgotten after
    /// its `until`).
    async fn reset_at(&self, username: &str, now: UnixTime)
        -> Result<Option<UnixTime>, StateError>;
    async fn ready(&self) -> Result<(), StateError>;
}

/// The ids of tokens that are good once (the provider's back-channel logout tokens), each
/// remembered until its token has expired: a token seen again is a replay.
#[async_trait]
pub trait UsedTokens: Send + Sync {
    /// Records `id`, kept until `until`; `false`: it was recorded already (and has not
    /// expired at `now`).
    async fn first_use(&self, id: &str, until: UnixTime, now: UnixTime)
        -> Result<bool, StateError>;
    async fn ready(&self) -> Result<(), StateError>;
}

/// Which store holds the shared state; the gateway only sees the traits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StateConfig {
    /// This process's memory: one gateway.
    #[default]
    Memory,
    /// One Redis for every gateway of a deployment.
    Redis(RedisSettings),
}

/// The stores a gateway uses.
#[derive(Clone)]
pub struct Stores {
    pub revocations: Arc<dyn Revocations>,
    pub lockouts: Arc<dyn Lockouts>,
    pub dashboard_attempts: Arc<dyn DashboardAttempts>,
    pub failed_logins: Arc<dyn FailedLogins>,
    pub upstream_tokens: Arc<dyn UpstreamTokens>,
    pub account_tokens: Arc<dyn AccountTokens>,
    pub user_sessions: Arc<dyn UserSessions>,
    pub credential_resets: Arc<dyn CredentialResets>,
    pub used_tokens: Arc<dyn UsedTokens>,
    pub account_use: Arc<dyn AccountUse>,
    pub api_keys: Arc<dyn ApiKeys>,
    /// Whether the stores answer, for readiness and metrics.
    pub health: Arc<StoreHealth>,
    /// Keeps the revocations of a shared store current; `None` in memory.
    pub feed: Option<RevocationFeed>,
}

impl Stores {
    /// Whether every store can answer (for readiness): a round trip to each.
    pub async fn ready(&self) -> Result<(), StateError> {
        self.revocations.ready().await?;
        self.lockouts.ready().await?;
        self.dashboard_attempts.ready().await?;
        self.failed_logins.ready().await?;
        self.upstream_tokens.ready().await?;
        self.user_sessions.ready().await?;
        self.credential_resets.ready().await?;
        self.used_tokens.ready().await?;
        self.api_keys.ready().await
    }
}

/// The accounts' uses, in `server.state_dir` with the memory backend.
pub const ACCOUNT_USE_FILE: &str = "dashboard-accounts-use";

/// Bound on entries in a memory store (and on a shared store's local copy of the
/// revocations), so no client can grow it without limit.
pub const MEMORY_MAX_ENTRIES: usize = 100_000;

impl StateConfig {
    /// Whether the state lives outside the gateways' processes, where a command can reach it.
    pub fn is_shared(&self) -> bool {
        matches!(self, StateConfig::Redis(_))
    }

    /// The stores; with the memory backend, the accounts' uses are kept in `state_dir`; at
    /// most `max_api_keys` API keys (`api_keys.max_keys`). A Redis that cannot be reached
    /// yet does not stop this: the stores answer `Unavailable` until it can, and recover by
    /// themselves.
    pub fn build(self, state_dir: &Path, max_api_keys: usize) -> Result<Stores, StateError> {
        match self {
            StateConfig::Memory => Ok(Stores {
                revocations: Arc::new(MemoryRevocations::new(MEMORY_MAX_ENTRIES)),
                lockouts: Arc::new(MemoryLockouts::new(MEMORY_MAX_ENTRIES)),
                dashboard_attempts: Arc::new(MemoryDashboardAttempts::new(MEMORY_MAX_ENTRIES)),
                failed_logins: Arc::new(MemoryFailedLogins::new(MEMORY_MAX_ENTRIES)),
                upstream_tokens: Arc::new(MemoryUpstreamTokens::default()),
                account_tokens: Arc::new(MemoryAccountTokens),
                user_sessions: Arc::new(MemoryUserSessions::new(MEMORY_MAX_ENTRIES)),
                credential_resets: Arc::new(MemoryCredentialResets::new(MEMORY_MAX_ENTRIES)),
                used_tokens: Arc::new(MemoryUsedTokens::new(MEMORY_MAX_ENTRIES)),
                account_use: Arc::new(LocalAccountUse::open(state_dir.join(ACCOUNT_USE_FILE))?),
                api_keys: Arc::new(MemoryApiKeys::new(max_api_keys)),
                health: Arc::new(StoreHealth::always_up()),
                feed: None,
            }),
            StateConfig::Redis(settings) => self::redis::stores(settings, max_api_keys),
        }
    }
}

#[cfg(test)]
pub(crate) mod contract;
#[cfg(feature = "test-support")]
pub use self::redis::open_sealed;
