//! Revoked token ids in this process's memory: a bounded map, pruned of the revocations
//! whose tokens have expired when it is full.

use async_trait::async_trait;
use dashmap::DashMap;

use super::make_room;
use crate::state::{Revocations, StateError, UnixTime};

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
        make_room(&self.revoked, jti, self.max_entries, |_, exp| *exp >= now)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::contract;

    #[tokio::test]
    async fn memory_revocations_pass_the_contract() {
        contract::revocations(&MemoryRevocations::new(10)).await;
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
}
