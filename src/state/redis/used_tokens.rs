//! The ids of tokens good once, in Redis: one key per id, `<prefix>used:<id>`, set only if
//! absent (`SET NX`, so two gateways given the same token at once accept it once) and
//! expiring when the token has.

use std::sync::Arc;

use async_trait::async_trait;

use super::connection::Redis;
use crate::state::{StateError, UnixTime, UsedTokens};

pub struct RedisUsedTokens {
    pub(super) redis: Arc<Redis>,
}

#[async_trait]
impl UsedTokens for RedisUsedTokens {
    async fn first_use(
        &self,
        id: &str,
        until: UnixTime,
        now: UnixTime,
    ) -> Result<bool, StateError> {
        // Expires the second after `until`: still refused at `until`.
        let set = redis::cmd("SET")
            .arg(self.redis.key("used", id))
            .arg(1)
            .arg("NX")
            .arg("EXAT")
            .arg(until.max(now) + 1)
            .clone();
        let answer: Option<String> = self.redis.run("used token", &set).await?;
        Ok(answer.is_some())
    }

    async fn ready(&self) -> Result<(), StateError> {
        self.redis.ping("used token").await
    }
}
