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
//! - Tokens (the service account's, the users' sessions) are sealed with the deployment's
//!   key (`sealed`): Redis never holds a credential in clear.
//!
//! Every command is bounded by `command_timeout`; a Redis that is down is `Unavailable`,
//! never a hang, and the connection comes back by itself.

mod account_use;
mod credential_resets;
mod dashboard_attempts;
mod failed_logins;
mod sealed;
mod used_tokens;

#[cfg(feature = "test-support")]
pub use sealed::open_sealed;
mod user_sessions;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures_util::StreamExt;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{Client, ConnectionAddr, Script, TlsMode};

use self::sealed::Sealer;
use super::memory::MemoryRevocations;
use super::{
    AccountTokens, Lockouts, Revocations, StateError, StoreHealth, Stores, UnixMillis, UnixTime,
    UpstreamToken, UpstreamTokens, MEMORY_MAX_ENTRIES,
};
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

/// Redis Sentinel: the sentinels to ask, and how to talk to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelSettings {
    /// `(host, port)` of each sentinel.
    pub addresses: Vec<(String, u16)>,
    /// The primary's name in the sentinels' `sentinel monitor` line.
    pub master_name: String,
    /// The sentinels' own ACL user, with `password`.
    pub username: Option<String>,
    pub password: Option<Secret>,
    /// TLS to the primary.
    pub tls: bool,
    /// TLS to the sentinels.
    pub sentinel_tls: bool,
}

/// One key file of `state.redis.encryption_keys`, shared by every gateway of a deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncryptionKey {
    pub kid: String,
    pub secret: Secret,
}

/// How long a failure count is kept without a new failure (a lock keeps it longer).
const FAILURE_MEMORY_SECONDS: u64 = 24 * 3600;
/// Keys read per SCAN step when the feed loads the live revocations.
const SCAN_STEP: usize = 1000;
/// SCAN steps a load takes at most (a wrong cursor cannot loop): four times what reads a
/// full local copy.
const MAX_SCAN_STEPS: usize = MEMORY_MAX_ENTRIES / SCAN_STEP * 4;
/// The feed's reconnection waits: from this, doubling, up to the next.
const RECONNECT_FIRST: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_millis(800);
/// Writes waiting for replicas at once (each on its own connection); more wait their turn.
const REPLICATED_WRITES_AT_ONCE: usize = 32;
/// How often the feed checks that Redis still answers while no message comes.
const LIVENESS_INTERVAL: Duration = Duration::from_millis(500);

/// The stores on one Redis connection.
pub(super) fn stores(settings: RedisSettings) -> Result<Stores, StateError> {
    stores_keeping(settings, MEMORY_MAX_ENTRIES)
}

