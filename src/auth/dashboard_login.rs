//! The dashboard's part in `POST /api/auth`: it checks the password
//! (`auth.source = "dashboard"`) or opens a local user's own session there
//! (`upstream.identity = "user"`), and the session is kept for the gateway's token.

use std::sync::Arc;
use std::time::Instant;

use super::dashboard::{DashboardError, DashboardLogin};
use super::login::LoggedIn;
use super::refusal_time::LoginAnswerKind;
use super::AuthError;
use super::{Auth, AuthSubject};
use crate::config::{AuthSource, DASHBOARD_LOCKOUT_ATTEMPTS};
use crate::state::{Hold, UnixMillis, UnixTime, UserSession};
use crate::tokens::Claims;
use crate::users::password::PasswordHash;
use crate::users::{RoleEdition, User};

fn millis(d: std::time::Duration) -> UnixMillis {
    UnixMillis::try_from(d.as_millis()).unwrap_or(UnixMillis::MAX)
}

impl Auth {
    /// The dashboard checks the password. The gateway keeps the dashboard's own count of
    /// consecutive failures per username (it disables the account at its
    /// `ACCOUNT_LOCKOUT_ATTEMPTS`) and never sends an attempt that could reach it; every
    /// refusal takes the learned floor, so an unknown username answers as slowly as a
    /// wrong password.
    pub(super) async fn check_with_dashboard(
        &self,
        username: &str,
        password: &str,
        now_ms: UnixMillis,
        subject: &mut AuthSubject,
    ) -> Result<LoggedIn, AuthError> {
        let started = Instant::now();
        // No dashboard to ask: 503, and no failure counted against the username (a user
        // retrying through an outage is not locked out when it ends).
        let Some(dashboard) = self.dashboard.as_ref().filter(|d| d.available()) else {
            return Err(unavailable(DashboardError::Unavailable(
                "no active dashboard backend".into(),
            )));
        };
        // The gateway's own account is not for people: refused like a wrong password,
        // never sent, never counted (a guesser could otherwise disable it).
        if dashboard.is_service_account(username) {
            tracing::info!(username = ?username, "login refused: the gateway's service account");
            return Err(self.refused(started).await);
        }
        let hold_until = now_ms.saturating_add(millis(dashboard.attempt_hold()));
        let Some(hold) = self
            .reserve_attempt(username, password, now_ms, hold_until)
            .await?
        else {
            tracing::info!(username = ?username, locked_out = true, "login refused");
            return Err(self.refused(started).await);
        };
        let answer = self
            .dashboard_log_in(username, password, now_ms / 1000)
            .await;
        let kind = match &answer {
            Ok(_) => Some(LoginAnswerKind::Accepted),
            Err(DashboardError::Refused) => Some(LoginAnswerKind::Refused),
            Err(_) => None,
        };
        if let Some(kind) = kind {
            self.refusal_floor.observe(started.elapsed(), kind);
        }
        let attempts = &self.stores.dashboard_attempts;
        let error = match answer {
            Ok(login) => {
                // The dashboard reset its count whether or not a verifier can be made now.
                let verifier = match self.passwords.hash(password.to_string()).await {
                    Ok(verifier) => Some(verifier),
                    Err(e) => {
                        tracing::warn!(username = ?username, error = %e, "no password verifier made for this login: the last one stays");
                        None
                    }
                };
                let verifier = verifier.as_ref().map(PasswordHash::phc);
                attempts.succeeded(username, &hold, verifier).await?;
                return Ok(LoggedIn {
                    user: Arc::new(User::from_dashboard(
                        username.to_string(),
                        login.grants.clone(),
                    )),
                    dashboard: Some(login),
                    // The dashboard checks its own tokens against its accounts' changes.
                    credential: None,
                });
            }
            Err(error) => error,
        };
        // Refused, or no answer: the dashboard may have counted it, so the gateway does.
        let failures = attempts.failed(username, &hold).await?;
        let DashboardError::Refused = error else {
            return Err(unavailable(error));
        };
        let locked = self.lockout.is_some_and(|p| failures == p.attempts);
        tracing::info!(username = ?username, locked_out = false, "login refused");
        if locked {
            subject.locked = true;
            self.locked_out(username);
        }
        Err(self.refused(started).await)
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
    ) -> Result<Option<Hold>, AuthError> {
        let attempts = &self.stores.dashboard_attempts;
        let short_of_the_limit = DASHBOARD_LOCKOUT_ATTEMPTS - 1;
        let any_password = self
            .lockout
            .map_or(short_of_the_limit, |p| p.attempts.min(short_of_the_limit));
        if let Some(hold) = attempts
            .reserve(username, any_password, now_ms, hold_until)
            .await?
        {
            return Ok(Some(hold));
        }
        let Some(verifier) = attempts.verifier(username).await? else {
            return Ok(None);
        };
        let Ok(verifier) = PasswordHash::parse(&verifier) else {
            tracing::warn!(username = ?username, "unreadable password verifier in the state store: ignored");
            return Ok(None);
        };
        self.metrics.auth.password_verified();
        let verified = self
            .passwords
            .check(Arc::new(verifier), password.to_string())
            .await?;
        if !verified {
            return Ok(None);
        }
        Ok(attempts
            .reserve(username, short_of_the_limit, now_ms, hold_until)
            .await?)
    }

