//! The stores in one Redis, shared by every gateway of a deployment.
//!
//! - Revocations: each revoked token id is a key that expires when its token would have.
//!   Every gateway keeps a local copy, fed by a push (`PUBLISH` on revoke, followed by
//!   [`RevocationFeed`]), so a token check costs no round trip. On every (re)connection the
//!   feed subscribes first and then reads the live set, and until it has, the copy is not
//!   trusted: checks fail closed.
//! - Lockouts: one hash per username, counted by a Lua script so that gateways count as one.
//! - Failed logins per client: one key per client's bucket, expiring once it is full
//!   again (`failed_logins`).
//! - The service account's token: one key, kept locally until due; one gateway logs in at a
//!   time (a short `SET NX` claim).
//!
//! Every command is bounded by `command_timeout`; a Redis that is down is `Unavailable`,
//! never a hang, and the connection comes back by itself.

mod credential_resets;
mod failed_logins;
mod user_sessions;

use std::sync::{Arc, LazyLock, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Script};

use super::memory::MemoryRevocations;
use super::{
    Lockouts, Revocations, StateError, StoreHealth, Stores, UnixTime, UpstreamToken,
    UpstreamTokens, MEMORY_MAX_ENTRIES,
};
use crate::secrets::Secret;

/// How to reach the Redis, as `[state.redis]` says.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    /// `redis://host:port[/db]` or `rediss://` (TLS).
    pub url: String,
    /// A Redis ACL user, with `password`.
    pub username: Option<String>,
    pub password: Option<Secret>,
    /// The CA certificates (PEM) that signed the server's certificate, for `rediss://`.
    pub ca_pem: Option<Vec<u8>>,
    /// Put before every key, so one Redis serves several deployments.
    pub key_prefix: String,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
}

/// How long a failure count is kept without a new failure (a lock keeps it longer).
const FAILURE_MEMORY_SECONDS: u64 = 24 * 3600;
/// Keys read per SCAN step when the feed loads the live revocations.
const SCAN_STEP: usize = 1000;
/// The feed's reconnection waits: from this, doubling, up to the next.
const RECONNECT_FIRST: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_millis(800);
/// How often the feed checks that Redis still answers while no message comes.
const LIVENESS_INTERVAL: Duration = Duration::from_millis(500);

/// The stores on one Redis connection.
pub(super) fn stores(settings: RedisSettings) -> Result<Stores, StateError> {
    let redis = Arc::new(Redis::new(settings)?);
    let revocations = Arc::new(RedisRevocations {
        redis: redis.clone(),
        local: MemoryRevocations::new(MEMORY_MAX_ENTRIES),
    });
    Ok(Stores {
        revocations: revocations.clone(),
        lockouts: Arc::new(RedisLockouts {
            redis: redis.clone(),
        }),
        failed_logins: Arc::new(failed_logins::RedisFailedLogins {
            redis: redis.clone(),
        }),
        upstream_tokens: Arc::new(RedisUpstreamTokens {
            redis: redis.clone(),
            local: RwLock::new(None),
            claimant: uuid::Uuid::new_v4().to_string(),
        }),
        user_sessions: Arc::new(user_sessions::RedisUserSessions {
            redis: redis.clone(),
        }),
        credential_resets: Arc::new(credential_resets::RedisCredentialResets {
            redis: redis.clone(),
        }),
        health: redis.health.clone(),
        feed: Some(RevocationFeed { revocations }),
    })
}

/// The connection every store of a gateway shares, its key names and its time bounds.
struct Redis {
    client: Client,
    /// Made on first use, inside a runtime; it reconnects by itself afterwards.
    manager: tokio::sync::OnceCell<ConnectionManager>,
    prefix: String,
    connect_timeout: Duration,
    command_timeout: Duration,
    health: Arc<StoreHealth>,
}