/// The stores, with at most `kept` revocations in the local copy.
fn stores_keeping(settings: RedisSettings, kept: usize) -> Result<Stores, StateError> {
    let redis = Arc::new(Redis::new(settings)?);
    let revocations = Arc::new(RedisRevocations {
        redis: redis.clone(),
        local: MemoryRevocations::new(kept),
        incomplete_until: AtomicU64::new(0),
    });
    Ok(Stores {
        revocations: revocations.clone(),
        lockouts: Arc::new(RedisLockouts {
            redis: redis.clone(),
        }),
        dashboard_attempts: Arc::new(dashboard_attempts::RedisDashboardAttempts {
            redis: redis.clone(),
        }),
        failed_logins: Arc::new(failed_logins::RedisFailedLogins {
            redis: redis.clone(),
        }),
        upstream_tokens: Arc::new(RedisUpstreamTokens::new(redis.clone(), "upstream".into())),
        account_tokens: Arc::new(RedisAccountTokens {
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
        health: redis.health.clone(),
        feed: Some(RevocationFeed { revocations }),
    })
}

/// The connection every store of a gateway shares, its key names and its time bounds.
struct Redis {
    locator: Locator,
    /// The primary in use; `None` until found, and again once lost (with sentinels).
    primary: RwLock<Option<Arc<Primary>>>,
    /// Numbers each primary found, so that losing an old one does not forget a newer one.
    lookups: AtomicU64,
    /// When the sentinels last failed to name a primary: no new lookup before
    /// `RECONNECT_FIRST` has passed, so an outage does not send every request to them.
    failed_lookup: Mutex<Option<Instant>>,
    prefix: String,
    connect_timeout: Duration,
    command_timeout: Duration,
    min_replicas: u32,
    replication_timeout: Duration,
    /// Bounds the connections of the writes waiting for replicas.
    replicated_writes: tokio::sync::Semaphore,
    health: Arc<StoreHealth>,
    sealer: Sealer,
}

/// How the primary is found.
enum Locator {
    /// One address: its `ConnectionManager` reconnects to it by itself.
    Fixed(Client),
    /// Asked of the sentinels (one lookup at a time), again whenever the primary is lost.
    Sentinels(tokio::sync::Mutex<SentinelClient>),
}

/// A primary found, with the connection every store shares.
struct Primary {
    lookup: u64,
    client: Client,
    manager: ConnectionManager,
}

impl Redis {
    fn new(settings: RedisSettings) -> Result<Redis, StateError> {
        let invalid = |e: redis::RedisError| StateError::Settings(e.to_string());
        let certificates = settings.ca_pem.map(|root_cert| redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(root_cert),
        });
        let password = settings
            .password
            .as_ref()
            .map(|p| String::from_utf8_lossy(p.expose()).into_owned());
        let locator = match settings.target {
            RedisTarget::Url(url) => {
                let mut info = redis::IntoConnectionInfo::into_connection_info(url.as_str())
                    .map_err(invalid)?;
                let mut account = info.redis_settings().clone();
                if let Some(username) = &settings.username {
                    account = account.set_username(username);
                }
                if let Some(password) = &password {
                    account = account.set_password(password);
                }
                info = info.set_redis_settings(account);
                let client = match certificates {
                    Some(certificates) => Client::build_with_tls(info, certificates),
                    None => Client::open(info),
                }
                .map_err(invalid)?;
                Locator::Fixed(client)
            }
            RedisTarget::Sentinels(sentinels) => {
                let client = sentinel_client(
                    *sentinels,
                    settings.username.as_deref(),
                    password.as_deref(),
                    certificates,
                )
                .map_err(invalid)?;
                Locator::Sentinels(tokio::sync::Mutex::new(client))
            }
        };
        let keys = settings.encryption_keys.iter();
        let sealer = Sealer::new(keys.map(|k| (k.kid.as_str(), k.secret.expose())))
            .ok_or_else(|| StateError::Settings("no encryption key".into()))?;
        Ok(Redis {
            locator,
            primary: RwLock::new(None),
            lookups: AtomicU64::new(0),
            failed_lookup: Mutex::new(None),
            prefix: settings.key_prefix,
            connect_timeout: settings.connect_timeout,
            command_timeout: settings.command_timeout,
            min_replicas: settings.min_replicas,
            replication_timeout: settings.replication_timeout,
            replicated_writes: tokio::sync::Semaphore::new(REPLICATED_WRITES_AT_ONCE),
            health: Arc::new(StoreHealth::starting()),
            sealer,
        })
    }

    fn key(&self, kind: &str, id: &str) -> String {
        format!("{}{kind}:{id}", self.prefix)
    }

    fn revocations_channel(&self) -> String {
        format!("{}revocations", self.prefix)
    }

    /// `plain` sealed for `key`.
    fn seal(&self, key: &str, plain: &str) -> Result<String, StateError> {
        self.sealer
            .seal(key, plain.as_bytes())
            .map_err(|_| StateError::Unavailable("cannot seal a value for redis".into()))
    }

    /// What was sealed for `key`; `None` for what no listed key opens (an old key taken off
    /// the list, or not written by this deployment): absent, so a user logs in again.
    fn open(&self, key: &str, stored: &str) -> Option<String> {
        let plain = self.sealer.open(key, stored);
        plain.and_then(|p| String::from_utf8(p).ok())
    }

    fn current_primary(&self) -> Option<Arc<Primary>> {
        self.primary.read().ok().and_then(|p| p.clone())
    }

    /// The primary to use: the one in use, else found (through the sentinels if any).
    async fn primary(&self) -> Result<Arc<Primary>, redis::RedisError> {
        if let Some(primary) = self.current_primary() {
            return Ok(primary);
        }
        let client = match &self.locator {
            Locator::Fixed(client) => client.clone(),
            Locator::Sentinels(sentinels) => {
                let mut sentinels = sentinels.lock().await;
                // Found by another task while this one waited for the lookup.
                if let Some(primary) = self.current_primary() {
                    return Ok(primary);
                }
                self.ask_sentinels(&mut sentinels).await?
            }
        };
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.command_timeout))
            .set_min_delay(RECONNECT_FIRST)
            .set_max_delay(RECONNECT_MAX);
        let manager = ConnectionManager::new_lazy_with_config(client.clone(), config)?;
        let primary = Arc::new(Primary {
            lookup: self.lookups.fetch_add(1, Ordering::Relaxed) + 1,
            client,
            manager,
        });
        let mut current = self
            .primary
            .write()
            .map_err(|_| lookup_error("the primary's lock is poisoned"))?;
        Ok(current.get_or_insert(primary).clone())
    }

    /// The primary the sentinels name, once it says it is one (`ROLE`), within
    /// `connect_timeout`.
    async fn ask_sentinels(
        &self,
        sentinels: &mut SentinelClient,
    ) -> Result<Client, redis::RedisError> {
        let failed_lookup = |at| {
            if let Ok(mut failed) = self.failed_lookup.lock() {
                *failed = at;
            }
        };
        let recent_failure = self.failed_lookup.lock().ok().and_then(|f| *f);
        if recent_failure.is_some_and(|at| at.elapsed() < RECONNECT_FIRST) {
            return Err(lookup_error(
                "no primary known: the sentinels were just asked",
            ));
        }
        let found = tokio::time::timeout(self.connect_timeout, sentinels.async_get_client()).await;
        match found {
            Ok(Ok(client)) => {
                failed_lookup(None);
                tracing::info!(primary = %client.get_connection_info().addr(), "redis primary found through the sentinels");
                Ok(client)
            }
            Ok(Err(e)) => {
                failed_lookup(Some(Instant::now()));
                Err(e)
            }
            Err(_) => {
                failed_lookup(Some(Instant::now()));
                Err(lookup_error(
                    "no primary named by the sentinels within connect_timeout_ms",
                ))
            }
        }
    }

    /// Forgets `primary` after it failed, so the next command asks the sentinels again:
    /// after a failover the old primary is gone or a replica. With one address, the
    /// connection reconnects by itself instead.
    fn lost(&self, lookup: u64) {
        if !matches!(self.locator, Locator::Sentinels(_)) {
            return;
        }
        if let Ok(mut current) = self.primary.write() {
            if current.as_ref().is_some_and(|p| p.lookup == lookup) {
                *current = None;
            }
        }
    }

    /// That Redis answers; with sentinels, that it is still the primary (`ROLE`) and the
    /// one they name: after a failover the old primary, if it still answers, says it is a
    /// primary until the sentinels turn it into a replica (up to 10 s later), and what is
    /// written there is lost. Forgotten then. Sentinels that do not answer change nothing.
    async fn check_primary(&self) -> Result<(), StateError> {
        let Locator::Sentinels(sentinels) = &self.locator else {
            return self.run("ping", &redis::cmd("PING")).await;
        };
        let role = self.run("role", &redis::cmd("ROLE")).await?;
        let Some(primary) = self.current_primary() else {
            return Err(self.failed("role", "no primary known"));
        };
        if !matches!(role, redis::Role::Primary { .. }) {
            self.lost(primary.lookup);
            return Err(self.failed("role", "the primary became a replica"));
        }
        let named = {
            let mut sentinels = sentinels.lock().await;
            self.ask_sentinels(&mut sentinels).await
        };
        let address = |client: &Client| client.get_connection_info().addr().to_string();
        match named {
            Ok(named) if address(&named) != address(&primary.client) => {
                self.lost(primary.lookup);
                Err(self.failed("role", "the sentinels name another primary"))
            }
            _ => Ok(()),
        }
    }

    /// Which primary is in use (its lookup's number), if any.
    fn primary_in_use(&self) -> Option<u64> {
        self.current_primary().map(|p| p.lookup)
    }

    /// Runs `command` within `command_timeout`, recording the outcome.
    async fn run<T: redis::FromRedisValue>(
        &self,
        what: &'static str,
        command: &redis::Cmd,
    ) -> Result<T, StateError> {
        self.bounded(what, self.command_timeout, |primary| async move {
            command.query_async(&mut primary.manager.clone()).await
        })
        .await
    }

    /// Runs a Lua script on one key with `args` (a value or a tuple of values).
    async fn run_script<T: redis::FromRedisValue>(
        &self,
        what: &'static str,
        script: &Script,
        keys: impl redis::ToRedisArgs,
        args: impl redis::ToRedisArgs,
    ) -> Result<T, StateError> {
        let mut invocation = script.prepare_invoke();
        invocation.key(keys).arg(args);
        let invocation = &invocation;
        self.bounded(what, self.command_timeout, |primary| async move {
            invocation.invoke_async(&mut primary.manager.clone()).await
        })
        .await
    }

    /// Runs `writes` (each `ignore`d), answering only once the primary has them and
    /// `min_replicas` replicas acknowledged them: `WAIT` in the same pipeline, so on the
    /// same connection (a WAIT on a reconnected one would wait for nothing). Past
    /// `replication_timeout` with fewer: `NotReplicated`, never a success that a
    /// failover may forget. Each on a connection of its own: Redis answers nothing else
    /// on a connection while it waits, so with replicas gone the checks (and the other
    /// writes) would queue behind it.
    async fn run_replicated(
        &self,
        what: &'static str,
        mut writes: redis::Pipeline,
    ) -> Result<(), StateError> {
        if self.min_replicas == 0 {
            return self
                .bounded(what, self.command_timeout, |primary| async move {
                    writes.query_async::<()>(&mut primary.manager.clone()).await
                })
                .await;
        }
        let timeout_ms = u64::try_from(self.replication_timeout.as_millis()).unwrap_or(u64::MAX);
        writes.cmd("WAIT").arg(self.min_replicas).arg(timeout_ms);
        let writes = &writes;
        let bound = self.command_timeout + self.replication_timeout;
        let (acknowledged,): (u32,) = self
            .bounded(what, bound, |primary| async move {
                let _turn = self.replicated_writes.acquire().await;
                let config = redis::AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(self.connect_timeout))
                    .set_response_timeout(Some(bound));
                let connection = primary
                    .client
                    .get_multiplexed_async_connection_with_config(&config);
                writes.query_async(&mut connection.await?).await
            })
            .await?;
        if acknowledged < self.min_replicas {
            return Err(StateError::NotReplicated {
                acknowledged,
                wanted: self.min_replicas,
            });
        }
        Ok(())
    }

    /// Runs `work` on the primary's connection within `bound`, recording the outcome; a
    /// primary that fails is forgotten (see `lost`).
    async fn bounded<T, W, F>(
        &self,
        what: &'static str,
        bound: Duration,
        work: W,
    ) -> Result<T, StateError>
    where
        W: FnOnce(Arc<Primary>) -> F,
        F: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let mut used = None;
        let outcome = tokio::time::timeout(bound, async {
            let primary = self.primary().await?;
            used = Some(primary.lookup);
            work(primary).await
        })
        .await;
        let why = match outcome {
            Ok(Ok(value)) => {
                self.health.command_succeeded();
                return Ok(value);
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer in time".to_string(),
        };
        if let Some(lookup) = used {
            self.lost(lookup);
        }
        Err(self.failed(what, &why))
    }

    fn failed(&self, what: &str, why: &str) -> StateError {
        self.health.command_failed();
        StateError::Unavailable(format!("redis {what}: {why}"))
    }
}

/// Asks `sentinels` for the primary, as the sentinels' user, and talks to it as the
/// gateways' user (`username`, `password`), each with TLS if so configured.
fn sentinel_client(
    sentinels: SentinelSettings,
    username: Option<&str>,
    password: Option<&str>,
    certificates: Option<redis::TlsCertificates>,
) -> redis::RedisResult<SentinelClient> {
    let tls = sentinels.sentinel_tls;
    let addresses = sentinels
        .addresses
        .into_iter()
        .map(|(host, port)| match tls {
            true => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: false,
                tls_params: None,
            },
            false => ConnectionAddr::Tcp(host, port),
        });
    let mut builder = SentinelClientBuilder::new(
        addresses,
        &sentinels.master_name,
        SentinelServerType::Master,
    )?;
    if let Some(username) = username {
        builder = builder.set_client_to_redis_username(username);
    }
    if let Some(password) = password {
        builder = builder.set_client_to_redis_password(password);
    }
    if sentinels.tls {
        builder = builder.set_client_to_redis_tls_mode(TlsMode::Secure);
        if let Some(certificates) = certificates.clone() {
            builder = builder.set_client_to_redis_certificates(certificates);
        }
    }
    if let Some(username) = &sentinels.username {
        builder = builder.set_client_to_sentinel_username(username);
    }
    if let Some(password) = &sentinels.password {
        builder =
            builder.set_client_to_sentinel_password(String::from_utf8_lossy(password.expose()));
    }
    if tls {
        builder = builder.set_client_to_sentinel_tls_mode(TlsMode::Secure);
        if let Some(certificates) = certificates {
            builder = builder.set_client_to_sentinel_certificates(certificates);
        }
    }
    builder.build()
}

