//! Redis Sentinel: the primary the sentinels name, checked while in use and forgotten
//! once it is not the primary any more.

use std::time::Instant;

use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{Client, ConnectionAddr, TlsMode};

use super::connection::{lookup_error, Locator, Redis, RECONNECT_FIRST};
use crate::secrets::Secret;
use crate::state::StateError;

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

impl Redis {
    /// The primary the sentinels name, once it says it is one (`ROLE`), within
    /// `connect_timeout`.
    pub(super) async fn ask_sentinels(
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
    pub(super) fn lost(&self, lookup: u64) {
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
    pub(super) async fn check_primary(&self) -> Result<(), StateError> {
        let Locator::Sentinels(sentinels) = &self.locator else {
            return self.ping("ping").await;
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
}

/// Asks `sentinels` for the primary, as the sentinels' user, and talks to it as the
/// gateways' user (`username`, `password`), each with TLS if so configured.
pub(super) fn sentinel_client(
    sentinels: &SentinelSettings,
    username: Option<&str>,
    password: Option<&str>,
    certificates: Option<redis::TlsCertificates>,
) -> redis::RedisResult<SentinelClient> {
    let tls = sentinels.sentinel_tls;
    let addresses = sentinels
        .addresses
        .iter()
        .cloned()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::redis::test_support::*;

    /// The settings of a gateway that asks `sentinel` for the primary (`primary` at first).
    fn through(sentinel: &SentinelServer, primary: &RedisServer, prefix: &str) -> RedisSettings {
        let password = std::fs::read(sentinel.password_file()).unwrap();
        RedisSettings {
            target: RedisTarget::Sentinels(Box::new(SentinelSettings {
                addresses: vec![("127.0.0.1".into(), sentinel.port)],
                master_name: "cg-test".into(),
                username: Some(redis_server::SENTINEL_USER.into()),
                password: Some(Secret::new(password)),
                tls: false,
                sentinel_tls: false,
            })),
            ..settings(primary, prefix)
        }
    }

    /// The address of the primary `gateway` uses, if any.
    fn primary_address(gateway: &Gateway) -> Option<String> {
        let feed = gateway.stores.feed.as_ref().unwrap();
        let primary = feed.revocations.redis.current_primary();
        primary.map(|p| p.client.get_connection_info().addr().to_string())
    }

    /// Revokes `jti` once a primary answers again, within `limit` (closed until then):
    /// how long that took.
    async fn revoke_once_a_primary_is_named(
        stores: &Stores,
        jti: &str,
        now: UnixTime,
        limit: Duration,
    ) -> Duration {
        let started = Instant::now();
        loop {
            match stores.revocations.revoke(jti, now + 600, now).await {
                Ok(()) => return started.elapsed(),
                Err(StateError::Unavailable(_)) => {
                    assert!(started.elapsed() < limit, "no new primary in {limit:?}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(other) => panic!("{other}"),
            }
        }
    }

    /// Asks `sentinel` for a switchover (`SENTINEL FAILOVER`), as the sentinels' user.
    async fn switch_over(sentinel: &SentinelServer) {
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
        let sentinels = RedisSettings {
            // The one replica becomes the primary: none left to acknowledge.
            min_replicas: 0,
            // As the shipped ACL's user: what the sentinels' client asks the primary
            // (ROLE) is allowed.
            username: Some(redis_server::GATEWAY_USER.into()),
            password: Some(Secret::new(
                std::fs::read(primary.gateway_password_file()).unwrap(),
            )),
            ..through(&sentinel, &primary, redis_server::GATEWAY_PREFIX)
        };
        let a = gateway_with(sentinels.clone()).await;
        let b = gateway_with(sentinels).await;
        let now = crate::state::unix_now();
        a.stores
            .revocations
            .revoke("before", now + 600, now)
            .await
            .unwrap();
        assert_eq!(
            primary_address(&a),
            Some(format!("127.0.0.1:{}", primary.port))
        );

        primary.stop();
        wait_until(Duration::from_secs(5), || !b.stores.health.up()).await;
        // Until the sentinels promote the replica, no primary: closed.
        let failover = Duration::from_millis(redis_server::SENTINEL_DOWN_AFTER_MS * 10);
        let took = revoke_once_a_primary_is_named(&a.stores, "after", now, failover).await;
        println!("writes again {took:?} after the primary was killed");
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
        let gateway = gateway_with(through(&sentinel, &primary, "cg:")).await;
        let in_use = || primary_address(&gateway);
        assert_eq!(in_use(), Some(format!("127.0.0.1:{}", primary.port)));
        switch_over(&sentinel).await;
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
