//! Logins and token checks (`auth`): their results, the logins refused for their client's
//! failures, the password hashes computed and the usernames locked out.

use prometheus::{IntCounter, IntCounterVec, Opts, Registry};

use super::labels::{LoginResult, TokenCheckResult};
use super::registered;

pub struct AuthMetrics {
    logins: IntCounterVec,
    login_rate_limited: IntCounterVec,
    token_checks: IntCounterVec,
    password_verifications: IntCounter,
    lockouts: IntCounter,
}

impl AuthMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let logins = IntCounterVec::new(
            Opts::new("clustergate_logins_total", "Login attempts, by result"),
            &["result"],
        )?;
        let login_rate_limited = IntCounterVec::new(
            Opts::new(
                "clustergate_login_rate_limited_total",
                "Logins refused with 429 because the client address failed too often, by address family",
            ),
            &["family"],
        )?;
        let token_checks = IntCounterVec::new(
            Opts::new(
                "clustergate_token_checks_total",
                "Token verifications, by result",
            ),
            &["result"],
        )?;
        let password_verifications = IntCounter::new(
            "clustergate_password_verifications_total",
            "Password hashes computed for logins (one per attempt, known user or not)",
        )?;
        let lockouts = IntCounter::new(
            "clustergate_lockouts_total",
            "Usernames locked out after consecutive failed logins",
        )?;
        // Every result exported from the start (at 0), so that `increase()` and the alert
        // rules see the first event of each kind.
        for result in LoginResult::ALL {
            logins.with_label_values(&[result.label()]);
        }
        for result in TokenCheckResult::ALL {
            token_checks.with_label_values(&[result.label()]);
        }
        Ok(AuthMetrics {
            logins: registered(registry, logins)?,
            login_rate_limited: registered(registry, login_rate_limited)?,
            token_checks: registered(registry, token_checks)?,
            password_verifications: registered(registry, password_verifications)?,
            lockouts: registered(registry, lockouts)?,
        })
    }

    pub fn login(&self, result: LoginResult) {
        self.logins.with_label_values(&[result.label()]).inc();
    }

    /// A login refused for its client's failed logins; the label is `ipv4` or `ipv6`.
    pub fn login_rate_limited(&self, ipv6: bool) {
        let family = if ipv6 { "ipv6" } else { "ipv4" };
        self.login_rate_limited.with_label_values(&[family]).inc();
    }

    pub fn token_check(&self, result: TokenCheckResult) {
        self.token_checks.with_label_values(&[result.label()]).inc();
    }

    pub fn password_verified(&self) {
        self.password_verifications.inc();
    }

    /// A username was locked out (once per lock, not per refused attempt).
    pub fn lockout(&self) {
        self.lockouts.inc();
    }
}
