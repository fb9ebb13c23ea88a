//! The connection every store of a gateway shares: the primary in use (found again after
//! a failover, see `sentinel`), its key names, the sealing of values, and every command
//! bounded in time and counted in `StoreHealth`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::SentinelClient;
use redis::{Client, Script};

use super::sealed::Sealer;
use super::sentinel::sentinel_client;
use super::{RedisSettings, RedisTarget};
use crate::state::{StateError, StoreHealth};

/// The feed's reconnection waits: from this, doubling, up to the next.
pub(super) const RECONNECT_FIRST: Duration = Duration::from_millis(100);
pub(super) const RECONNECT_MAX: Duration = Duration::from_millis(800);
/// Writes waiting for replicas at once (each on its own connection); more wait their turn.
const REPLICATED_WRITES_AT_ONCE: usize = 32;

/// The connection every store of a gateway shares, its key names and its time bounds.
pub(super) struct Redis {
    pub(super) locator: Locator,
    /// The primary in use; `None` until found, and again once lost (with sentinels).
    pub(super) primary: RwLock<Option<Arc<Primary>>>,
    /// Numbers each primary found, so that losing an old one does not forget a newer one.
    pub(super) lookups: AtomicU64,
    /// When the sentinels last failed to name a primary: no new lookup before
    /// `RECONNECT_FIRST` has passed, so an outage does not send every request to them.
    pub(super) failed_lookup: Mutex<Option<Instant>>,
    pub(super) prefix: String,
    pub(super) connect_timeout: Duration,
    pub(super) command_timeout: Duration,
    pub(super) min_replicas: u32,
    pub(super) replication_timeout: Duration,
    /// Bounds the connections of the writes waiting for replicas.
    pub(super) replicated_writes: tokio::sync::Semaphore,
    pub(super) health: Arc<StoreHealth>,
    pub(super) sealer: Sealer,
}

/// How the primary is found.
pub(super) enum Locator {
    /// One address: its `ConnectionManager` reconnects to it by itself.
    Fixed(Client),
    /// Asked of the sentinels (one lookup at a time), again whenever the primary is lost.
    Sentinels(tokio::sync::Mutex<SentinelClient>),
}

impl Locator {
    /// The client of the one Redis, or of the sentinels, as the gateways' user and with
    /// TLS as configured.
    fn new(settings: &RedisSettings) -> redis::RedisResult<Locator> {
        let certificates = settings
            .ca_pem
            .clone()
            .map(|root_cert| redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(root_cert),
            });
        let password = settings
            .password
            .as_ref()
            .map(|p| String::from_utf8_lossy(p.expose()).into_owned());
        let username = settings.username.as_deref();
        Ok(match &settings.target {
            RedisTarget::Url(url) => Locator::Fixed(fixed_client(
                url,
                username,
                password.as_deref(),
                certificates,
            )?),
            RedisTarget::Sentinels(sentinels) => {
                let client =
                    sentinel_client(sentinels, username, password.as_deref(), certificates)?;
                Locator::Sentinels(tokio::sync::Mutex::new(client))
            }
        })
    }
}

/// The client of the Redis at `url`, as `username` with `password`.
fn fixed_client(
    url: &str,
    username: Option<&str>,
    password: Option<&str>,
    certificates: Option<redis::TlsCertificates>,
) -> redis::RedisResult<Client> {
    let mut info = redis::IntoConnectionInfo::into_connection_info(url)?;
    let mut account = info.redis_settings().clone();
    if let Some(username) = username {
        account = account.set_username(username);
    }
    if let Some(password) = password {
        account = account.set_password(password);
    }
    info = info.set_redis_settings(account);
    match certificates {
        Some(certificates) => Client::build_with_tls(info, certificates),
        None => Client::open(info),
    }
}

/// A primary found, with the connection every store shares.
pub(super) struct Primary {
    pub(super) lookup: u64,
    pub(super) client: Client,
    pub(super) manager: ConnectionManager,
}

impl Redis {
    pub(super) fn new(settings: RedisSettings) -> Result<Redis, StateError> {
        let keys = settings.encryption_keys.iter();
        let sealer = Sealer::new(keys.map(|k| (k.kid.as_str(), k.secret.expose())))
            .ok_or_else(|| StateError::Settings("no encryption key".into()))?;
        Ok(Redis {
            locator: Locator::new(&settings).map_err(|e| StateError::Settings(e.to_string()))?,
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

    pub(super) fn key(&self, kind: &str, id: &str) -> String {
        format!("{}{kind}:{id}", self.prefix)
    }

    pub(super) fn revocations_channel(&self) -> String {
        format!("{}revocations", self.prefix)
    }

    /// `plain` sealed for `key`.
    pub(super) fn seal(&self, key: &str, plain: &str) -> Result<String, StateError> {
        self.sealer
            .seal(key, plain.as_bytes())
            .map_err(|_| StateError::Unavailable("cannot seal a value for redis".into()))
    }

    /// What was sealed for `key`; `None` for what no listed key opens (an old key taken off
    /// the list, or not written by this deployment): absent, so a user logs in again.
    pub(super) fn open(&self, key: &str, stored: &str) -> Option<String> {
        let plain = self.sealer.open(key, stored);
        plain.and_then(|p| String::from_utf8(p).ok())
    }

    pub(super) fn current_primary(&self) -> Option<Arc<Primary>> {
        self.primary.read().ok().and_then(|p| p.clone())
    }

    /// The primary to use: the one in use, else found (through the sentinels if any).
    pub(super) async fn primary(&self) -> Result<Arc<Primary>, redis::RedisError> {
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

    /// Which primary is in use (its lookup's number), if any.
    pub(super) fn primary_in_use(&self) -> Option<u64> {
        self.current_primary().map(|p| p.lookup)
    }

    /// Runs `command` within `command_timeout`, recording the outcome.
    pub(super) async fn run<T: redis::FromRedisValue>(
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
    pub(super) async fn run_script<T: redis::FromRedisValue>(
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
    pub(super) async fn run_replicated(
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
    pub(super) async fn bounded<T, W, F>(
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

    /// A round trip, for a store's readiness (`what` names the store in the error).
    pub(super) async fn ping(&self, what: &'static str) -> Result<(), StateError> {
        self.run(what, &redis::cmd("PING")).await
    }

    pub(super) fn failed(&self, what: &str, why: &str) -> StateError {
        self.health.command_failed();
        StateError::Unavailable(format!("redis {what}: {why}"))
    }
}

pub(super) fn lookup_error(why: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Io, why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::redis::test_support::*;

    /// Asserts that no replica acknowledged a write that wanted one.
    fn not_replicated(outcome: Result<(), StateError>) {
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
        assert!(holds(&replica, "cg:revoked:kept").await);
        assert!(holds(&replica, "cg:lockout:locked").await);

        replica.stop();
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
}