impl Redis {
    fn new(settings: RedisSettings) -> Result<Redis, StateError> {
        let invalid = |e: redis::RedisError| StateError::Settings(e.to_string());
        let mut info = redis::IntoConnectionInfo::into_connection_info(settings.url.as_str())
            .map_err(invalid)?;
        let mut account = info.redis_settings().clone();
        if let Some(username) = &settings.username {
            account = account.set_username(username);
        }
        if let Some(password) = &settings.password {
            account = account.set_password(String::from_utf8_lossy(password.expose()));
        }
        info = info.set_redis_settings(account);
        let client = match settings.ca_pem {
            Some(root_cert) => Client::build_with_tls(
                info,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(root_cert),
                },
            ),
            None => Client::open(info),
        }
        .map_err(invalid)?;
        Ok(Redis {
            client,
            manager: tokio::sync::OnceCell::new(),
            prefix: settings.key_prefix,
            connect_timeout: settings.connect_timeout,
            command_timeout: settings.command_timeout,
            health: Arc::new(StoreHealth::starting()),
        })
    }

    fn key(&self, kind: &str, id: &str) -> String {
        format!("{}{kind}:{id}", self.prefix)
    }

    fn revocations_channel(&self) -> String {
        format!("{}revocations", self.prefix)
    }

    async fn connection(&self) -> Result<ConnectionManager, redis::RedisError> {
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.command_timeout))
            .set_min_delay(RECONNECT_FIRST)
            .set_max_delay(RECONNECT_MAX);
        let manager = self
            .manager
            .get_or_try_init(|| async {
                ConnectionManager::new_lazy_with_config(self.client.clone(), config)
            })
            .await?;
        Ok(manager.clone())
    }

    /// Runs `command` within `command_timeout`, recording the outcome.
    async fn run<T: redis::FromRedisValue>(
        &self,
        what: &'static str,
        command: &redis::Cmd,
    ) -> Result<T, StateError> {
        self.bounded(what, async {
            let mut connection = self.connection().await?;
            command.query_async(&mut connection).await
        })
        .await
    }

    /// Runs a Lua script on one key with `args` (a value or a tuple of values).
    async fn run_script<T: redis::FromRedisValue>(
        &self,
        what: &'static str,
        script: &Script,
        key: String,
        args: impl redis::ToRedisArgs,
    ) -> Result<T, StateError> {
        let mut invocation = script.prepare_invoke();
        invocation.key(key).arg(args);
        self.bounded(what, async {
            let mut connection = self.connection().await?;
            invocation.invoke_async(&mut connection).await
        })
        .await
    }

    async fn bounded<T>(
        &self,
        what: &'static str,
        work: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StateError> {
        let outcome = tokio::time::timeout(self.command_timeout, work).await;
        match outcome {
            Ok(Ok(value)) => {
                self.health.command_succeeded();
                Ok(value)
            }
            Ok(Err(e)) => Err(self.failed(what, &e.to_string())),
            Err(_) => Err(self.failed(what, "no answer within command_timeout_ms")),
        }
    }

    fn failed(&self, what: &str, why: &str) -> StateError {
        self.health.command_failed();
        StateError::Unavailable(format!("redis {what}: {why}"))
    }
}

/// Revocations: keys in Redis, a local copy for the checks.
pub struct RedisRevocations {
    redis: Arc<Redis>,
    local: MemoryRevocations,
}

#[async_trait]
impl Revocations for RedisRevocations {
    async fn revoke(&self, jti: &str, until: UnixTime, now: UnixTime) -> Result<(), StateError> {
        if until < now {
            return Ok(()); // already expired: nothing left to revoke
        }
        let mut atomic = redis::pipe();
        atomic
            .atomic()
            .cmd("SET")
            .arg(self.redis.key("revoked", jti))
            .arg(1)
            .arg("EXAT")
            .arg(until)
            .ignore()
            .cmd("PUBLISH")
            .arg(self.redis.revocations_channel())
            .arg(format!("{until} {jti}"))
            .ignore();
        self.redis
            .bounded("revoke", async {
                let mut connection = self.redis.connection().await?;
                atomic.query_async::<()>(&mut connection).await
            })
            .await?;
        // This gateway refuses the token at once, before its own message comes back.
        self.local.revoke(jti, until, now).await
    }

