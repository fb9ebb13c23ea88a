//! The dashboard's own accounts (`auth.source = "dashboard"`): the active dashboard checks
//! the password, and the user's session there (with the permissions its answer granted)
//! is kept for the gateway's token. The gateway keeps the dashboard's own count of
//! consecutive failures per username (it disables the account at its
//! `ACCOUNT_LOCKOUT_ATTEMPTS`) and never sends an attempt that could reach it; every
//! refusal takes the learned floor, so an unknown username answers as slowly as a wrong
//! password.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use super::{CredentialSource, LoggedIn, LoginAttempt};
use crate::auth::dashboard::{self, DashboardAccounts, DashboardError, DashboardLogin};
use crate::auth::policy::LoginPolicy;
use crate::auth::refusal_time::LoginAnswerKind;
use crate::auth::{AuthError, AuthSubject, Authenticated, TokenRejection};
use crate::config::DASHBOARD_LOCKOUT_ATTEMPTS;
use crate::state::{DashboardAttempts, Hold, UnixMillis, UnixTime};
use crate::tokens::Claims;
use crate::users::password::PasswordHash;
use crate::users::{RoleEdition, User};

pub struct DashboardSource {
    accounts: Arc<DashboardAccounts>,
    attempts: Arc<dyn DashboardAttempts>,
}

fn millis(d: std::time::Duration) -> UnixMillis {
    UnixMillis::try_from(d.as_millis()).unwrap_or(UnixMillis::MAX)
}

#[async_trait]
impl CredentialSource for DashboardSource {
    fn method(&self) -> &'static str {
        "dashboard"
    }

    async fn log_in(
        &self,
        attempt: LoginAttempt<'_>,
        subject: &mut AuthSubject,
    ) -> Result<LoggedIn, AuthError> {
        let started = Instant::now();
        let LoginAttempt {
            username,
            password,
            now_ms,
            policy,
        } = attempt;
        // No dashboard to ask: 503, and no failure counted against the username (a user
        // retrying through an outage is not locked out when it ends).
        if !self.accounts.available() {
            return Err(dashboard::unavailable(DashboardError::Unavailable(
                "no active dashboard backend".into(),
            )));
        }
        // The gateway's own account is not for people: refused like a wrong password,
        // never sent, never counted (a guesser could otherwise disable it).
        if self.accounts.is_service_account(username) {
            tracing::info!(username = ?username, "login refused: the gateway's service account");
            return Err(policy.refused(started).await);
        }
        let hold_until = now_ms.saturating_add(millis(self.accounts.attempt_hold()));
        let Some(hold) = self
            .reserve_attempt(username, &password, now_ms, hold_until, policy)
            .await?
        else {
            tracing::info!(username = ?username, locked_out = true, "login refused");
            return Err(policy.refused(started).await);
        };
        let answer = self
            .accounts
            .log_in(username, &password, now_ms / 1000)
            .await;
        let kind = match &answer {
            Ok(_) => Some(LoginAnswerKind::Accepted),
            Err(DashboardError::Refused) => Some(LoginAnswerKind::Refused),
            Err(_) => None,
        };
        if let Some(kind) = kind {
            policy.refusal_floor.observe(started.elapsed(), kind);
        }
        match answer {
            Ok(login) => {
                self.succeeded(username, password, &hold, login, now_ms, policy)
                    .await
            }
            Err(error) => {
                self.failed(username, &hold, error, policy, subject).await?;
                Err(policy.refused(started).await)
            }
        }
    }

    fn issued(&self, claims: &Claims) -> bool {
        claims.idp.is_none()
    }

    /// The user is the one the dashboard's answer described at login, kept with the session.
    async fn authenticate(
        &self,
        claims: &Claims,
        now: UnixTime,
    ) -> Result<Authenticated, TokenRejection> {
        let session = self.accounts.session(&claims.jti, now).await?;
        let user = session.user.clone().ok_or(TokenRejection::NoSession)?;
        Ok(Authenticated {
            user,
            upstream: Some(session.token.clone()),
        })
    }
}

impl DashboardSource {
    pub fn new(
        accounts: Arc<DashboardAccounts>,
        attempts: Arc<dyn DashboardAttempts>,
    ) -> DashboardSource {
        DashboardSource { accounts, attempts }
    }

