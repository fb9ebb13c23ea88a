//! Failed logins per client in Redis: one key per client, `<prefix>failed_logins:<client>`,
//! holding the time (ms) its bucket is full again, changed by one Lua script so that every
//! gateway takes from the same bucket. The key expires when the bucket is full again, so
//! Redis holds only the buckets of clients that failed within the last minute or so.

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use redis::Script;

use super::connection::Redis;
use crate::client_addr::ClientNet;
use crate::state::{BucketRate, FailedLogins, StateError, Take, UnixMillis};

/// `BucketRate::take` (ARGV[4] "take") or `BucketRate::give_back` (else) on KEYS[1], a
/// bucket's `full_at` (absent: full). ARGV: now (ms), refill (ms), burst. Returns 0, or
/// the ms until a token is there.
static BUCKET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local now = tonumber(ARGV[1])
local refill = tonumber(ARGV[2])
local full_at = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), now)
if ARGV[4] == 'take' then
  full_at = full_at + refill
  local wait = full_at - now - tonumber(ARGV[3]) * refill
  if wait > 0 then
    return wait
  end
else
  full_at = full_at - refill
end
if full_at > now then
  redis.call('SET', KEYS[1], string.format('%d', full_at), 'PX', string.format('%d', full_at - now))
else
  redis.call('DEL', KEYS[1])
end
return 0
"#,
    )
});

pub struct RedisFailedLogins {
    pub(super) redis: Arc<Redis>,
}

impl RedisFailedLogins {
    async fn run(
        &self,
        client: &ClientNet,
        rate: BucketRate,
        now: UnixMillis,
        op: &str,
    ) -> Result<u64, StateError> {
        let key = self.redis.key("failed_logins", &client.to_string());
        let args = (now, rate.refill_ms, rate.burst, op);
        self.redis
            .run_script("failed logins", &BUCKET, key, args)
            .await
    }
}

#[async_trait]
impl FailedLogins for RedisFailedLogins {
    async fn take(
        &self,
        client: &ClientNet,
        rate: BucketRate,
        now: UnixMillis,
    ) -> Result<Take, StateError> {
        Ok(match self.run(client, rate, now, "take").await? {
            0 => Take::Taken,
            retry_in_ms => Take::Empty { retry_in_ms },
        })
    }

    async fn give_back(
        &self,
        client: &ClientNet,
        rate: BucketRate,
        now: UnixMillis,
    ) -> Result<(), StateError> {
        self.run(client, rate, now, "give_back").await.map(|_| ())
    }

    async fn ready(&self) -> Result<(), StateError> {
        self.redis.ping("ping").await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::redis::test_support::*;

    /// Redis holds a client's bucket only until it is full again, under the deployment's prefix.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_login_bucket_is_a_prefixed_key_that_expires_when_full() {
        let server = RedisServer::start();
        let failed_logins = stores(settings(&server, "cg:"), MAX_API_KEYS)
            .unwrap()
            .failed_logins;
        let client = ClientNet::of("2001:db8:1:2::7".parse().unwrap());
        let rate = BucketRate {
            burst: 3,
            refill_ms: 200,
        };
        let now = crate::state::unix_now_ms();
        failed_logins.take(&client, rate, now).await.unwrap();
        failed_logins.take(&client, rate, now).await.unwrap();
        let key = "cg:failed_logins:2001:db8:1:2::/64";
        let ttl: i64 = redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut raw(&server).await)
            .await
            .unwrap();
        assert!(0 < ttl && ttl <= 400, "PTTL {ttl}");
        // Given back to full: gone at once.
        failed_logins.give_back(&client, rate, now).await.unwrap();
        failed_logins.give_back(&client, rate, now).await.unwrap();
        assert!(!holds(&server, key).await);
        // Left alone: gone once full again.
        failed_logins.take(&client, rate, now).await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(!holds(&server, key).await);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failed_logins_on_three_gateways_take_from_one_bucket() {
        let server = RedisServer::start();
        let client = ClientNet::of("192.0.2.1".parse().unwrap());
        let rate = BucketRate {
            burst: 30,
            refill_ms: 60_000,
        };
        let takes = at_once_on_three_gateways(&server, |stores| async move {
            stores
                .failed_logins
                .take(&client, rate, 100_000)
                .await
                .unwrap()
        })
        .await;
        let taken = takes.iter().filter(|take| **take == Take::Taken).count();
        assert_eq!(taken, 30, "the burst, once, over all gateways");
    }
}
