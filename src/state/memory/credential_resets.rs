//! The moments users' earlier tokens stopped counting, in this process's memory: a
//! bounded map, swept of the resets whose tokens have all expired when it is full.

use async_trait::async_trait;
use dashmap::DashMap;

use super::make_room;
use crate::state::{CredentialResets, StateError, UnixTime};

/// A reset: tokens issued before `at` are refused; all of them have expired at `until`.
#[derive(Debug, Clone, Copy)]
struct Reset {
    at: UnixTime,
    until: UnixTime,
}

pub struct MemoryCredentialResets {
    resets: DashMap<String, Reset>,
    max_entries: usize,
}

impl MemoryCredentialResets {
    pub fn new(max_entries: usize) -> Self {
        Self {
            resets: DashMap::new(),
            max_entries,
        }
    }
}

#[async_trait]
impl CredentialResets for MemoryCredentialResets {
    async fn reset(
        &self,
        username: &str,
        at: UnixTime,
        until: UnixTime,
        now: UnixTime,
    ) -> Result<(), StateError> {
        make_room(&self.resets, username, self.max_entries, |_, reset| {
            reset.until >= now
        })?;
        let mut entry = self
            .resets
            .entry(username.to_string())
            .or_insert(Reset { at, until });
        if at > entry.at {
            *entry = Reset { at, until };
        }
        Ok(())
    }

    async fn reset_at(
        &self,
        username: &str,
        now: UnixTime,
    ) -> Result<Option<UnixTime>, StateError> {
        Ok(self
            .resets
            .get(username)
            .filter(|reset| reset.until >= now)
            .map(|reset| reset.at))
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
    async fn memory_credential_resets_pass_the_contract() {
        contract::credential_resets(&MemoryCredentialResets::new(10)).await;
    }

    #[tokio::test]
    async fn a_full_store_makes_room_only_from_resets_whose_tokens_expired() {
        let store = MemoryCredentialResets::new(2);
        store.reset("a", 5, 10, 5).await.unwrap();
        store.reset("b", 5, 20, 5).await.unwrap();
        assert!(matches!(
            store.reset("c", 5, 20, 5).await,
            Err(StateError::Full(2))
        ));
        store.reset("b", 6, 21, 5).await.unwrap();
        store.reset("c", 11, 20, 11).await.unwrap();
        assert_eq!(store.reset_at("a", 11).await.unwrap(), None);
        assert_eq!(store.reset_at("b", 11).await.unwrap(), Some(6));
        assert_eq!(store.reset_at("c", 11).await.unwrap(), Some(11));
    }
}
