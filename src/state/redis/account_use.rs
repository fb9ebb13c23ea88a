//! When each managed dashboard account was last used, in Redis: one hash,
//! `<prefix>account-use:all`, an account per field, shared by every gateway of a deployment.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use redis::Script;

use super::connection::Redis;
use crate::state::{AccountUse, StateError, UnixTime, MAX_RECORDED_ACCOUNTS};

/// Keeps the later of KEYS[1][ARGV[1]] and ARGV[2], and refuses a new field past ARGV[3]
/// fields (returns -1): two gateways recording at once keep the later moment.
static RECORD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local last = redis.call('HGET', KEYS[1], ARGV[1])
if not last and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then
  return -1
end
if tonumber(ARGV[2]) > tonumber(last or '0') then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
return 0
"#,
    )
});

pub struct RedisAccountUse {
    pub(super) redis: Arc<Redis>,
}

impl RedisAccountUse {
    fn key(&self) -> String {
        self.redis.key("account-use", "all")
    }
}

#[async_trait]
impl AccountUse for RedisAccountUse {
    async fn record(&self, account: &str, at: UnixTime) -> Result<(), StateError> {
        let args = (account, at, MAX_RECORDED_ACCOUNTS);
        let recorded: i64 = self
            .redis
            .run_script("account use", &RECORD, self.key(), args)
            .await?;
        match recorded {
            -1 => Err(StateError::Full(MAX_RECORDED_ACCOUNTS)),
            _ => Ok(()),
        }
    }

    async fn last_uses(&self) -> Result<BTreeMap<String, UnixTime>, StateError> {
        // `record` keeps the hash within MAX_RECORDED_ACCOUNTS fields.
        let all = redis::cmd("HGETALL").arg(self.key()).clone();
        self.redis.run("account use", &all).await
    }

    async fn forget(&self, accounts: &[String]) -> Result<(), StateError> {
        if accounts.is_empty() {
            return Ok(());
        }
        let forget = redis::cmd("HDEL").arg(self.key()).arg(accounts).clone();
        self.redis
            .run::<i64>("account use", &forget)
            .await
            .map(|_| ())
    }
}