fn lookup_error(why: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Io, why))
}

/// Revocations: keys in Redis, a local copy for the checks. Redis keeps every one until its
/// token expires; the copy keeps a bounded number, and while it lacks some (it was full),
/// a token it does not hold is looked up in Redis: no logout is ever ignored.
pub struct RedisRevocations {
    redis: Arc<Redis>,
    local: MemoryRevocations,
    /// Until when the copy may lack revocations: the latest expiry of one it could not keep.
    incomplete_until: AtomicU64,
}

#[async_trait]
impl Revocations for RedisRevocations {
    async fn revoke(&self, jti: &str, until: UnixTime, now: UnixTime) -> Result<(), StateError> {
        if until < now {
            return Ok(()); // already expired: nothing left to revoke
        }
        let channel = self.redis.revocations_channel();
        let signed = self.redis.sealer.sign(&channel, &format!("{until} {jti}"));
        // MULTI/EXEC written out (not `atomic()`): the WAIT after it must stay outside.
        let mut writes = redis::pipe();
        writes
            .cmd("MULTI")
            .ignore()
            .cmd("SET")
            .arg(self.redis.key("revoked", jti))
            .arg(&signed)
            .arg("EXAT")
            .arg(until)
            .ignore()
            .cmd("PUBLISH")
            .arg(channel)
            .arg(&signed)
            .ignore()
            .cmd("EXEC")
            .ignore();
        self.redis.run_replicated("revoke", writes).await?;
        // This gateway refuses the token at once, before its own message comes back.
        self.keep_locally(jti, until, now).await
    }

    async fn is_revoked(&self, jti: &str, now: UnixTime) -> Result<bool, StateError> {
        if !self.redis.health.in_sync() {
            return Err(StateError::Unavailable(
                "revocations are not in sync with redis".into(),
            ));
        }
        if self.local.is_revoked(jti, now).await? {
            return Ok(true);
        }
        if self.incomplete_until.load(Ordering::Acquire) < now {
            return Ok(false);
        }
        self.revoked_in_redis(jti, now).await
    }

    async fn ready(&self) -> Result<(), StateError> {
        if !self.redis.health.in_sync() {
            return Err(StateError::Unavailable(
                "revocations are not in sync with redis".into(),
            ));
        }
        self.redis.run("ping", &redis::cmd("PING")).await
    }
}

impl RedisRevocations {
    /// Loads every live revocation into the local copy (after subscribing, so none is
    /// missed in between). Bounded by the local copy's size.
    async fn load(&self, now: UnixTime) -> Result<usize, StateError> {
        let pattern = format!("{}*", self.redis.key("revoked", ""));
        let mut cursor: u64 = 0;
        let mut loaded = 0;
        // Each step reads up to SCAN_STEP keys; a bound on steps keeps a wrong cursor from looping.
        for _ in 0..MAX_SCAN_STEPS {
            let step = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(SCAN_STEP)
                .clone();
            let (next, keys): (u64, Vec<String>) = self.redis.run("scan", &step).await?;
            loaded += self.load_keys(&keys, now).await?;
            if next == 0 {
                return Ok(loaded);
            }
            cursor = next;
        }
        // Not every key was read: every token the copy lacks is looked up in Redis.
        self.incomplete_until
            .store(UnixTime::MAX, Ordering::Release);
        tracing::error!(
            loaded,
            "too many revocations in redis to read them all: tokens not among them are looked up in redis"
        );
        Ok(loaded)
    }

    /// Keeps a revocation in the local copy; one the full copy cannot keep is left to
    /// Redis (`is_revoked` asks it) until its token has expired.
    async fn keep_locally(
        &self,
        jti: &str,
        until: UnixTime,
        now: UnixTime,
    ) -> Result<(), StateError> {
        match self.local.revoke(jti, until, now).await {
            Err(StateError::Full(kept)) => {
                let before = self.incomplete_until.fetch_max(until, Ordering::AcqRel);
                if before < now {
                    tracing::warn!(kept, "the local copy of the revocations is full: tokens not in it are looked up in redis until the revocations it could not keep have expired");
                }
                Ok(())
            }
            other => other,
        }
    }

    /// Whether Redis holds a revocation of `jti`, signed with the deployment's key.
    async fn revoked_in_redis(&self, jti: &str, now: UnixTime) -> Result<bool, StateError> {
        let key = self.redis.key("revoked", jti);
        let signed: Option<String> = self
            .redis
            .run("revoked", redis::cmd("GET").arg(key))
            .await?;
        Ok(signed
            .as_deref()
            .and_then(|signed| self.signed_revocation(signed))
            .is_some_and(|(until, revoked)| revoked == jti && until >= now))
    }

    /// The `(until, jti)` of a signed revocation; `None` when not signed with the
    /// deployment's key.
    fn signed_revocation<'a>(&self, signed: &'a str) -> Option<(UnixTime, &'a str)> {
        let channel = self.redis.revocations_channel();
        let message = self.redis.sealer.verify(&channel, signed)?;
        let (until, jti) = message.split_once(' ')?;
        Some((until.parse::<UnixTime>().ok()?, jti))
    }

    /// Applies the revocations kept in `keys` (each holds its signed message).
    async fn load_keys(&self, keys: &[String], now: UnixTime) -> Result<usize, StateError> {
        if keys.is_empty() {
            return Ok(0);
        }
        let messages: Vec<Option<String>> =
            self.redis.run("mget", redis::cmd("MGET").arg(keys)).await?;
        let mut loaded = 0;
        for message in messages.iter().flatten() {
            loaded += usize::from(self.apply(message, now).await);
        }
        Ok(loaded)
    }

    /// Applies a signed `"<until> <jti>"` (from the channel or a key); whether it was one.
    /// Anything else is dropped, counted, and logged without its content.
    async fn apply(&self, signed: &str, now: UnixTime) -> bool {
        let Some((until, jti)) = self.signed_revocation(signed) else {
            let forged = self.redis.health.revocation_refused();
            // Logged at the 1st, 2nd, 4th, 8th... so a flood cannot flood the log.
            if forged.is_power_of_two() {
                tracing::warn!(
                    refused = forged,
                    "a revocation not signed with this deployment's key was dropped"
                );
            }
            return false;
        };
        if let Err(e) = self.keep_locally(jti, until, now).await {
            tracing::error!(error = %e, "cannot keep a revocation locally");
        }
        true
    }
}

/// The background task that keeps every gateway's copy of the revocations current: a
/// subscription to the revocations channel, re-made (and the copy reloaded) whenever the
/// connection is lost.
#[derive(Clone)]
pub struct RevocationFeed {
    revocations: Arc<RedisRevocations>,
}

impl RevocationFeed {
    fn health(&self) -> &StoreHealth {
        &self.revocations.redis.health
    }

    /// Follows the channel until the connection is lost (`Err`) or shutdown (`Ok`).
    async fn follow(&self, shutdown: &mut ShutdownWatch) -> Result<(), StateError> {
        let redis = &self.revocations.redis;
        let lost = |e: redis::RedisError| StateError::Unavailable(format!("redis feed: {e}"));
        let no_primary = || StateError::Unavailable("redis feed: no primary in time".into());
        let primary = tokio::time::timeout(redis.connect_timeout, redis.primary())
            .await
            .map_err(|_| no_primary())?
            .map_err(lost)?;
        let pubsub = tokio::time::timeout(redis.connect_timeout, primary.client.get_async_pubsub())
            .await
            .map_err(|_| StateError::Unavailable("redis feed: no connection in time".into()));
        let mut pubsub = match pubsub {
            Ok(Ok(pubsub)) => pubsub,
            Ok(Err(e)) => {
                redis.lost(primary.lookup);
                return Err(lost(e));
            }
            Err(e) => {
                redis.lost(primary.lookup);
                return Err(e);
            }
        };
        tokio::time::timeout(
            redis.command_timeout,
            pubsub.subscribe(redis.revocations_channel()),
        )
        .await
        .map_err(|_| StateError::Unavailable("redis feed: no subscription in time".into()))?
        .map_err(lost)?;
        let loaded = self.revocations.load(super::unix_now()).await?;
        self.health().set_in_sync(true);
        tracing::info!(revocations = loaded, "revocations in sync with redis");
        let mut messages = pubsub.into_on_message();
        let mut liveness = tokio::time::interval(LIVENESS_INTERVAL);
        loop {
            tokio::select! {
                _ = shutdown.changed() => return Ok(()),
                message = messages.next() => match message {
                    Some(message) => {
                        let text = message.get_payload::<String>().unwrap_or_default();
                        self.revocations.apply(&text, super::unix_now()).await;
                    }
                    None => return Err(StateError::Unavailable("redis feed: connection closed".into())),
                },
                _ = liveness.tick() => {
                    redis.check_primary().await?;
                    // The commands moved to another primary (a failover): follow it there,
                    // and read its revocations again.
                    if redis.primary_in_use() != Some(primary.lookup) {
                        return Err(StateError::Unavailable("redis feed: the primary changed".into()));
                    }
                }
            }
        }
    }
}

