//! The dashboard's count of failed logins per username, kept by the gateway (the memory
//! store here; the Redis one in `redis/dashboard_attempts.rs` does the same in Lua).
//!
//! A record holds the consecutive failures since the last success, the holds of attempts
//! in flight (each with the time it counts as a failure if nobody settles it) and the
//! verifier of the last password that succeeded. A record with failures or holds is never
//! dropped: forgetting it would let the dashboard's count pass the gateway's. Only records
//! holding a verifier alone make room; when none is left, a new username is refused
//! (`Full`), so the table stays bounded and fails closed.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;

use crate::state::{DashboardAttempts, Hold, StateError, UnixMillis};

#[derive(Debug, Default)]
struct Record {
    failures: u32,
    /// Attempts in flight, by the time each counts as a failure.
    holds: HashMap<String, UnixMillis>,
    verifier: Option<String>,
}

impl Record {
    /// Counts the holds nobody settled in time as failures.
    fn expire_holds(&mut self, now: UnixMillis) {
        let before = self.holds.len();
        self.holds.retain(|_, until| *until > now);
        let expired = u32::try_from(before - self.holds.len()).unwrap_or(u32::MAX);
        self.failures = self.failures.saturating_add(expired);
    }

    /// Whether forgetting it loses nothing but a verifier.
    fn disposable(&self) -> bool {
        self.failures == 0 && self.holds.is_empty()
    }
}

pub struct MemoryDashboardAttempts {
    records: Mutex<HashMap<String, Record>>,
    max_entries: usize,
}

impl MemoryDashboardAttempts {
    pub fn new(max_entries: usize) -> Self {
        Self {
            records: Mutex::new(HashMap::new()),
            max_entries,
        }
    }

    fn records(&self) -> Result<MutexGuard<'_, HashMap<String, Record>>, StateError> {
        self.records
            .lock()
            .map_err(|_| StateError::Unavailable("dashboard attempts lock poisoned".into()))
    }
}

#[async_trait]
impl DashboardAttempts for MemoryDashboardAttempts {
    async fn reserve(
        &self,
        username: &str,
        ceiling: u32,
        now: UnixMillis,
        hold_until: UnixMillis,
    ) -> Result<Option<Hold>, StateError> {
        let mut records = self.records()?;
        if !records.contains_key(username) && records.len() >= self.max_entries {
            records.retain(|_, r| !r.disposable());
            if records.len() >= self.max_entries {
                return Err(StateError::Full(self.max_entries));
            }
        }
        let record = records.entry(username.to_string()).or_default();
        record.expire_holds(now);
        let in_flight = u32::try_from(record.holds.len()).unwrap_or(u32::MAX);
        if record.failures.saturating_add(in_flight) >= ceiling {
            return Ok(None);
        }
        let hold = Hold::new();
        record.holds.insert(hold.0.clone(), hold_until);
        Ok(Some(hold))
    }

    async fn failed(&self, username: &str, hold: &Hold) -> Result<u32, StateError> {
        let mut records = self.records()?;
        let record = records.entry(username.to_string()).or_default();
        if record.holds.remove(&hold.0).is_some() {
            record.failures = record.failures.saturating_add(1);
        }
        Ok(record.failures)
    }

    async fn cancel(&self, username: &str, hold: &Hold) -> Result<(), StateError> {
        if let Some(record) = self.records()?.get_mut(username) {
            record.holds.remove(&hold.0);
        }
        Ok(())
    }

    async fn succeeded(
        &self,
        username: &str,
        hold: &Hold,
        verifier: Option<&str>,
    ) -> Result<(), StateError> {
        let mut records = self.records()?;
        let record = records.entry(username.to_string()).or_default();
        record.holds.remove(&hold.0);
        record.failures = 0;
        if let Some(verifier) = verifier {
            record.verifier = Some(verifier.to_string());
        }
        Ok(())
    }

    async fn verifier(&self, username: &str) -> Result<Option<String>, StateError> {
        Ok(self
            .records()?
            .get(username)
            .and_then(|r| r.verifier.clone()))
    }

    async fn forget(&self, username: &str) -> Result<(), StateError> {
        self.records()?.remove(username);
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
    async fn memory_dashboard_attempts_pass_the_contract() {
        contract::dashboard_attempts(&MemoryDashboardAttempts::new(10)).await;
    }

    #[tokio::test]
    async fn a_full_table_drops_only_verifiers_and_then_refuses_new_usernames() {
        let store = MemoryDashboardAttempts::new(2);
        let hold = store.reserve("kept", 5, 0, 100).await.unwrap().unwrap();
        store.succeeded("kept", &hold, Some("v")).await.unwrap();
        let hold = store.reserve("counted", 5, 0, 100).await.unwrap().unwrap();
        store.failed("counted", &hold).await.unwrap();
        // "kept" holds only a verifier: it makes room.
        let hold = store.reserve("third", 5, 0, 100).await.unwrap().unwrap();
        store.failed("third", &hold).await.unwrap();
        assert_eq!(store.verifier("kept").await.unwrap(), None);
        // Both left hold failures: a new username is refused, the known ones go on.
        assert!(matches!(
            store.reserve("fourth", 5, 0, 100).await,
            Err(StateError::Full(2))
        ));
        assert!(store.reserve("counted", 5, 0, 100).await.unwrap().is_some());
    }
}
