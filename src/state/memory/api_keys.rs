//! The API keys in this process's memory: a bounded map by id, swept of the expired keys
//! when it is full; each key's last use kept beside its record.

use async_trait::async_trait;
use dashmap::DashMap;

use super::make_room;
use crate::api_keys::{KeyRecord, StoredKey};
use crate::state::{ApiKeys, StateError, UnixTime};

pub struct MemoryApiKeys {
    keys: DashMap<String, StoredKey>,
    max_keys: usize,
}

impl MemoryApiKeys {
    pub fn new(max_keys: usize) -> Self {
        Self {
            keys: DashMap::new(),
            max_keys,
        }
    }
}

/// Whether a key is still accepted at `now` (refused from its `expires_at` on).
fn live(record: &KeyRecord, now: UnixTime) -> bool {
    record.expires_at > now
}

#[async_trait]
impl ApiKeys for MemoryApiKeys {
    async fn insert(&self, record: &KeyRecord, now: UnixTime) -> Result<(), StateError> {
        make_room(&self.keys, &record.id, self.max_keys, |_, key| {
            live(&key.record, now)
        })?;
        let key = StoredKey {
            record: record.clone(),
            last_used: None,
        };
        self.keys.insert(record.id.clone(), key);
        Ok(())
    }

    async fn get(&self, id: &str, now: UnixTime) -> Result<Option<KeyRecord>, StateError> {
        Ok(self
            .keys
            .get(id)
            .filter(|key| live(&key.record, now))
            .map(|key| key.record.clone()))
    }

    async fn list(&self, owner: Option<&str>, now: UnixTime) -> Result<Vec<StoredKey>, StateError> {
        let mut keys: Vec<StoredKey> = self
            .keys
            .iter()
            .filter(|key| live(&key.record, now))
            .filter(|key| owner.is_none_or(|owner| key.record.owner == owner))
            .map(|key| key.clone())
            .collect();
        keys.sort_by(|a, b| {
            (a.record.created_at, &a.record.id).cmp(&(b.record.created_at, &b.record.id))
        });
        Ok(keys)
    }

    async fn remove(&self, id: &str) -> Result<bool, StateError> {
        Ok(self.keys.remove(id).is_some())
    }

    async fn touch(&self, id: &str, at: UnixTime) -> Result<(), StateError> {
        if let Some(mut key) = self.keys.get_mut(id) {
            key.last_used = key.last_used.max(Some(at));
        }
        Ok(())
    }

    async fn ready(&self) -> Result<(), StateError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::contract;

    #[tokio::test]
    async fn memory_api_keys_pass_the_contract() {
        contract::api_keys(&MemoryApiKeys::new(5), 5).await;
    }
}