    async fn is_revoked(&self, jti: &str, now: UnixTime) -> Result<bool, StateError> {
        if !self.redis.health.in_sync() {
            return Err(StateError::Unavailable(
                "revocations are not in sync with redis".into(),
            ));
        }
        self.local.is_revoked(jti, now).await
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
        for _ in 0..=(MEMORY_MAX_ENTRIES / SCAN_STEP * 4) {
            let step = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(SCAN_STEP)
                .clone();
            let (next, keys): (u64, Vec<String>) = self.redis.run("scan", &step).await?;
            loaded += self.load_keys(&keys, now).await?;
            if next == 0 || loaded >= MEMORY_MAX_ENTRIES {
                return Ok(loaded);
            }
            cursor = next;
        }
        Ok(loaded)
    }

    async fn load_keys(&self, keys: &[String], now: UnixTime) -> Result<usize, StateError> {
        if keys.is_empty() {
            return Ok(0);
        }
        let mut expiries = redis::pipe();
        for key in keys {
            expiries.cmd("EXPIRETIME").arg(key);
        }
        let until: Vec<i64> = self
            .redis
            .bounded("expiretime", async {
                let mut connection = self.redis.connection().await?;
                expiries.query_async(&mut connection).await
            })
            .await?;
        let prefix = self.redis.key("revoked", "");
        let mut loaded = 0;
        for (key, until) in keys.iter().zip(until) {
            // -1: no expiry (not ours); -2: gone meanwhile.
            let (Some(jti), Ok(until)) = (key.strip_prefix(&prefix), UnixTime::try_from(until))
            else {
                continue;
            };
            self.local.revoke(jti, until, now).await?;
            loaded += 1;
        }
        Ok(loaded)
    }

    /// A message of the revocations channel: `"<until> <jti>"`.
    async fn apply(&self, message: &str) {
        let Some((until, jti)) = message.split_once(' ') else {
            return;
        };
        let Ok(until) = until.parse::<UnixTime>() else {
            return;
        };
        if let Err(e) = self.local.revoke(jti, until, super::unix_now()).await {
            tracing::error!(error = %e, "cannot keep a revocation locally");
        }
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
        let mut pubsub =
            tokio::time::timeout(redis.connect_timeout, redis.client.get_async_pubsub())
                .await
                .map_err(|_| StateError::Unavailable("redis feed: no connection in time".into()))?
                .map_err(lost)?;
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
                        if let Ok(text) = message.get_payload::<String>() {
                            self.revocations.apply(&text).await;
                        }
                    }
                    None => return Err(StateError::Unavailable("redis feed: connection closed".into())),
                },
                _ = liveness.tick() => {
                    redis.run::<()>("ping", &redis::cmd("PING")).await?;
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
            let outcome = self.follow(&mut shutdown).await;
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
static LOCK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
redis.call('HSET', KEYS[1], 'locked_until', ARGV[1])
redis.call('EXPIREAT', KEYS[1], tonumber(ARGV[1]) + tonumber(ARGV[2]))
return 1
"#,
    )
});

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
        let args = (until, FAILURE_MEMORY_SECONDS);
        self.redis
            .run_script::<i64>("lockout", &LOCK, key, args)
            .await?;
        Ok(())
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

/// Deletes the stored token (`<renew_at> <token>`, KEYS[1]) if it is still ARGV[1].
static DISCARD_TOKEN: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local stored = redis.call('GET', KEYS[1])
if stored then
  local space = string.find(stored, ' ', 1, true)
  if space and string.sub(stored, space + 1) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
  end
