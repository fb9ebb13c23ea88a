//! Dashboard tokens in this process's memory: one gateway, so its own login is the only
//! one there is.

use std::sync::{Arc, RwLock};

use async_trait::async_trait;

use crate::state::{
    AccountTokens, StateError, UnixMillis, UnixTime, UpstreamToken, UpstreamTokens,
};

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

/// In this process's memory: the caller keeps each account's store.
pub struct MemoryAccountTokens;

impl AccountTokens for MemoryAccountTokens {
    fn of(&self, _account: &str) -> Arc<dyn UpstreamTokens> {
        Arc::new(MemoryUpstreamTokens::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::contract;

    #[tokio::test]
    async fn memory_upstream_tokens_pass_the_contract() {
        contract::upstream_tokens(&MemoryUpstreamTokens::default()).await;
    }
}
