//! Whether the state stores answer: what `/readyz`, the token check and the metrics say
//! about them. Updated by the stores as they work, read without a round trip.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub struct StoreHealth {
    /// The last command succeeded.
    commands: AtomicBool,
    /// The local copy of the revocations follows the shared store.
    in_sync: AtomicBool,
    errors: AtomicU64,
    /// Revocation messages or keys not signed with the deployment's key, dropped.
    revocations_refused: AtomicU64,
}

impl StoreHealth {
    /// A store that cannot fail (memory).
    pub fn always_up() -> StoreHealth {
        StoreHealth {
            commands: AtomicBool::new(true),
            in_sync: AtomicBool::new(true),
            errors: AtomicU64::new(0),
            revocations_refused: AtomicU64::new(0),
        }
    }

    /// A shared store, down until it has answered and synced.
    pub fn starting() -> StoreHealth {
        StoreHealth {
            commands: AtomicBool::new(false),
            in_sync: AtomicBool::new(false),
            errors: AtomicU64::new(0),
            revocations_refused: AtomicU64::new(0),
        }
    }

    pub fn up(&self) -> bool {
        self.commands.load(Ordering::Acquire) && self.in_sync.load(Ordering::Acquire)
    }

    pub fn in_sync(&self) -> bool {
        self.in_sync.load(Ordering::Acquire)
    }

    /// Errors since start.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// Revocations dropped since start: not signed with the deployment's key.
    pub fn revocations_refused(&self) -> u64 {
        self.revocations_refused.load(Ordering::Relaxed)
    }

    /// Counts one more dropped revocation; the count with it.
    pub(super) fn revocation_refused(&self) -> u64 {
        self.revocations_refused.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(super) fn command_succeeded(&self) {
        self.commands.store(true, Ordering::Release);
    }

    pub(super) fn command_failed(&self) {
        self.commands.store(false, Ordering::Release);
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn set_in_sync(&self, in_sync: bool) {
        self.in_sync.store(in_sync, Ordering::Release);
    }
}