end
return 0
"#,
    )
});

/// How long a stored token outlives its renewal time (the dashboard's tokens expire a
/// fifth of their lifetime, at most 5 minutes, after it).
const TOKEN_KEPT_PAST_RENEWAL: u64 = 300;

/// The service account's token: one key, `<renew_at or 0> <token>`, kept locally until due.
pub struct RedisUpstreamTokens {
    redis: Arc<Redis>,
    local: RwLock<Option<UpstreamToken>>,
    /// This gateway's name in the login claim.
    claimant: String,
}

impl RedisUpstreamTokens {
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
}

#[async_trait]
impl UpstreamTokens for RedisUpstreamTokens {
    async fn current(&self, now: UnixTime) -> Result<Option<UpstreamToken>, StateError> {
        if let Some(token) = self.local().filter(|t| !t.due(now)) {
            return Ok(Some(token));
        }
        let key = self.redis.key("upstream", "token");
        let stored: Option<String> = self
            .redis
            .run("upstream token", redis::cmd("GET").arg(key))
            .await?;
        let token = stored
            .as_deref()
            .and_then(Self::decode)
            .filter(|t| !t.due(now));
        self.set_local(token.clone());
        Ok(token)
    }

    async fn store(&self, token: UpstreamToken) -> Result<(), StateError> {
        let mut set = redis::cmd("SET");
        set.arg(self.redis.key("upstream", "token"))
            .arg(Self::encode(&token));
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
        let key = self.redis.key("upstream", "token");
        self.redis
            .run_script::<i64>("upstream token", &DISCARD_TOKEN, key, token)
            .await?;
        Ok(())
    }

    async fn claim_login(&self, ttl: Duration) -> Result<bool, StateError> {
        let claim = redis::cmd("SET")
            .arg(self.redis.key("upstream", "login"))
            .arg(&self.claimant)
            .arg("NX")
            .arg("PX")
            .arg(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1))
            .clone();
        let set: Option<String> = self.redis.run("login claim", &claim).await?;
        Ok(set.is_some())
    }

    async fn release_login(&self) -> Result<(), StateError> {
        let key = self.redis.key("upstream", "login");
        let claimant = self.claimant.as_str();
        self.redis
            .run_script::<i64>("login claim", &DELETE_IF_EQUAL, key, claimant)
            .await?;
        Ok(())
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
    use crate::state::redis_server::RedisServer;
    use crate::state::{contract, BucketRate, Take};

    const COMMAND_TIMEOUT: Duration = Duration::from_millis(300);

    fn settings(server: &RedisServer, prefix: &str) -> RedisSettings {
        RedisSettings {
            url: server.url(),
            username: None,
            password: None,
            ca_pem: None,
            key_prefix: prefix.into(),
            connect_timeout: Duration::from_millis(300),
            command_timeout: COMMAND_TIMEOUT,
        }
    }

    /// A gateway's stores, with its revocation feed running until the sender drops.
    struct Gateway {
        stores: Stores,
        _stop: tokio::sync::watch::Sender<bool>,
    }

    async fn gateway(server: &RedisServer, prefix: &str) -> Gateway {
        let stores = stores(settings(server, prefix)).unwrap();
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
        contract::upstream_tokens(gateway.stores.upstream_tokens.as_ref()).await;
        contract::user_sessions(gateway.stores.user_sessions.as_ref()).await;
        contract::credential_resets(gateway.stores.credential_resets.as_ref()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_logout_on_one_gateway_reaches_another_within_100_ms() {
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
        delays.sort();
        let p99 = delays[delays.len() * 99 / 100 - 1];
        println!(
            "propagation over 200 logouts: p50 {:?}, p99 {p99:?}, max {:?}",
            delays[100], delays[199]
        );
        assert!(p99 < Duration::from_millis(100), "p99 {p99:?}");
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
}
