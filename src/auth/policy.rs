//! What every credential source's password login shares, whoever checks the password: the
//! per-username lockout's settings, the bounded password hashing, the learned floor on a
//! refusal's time, and the metrics that count them. `Auth` owns it and lends it to the
//! source at each login.

use std::sync::Arc;
use std::time::Instant;

use super::{AuthError, RefusalFloor};
use crate::config::LockoutPolicy;
use crate::observe::metrics::Metrics;
use crate::users::PasswordChecker;

pub struct LoginPolicy {
    /// `auth.lockout_*`; `None`: no lockout per username.
    pub lockout: Option<LockoutPolicy>,
    pub passwords: PasswordChecker,
    /// How long a login a remote source refused takes at least.
    pub refusal_floor: RefusalFloor,
    pub metrics: Arc<Metrics>,
}

impl LoginPolicy {
    /// The last attempt allowed failed: the username's lock holds (counted once per lock).
    pub fn locked_out(&self, username: &str) {
        self.metrics.auth.lockout();
        if let Some(policy) = self.lockout {
            tracing::warn!(username = ?username, attempts = policy.attempts, lock_seconds = policy.duration.as_secs(), "user locked out after consecutive failed logins");
        }
    }

    /// The refusal of a login begun at `started`, once the learned floor has passed.
    pub async fn refused(&self, started: Instant) -> AuthError {
        tokio::time::sleep(self.refusal_floor.remaining(started.elapsed())).await;
        AuthError::InvalidCredentials
    }
}
