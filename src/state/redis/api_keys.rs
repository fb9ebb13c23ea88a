//! The API keys in Redis, shared by every gateway of a deployment:
//! - `<prefix>api_key:<id>`: the record as JSON, sealed (it holds the key's digest, and
//!   its name and networks say what it is for), expiring at the key's `expires_at`;
//! - `<prefix>api_keys:index`: a hash of every key's id to its `expires_at`, which bounds
//!   the keys (`insert` refuses a new one past the maximum once the expired ones are
//!   dropped) and is what `list` reads; an entry whose record is gone (expired, or removed
//!   by hand) is dropped when `list` meets it;
//! - `<prefix>api_keys:last_used`: a hash of id to the key's last use, the later time
//!   winning whichever gateway writes last.
//!
//! Only the commands of `deploy/redis/clustergate.acl` are used (hashes, no sorted sets):
//! `list` orders the records itself.

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use redis::Script;

use super::connection::Redis;
use crate::api_keys::{KeyRecord, StoredKey};
use crate::state::{ApiKeys, StateError, UnixTime};

const WHAT: &str = "api keys";

/// Keeps a record. KEYS: the record, the index, the last uses. ARGV: id, sealed record,
/// expires_at, now, maximum. A new id in a full index first drops the entries expired at
/// now; returns -1 if that freed nothing, else 1.
static INSERT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local now = tonumber(ARGV[4])
local max = tonumber(ARGV[5])
if not redis.call('HGET', KEYS[2], ARGV[1]) and redis.call('HLEN', KEYS[2]) >= max then
  local fields = redis.call('HGETALL', KEYS[2])
  for i = 1, #fields, 2 do
    if tonumber(fields[i + 1]) <= now then
      redis.call('HDEL', KEYS[2], fields[i])
      redis.call('HDEL', KEYS[3], fields[i])
    end
  end
  if redis.call('HLEN', KEYS[2]) >= max then
    return -1
  end
end
redis.call('SET', KEYS[1], ARGV[2], 'EXAT', ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
"#,
    )
});

/// Forgets key ARGV[1]. KEYS: the record, the index, the last uses. Returns 1 if it was
/// in the index, else 0.
static REMOVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
redis.call('DEL', KEYS[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return redis.call('HDEL', KEYS[2], ARGV[1])
"#,
    )
});

/// Keeps the later of the recorded use of key ARGV[1] and ARGV[2], for a key in the index.
/// KEYS: the index, the last uses.
static TOUCH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if not redis.call('HGET', KEYS[1], ARGV[1]) then
  return 0
end
if tonumber(ARGV[2]) > tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0') then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
end
return 1
"#,
    )
});

/// The ids in the index not expired at ARGV[1], at most ARGV[2] of them, each followed by
/// its last use ('' for none). KEYS: the index, the last uses.
static LIVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local now = tonumber(ARGV[1])
local max = tonumber(ARGV[2])
local found = {}
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  if #found >= 2 * max then
    break
  end
  if tonumber(fields[i + 1]) > now then
    found[#found + 1] = fields[i]
    found[#found + 1] = redis.call('HGET', KEYS[2], fields[i]) or ''
  end
end
return found
"#,
    )
});

pub struct RedisApiKeys {
    redis: Arc<Redis>,
    max_keys: usize,
}

impl RedisApiKeys {
    pub(super) fn new(redis: Arc<Redis>, max_keys: usize) -> Self {
        Self { redis, max_keys }
    }

    fn record_key(&self, id: &str) -> String {
        self.redis.key("api_key", id)
    }

    fn index(&self) -> String {
        self.redis.key("api_keys", "index")
    }

    fn last_used(&self) -> String {
        self.redis.key("api_keys", "last_used")
    }

    /// The record sealed under `key` for key `id`; `None` for what does not open or is
    /// not a record of `id`.
    fn decode(&self, key: &str, id: &str, sealed: &str) -> Option<KeyRecord> {
        let text = self.redis.open(key, sealed)?;
        serde_json::from_str::<KeyRecord>(&text)
            .ok()
            .filter(|record| record.id == id)
    }

    /// The live ids with their last use, at most the maximum.
    async fn live(&self, now: UnixTime) -> Result<Vec<(String, Option<UnixTime>)>, StateError> {
        let keys = [self.index(), self.last_used()];
        let found: Vec<String> = self
            .redis
            .run_script(WHAT, &LIVE, &keys, (now, self.max_keys))
            .await?;
        Ok(found
            .chunks_exact(2)
            .map(|pair| (pair[0].clone(), pair[1].parse().ok()))
            .collect())
    }
}

#[async_trait]
impl ApiKeys for RedisApiKeys {
    async fn insert(&self, record: &KeyRecord, now: UnixTime) -> Result<(), StateError> {
        let key = self.record_key(&record.id);
        let text = serde_json::to_string(record)
            .map_err(|e| StateError::Unavailable(format!("redis {WHAT}: {e}")))?;
        let sealed = self.redis.seal(&key, &text)?;
        let keys = [key, self.index(), self.last_used()];
        let args = (&record.id, sealed, record.expires_at, now, self.max_keys);
        let kept: i64 = self.redis.run_script(WHAT, &INSERT, &keys, args).await?;
        match kept {
            -1 => Err(StateError::Full(self.max_keys)),
            _ => Ok(()),
        }
    }