    /// The refusal of a login begun at `started`, once the learned floor has passed.
    async fn refused(&self, started: Instant) -> AuthError {
        tokio::time::sleep(self.refusal_floor.remaining(started.elapsed())).await;
        AuthError::InvalidCredentials
    }

    /// A local user's own dashboard account, logged in with the password the users file
    /// just accepted (`upstream.identity = "user"`).
    pub(super) async fn own_dashboard_login(
        &self,
        username: &str,
        password: &str,
        now: UnixTime,
    ) -> Result<DashboardLogin, AuthError> {
        match self.dashboard_log_in(username, password, now).await {
            Ok(login) => Ok(login),
            Err(DashboardError::Refused) => {
                tracing::warn!(username = ?username, "the dashboard has no account with this user's name and password: upstream.identity = \"user\" refuses the login");
                Err(AuthError::NoDashboardAccount)
            }
            Err(other) => Err(unavailable(other)),
        }
    }

    /// Keeps the user's dashboard session for the token just issued (`claims`).
    pub(super) async fn open_session(
        &self,
        claims: &Claims,
        user: &User,
        login: DashboardLogin,
        now: UnixTime,
    ) -> Result<(), AuthError> {
        let Some(dashboard) = &self.dashboard else {
            return Ok(());
        };
        let session = UserSession {
            username: user.username.clone(),
            dashboard_token: login.token,
            // A local user's grants come from the users file, read on every request.
            permissions: (self.source == AuthSource::Dashboard)
                // (a dashboard's own permissions grant the same whatever the edition)
                .then(|| login.grants.json(RoleEdition::Tentacle).to_string()),
            until: claims.exp,
        };
        dashboard.open(&claims.jti, &session, now).await?;
        Ok(())
    }

    async fn dashboard_log_in(
        &self,
        username: &str,
        password: &str,
        now: UnixTime,
    ) -> Result<DashboardLogin, DashboardError> {
        match &self.dashboard {
            Some(dashboard) => dashboard.log_in(username, password, now).await,
            None => Err(DashboardError::Unavailable(
                "no dashboard is configured".into(),
            )),
        }
    }
}

/// A dashboard that could not answer: 503 (the client tries again), never a 500.
fn unavailable(e: DashboardError) -> AuthError {
    match e {
        DashboardError::Store(e) => AuthError::State(e),
        other => {
            tracing::warn!(error = %other, "the dashboard could not answer a login");
            AuthError::Unavailable("the dashboard cannot check the login now; try again".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{
        auth_without_an_active_dashboard, credentials, post, request, NOW_MS,
    };
    use super::*;

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
