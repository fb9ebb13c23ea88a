//! Revocations in Redis: each revoked token id is a key that expires when its token would
//! have, signed with the deployment's key, with a bounded local copy for the checks (kept
//! current by `feed`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;

use super::connection::Redis;
use crate::state::memory::MemoryRevocations;
use crate::state::{Revocations, StateError, UnixTime, MEMORY_MAX_ENTRIES};

/// Keys read per SCAN step when the feed loads the live revocations.
const SCAN_STEP: usize = 1000;
/// SCAN steps a load takes at most (a wrong cursor cannot loop): four times what reads a
/// full local copy.
const MAX_SCAN_STEPS: usize = MEMORY_MAX_ENTRIES / SCAN_STEP * 4;

/// Revocations: keys in Redis, a local copy for the checks. Redis keeps every one until its
/// token expires; the copy keeps a bounded number, and while it lacks some (it was full),
/// a token it does not hold is looked up in Redis: no logout is ever ignored.
pub struct RedisRevocations {
    pub(super) redis: Arc<Redis>,
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
        self.redis.ping("ping").await
    }
}

impl RedisRevocations {
    /// The revocations in `redis`, with at most `kept` of them in the local copy.
    pub(super) fn new(redis: Arc<Redis>, kept: usize) -> Self {
        RedisRevocations {
            redis,
            local: MemoryRevocations::new(kept),
            incomplete_until: AtomicU64::new(0),
        }
    }

    /// Loads every live revocation into the local copy (after subscribing, so none is
    /// missed in between). Bounded by the local copy's size.
    pub(super) async fn load(&self, now: UnixTime) -> Result<usize, StateError> {
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
    pub(super) async fn apply(&self, signed: &str, now: UnixTime) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::redis::test_support::*;

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

    /// Revocations of `victim` that this deployment must not take: unsigned, signed badly,
    /// with another key, for another deployment, or `genuine` with its `until` moved.
    fn forgeries(server: &RedisServer, genuine: &str, now: UnixTime) -> Vec<String> {
        let other_key = RedisSettings {
            encryption_keys: vec![encryption_key(
                redis_server::ENCRYPTION_KID,
                "another deployment's key, 32 bytes or more",
            )],
            ..settings(server, "cg:")
        };
        let other_sealer = Redis::new(other_key).unwrap().sealer;
        let other_deployment = Redis::new(settings(server, "other:")).unwrap().sealer;
        vec![
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
        ]
    }

    /// Publishes `forged` on the deployment's channel, and writes a revocation key without
    /// the deployment's key.
    async fn publish_forgeries(server: &RedisServer, forged: &[String]) {
        let mut redis = raw(server).await;
        for message in forged {
            redis::cmd("PUBLISH")
                .arg("cg:revocations")
                .arg(message)
                .query_async::<()>(&mut redis)
                .await
                .unwrap();
        }
        redis::cmd("SET")
            .arg("cg:revoked:victim")
            .arg(1)
            .arg("EX")
            .arg(60)
            .query_async::<()>(&mut redis)
            .await
            .unwrap();
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
        let forged = forgeries(&server, &genuine, now);
        publish_forgeries(&server, &forged).await;
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
}
