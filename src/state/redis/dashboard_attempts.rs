//! The dashboard's count of failed logins per username in Redis, shared by every gateway:
//! one hash per username, `<prefix>dashboard_attempts:<username>`, with `failures`,
//! `verifier` and one `hold:<id>` field per attempt in flight (the time in ms it counts as
//! a failure), changed only by the Lua scripts below so that gateways reserve as one.
//!
//! A hash with failures or holds never expires, and the set
//! `<prefix>dashboard_attempts_counted:` names them: at most `MEMORY_MAX_ENTRIES`, then a
//! new username is refused (fails closed, like the memory store). A hash left with a
//! verifier alone expires after `VERIFIER_MEMORY_SECONDS`.

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use redis::Script;

use super::connection::Redis;
use crate::state::{DashboardAttempts, Hold, StateError, UnixMillis, MEMORY_MAX_ENTRIES};

/// How long a verifier is kept after the success that stored it, with no failure since.
const VERIFIER_MEMORY_SECONDS: u64 = 30 * 24 * 3600;

/// Expired holds become failures, then a hold is added if failures + holds < ceiling.
/// KEYS: the record, the counted set. ARGV: now, ceiling, hold id, hold until, max
/// entries, username. Returns 1 (held), 0 (at the ceiling) or -1 (the set is full).
static RESERVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local now = tonumber(ARGV[1])
local failures = tonumber(redis.call('HGET', KEYS[1], 'failures') or '0')
local expired = 0
local live = 0
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, 5) == 'hold:' then
    if tonumber(fields[i + 1]) <= now then
      redis.call('HDEL', KEYS[1], fields[i])
      expired = expired + 1
    else
      live = live + 1
    end
  end
end
if expired > 0 then
  failures = failures + expired
  redis.call('HSET', KEYS[1], 'failures', failures)
end
if failures + live >= tonumber(ARGV[2]) then
  return 0
end
if redis.call('SISMEMBER', KEYS[2], ARGV[6]) == 0 then
  if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[5]) then
    return -1
  end
  redis.call('SADD', KEYS[2], ARGV[6])
end
redis.call('HSET', KEYS[1], 'hold:' .. ARGV[3], ARGV[4])
redis.call('PERSIST', KEYS[1])
return 1
"#,
    )
});

/// One more failure if the hold ARGV[1] is still there. KEYS: the record. Returns the
/// failures.
static FAILED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('HDEL', KEYS[1], 'hold:' .. ARGV[1]) == 1 then
  return redis.call('HINCRBY', KEYS[1], 'failures', 1)
end
return tonumber(redis.call('HGET', KEYS[1], 'failures') or '0')
"#,
    )
});

/// No failures, the verifier kept; with no hold left the username leaves the counted set
/// and the record expires. KEYS: the record, the counted set. ARGV: hold id, verifier
/// (empty: keep the last), username, verifier lifetime (s).
static SUCCEEDED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
redis.call('HDEL', KEYS[1], 'hold:' .. ARGV[1])
redis.call('HSET', KEYS[1], 'failures', 0)
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[1], 'verifier', ARGV[2])
end
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(field, 1, 5) == 'hold:' then
    return 1
  end
end
redis.call('SREM', KEYS[2], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"#,
    )
});

/// Deletes the record KEYS[1] and takes ARGV[1] out of the counted set KEYS[2].
static FORGET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
redis.call('DEL', KEYS[1])
return redis.call('SREM', KEYS[2], ARGV[1])
"#,
    )
});

pub struct RedisDashboardAttempts {
    pub(super) redis: Arc<Redis>,
}

impl RedisDashboardAttempts {
    fn record(&self, username: &str) -> String {
        self.redis.key("dashboard_attempts", username)
    }

    fn counted(&self) -> String {
        self.redis.key("dashboard_attempts_counted", "")
    }
}

const WHAT: &str = "dashboard attempts";

#[async_trait]
impl DashboardAttempts for RedisDashboardAttempts {
    async fn reserve(
        &self,
        username: &str,
        ceiling: u32,
        now: UnixMillis,
        hold_until: UnixMillis,
    ) -> Result<Option<Hold>, StateError> {
        let hold = Hold::new();
        let keys = [self.record(username), self.counted()];
        let args = (
            now,
            ceiling,
            &hold.0,
            hold_until,
            MEMORY_MAX_ENTRIES,
            username,
        );
        match self.redis.run_script(WHAT, &RESERVE, &keys, args).await? {
            1 => Ok(Some(hold)),
            -1 => Err(StateError::Full(MEMORY_MAX_ENTRIES)),
            _ => Ok(None),
        }
    }

    async fn failed(&self, username: &str, hold: &Hold) -> Result<u32, StateError> {
        let key = self.record(username);
        self.redis.run_script(WHAT, &FAILED, key, &hold.0).await
    }

    async fn cancel(&self, username: &str, hold: &Hold) -> Result<(), StateError> {
        let cancel = redis::cmd("HDEL")
            .arg(self.record(username))
            .arg(format!("hold:{}", hold.0))
            .clone();
        self.redis.run::<i64>(WHAT, &cancel).await?;
        Ok(())
    }

    async fn succeeded(
        &self,
        username: &str,
        hold: &Hold,
        verifier: Option<&str>,
    ) -> Result<(), StateError> {
        let keys = [self.record(username), self.counted()];
        // The verifier is an argon2id hash of the user's password: sealed like every other
        // credential kept in Redis, so that reading Redis gives nothing to crack offline.
        let verifier = match verifier {
            Some(verifier) => self.redis.seal(&keys[0], verifier)?,
            None => String::new(),
        };
        let args = (&hold.0, verifier, username, VERIFIER_MEMORY_SECONDS);
        self.redis
            .run_script::<i64>(WHAT, &SUCCEEDED, &keys, args)
            .await?;
        Ok(())
    }

    async fn verifier(&self, username: &str) -> Result<Option<String>, StateError> {
        let key = self.record(username);
        let sealed: Option<String> = self
            .redis
            .run(WHAT, redis::cmd("HGET").arg(&key).arg("verifier"))
            .await?;
        Ok(sealed.and_then(|sealed| self.redis.open(&key, &sealed)))
    }

    async fn forget(&self, username: &str) -> Result<(), StateError> {
        let keys = [self.record(username), self.counted()];
        self.redis
            .run_script::<i64>(WHAT, &FORGET, &keys, username)
            .await?;
        Ok(())
    }

    async fn ready(&self) -> Result<(), StateError> {
        self.redis.ping("ping").await
    }
}

#[cfg(test)]
mod tests {
    use crate::state::redis::test_support::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn three_gateways_reserve_the_dashboards_attempts_as_one() {
        let server = RedisServer::start();
        let holds = at_once_on_three_gateways(&server, |stores| async move {
            let attempts = stores.dashboard_attempts;
            attempts.reserve("admin", 9, 100, 60_000).await.unwrap()
        })
        .await;
        let held = holds.iter().filter(|hold| hold.is_some()).count();
        assert_eq!(
            held, 9,
            "failures plus attempts in flight stay under the ceiling"
        );
    }
}
