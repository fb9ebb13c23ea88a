//! The stores of one gateway process, in its memory: one file per store, each a bounded
//! map pruned of what has expired (the accounts' uses: a file in the state directory).

mod account_use;
mod api_keys;
mod credential_resets;
mod dashboard_attempts;
mod failed_logins;
mod lockouts;
mod revocations;
mod upstream_tokens;
mod used_tokens;
mod user_sessions;

use dashmap::DashMap;

pub use account_use::LocalAccountUse;
pub use api_keys::MemoryApiKeys;
pub use credential_resets::MemoryCredentialResets;
pub use dashboard_attempts::MemoryDashboardAttempts;
pub use failed_logins::MemoryFailedLogins;
pub use lockouts::MemoryLockouts;
pub use revocations::MemoryRevocations;
pub use upstream_tokens::{MemoryAccountTokens, MemoryUpstreamTokens};
pub use used_tokens::MemoryUsedTokens;
pub use user_sessions::MemoryUserSessions;

use super::StateError;

/// Makes room for `key` in a map holding `max_entries` or more: when `key` is new, the
/// entries `keep` refuses are dropped, and if that frees nothing the map is `Full` (the
/// caller answers 503 rather than forget what it must keep).
fn make_room<V>(
    map: &DashMap<String, V>,
    key: &str,
    max_entries: usize,
    keep: impl FnMut(&String, &mut V) -> bool,
) -> Result<(), StateError> {
    if map.len() < max_entries || map.contains_key(key) {
        return Ok(());
    }
    map.retain(keep);
    if map.len() >= max_entries {
        return Err(StateError::Full(max_entries));
    }
    Ok(())
}
