//! When each managed dashboard account was last used, for one gateway (the memory
//! backend): a file in the state directory, `<account> <unix time>` per line, so that the
//! `accounts` command, another process, reads what the running gateway recorded. The
//! gateway records an account at most every few minutes, so the file is small and seldom
//! written; each write replaces it whole (a new file renamed over the old one), so a
//! reader never sees half of one.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;

use crate::state::{AccountUse, StateError, UnixTime, MAX_RECORDED_ACCOUNTS};

/// A line is an account name (`cg-` and 16 hex digits) and a number: the file stays far
/// below this; a larger one is not ours.
const MAX_FILE: u64 = 1024 * 1024;

pub struct LocalAccountUse {
    path: PathBuf,
    records: Mutex<BTreeMap<String, UnixTime>>,
    /// One write at a time, so that an older copy never replaces a newer one.
    writing: tokio::sync::Mutex<()>,
}

impl LocalAccountUse {
    /// The records in `path`, none if it does not exist yet.
    pub fn open(path: PathBuf) -> Result<LocalAccountUse, StateError> {
        let records = read(&path)?;
        Ok(LocalAccountUse {
            path,
            records: Mutex::new(records),
            writing: tokio::sync::Mutex::new(()),
        })
    }

    fn records(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, UnixTime>> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes the records as they are now.
    async fn save(&self) -> Result<(), StateError> {
        let _one_at_a_time = self.writing.lock().await;
        let text: String = self
            .records()
            .iter()
            .map(|(account, at)| format!("{account} {at}\n"))
            .collect();
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || replace(&path, text.as_bytes()))
            .await
            .map_err(|e| unavailable(&self.path, e))?
    }
}

#[async_trait]
impl AccountUse for LocalAccountUse {
    async fn record(&self, account: &str, at: UnixTime) -> Result<(), StateError> {
        {
            let mut records = self.records();
            if !records.contains_key(account) && records.len() >= MAX_RECORDED_ACCOUNTS {
                return Err(StateError::Full(MAX_RECORDED_ACCOUNTS));
            }
            let last = records.entry(account.to_string()).or_insert(at);
            if *last > at {
                return Ok(());
            }
            *last = at;
        }
        self.save().await
    }

    async fn last_uses(&self) -> Result<BTreeMap<String, UnixTime>, StateError> {
        Ok(self.records().clone())
    }

    async fn forget(&self, accounts: &[String]) -> Result<(), StateError> {
        self.records()
            .retain(|account, _| !accounts.contains(account));
        self.save().await
    }
}

fn read(path: &Path) -> Result<BTreeMap<String, UnixTime>, StateError> {
    let text = match std::fs::metadata(path) {
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(unavailable(path, e)),
        Ok(meta) if meta.len() > MAX_FILE => {
            let detail = format!("larger than {MAX_FILE} bytes: not the gateway's; remove it");
            return Err(unavailable(path, detail));
        }
        Ok(_) => std::fs::read_to_string(path).map_err(|e| unavailable(path, e))?,
    };
    let bad = |line: &str| {
        unavailable(path, format!("line {line:?} is not `<account> <unix time>`: remove the file (the gateway writes it again)"))
    };
    text.lines()
        .filter(|line| !line.is_empty())
        .take(MAX_RECORDED_ACCOUNTS)
        .map(|line| {
            let (account, at) = line.split_once(' ').ok_or_else(|| bad(line))?;
            let at = at.parse().map_err(|_| bad(line))?;
            Ok((account.to_string(), at))
        })
        .collect()
}

/// Writes `bytes` to a new file beside `path` and renames it over `path`.
fn replace(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    let fresh = path.with_extension("new");
    std::fs::write(&fresh, bytes)
        .and_then(|()| std::fs::rename(&fresh, path))
        .map_err(|e| unavailable(path, e))
}

fn unavailable(path: &Path, e: impl std::fmt::Display) -> StateError {
    StateError::Unavailable(format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::contract;

    #[tokio::test]
    async fn local_account_use_passes_the_contract() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalAccountUse::open(dir.path().join("use")).unwrap();
        contract::account_use(&store).await;
    }

    #[tokio::test]
    async fn another_process_reads_what_the_gateway_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("use");
        let gateway = LocalAccountUse::open(path.clone()).unwrap();
        gateway
            .record("cg-0123456789abcdef", 1_800_000_000)
            .await
            .unwrap();
        let command = LocalAccountUse::open(path).unwrap();
        let uses = command.last_uses().await.unwrap();
        assert_eq!(uses["cg-0123456789abcdef"], 1_800_000_000);
    }

    #[test]
    fn a_file_that_is_not_the_gateways_is_refused_saying_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("use");
        std::fs::write(&path, "cg-a 12\nnonsense\n").unwrap();
        let Err(StateError::Unavailable(detail)) = LocalAccountUse::open(path) else {
            panic!("opened");
        };
        assert!(detail.contains("remove the file"), "{detail}");
    }
}
