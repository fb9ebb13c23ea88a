//! The ids of tokens good once (the provider's back-channel logout tokens), in this
//! process's memory: a bounded map, swept of the ids whose tokens have expired when it is
//! full.

use async_trait::async_trait;
use dashmap::mapref::entry::Entry;
use dashmap::DashMap;

use super::make_room;
use crate::state::{StateError, UnixTime, UsedTokens};

pub struct MemoryUsedTokens {
    /// Token id -> when its token has expired (it is forgotten after).
    used: DashMap<String, UnixTime>,
    max_entries: usize,
}

impl MemoryUsedTokens {
    pub fn new(max_entries: usize) -> Self {
        Self {
            used: DashMap::new(),
            max_entries,
        }
    }
}

#[async_trait]
impl UsedTokens for MemoryUsedTokens {
    async fn first_use(
        &self,
        id: &str,
        until: UnixTime,
        now: UnixTime,
    ) -> Result<bool, StateError> {
        make_room(&self.used, id, self.max_entries, |_, until| *until >= now)?;
        match self.used.entry(id.to_string()) {
            Entry::Occupied(seen) if *seen.get() >= now => Ok(false),
            Entry::Occupied(mut expired) => {
                expired.insert(until);
                Ok(true)
            }
            Entry::Vacant(new) => {
                new.insert(until);
                Ok(true)
            }
        }
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
    async fn memory_used_tokens_pass_the_contract() {
        contract::used_tokens(&MemoryUsedTokens::new(10)).await;
    }

    #[tokio::test]
    async fn a_full_store_makes_room_only_from_expired_tokens() {
        let store = MemoryUsedTokens::new(2);
        assert!(store.first_use("a", 10, 5).await.unwrap());
        assert!(store.first_use("b", 20, 5).await.unwrap());
        assert!(matches!(
            store.first_use("c", 20, 5).await,
            Err(StateError::Full(2))
        ));
        assert!(store.first_use("c", 20, 11).await.unwrap());
        assert!(!store.first_use("b", 20, 11).await.unwrap());
    }
}