#[async_trait]
impl BackgroundService for RevocationFeed {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut wait = RECONNECT_FIRST;
        loop {
            // Boxed: the subscription's future is large (clippy.toml), once per connection.
            let outcome = Box::pin(self.follow(&mut shutdown)).await;
            self.health().set_in_sync(false);
            match outcome {
                Ok(()) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "revocations not in sync with redis; reconnecting")
                }
            }
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(wait) => {}
            }
            wait = (wait * 2).min(RECONNECT_MAX);
            if self.health().up() {
                wait = RECONNECT_FIRST;
            }
        }
    }
}

/// Counts a failure; a lock over at `now` is forgotten first, with its count. Keys: the
/// user's record. Arguments: now, how long a count is kept.
static RECORD_FAILURE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local locked = tonumber(redis.call('HGET', KEYS[1], 'locked_until') or '0')
if locked > 0 and locked <= tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[1])
end
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
if redis.call('TTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return failures
"#,
    )
});

/// Locks a user until ARGV[1], keeping its count; the record outlives the lock by ARGV[2].
const LOCK_SOURCE: &str = r#"
redis.call('HSET', KEYS[1], 'locked_until', ARGV[1])
redis.call('EXPIREAT', KEYS[1], tonumber(ARGV[1]) + tonumber(ARGV[2]))
return 1
"#;
static LOCK: LazyLock<Script> = LazyLock::new(|| Script::new(LOCK_SOURCE));

/// Lockouts: one hash per username, `failures` and `locked_until`.
pub struct RedisLockouts {
    redis: Arc<Redis>,
}

#[async_trait]
impl Lockouts for RedisLockouts {
    async fn locked_until(
        &self,
        username: &str,
        now: UnixTime,
    ) -> Result<Option<UnixTime>, StateError> {
        let key = self.redis.key("lockout", username);
        let until: Option<UnixTime> = self
            .redis
            .run("lockout", redis::cmd("HGET").arg(key).arg("locked_until"))
            .await?;
        Ok(until.filter(|until| *until > now))
    }

    async fn record_failure(&self, username: &str, now: UnixTime) -> Result<u32, StateError> {
        let key = self.redis.key("lockout", username);
        let args = (now, FAILURE_MEMORY_SECONDS);
        self.redis
            .run_script("lockout", &RECORD_FAILURE, key, args)
            .await
    }

    async fn lock(&self, username: &str, until: UnixTime) -> Result<(), StateError> {
        let key = self.redis.key("lockout", username);
        // Loaded in the same pipeline: EVALSHA alone fails on a primary that never ran it
        // (a new one after a failover).
        let mut writes = redis::pipe();
        writes
            .cmd("SCRIPT")
            .arg("LOAD")
            .arg(LOCK_SOURCE)
            .ignore()
            .cmd("EVALSHA")
            .arg(LOCK.get_hash())
            .arg(1)
            .arg(key)
            .arg(until)
            .arg(FAILURE_MEMORY_SECONDS)
            .ignore();
        self.redis.run_replicated("lockout", writes).await
    }

    async fn clear(&self, username: &str) -> Result<(), StateError> {
        let key = self.redis.key("lockout", username);
        self.redis.run("lockout", redis::cmd("DEL").arg(key)).await
    }

    async fn ready(&self) -> Result<(), StateError> {
        self.redis.run("ping", &redis::cmd("PING")).await
    }
}

/// Deletes KEYS[1] if it still holds ARGV[1].
static DELETE_IF_EQUAL: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"#,
    )
});

/// How long a stored token outlives its renewal time (the dashboard's tokens expire a
/// fifth of their lifetime, at most 5 minutes, after it).
const TOKEN_KEPT_PAST_RENEWAL: u64 = 300;

/// An account's dashboard token: one key, `<renew_at or 0> <token>` sealed, kept locally
/// until due.
pub struct RedisUpstreamTokens {
    redis: Arc<Redis>,
    /// The keys' kind: `upstream` for the service account's (the keys it always had),
    /// `account:<name>` for an account the gateway manages.
    kind: String,
    local: RwLock<Option<UpstreamToken>>,
    /// This gateway's name in the login claim.
    claimant: String,
}

/// The tokens of the accounts the gateway manages, each under its own keys.
struct RedisAccountTokens {
    redis: Arc<Redis>,
}

impl AccountTokens for RedisAccountTokens {
    fn of(&self, account: &str) -> Arc<dyn UpstreamTokens> {
        let kind = format!("account:{account}");
        Arc::new(RedisUpstreamTokens::new(self.redis.clone(), kind))
    }
}

impl RedisUpstreamTokens {
    fn new(redis: Arc<Redis>, kind: String) -> Self {
        RedisUpstreamTokens {
            redis,
            kind,
            local: RwLock::new(None),
            claimant: uuid::Uuid::new_v4().to_string(),
        }
    }

    fn local(&self) -> Option<UpstreamToken> {
        self.local.read().ok().and_then(|t| t.clone())
    }

    fn set_local(&self, token: Option<UpstreamToken>) {
        if let Ok(mut local) = self.local.write() {
            *local = token;
        }
    }

    fn encode(token: &UpstreamToken) -> String {
        format!("{} {}", token.renew_at.unwrap_or(0), token.token)
    }

    fn decode(text: &str) -> Option<UpstreamToken> {
        let (renew_at, token) = text.split_once(' ')?;
        let renew_at = renew_at.parse::<UnixTime>().ok()?;
        Some(UpstreamToken {
            token: Arc::from(token),
            renew_at: (renew_at > 0).then_some(renew_at),
        })
    }

    /// The stored value as Redis holds it, and the token it seals (none if no key opens it).
    async fn stored(&self) -> Result<Option<(String, UpstreamToken)>, StateError> {
        let key = self.redis.key(&self.kind, "token");
        let stored: Option<String> = self
            .redis
            .run("upstream token", redis::cmd("GET").arg(&key))
            .await?;
        Ok(stored.and_then(|sealed| {
            let token = Self::decode(&self.redis.open(&key, &sealed)?)?;
            Some((sealed, token))
        }))
    }
}

#[async_trait]
impl UpstreamTokens for RedisUpstreamTokens {
    async fn current(&self, now: UnixTime) -> Result<Option<UpstreamToken>, StateError> {
        if let Some(token) = self.local().filter(|t| !t.due(now)) {
            return Ok(Some(token));
        }
        let token = self.stored().await?.map(|(_, token)| token);
        let token = token.filter(|t| !t.due(now));
        self.set_local(token.clone());
        Ok(token)
    }

    async fn store(&self, token: UpstreamToken) -> Result<(), StateError> {
        let key = self.redis.key(&self.kind, "token");
        let sealed = self.redis.seal(&key, &Self::encode(&token))?;
        let mut set = redis::cmd("SET");
        set.arg(key).arg(sealed);
        if let Some(renew_at) = token.renew_at {
            set.arg("EXAT").arg(renew_at + TOKEN_KEPT_PAST_RENEWAL);
        }
        self.redis.run::<()>("upstream token", &set).await?;
        self.set_local(Some(token));
        Ok(())
    }

    async fn discard(&self, token: &str) -> Result<(), StateError> {
        if self.local().is_some_and(|t| &*t.token == token) {
            self.set_local(None);
        }
        // Deleted only if Redis still holds what was read: a token stored meanwhile stays.
        if let Some((sealed, stored)) = self.stored().await? {
            if &*stored.token == token {
                let key = self.redis.key(&self.kind, "token");
                self.redis
                    .run_script::<i64>("upstream token", &DELETE_IF_EQUAL, key, sealed)
                    .await?;
            }
        }
        Ok(())
    }

