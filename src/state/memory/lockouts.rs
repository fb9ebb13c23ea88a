//! Login failures and locks per username in this process's memory: a bounded map; when
//! it is full, only the records holding a live lock are kept.

use async_trait::async_trait;
use dashmap::DashMap;

use super::make_room;
use crate::state::{Lockouts, StateError, UnixTime};

#[derive(Debug, Clone, Copy, Default)]
struct LoginRecord {
    failures: u32,
    locked_until: Option<UnixTime>,
}

pub struct MemoryLockouts {
    records: DashMap<String, LoginRecord>,
    max_entries: usize,
}

impl MemoryLockouts {
    pub fn new(max_entries: usize) -> Self {
        Self {
            records: DashMap::new(),
            max_entries,
        }
    }
}

#[async_trait]
impl Lockouts for MemoryLockouts {
    async fn locked_until(
        &self,
        username: &str,
        now: UnixTime,
    ) -> Result<Option<UnixTime>, StateError> {
        Ok(self
            .records
            .get(username)
            .and_then(|r| r.locked_until)
            .filter(|until| *until > now))
    }

    async fn record_failure(&self, username: &str, now: UnixTime) -> Result<u32, StateError> {
        // Room is made by dropping the records that hold no live lock.
        make_room(&self.records, username, self.max_entries, |_, r| {
            r.locked_until.is_some_and(|until| until > now)
        })?;
        let mut record = self.records.entry(username.to_string()).or_default();
        if record.locked_until.is_some_and(|until| until <= now) {
            *record = LoginRecord::default(); // the lock is over: count from zero
        }
        record.failures = record.failures.saturating_add(1);
        Ok(record.failures)
    }

    async fn lock(&self, username: &str, until: UnixTime) -> Result<(), StateError> {
        self.records
            .entry(username.to_string())
            .or_default()
            .locked_until = Some(until);
        Ok(())
    }

    async fn clear(&self, username: &str) -> Result<(), StateError> {
        self.records.remove(username);
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
    async fn memory_lockouts_pass_the_contract() {
        contract::lockouts(&MemoryLockouts::new(10)).await;
    }

    #[tokio::test]
    async fn a_full_lockout_store_keeps_live_locks() {
        let store = MemoryLockouts::new(2);
        store.lock("admin", 100).await.unwrap();
        store.record_failure("x", 0).await.unwrap();
        store.record_failure("y", 0).await.unwrap();
        assert_eq!(store.locked_until("admin", 50).await.unwrap(), Some(100));
    }
}
