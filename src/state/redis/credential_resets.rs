//! The moments users' earlier tokens stopped counting, in Redis: one key per username,
//! `<prefix>reset:<username>`, holding the latest reset and expiring when every token
//! issued before it has, so that a gateway that never saw a user removed still refuses
//! the old tokens once the user is back.

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use redis::Script;

use super::connection::Redis;
use crate::state::{CredentialResets, StateError, UnixTime};

/// Keeps the later of KEYS[1]'s reset and ARGV[1], the new one expiring at ARGV[2]
/// (seconds): two gateways reloading the same change record it once, the later moment.
static RESET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local at = tonumber(ARGV[1])
if at > tonumber(redis.call('GET', KEYS[1]) or '0') then
  redis.call('SET', KEYS[1], ARGV[1], 'EXAT', ARGV[2])
end
return 0
"#,
    )
});

pub struct RedisCredentialResets {
    pub(super) redis: Arc<Redis>,
}

#[async_trait]
impl CredentialResets for RedisCredentialResets {
    async fn reset(
        &self,
        username: &str,
        at: UnixTime,
        until: UnixTime,
        now: UnixTime,
    ) -> Result<(), StateError> {
        if until < now {
            return Ok(()); // every token it would refuse has expired already
        }
        let key = self.redis.key("reset", username);
        // Expires the second after `until`: `reset_at` still answers at `until`.
        let args = (at, until + 1);
        self.redis
            .run_script::<i64>("credential reset", &RESET, key, args)
            .await
            .map(|_| ())
    }

    async fn reset_at(
        &self,
        username: &str,
        _now: UnixTime,
    ) -> Result<Option<UnixTime>, StateError> {
        let get = redis::cmd("GET")
            .arg(self.redis.key("reset", username))
            .clone();
        self.redis.run("credential reset", &get).await
    }

    async fn ready(&self) -> Result<(), StateError> {
        self.redis.ping("credential reset").await
    }
}