    async fn get(&self, id: &str, now: UnixTime) -> Result<Option<KeyRecord>, StateError> {
        let key = self.record_key(id);
        let stored: Option<String> = self.redis.run(WHAT, redis::cmd("GET").arg(&key)).await?;
        Ok(stored
            .and_then(|sealed| self.decode(&key, id, &sealed))
            .filter(|record| record.expires_at > now))
    }

    async fn list(&self, owner: Option<&str>, now: UnixTime) -> Result<Vec<StoredKey>, StateError> {
        let live = self.live(now).await?;
        if live.is_empty() {
            return Ok(Vec::new());
        }
        let record_keys: Vec<String> = live.iter().map(|(id, _)| self.record_key(id)).collect();
        let stored: Vec<Option<String>> = self
            .redis
            .run(WHAT, redis::cmd("MGET").arg(&record_keys))
            .await?;
        let mut keys = Vec::with_capacity(live.len());
        for ((id, last_used), (key, sealed)) in live.into_iter().zip(record_keys.iter().zip(stored))
        {
            let Some(sealed) = sealed else {
                // Its record expired (by Redis' clock) or was deleted by hand.
                self.remove(&id).await?;
                continue;
            };
            let Some(record) = self.decode(key, &id, &sealed) else {
                continue; // sealed with a key no longer listed, or not this deployment's
            };
            if record.expires_at > now && owner.is_none_or(|owner| record.owner == owner) {
                keys.push(StoredKey { record, last_used });
            }
        }
        keys.sort_by(|a, b| {
            (a.record.created_at, &a.record.id).cmp(&(b.record.created_at, &b.record.id))
        });
        Ok(keys)
    }

    async fn remove(&self, id: &str) -> Result<bool, StateError> {
        let keys = [self.record_key(id), self.index(), self.last_used()];
        let removed: i64 = self.redis.run_script(WHAT, &REMOVE, &keys, id).await?;
        Ok(removed == 1)
    }

    async fn touch(&self, id: &str, at: UnixTime) -> Result<(), StateError> {
        let keys = [self.index(), self.last_used()];
        self.redis
            .run_script::<i64>(WHAT, &TOUCH, &keys, (id, at))
            .await
            .map(|_| ())
    }

    async fn ready(&self) -> Result<(), StateError> {
        self.redis.ping(WHAT).await
    }
}

#[cfg(test)]
mod tests {
    use crate::state::contract::key_record;
    use crate::state::redis::test_support::*;

    /// What Redis holds for a key shows neither its digest nor its name; another gateway
    /// of the deployment reads it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn key_records_in_redis_are_sealed() {
        let server = RedisServer::start();
        let one = stores(settings(&server, "cg:"), MAX_API_KEYS).unwrap();
        let now = crate::state::unix_now();
        let record = key_record("0123456789abcdef", "alice", now, now + 600);
        one.api_keys.insert(&record, now).await.unwrap();
        let stored = raw_get(&server, "cg:api_key:0123456789abcdef").await;
        let mut redis = raw(&server).await;
        let mut held = vec![stored];
        for hash in ["cg:api_keys:index", "cg:api_keys:last_used"] {
            let fields: Vec<String> = redis::cmd("HGETALL")
                .arg(hash)
                .query_async(&mut redis)
                .await
                .unwrap();
            held.extend(fields);
        }
        for text in &held {
            for secret in [&record.digest, &record.name, "10.0.0.0"] {
                assert!(
                    !text.contains(secret),
                    "Redis holds {secret} in clear: {text}"
                );
            }
        }
        let other = stores(settings(&server, "cg:"), MAX_API_KEYS).unwrap();
        assert_eq!(
            other.api_keys.get(&record.id, now).await.unwrap(),
            Some(record)
        );
    }

    /// A record gone from Redis (expired by its clock, or deleted by hand) leaves an index
    /// entry that `list` drops when it meets it, so it no longer counts against the
    /// maximum.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_index_entry_without_its_record_is_dropped_by_list() {
        let server = RedisServer::start();
        let keys = stores(settings(&server, "cg:"), 2).unwrap().api_keys;
        let now = crate::state::unix_now();
        let a = key_record("aaaaaaaaaaaaaaaa", "alice", now, now + 600);
        let b = key_record("bbbbbbbbbbbbbbbb", "alice", now, now + 600);
        let c = key_record("cccccccccccccccc", "alice", now, now + 600);
        keys.insert(&a, now).await.unwrap();
        keys.insert(&b, now).await.unwrap();
        redis::cmd("DEL")
            .arg("cg:api_key:aaaaaaaaaaaaaaaa")
            .query_async::<()>(&mut raw(&server).await)
            .await
            .unwrap();
        assert!(matches!(
            keys.insert(&c, now).await,
            Err(StateError::Full(2))
        ));
        let listed = keys.list(None, now).await.unwrap();
        assert_eq!(listed.len(), 1);
        keys.insert(&c, now).await.unwrap();
    }
}
