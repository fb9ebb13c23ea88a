//! In-memory stores for one gateway process: bounded maps, pruned of what has expired.

use async_trait::async_trait;
use dashmap::DashMap;

use std::sync::RwLock;

use super::{
    Lockouts, Revocations, StateError, UnixMillis, UnixTime, UpstreamToken, UpstreamTokens,
};

pub struct MemoryRevocations {
    revoked: DashMap<String, UnixTime>,
    max_entries: usize,
}

impl MemoryRevocations {
    pub fn new(max_entries: usize) -> Self {
        Self {
            revoked: DashMap::new(),
            max_entries,
        }
    }
}

#[async_trait]
impl Revocations for MemoryRevocations {
    async fn revoke(&self, jti: &str, until: UnixTime, now: UnixTime) -> Result<(), StateError> {
        if until < now {
            return Ok(()); // already expired: nothing left to revoke
        }
        // Full: the revocations whose tokens have expired make room; when none has, the
        // logout fails (`Full`, answered 503) rather than being ignored.
        if self.revoked.len() >= self.max_entries && !self.revoked.contains_key(jti) {
            self.revoked.retain(|_, exp| *exp >= now);
            if self.revoked.len() >= self.max_entries {
                return Err(StateError::Full(self.max_entries));
            }
        }
        self.revoked.insert(jti.to_string(), until);
        Ok(())
    }

    async fn is_revoked(&self, jti: &str, now: UnixTime) -> Result<bool, StateError> {
        Ok(self.revoked.get(jti).is_some_and(|exp| *exp >= now))
    }

    async fn ready(&self) -> Result<(), StateError> {
        Ok(())
    }
}

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

    /// Makes room by dropping records that hold no live lock.
    fn make_room(&self, now: UnixTime) -> Result<(), StateError> {
        if self.records.len() < self.max_entries {
            return Ok(());
        }
        self.records
            .retain(|_, r| r.locked_until.is_some_and(|until| until > now));
        if self.records.len() >= self.max_entries {
            return Err(StateError::Full(self.max_entries));
        }
        Ok(())
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
        if !self.records.contains_key(username) {
            self.make_room(now)?;
        }
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

#[derive(Default)]
pub struct MemoryUpstreamTokens {
    current: RwLock<Option<UpstreamToken>>,
    login_backoff: RwLock<Option<UnixMillis>>,
}

impl MemoryUpstreamTokens {
    fn poisoned() -> StateError {
        StateError::Unavailable("upstream token lock poisoned".into())
    }
}

#[async_trait]
impl UpstreamTokens for MemoryUpstreamTokens {
    async fn current(&self, now: UnixTime) -> Result<Option<UpstreamToken>, StateError> {
        let current = self.current.read().map_err(|_| Self::poisoned())?;
        Ok(current.clone().filter(|t| !t.due(now)))
    }

    async fn store(&self, token: UpstreamToken) -> Result<(), StateError> {
        *self.current.write().map_err(|_| Self::poisoned())? = Some(token);
        Ok(())
    }

    async fn discard(&self, token: &str) -> Result<(), StateError> {
        let mut current = self.current.write().map_err(|_| Self::poisoned())?;
        if current.as_ref().is_some_and(|c| &*c.token == token) {
            *current = None;
        }
        Ok(())
    }

    /// One process: its own login lock is the only one there is.
    async fn claim_login(&self, _ttl: std::time::Duration) -> Result<bool, StateError> {
        Ok(true)
    }

    async fn release_login(&self) -> Result<(), StateError> {
        Ok(())
    }

    async fn set_login_backoff(&self, until: Option<UnixMillis>) -> Result<(), StateError> {
        *self.login_backoff.write().map_err(|_| Self::poisoned())? = until;
        Ok(())
    }

    async fn login_backoff(&self, now: UnixMillis) -> Result<Option<UnixMillis>, StateError> {
        let until = *self.login_backoff.read().map_err(|_| Self::poisoned())?;
        Ok(until.filter(|until| *until > now))
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
    async fn memory_revocations_pass_the_contract() {
        contract::revocations(&MemoryRevocations::new(10)).await;
    }

    #[tokio::test]
    async fn memory_lockouts_pass_the_contract() {
        contract::lockouts(&MemoryLockouts::new(10)).await;
    }

    #[tokio::test]
    async fn memory_upstream_tokens_pass_the_contract() {
        contract::upstream_tokens(&MemoryUpstreamTokens::default()).await;
    }

    #[tokio::test]
    async fn a_full_revocation_store_prunes_expired_entries_first() {
        let store = MemoryRevocations::new(2);
        store.revoke("a", 10, 0).await.unwrap();
        store.revoke("b", 10, 0).await.unwrap();
        assert!(matches!(
            store.revoke("c", 30, 5).await,
            Err(StateError::Full(2))
        ));
        store.revoke("c", 30, 20).await.unwrap();
        assert!(store.is_revoked("c", 20).await.unwrap());
        assert_eq!(store.revoked.len(), 1);
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
