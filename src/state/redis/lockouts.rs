//! Lockouts in Redis: one hash per username, `failures` and `locked_until`, counted by a
//! Lua script so that gateways count as one.

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use redis::Script;

use super::connection::Redis;
use crate::state::{Lockouts, StateError, UnixTime};

/// How long a failure count is kept without a new failure (a lock keeps it longer).
const FAILURE_MEMORY_SECONDS: u64 = 24 * 3600;

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
    pub(super) redis: Arc<Redis>,
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
        self.redis.ping("ping").await
    }
}

#[cfg(test)]
mod tests {
    use crate::state::redis::test_support::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failures_from_three_gateways_count_as_one() {
        let server = RedisServer::start();
        let mut counts = at_once_on_three_gateways(&server, |stores| async move {
            stores.lockouts.record_failure("admin", 100).await.unwrap()
        })
        .await;
        counts.sort();
        assert_eq!(
            counts,
            (1..=60).collect::<Vec<u32>>(),
            "every failure counted once"
        );
    }
}
