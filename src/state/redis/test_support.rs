//! What the Redis stores' tests share: a gateway's stores on a test server, and raw access
//! to what they keep.

pub(super) use std::time::{Duration, Instant};

pub(super) use pingora::services::background::BackgroundService;
pub(super) use redis::Client;

pub(super) use super::{stores, stores_keeping, EncryptionKey, RedisSettings, RedisTarget};
pub(super) use crate::client_addr::ClientNet;
pub(super) use crate::secrets::Secret;
pub(super) use crate::state::{
    contract, BucketRate, StateError, Stores, UnixTime, UpstreamToken, UserSession,
    MEMORY_MAX_ENTRIES,
};
pub(super) use clustergate_test_support::redis_server::{self, RedisServer, SentinelServer};

/// The API keys a test gateway's store keeps at most.
pub(super) const MAX_API_KEYS: usize = 10;

pub(super) const COMMAND_TIMEOUT: Duration = Duration::from_millis(300);

pub(super) const REPLICATION_TIMEOUT: Duration = Duration::from_millis(300);

/// Room for a replica's acknowledgement while the other tests load both cores.
pub(super) const BUSY_REPLICATION_TIMEOUT: Duration = Duration::from_secs(1);

pub(super) fn settings(server: &RedisServer, prefix: &str) -> RedisSettings {
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

pub(super) fn encryption_key(kid: &str, secret: &str) -> EncryptionKey {
    EncryptionKey {
        kid: kid.into(),
        secret: Secret::new(secret.as_bytes().to_vec()),
    }
}

/// A connection as Redis' `default` user, to read and write what the gateway does not.
pub(super) async fn raw(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Whether `server` holds `key`.
pub(super) async fn holds(server: &RedisServer, key: &str) -> bool {
    let exists: bool = redis::cmd("EXISTS")
        .arg(key)
        .query_async(&mut raw(server).await)
        .await
        .unwrap();
    exists
}

pub(super) async fn raw_get(server: &RedisServer, key: &str) -> String {
    let value: Option<String> = redis::cmd("GET")
        .arg(key)
        .query_async(&mut raw(server).await)
        .await
        .unwrap();
    value.unwrap_or_else(|| panic!("{key} is not in redis"))
}

/// A gateway's stores, with its revocation feed running until the sender drops.
pub(super) struct Gateway {
    pub(super) stores: Stores,
    _stop: tokio::sync::watch::Sender<bool>,
}

pub(super) async fn gateway(server: &RedisServer, prefix: &str) -> Gateway {
    gateway_with(settings(server, prefix)).await
}

pub(super) async fn gateway_with(settings: RedisSettings) -> Gateway {
    gateway_keeping(settings, MEMORY_MAX_ENTRIES).await
}

/// A gateway whose local copy keeps at most `kept` revocations.
pub(super) async fn gateway_keeping(settings: RedisSettings, kept: usize) -> Gateway {
    let stores = stores_keeping(settings, kept, MAX_API_KEYS).unwrap();
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

pub(super) async fn wait_until(limit: Duration, done: impl Fn() -> bool) -> Duration {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    started.elapsed()
}

pub(super) const DASHBOARD_TOKEN: &str =
    "eyJhbGciOiJIUzI1NiJ9.eyJ1c2VybmFtZSI6ImFkbWluIn0.c2lnbmF0dXJl";

pub(super) fn session(until: UnixTime) -> UserSession {
    UserSession {
        username: "admin".into(),
        dashboard_token: DASHBOARD_TOKEN.into(),
        permissions: None,
        until,
    }
}

/// Writes `value` under `key` on `server` and reads it back from `replica` within 5 s.
pub(super) async fn replicating(server: &RedisServer, replica: &RedisServer) {
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

/// Runs `attempt` 20 times at once on each of three gateways' stores (all on `server`,
/// one deployment); the answers, in no particular order.
pub(super) async fn at_once_on_three_gateways<T, F, A>(server: &RedisServer, attempt: A) -> Vec<T>
where
    T: Send + 'static,
    F: std::future::Future<Output = T> + Send + 'static,
    A: Fn(Stores) -> F,
{
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let stores = stores(settings(server, "cg:"), MAX_API_KEYS).unwrap();
        for _ in 0..20 {
            tasks.push(tokio::spawn(attempt(stores.clone())));
        }
    }
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

/// Runs the contract of every store on `stores`.
pub(super) async fn every_contract(stores: &Stores) {
    contract::revocations(stores.revocations.as_ref()).await;
    contract::lockouts(stores.lockouts.as_ref()).await;
    contract::failed_logins(stores.failed_logins.as_ref()).await;
    contract::dashboard_attempts(stores.dashboard_attempts.as_ref()).await;
    contract::upstream_tokens(stores.upstream_tokens.as_ref()).await;
    contract::user_sessions(stores.user_sessions.as_ref()).await;
    contract::credential_resets(stores.credential_resets.as_ref()).await;
    contract::used_tokens(stores.used_tokens.as_ref()).await;
    contract::account_use(stores.account_use.as_ref()).await;
    contract::api_keys(stores.api_keys.as_ref(), MAX_API_KEYS).await;
}

/// Waits (up to 2 s) until `stores` refuse token `jti`: a revocation made elsewhere has
/// reached them.
pub(super) async fn until_revoked(stores: &Stores, jti: &str, now: UnixTime) {
    let started = Instant::now();
    while !stores.revocations.is_revoked(jti, now).await.unwrap() {
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{jti} never arrived"
        );
        tokio::task::yield_now().await;
    }
}
