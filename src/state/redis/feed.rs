//! The revocation feed: every gateway's local copy of the revocations follows the
//! revocations channel, and is read again whenever the connection is lost.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use super::connection::{RECONNECT_FIRST, RECONNECT_MAX};
use super::revocations::RedisRevocations;
use crate::state::{unix_now, StateError, StoreHealth};

/// How often the feed checks that Redis still answers while no message comes.
const LIVENESS_INTERVAL: Duration = Duration::from_millis(500);

/// The background task that keeps every gateway's copy of the revocations current: a
/// subscription to the revocations channel, re-made (and the copy reloaded) whenever the
/// connection is lost.
#[derive(Clone)]
pub struct RevocationFeed {
    pub(super) revocations: Arc<RedisRevocations>,
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
        let loaded = self.revocations.load(unix_now()).await?;
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
                        self.revocations.apply(&text, unix_now()).await;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::redis::test_support::*;

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
}