    /// The dashboard accepted the password: it reset its count, and the password's
    /// verifier lets its owner back in past a guesser's failures.
    async fn succeeded(
        &self,
        username: &str,
        password: String,
        hold: &Hold,
        login: DashboardLogin,
        now_ms: UnixMillis,
        policy: &LoginPolicy,
    ) -> Result<LoggedIn, AuthError> {
        // The dashboard reset its count whether or not a verifier can be made now.
        let verifier = match policy.passwords.hash(password).await {
            Ok(verifier) => Some(verifier),
            Err(e) => {
                tracing::warn!(username = ?username, error = %e, "no password verifier made for this login: the last one stays");
                None
            }
        };
        let verifier = verifier.as_ref().map(PasswordHash::phc);
        self.attempts.succeeded(username, hold, verifier).await?;
        Ok(LoggedIn {
            user: Arc::new(User::from_dashboard(
                username.to_string(),
                login.grants.clone(),
            )),
            // (a dashboard's own permissions grant the same whatever the edition)
            session_permissions: Some(login.grants.json(RoleEdition::Tentacle).to_string()),
            dashboard: Some(login),
            // The dashboard checks its own tokens against its accounts' changes.
            fingerprint: String::new(),
            issued_at: now_ms / 1000,
        })
    }

    /// Refused, or no answer: the dashboard may have counted it, so the gateway does.
    /// `Ok`: refused (the caller waits out the floor); `Err`: the login's error.
    async fn failed(
        &self,
        username: &str,
        hold: &Hold,
        error: DashboardError,
        policy: &LoginPolicy,
        subject: &mut AuthSubject,
    ) -> Result<(), AuthError> {
        let failures = self.attempts.failed(username, hold).await?;
        let DashboardError::Refused = error else {
            return Err(dashboard::unavailable(error));
        };
        let locked = policy.lockout.is_some_and(|p| failures == p.attempts);
        tracing::info!(username = ?username, locked_out = false, "login refused");
        if locked {
            subject.locked = true;
            policy.locked_out(username);
        }
        Ok(())
    }

    /// Holds one attempt at `username`'s dashboard account, or `None`: below
    /// `auth.lockout_attempts` consecutive failures any password; above, up to one
    /// failure short of the dashboard's limit, only the password that last succeeded
    /// through a gateway (its argon2id verifier matches), so its owner gets back in
    /// however many failures a guesser caused, and nothing reaches the limit.
    async fn reserve_attempt(
        &self,
        username: &str,
        password: &str,
        now_ms: UnixMillis,
        hold_until: UnixMillis,
        policy: &LoginPolicy,
    ) -> Result<Option<Hold>, AuthError> {
        let short_of_the_limit = DASHBOARD_LOCKOUT_ATTEMPTS - 1;
        let any_password = policy
            .lockout
            .map_or(short_of_the_limit, |p| p.attempts.min(short_of_the_limit));
        if let Some(hold) = self
            .attempts
            .reserve(username, any_password, now_ms, hold_until)
            .await?
        {
            return Ok(Some(hold));
        }
        let Some(verifier) = self.attempts.verifier(username).await? else {
            return Ok(None);
        };
        let Ok(verifier) = PasswordHash::parse(&verifier) else {
            tracing::warn!(username = ?username, "unreadable password verifier in the state store: ignored");
            return Ok(None);
        };
        policy.metrics.auth.password_verified();
        let verified = policy
            .passwords
            .check(Arc::new(verifier), password.to_string())
            .await?;
        if !verified {
            return Ok(None);
        }
        Ok(self
            .attempts
            .reserve(username, short_of_the_limit, now_ms, hold_until)
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use crate::auth::testing::{
        auth_without_an_active_dashboard, credentials, post, request, NOW_MS,
    };
    use crate::auth::{AuthError, AuthSubject};

    #[tokio::test]
    async fn without_an_active_dashboard_logins_are_503_and_lock_nobody_out() {
        let auth = auth_without_an_active_dashboard();
        let headers = post("application/vnd.ceph.api.v1.0+json");
        // More attempts than the lockout allows (3): none counts against the username.
        for _ in 0..5 {
            let req = request(&headers, credentials("admin", "pw"));
            let refused = auth.login(&req, NOW_MS, &mut AuthSubject::default()).await;
            assert!(matches!(refused, Err(AuthError::Unavailable(_))));
        }
        // Nothing was counted: the username's first attempt may still be held at a ceiling of 1.
        let attempts = &auth.stores.dashboard_attempts;
        let held = attempts.reserve("admin", 1, NOW_MS, NOW_MS + 1000).await;
        assert!(held.unwrap().is_some());
    }
}