    async fn claim_login(&self, ttl: Duration) -> Result<bool, StateError> {
        let claim = redis::cmd("SET")
            .arg(self.redis.key(&self.kind, "login"))
            .arg(&self.claimant)
            .arg("NX")
            .arg("PX")
            .arg(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1))
            .clone();
        let set: Option<String> = self.redis.run("login claim", &claim).await?;
        Ok(set.is_some())
    }

    async fn release_login(&self) -> Result<(), StateError> {
        let key = self.redis.key(&self.kind, "login");
        let claimant = self.claimant.as_str();
        self.redis
            .run_script::<i64>("login claim", &DELETE_IF_EQUAL, key, claimant)
            .await?;
        Ok(())
    }

    /// One key, expiring when the wait is over.
    async fn set_login_backoff(&self, until: Option<UnixMillis>) -> Result<(), StateError> {
        let key = self.redis.key("upstream", "login_backoff");
        let command = match until {
            Some(until) => redis::cmd("SET")
                .arg(key)
                .arg(until)
                .arg("PXAT")
                .arg(until.max(1))
                .clone(),
            None => redis::cmd("DEL").arg(key).clone(),
        };
        self.redis.run::<()>("login backoff", &command).await
    }

    async fn login_backoff(&self, now: UnixMillis) -> Result<Option<UnixMillis>, StateError> {
        let key = self.redis.key("upstream", "login_backoff");
        let until: Option<UnixMillis> = self
            .redis
            .run("login backoff", redis::cmd("GET").arg(key))
            .await?;
        Ok(until.filter(|until| *until > now))
    }

    async fn ready(&self) -> Result<(), StateError> {
        self.redis.run("ping", &redis::cmd("PING")).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::client_addr::ClientNet;
    use crate::state::{contract, BucketRate, Take, UserSession};
    use clustergate_test_support::redis_server::{self, RedisServer, SentinelServer};

    const COMMAND_TIMEOUT: Duration = Duration::from_millis(300);
    const REPLICATION_TIMEOUT: Duration = Duration::from_millis(300);
    /// Room for a replica's acknowledgement while the other tests load both cores.
    const BUSY_REPLICATION_TIMEOUT: Duration = Duration::from_secs(1);

    fn settings(server: &RedisServer, prefix: &str) -> RedisSettings {
        RedisSettings {
            target: RedisTarget::Url(server.url()),
            username: None,
            password: None,
            ca_pem: None,
            key_prefix: prefix.into(),
            connect_timeout: Duration::from_millis(300),
            command_timeout: COMMAND_TIMEOUT,
            min_replicas: 0,
            replication_timeout: REPLICATION_TIMEOUT,
            encryption_keys: vec![encryption_key(
                redis_server::ENCRYPTION_KID,
                redis_server::ENCRYPTION_SECRET,
            )],
        }
    }

    fn encryption_key(kid: &str, secret: &str) -> EncryptionKey {
        EncryptionKey {
            kid: kid.into(),
            secret: Secret::new(secret.as_bytes().to_vec()),
        }
    }

    /// A connection as Redis' `default` user, to read and write what the gateway does not.
    async fn raw(server: &RedisServer) -> redis::aio::MultiplexedConnection {
        Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }

    async fn raw_get(server: &RedisServer, key: &str) -> String {
        let value: Option<String> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut raw(server).await)
            .await
            .unwrap();
        value.unwrap_or_else(|| panic!("{key} is not in redis"))
    }

    /// A gateway's stores, with its revocation feed running until the sender drops.
    struct Gateway {
        stores: Stores,
        _stop: tokio::sync::watch::Sender<bool>,
    }

    async fn gateway(server: &RedisServer, prefix: &str) -> Gateway {
        gateway_with(settings(server, prefix)).await
    }

    async fn gateway_with(settings: RedisSettings) -> Gateway {
        gateway_keeping(settings, MEMORY_MAX_ENTRIES).await
    }

    /// A gateway whose local copy keeps at most `kept` revocations.
    async fn gateway_keeping(settings: RedisSettings, kept: usize) -> Gateway {
        let stores = stores_keeping(settings, kept).unwrap();
        let (stop, watch) = tokio::sync::watch::channel(false);
        let feed = stores.feed.clone().unwrap();
        tokio::spawn(async move { feed.start(watch).await });
        let gateway = Gateway {
            stores,
            _stop: stop,
        };
        wait_until(Duration::from_secs(5), || gateway.stores.health.up()).await;
        gateway
    }

    async fn wait_until(limit: Duration, done: impl Fn() -> bool) -> Duration {
        let started = Instant::now();
        while !done() {
            assert!(started.elapsed() < limit, "not within {limit:?}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        started.elapsed()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_stores_pass_the_contract() {
        let server = RedisServer::start();
        let gateway = gateway(&server, "contract:").await;
        contract::revocations(gateway.stores.revocations.as_ref()).await;
        contract::lockouts(gateway.stores.lockouts.as_ref()).await;
        contract::failed_logins(gateway.stores.failed_logins.as_ref()).await;
        contract::dashboard_attempts(gateway.stores.dashboard_attempts.as_ref()).await;
        contract::upstream_tokens(gateway.stores.upstream_tokens.as_ref()).await;
        contract::user_sessions(gateway.stores.user_sessions.as_ref()).await;
        contract::credential_resets(gateway.stores.credential_resets.as_ref()).await;
        contract::used_tokens(gateway.stores.used_tokens.as_ref()).await;
        contract::account_use(gateway.stores.account_use.as_ref()).await;
    }

    /// Issue 33, item 12: past the local copy's bound a logout still takes effect on every
    /// gateway, the one that made it, one following the channel and one started after.
    /// Before, the copies dropped it and no gateway refused the token.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn logouts_beyond_the_local_copys_bound_are_refused_by_every_gateway() {
        let server = RedisServer::start();
        let keeping_two = || gateway_keeping(settings(&server, "cg:"), 2);
        let (a, b) = (keeping_two().await, keeping_two().await);
        let now = crate::state::unix_now();
        let jtis = ["first", "second", "third", "fourth"];
        for jti in jtis {
            a.stores
                .revocations
                .revoke(jti, now + 60, now)
                .await
                .unwrap();
        }
        let c = keeping_two().await;
        for gateway in [&a, &b, &c] {
            let revocations = &gateway.stores.revocations;
            for jti in jtis {
                let started = Instant::now();
                while !revocations.is_revoked(jti, now).await.unwrap() {
                    assert!(
                        started.elapsed() < Duration::from_secs(2),
                        "{jti} is not refused"
                    );
                    tokio::task::yield_now().await;
                }
            }
            assert!(!revocations.is_revoked("never-revoked", now).await.unwrap());
            // Once the revocations it could not keep have expired, the copy is whole again.
            assert!(!revocations.is_revoked("fourth", now + 61).await.unwrap());
        }
    }

    /// Each managed account's token lives under its own keys: storing one neither shows
    /// as the service account's nor as another account's, and another gateway reads it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_managed_accounts_token_has_its_own_keys() {
        let server = RedisServer::start();
        let gateway = gateway(&server, "accounts:").await;
        let accounts = &gateway.stores.account_tokens;
        contract::upstream_tokens(accounts.of("cg-a").as_ref()).await;
        let token = UpstreamToken {
            token: "role-token".into(),
            renew_at: None,
        };
        accounts.of("cg-b").store(token.clone()).await.unwrap();
        let now = 1;
        assert_eq!(accounts.of("cg-c").current(now).await.unwrap(), None);
        let service = gateway.stores.upstream_tokens.current(now).await.unwrap();
        assert_eq!(service, None);
        let other = stores(settings(&server, "accounts:"))
            .unwrap()
            .account_tokens;
        assert_eq!(other.of("cg-b").current(now).await.unwrap(), Some(token));
        assert!(other
            .of("cg-c")
            .claim_login(Duration::from_secs(5))
            .await
            .unwrap());
        assert!(accounts
            .of("cg-b")
            .claim_login(Duration::from_secs(5))
            .await
            .unwrap());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_logout_on_one_gateway_reaches_another() {
        let server = RedisServer::start();
        let a = gateway(&server, "cg:").await;
        let b = gateway(&server, "cg:").await;
        let now = crate::state::unix_now();
        let mut delays = Vec::with_capacity(200);
        for i in 0..200 {
            let jti = format!("token-{i}");
            a.stores
                .revocations
                .revoke(&jti, now + 60, now)
                .await
                .unwrap();
            let started = Instant::now();
            loop {
                if b.stores.revocations.is_revoked(&jti, now).await.unwrap() {
                    break;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(2),
                    "{jti} never reached B"
                );
                tokio::task::yield_now().await;
            }
            delays.push(started.elapsed());
        }
        // How fast is for bench/, not for a test on a shared machine; shown for the reader.
        delays.sort();
        println!(
            "propagation over 200 logouts: p50 {:?}, max {:?}",
            delays[100], delays[199]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keys_of_other_deployments_are_apart() {
        let server = RedisServer::start();
        let one = gateway(&server, "one:").await;
        let other = gateway(&server, "other:").await;
        let now = crate::state::unix_now();
        one.stores
            .revocations
            .revoke("t", now + 60, now)
            .await
            .unwrap();
        one.stores
            .lockouts
            .record_failure("admin", now)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!other.stores.revocations.is_revoked("t", now).await.unwrap());
        assert_eq!(
            other
                .stores
                .lockouts
                .record_failure("admin", now)
                .await
                .unwrap(),
            1
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redis_outage_fails_closed_in_time_and_recovers_with_its_revocations() {
        let mut server = RedisServer::start_persistent();
        let gateway = gateway(&server, "cg:").await;
        let revocations = &gateway.stores.revocations;
        let now = crate::state::unix_now();
        revocations.revoke("before", now + 600, now).await.unwrap();

        server.stop();
        wait_until(Duration::from_secs(2), || !gateway.stores.health.up()).await;
        let started = Instant::now();
        assert!(matches!(
            revocations.is_revoked("other", now).await,
            Err(StateError::Unavailable(_))
        ));
        let lockout = gateway.stores.lockouts.record_failure("u", now).await;
        assert!(matches!(lockout, Err(StateError::Unavailable(_))));
        let client = ClientNet::of("192.0.2.1".parse().unwrap());
        let rate = BucketRate {
            burst: 1,
            refill_ms: 1000,
        };
        let bucket = gateway.stores.failed_logins.take(&client, rate, now * 1000);
        assert!(matches!(bucket.await, Err(StateError::Unavailable(_))));
        assert!(gateway.stores.ready().await.is_err());
        assert!(
            started.elapsed() < COMMAND_TIMEOUT * 4,
            "{:?}",
            started.elapsed()
        );

        server.restart();
        let recovery = wait_until(Duration::from_secs(2), || gateway.stores.health.up()).await;
        println!("recovered {recovery:?} after redis came back");
        assert!(revocations.is_revoked("before", now).await.unwrap());
        assert!(!revocations.is_revoked("other", now).await.unwrap());
        gateway.stores.ready().await.unwrap();
    }

    /// Redis holds a client's bucket only until it is full again, under the deployment's prefix.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_login_bucket_is_a_prefixed_key_that_expires_when_full() {
        let server = RedisServer::start();
        let failed_logins = stores(settings(&server, "cg:")).unwrap().failed_logins;
        let client = ClientNet::of("2001:db8:1:2::7".parse().unwrap());
        let rate = BucketRate {
            burst: 3,
            refill_ms: 200,
        };
        let now = crate::state::unix_now_ms();
        failed_logins.take(&client, rate, now).await.unwrap();
        failed_logins.take(&client, rate, now).await.unwrap();
        let mut redis = redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let key = "cg:failed_logins:2001:db8:1:2::/64";
        let ttl: i64 = redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut redis)
            .await
            .unwrap();
        assert!(0 < ttl && ttl <= 400, "PTTL {ttl}");
        // Given back to full: gone at once.
        failed_logins.give_back(&client, rate, now).await.unwrap();
        failed_logins.give_back(&client, rate, now).await.unwrap();
        let exists: bool = redis::cmd("EXISTS")
            .arg(key)
            .query_async(&mut redis)
            .await
            .unwrap();
        assert!(!exists);
        // Left alone: gone once full again.
        failed_logins.take(&client, rate, now).await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
        let exists: bool = redis::cmd("EXISTS")
            .arg(key)
            .query_async(&mut redis)
            .await
            .unwrap();
        assert!(!exists);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failed_logins_on_three_gateways_take_from_one_bucket() {
        let server = RedisServer::start();
        let client = ClientNet::of("192.0.2.1".parse().unwrap());
        let rate = BucketRate {
            burst: 30,
            refill_ms: 60_000,
        };
        let mut tasks = Vec::new();
        for _ in 0..3 {
            let failed_logins = stores(settings(&server, "cg:")).unwrap().failed_logins;
            for _ in 0..20 {
                let failed_logins = failed_logins.clone();
                tasks.push(tokio::spawn(async move {
                    failed_logins.take(&client, rate, 100_000).await.unwrap()
                }));
            }
        }
        let mut taken = 0;
        for task in tasks {
            taken += usize::from(task.await.unwrap() == Take::Taken);
        }
        assert_eq!(taken, 30, "the burst, once, over all gateways");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failures_from_three_gateways_count_as_one() {
        let server = RedisServer::start();
        let mut tasks = Vec::new();
        for _ in 0..3 {
            let lockouts = stores(settings(&server, "cg:")).unwrap().lockouts;
            for _ in 0..20 {
                let lockouts = lockouts.clone();
                tasks.push(tokio::spawn(async move {
                    lockouts.record_failure("admin", 100).await.unwrap()
                }));
            }
        }
        let mut counts = Vec::new();
        for task in tasks {
            counts.push(task.await.unwrap());
        }
        counts.sort();
        assert_eq!(
            counts,
            (1..=60).collect::<Vec<u32>>(),
            "every failure counted once"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn three_gateways_reserve_the_dashboards_attempts_as_one() {
        let server = RedisServer::start();
        let mut tasks = Vec::new();
        for _ in 0..3 {
            let attempts = stores(settings(&server, "cg:")).unwrap().dashboard_attempts;
            for _ in 0..20 {
                let attempts = attempts.clone();
                tasks.push(tokio::spawn(async move {
                    attempts.reserve("admin", 9, 100, 60_000).await.unwrap()
                }));
            }
        }
        let mut held = 0;
        for task in tasks {
            held += usize::from(task.await.unwrap().is_some());
        }
        assert_eq!(
            held, 9,
            "failures plus attempts in flight stay under the ceiling"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_gateway_at_a_time_logs_in_and_all_share_its_token() {
        let server = RedisServer::start();
        let a = stores(settings(&server, "cg:")).unwrap().upstream_tokens;
        let b = stores(settings(&server, "cg:")).unwrap().upstream_tokens;
        let ttl = Duration::from_millis(300);
        assert!(a.claim_login(ttl).await.unwrap());
        assert!(!b.claim_login(ttl).await.unwrap(), "A holds the claim");
        let now = crate::state::unix_now();
        a.store(UpstreamToken {
            token: "shared".into(),
            renew_at: Some(now + 600),
        })
        .await
        .unwrap();
        a.release_login().await.unwrap();
        assert_eq!(
            b.current(now).await.unwrap().map(|t| t.token),
            Some("shared".into())
        );
        // A claim not released expires by itself.
        assert!(b.claim_login(ttl).await.unwrap());
        tokio::time::sleep(ttl + Duration::from_millis(100)).await;
        assert!(a.claim_login(ttl).await.unwrap());
        // A token B discarded (the dashboard refused it) is gone from Redis: a gateway
        // without a copy gets none. A keeps its copy until the dashboard refuses it to A.
        b.discard("shared").await.unwrap();
        let c = stores(settings(&server, "cg:")).unwrap().upstream_tokens;
        assert_eq!(c.current(now).await.unwrap(), None);
        assert!(a.current(now).await.unwrap().is_some());
    }

    const DASHBOARD_TOKEN: &str = "eyJhbGciOiJIUzI1NiJ9.eyJ1c2VybmFtZSI6ImFkbWluIn0.c2lnbmF0dXJl";

    fn session(until: UnixTime) -> UserSession {
        UserSession {
            username: "admin".into(),
            dashboard_token: DASHBOARD_TOKEN.into(),
            permissions: None,
            until,
        }
    }

    /// Item 10: what Redis holds of a token does not show it; a sealed value moved to
    /// another key opens nowhere (absent, no error).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tokens_in_redis_are_sealed_and_bound_to_their_key() {
        let server = RedisServer::start();
        let stores = stores(settings(&server, "cg:")).unwrap();
        let now = crate::state::unix_now();
        let service = UpstreamToken {
            token: DASHBOARD_TOKEN.into(),
            renew_at: Some(now + 600),
        };
        stores.upstream_tokens.store(service.clone()).await.unwrap();
        stores
            .user_sessions
            .open("j1", &session(now + 600), now)
            .await
            .unwrap();
        let mut redis = raw(&server).await;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut redis)
            .await
            .unwrap();
        assert_eq!(keys.len(), 2, "{keys:?}");
        for key in &keys {
            let stored = raw_get(&server, key).await;
            for part in DASHBOARD_TOKEN.split('.') {
                assert!(
                    !stored.contains(part),
                    "{key} holds the token in clear: {stored}"
                );
            }
        }
        // Another gateway reads them.
        let other = super::stores(settings(&server, "cg:")).unwrap();
        assert_eq!(
            other.upstream_tokens.current(now).await.unwrap(),
            Some(service)
        );
        let found = other.user_sessions.find("j1", now).await.unwrap();
        assert_eq!(found, Some(session(now + 600)));
        // j1's session copied under j2: not j2's.
        let sealed = raw_get(&server, "cg:session:j1").await;
        redis::cmd("SET")
            .arg("cg:session:j2")
            .arg(&sealed)
            .query_async::<()>(&mut redis)
            .await
            .unwrap();
        assert_eq!(other.user_sessions.find("j2", now).await.unwrap(), None);
        // Written in clear (as before sealing): absent, not an error.
        redis::cmd("SET")
            .arg("cg:upstream:token")
            .arg(format!("0 {DASHBOARD_TOKEN}"))
            .query_async::<()>(&mut redis)
            .await
            .unwrap();
        let fresh = super::stores(settings(&server, "cg:")).unwrap();
        assert_eq!(fresh.upstream_tokens.current(now).await.unwrap(), None);
    }

    /// Item 10: a key put first seals from then on; values and revocations of the old key
    /// are still read while it is listed, and absent once it is not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_value_sealed_with_an_old_key_is_read_after_a_new_key_is_put_first() {
        let server = RedisServer::start();
        let with_keys = |keys: &[(&str, &str)]| RedisSettings {
            encryption_keys: keys.iter().map(|(k, s)| encryption_key(k, s)).collect(),
            ..settings(&server, "cg:")
        };
        let old = ("old", "the old key of the deployment, 32 bytes or more");
        let new = ("new", "the new key of the deployment, 32 bytes or more");
        let now = crate::state::unix_now();
        let before = gateway_with(with_keys(&[old])).await;
        let token = UpstreamToken {
            token: "service-token".into(),
            renew_at: Some(now + 600),
        };
        before
            .stores
            .upstream_tokens
            .store(token.clone())
            .await
            .unwrap();
        let user = session(now + 600);
        before
            .stores
            .user_sessions
            .open("j1", &user, now)
            .await
            .unwrap();
        before
            .stores
            .revocations
            .revoke("gone", now + 600, now)
            .await
            .unwrap();

        let rotated = gateway_with(with_keys(&[new, old])).await;
        let upstream = &rotated.stores.upstream_tokens;
        assert_eq!(upstream.current(now).await.unwrap(), Some(token));
        let found = rotated.stores.user_sessions.find("j1", now).await;
        assert_eq!(found.unwrap(), Some(user.clone()));
        assert!(rotated
            .stores
            .revocations
            .is_revoked("gone", now)
            .await
            .unwrap());
        // What the rotated gateway writes is sealed with the new key...
        rotated
            .stores
            .user_sessions
            .open("j2", &user, now)
            .await
            .unwrap();
        assert!(raw_get(&server, "cg:session:j2").await.starts_with("new:"));
        // ...and once the old key is off the list, what it sealed is absent: log in again.
        let after = gateway_with(with_keys(&[new])).await;
        assert_eq!(
            after.stores.user_sessions.find("j1", now).await.unwrap(),
            None
        );
        assert_eq!(
            after.stores.user_sessions.find("j2", now).await.unwrap(),
            Some(user)
        );
        assert_eq!(
            after.stores.upstream_tokens.current(now).await.unwrap(),
            None
        );
    }

    /// Item 10: whoever can PUBLISH on the channel (or write a revocation key) without the
    /// deployment's key revokes nothing; a genuine message replayed with another `until`
    /// or on another deployment's channel neither. Each is dropped and counted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn forged_revocations_are_dropped_and_counted() {
        let server = RedisServer::start();
        let a = gateway(&server, "cg:").await;
        let b = gateway(&server, "cg:").await;
        let now = crate::state::unix_now();
        a.stores
            .revocations
            .revoke("genuine", now + 60, now)
            .await
            .unwrap();
        let genuine = raw_get(&server, "cg:revoked:genuine").await;
        let other_key = RedisSettings {
            encryption_keys: vec![encryption_key(
                redis_server::ENCRYPTION_KID,
                "another deployment's key, 32 bytes or more",
            )],
            ..settings(&server, "cg:")
        };
        let other_sealer = Redis::new(other_key).unwrap().sealer;
        let other_deployment = Redis::new(settings(&server, "other:")).unwrap().sealer;
        let forged = [
            format!("{} victim", now + 60),
            format!(
                "{ENCRYPTION_KID}:AAAA {} victim",
                now + 60,
                ENCRYPTION_KID = redis_server::ENCRYPTION_KID
            ),
            other_sealer.sign("cg:revocations", &format!("{} victim", now + 60)),
            other_deployment.sign("other:revocations", &format!("{} victim", now + 60)),
            // The genuine message with `until` moved: its signature no longer holds.
            genuine.replace(&format!("{} ", now + 60), &format!("{} ", now + 3600)),
            "\u{0}".into(),
        ];
        let mut redis = raw(&server).await;
        for message in &forged {
            redis::cmd("PUBLISH")
                .arg("cg:revocations")
                .arg(message)
                .query_async::<()>(&mut redis)
                .await
                .unwrap();
        }
        // A key written without the deployment's key is not loaded either.
        redis::cmd("SET")
            .arg("cg:revoked:victim")
            .arg(1)
            .arg("EX")
            .arg(60)
            .query_async::<()>(&mut redis)
            .await
            .unwrap();
        // Messages on a channel arrive in order: once this one is in, the forged ones were.
        a.stores
            .revocations
            .revoke("marker", now + 60, now)
            .await
            .unwrap();
        let revocations = &b.stores.revocations;
        let revoked =
            |jti: &'static str| async move { revocations.is_revoked(jti, now).await.unwrap() };
        let started = Instant::now();
        while !revoked("marker").await {
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "the marker never came"
            );
            tokio::task::yield_now().await;
        }
        assert!(!revoked("victim").await, "a forged message revoked a token");
        assert!(revoked("genuine").await);
        assert_eq!(b.stores.health.revocations_refused(), forged.len() as u64);
        // A gateway that starts now loads the genuine keys and refuses the forged one.
        let c = gateway(&server, "cg:").await;
        assert!(c
            .stores
            .revocations
            .is_revoked("genuine", now)
            .await
            .unwrap());
        assert!(!c
            .stores
            .revocations
            .is_revoked("victim", now)
            .await
            .unwrap());
        assert_eq!(c.stores.health.revocations_refused(), 1);
    }

    /// Item 10: the Redis user of deploy/redis/clustergate.acl (as the README has operators
    /// create it) can do all a gateway does: every store's contract, and a logout on one
    /// gateway reaching another.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_shipped_acl_user_can_do_all_a_gateway_does() {
        let server = RedisServer::start();
        // A replica to acknowledge the writes that wait for one (WAIT).
        let replica = RedisServer::start_replica_of(&server);
        replicating(&server, &replica).await;
        let password = std::fs::read(server.gateway_password_file()).unwrap();
        let key = crate::secrets::read_secret(&server.encryption_key_file()).unwrap();
        let acl_user = || RedisSettings {
            min_replicas: 1,
            // Room for a replica's acknowledgement on two busy cores.
            replication_timeout: BUSY_REPLICATION_TIMEOUT,
            username: Some(redis_server::GATEWAY_USER.into()),
            password: Some(Secret::new(password.clone())),
            encryption_keys: vec![EncryptionKey {
                kid: redis_server::ENCRYPTION_KID.into(),
                secret: key.clone(),
            }],
            ..settings(&server, redis_server::GATEWAY_PREFIX)
        };
        let a = gateway_with(acl_user()).await;
        contract::revocations(a.stores.revocations.as_ref()).await;
        contract::lockouts(a.stores.lockouts.as_ref()).await;
        contract::dashboard_attempts(a.stores.dashboard_attempts.as_ref()).await;
        contract::credential_resets(a.stores.credential_resets.as_ref()).await;
        contract::failed_logins(a.stores.failed_logins.as_ref()).await;
        contract::upstream_tokens(a.stores.upstream_tokens.as_ref()).await;
        contract::user_sessions(a.stores.user_sessions.as_ref()).await;
        contract::account_use(a.stores.account_use.as_ref()).await;
        let b = gateway_with(acl_user()).await;
        let now = crate::state::unix_now();
        a.stores
            .revocations
            .revoke("logged-out", now + 60, now)
            .await
            .unwrap();
        let started = Instant::now();
        while !b
            .stores
            .revocations
            .is_revoked("logged-out", now)
            .await
            .unwrap()
        {
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "never reached B"
            );
            tokio::task::yield_now().await;
        }
        // Redis refused none of the commands they sent (ignored ones included).
        let acl_log = || async {
            let log: Vec<redis::Value> = redis::cmd("ACL")
                .arg("LOG")
                .query_async(&mut raw(&server).await)
                .await
                .unwrap();
            log
        };
        let denied = acl_log().await;
        assert!(denied.is_empty(), "ACL LOG: {denied:?}");
        // The user reaches nothing outside the deployment's keys.
        let outside = RedisSettings {
            key_prefix: "elsewhere:".into(),
            ..acl_user()
        };
        let elsewhere = super::stores(outside).unwrap();
        let refused = elsewhere.lockouts.record_failure("admin", now).await;
        assert!(
            matches!(refused, Err(StateError::Unavailable(_))),
            "{refused:?}"
        );
        assert_eq!(acl_log().await.len(), 1, "ACL LOG records what it refuses");
        assert_eq!(a.stores.health.errors(), 0, "a command the ACL refused");
        assert_eq!(b.stores.health.errors(), 0, "a command the ACL refused");
    }

    /// Writes `value` under `key` on `server` and reads it back from `replica` within 5 s.
    async fn replicating(server: &RedisServer, replica: &RedisServer) {
        let mut primary = raw(server).await;
        redis::cmd("SET")
            .arg("probe")
            .arg(1)
            .query_async::<()>(&mut primary)
            .await
            .unwrap();
        let started = Instant::now();
        loop {
            let seen: Option<u32> = redis::cmd("GET")
                .arg("probe")
                .query_async(&mut raw(replica).await)
                .await
                .unwrap();
            if seen.is_some() {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the replica never synced"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Item 2: a revocation, a lock and a session's end are answered once a replica has
    /// them; with no replica to acknowledge them, `NotReplicated` (a 503), not done, while
    /// reads and the other writes go on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn revocations_locks_and_session_ends_wait_for_min_replicas() {
        let server = RedisServer::start();
        let mut replica = RedisServer::start_replica_of(&server);
        replicating(&server, &replica).await;
        let gateway = gateway_with(RedisSettings {
            min_replicas: 1,
            replication_timeout: BUSY_REPLICATION_TIMEOUT,
            ..settings(&server, "cg:")
        })
        .await;
        let stores = &gateway.stores;
        let now = crate::state::unix_now();
        stores
            .revocations
            .revoke("kept", now + 60, now)
            .await
            .unwrap();
        stores.lockouts.lock("locked", now + 60).await.unwrap();
        stores
            .user_sessions
            .open("j1", &session(now + 60), now)
            .await
            .unwrap();
        stores.user_sessions.close("j1").await.unwrap();
        // Acknowledged: the replica has them.
        let on_replica = |key: &'static str| {
            let replica = &replica;
            async move {
                let exists: bool = redis::cmd("EXISTS")
                    .arg(key)
                    .query_async(&mut raw(replica).await)
                    .await
                    .unwrap();
                exists
            }
        };
        assert!(on_replica("cg:revoked:kept").await);
        assert!(on_replica("cg:lockout:locked").await);

        replica.stop();
        let not_replicated = |outcome: Result<(), StateError>| {
            assert!(
                matches!(
                    outcome,
                    Err(StateError::NotReplicated {
                        acknowledged: 0,
                        wanted: 1
                    })
                ),
                "{outcome:?}"
            )
        };
        not_replicated(stores.revocations.revoke("lost", now + 60, now).await);
        not_replicated(stores.lockouts.lock("other", now + 60).await);
        not_replicated(stores.user_sessions.close("j2").await);
        // Not an outage: checks, reads and other writes go on.
        assert!(stores.health.up());
        assert!(stores.revocations.is_revoked("kept", now).await.unwrap());
        assert_eq!(
            stores.lockouts.locked_until("locked", now).await.unwrap(),
            Some(now + 60)
        );
        stores
            .lockouts
            .record_failure("someone", now)
            .await
            .unwrap();
        stores.ready().await.unwrap();
    }

    /// Item 1: with sentinels, the stores use the primary they name and, once it is
    /// killed, the replica they promote, without a restart; the revocations made before
    /// are known after, and the feed reads them again from the new primary.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_primary_is_found_through_the_sentinels_and_followed_after_a_failover() {
        let mut primary = RedisServer::start();
        let replica = RedisServer::start_replica_of(&primary);
        replicating(&primary, &replica).await;
        let sentinel = SentinelServer::start("cg-test", &primary, 1);
        let password = std::fs::read(sentinel.password_file()).unwrap();
        let sentinels = RedisSettings {
            target: RedisTarget::Sentinels(Box::new(SentinelSettings {
                addresses: vec![("127.0.0.1".into(), sentinel.port)],
                master_name: "cg-test".into(),
                username: Some(redis_server::SENTINEL_USER.into()),
                password: Some(Secret::new(password)),
                tls: false,
                sentinel_tls: false,
            })),
            // The one replica becomes the primary: none left to acknowledge.
            min_replicas: 0,
            // As the shipped ACL's user: what the sentinels' client asks the primary
            // (ROLE) is allowed.
            username: Some(redis_server::GATEWAY_USER.into()),
            password: Some(Secret::new(
                std::fs::read(primary.gateway_password_file()).unwrap(),
            )),
            ..settings(&primary, redis_server::GATEWAY_PREFIX)
        };
        let a = gateway_with(sentinels.clone()).await;
        let b = gateway_with(sentinels).await;
        let now = crate::state::unix_now();
        a.stores
            .revocations
            .revoke("before", now + 600, now)
            .await
            .unwrap();
        let primary_address = |gateway: &Gateway| {
            let feed = gateway.stores.feed.as_ref().unwrap();
            let primary = feed.revocations.redis.current_primary();
            primary.map(|p| p.client.get_connection_info().addr().to_string())
        };
        assert_eq!(
            primary_address(&a),
            Some(format!("127.0.0.1:{}", primary.port))
        );

        primary.stop();
        wait_until(Duration::from_secs(5), || !b.stores.health.up()).await;
        // Until the sentinels promote the replica, no primary: closed.
        let failover = Duration::from_millis(redis_server::SENTINEL_DOWN_AFTER_MS * 10);
        let started = Instant::now();
        loop {
            match a.stores.revocations.revoke("after", now + 600, now).await {
                Ok(()) => break,
                Err(StateError::Unavailable(_)) => {
                    assert!(
                        started.elapsed() < failover,
                        "no new primary in {failover:?}"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(other) => panic!("{other}"),
            }
        }
        println!(
            "writes again {:?} after the primary was killed",
            started.elapsed()
        );
        assert_eq!(
            primary_address(&a),
            Some(format!("127.0.0.1:{}", replica.port))
        );
        for gateway in [&a, &b] {
            wait_until(Duration::from_secs(5), || gateway.stores.health.up()).await;
            let revocations = &gateway.stores.revocations;
            assert!(revocations.is_revoked("before", now).await.unwrap());
            let started = Instant::now();
            while !revocations.is_revoked("after", now).await.unwrap() {
                assert!(
                    started.elapsed() < Duration::from_secs(2),
                    "after never came"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    /// Item 1: a primary replaced while it still answers (`SENTINEL FAILOVER`: a
    /// switchover) is left for the one the sentinels promoted, with no write to find out:
    /// while it waits for messages the feed asks `ROLE` and the sentinels.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_primary_turned_replica_is_left_for_the_promoted_one() {
        let primary = RedisServer::start();
        let replica = RedisServer::start_replica_of(&primary);
        replicating(&primary, &replica).await;
        let sentinel = SentinelServer::start("cg-test", &primary, 1);
        let password = std::fs::read(sentinel.password_file()).unwrap();
        let gateway = gateway_with(RedisSettings {
            target: RedisTarget::Sentinels(Box::new(SentinelSettings {
                addresses: vec![("127.0.0.1".into(), sentinel.port)],
                master_name: "cg-test".into(),
                username: Some(redis_server::SENTINEL_USER.into()),
                password: Some(Secret::new(password.clone())),
                tls: false,
                sentinel_tls: false,
            })),
            ..settings(&primary, "cg:")
        })
        .await;
        let redis = &gateway.stores.feed.as_ref().unwrap().revocations.redis;
        let in_use = || {
            let primary = redis.current_primary();
            primary.map(|p| p.client.get_connection_info().addr().to_string())
        };
        assert_eq!(in_use(), Some(format!("127.0.0.1:{}", primary.port)));
        let sentinel_user = Client::open(format!(
            "redis://{}:{}@127.0.0.1:{}",
            redis_server::SENTINEL_USER,
            redis_server::SENTINEL_PASSWORD,
            sentinel.port
        ))
        .unwrap();
        let mut to_sentinel = sentinel_user
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        // Refused (NOGOODSLAVE) until the sentinel has heard from the replica itself.
        let started = Instant::now();
        while let Err(e) = redis::cmd("SENTINEL")
            .arg("FAILOVER")
            .arg("cg-test")
            .query_async::<()>(&mut to_sentinel)
            .await
        {
            assert!(started.elapsed() < Duration::from_secs(10), "{e}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let promoted = Some(format!("127.0.0.1:{}", replica.port));
        let started = Instant::now();
        while in_use() != promoted {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "still on {:?}",
                in_use()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        wait_until(Duration::from_secs(5), || gateway.stores.health.up()).await;
        let now = crate::state::unix_now();
        gateway
            .stores
            .revocations
            .revoke("after", now + 60, now)
            .await
            .unwrap();
        assert!(gateway
            .stores
            .revocations
            .is_revoked("after", now)
            .await
            .unwrap());
    }
}
