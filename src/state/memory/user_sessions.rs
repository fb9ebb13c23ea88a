//! The users' dashboard sessions in this process's memory: a bounded map, swept of the
//! sessions that ended when it is full.

use async_trait::async_trait;
use dashmap::DashMap;

use super::make_room;
use crate::state::{StateError, UnixTime, UserSession, UserSessions};

pub struct MemoryUserSessions {
    sessions: DashMap<String, UserSession>,
    max_entries: usize,
}

impl MemoryUserSessions {
    pub fn new(max_entries: usize) -> Self {
        Self {
            sessions: DashMap::new(),
            max_entries,
        }
    }
}

#[async_trait]
impl UserSessions for MemoryUserSessions {
    async fn open(
        &self,
        jti: &str,
        session: &UserSession,
        now: UnixTime,
    ) -> Result<(), StateError> {
        make_room(&self.sessions, jti, self.max_entries, |_, s| s.until >= now)?;
        self.sessions.insert(jti.to_string(), session.clone());
        Ok(())
    }

    async fn find(&self, jti: &str, now: UnixTime) -> Result<Option<UserSession>, StateError> {
        Ok(self
            .sessions
            .get(jti)
            .filter(|s| s.until >= now)
            .map(|s| s.clone()))
    }

    async fn close(&self, jti: &str) -> Result<(), StateError> {
        self.sessions.remove(jti);
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
    async fn memory_user_sessions_pass_the_contract() {
        contract::user_sessions(&MemoryUserSessions::new(10)).await;
    }

    #[tokio::test]
    async fn a_full_store_makes_room_only_from_ended_sessions() {
        let store = MemoryUserSessions::new(2);
        let session = |until| UserSession {
            username: "u".into(),
            dashboard_token: "t".into(),
            permissions: None,
            until,
        };
        store.open("a", &session(10), 5).await.unwrap();
        store.open("b", &session(20), 5).await.unwrap();
        assert!(matches!(
            store.open("c", &session(20), 5).await,
            Err(StateError::Full(2))
        ));
        store.open("c", &session(20), 11).await.unwrap();
        assert_eq!(store.find("a", 5).await.unwrap(), None);
        assert!(store.find("c", 11).await.unwrap().is_some());
    }
}
