//! The dashboard's part in `POST /api/auth`: it checks the password
//! (`auth.source = "dashboard"`) or opens a local user's own session there
//! (`upstream.identity = "user"`), and the session is kept for the gateway's token.

use std::sync::Arc;
use std::time::Instant;

use super::dashboard::{DashboardError, DashboardLogin};
use super::login::{Attempt, LoggedIn};
use super::refusal_time::LoginAnswerKind;
use super::{Auth, AuthSubject};
use crate::config::AuthSource;
use crate::errors::GatewayError;
use crate::state::{UnixTime, UserSession};
use crate::tokens::Claims;
use crate::users::User;

impl Auth {
    /// The dashboard checks the password, behind the gateway's lockout: a locked username
    /// is refused without asking it, so that a guesser never reaches the dashboard's own
    /// limit (it would disable the account). Every refusal takes the learned floor, so
    /// an unknown username answers as slowly as a wrong password.
    pub(super) async fn check_with_dashboard(
        &self,
        username: &str,
        password: &str,
        now: UnixTime,
        subject: &mut AuthSubject,
    ) -> Result<LoggedIn, GatewayError> {
        let started = Instant::now();
        // No dashboard to ask: 503, and no failure counted against the username (a user
        // retrying through an outage is not locked out when it ends).
        if !self.dashboard.as_ref().is_some_and(|d| d.available()) {
            return Err(unavailable(DashboardError::Unavailable(
                "no active dashboard backend".into(),
            )));
        }
        // The gateway cannot know whether the account exists: every username is counted.
        let attempt = match self.lockout {
            Some(policy) => self.admit(username, policy, now).await?,
            None => Attempt::Allowed,
        };
        let answer = match attempt {
            Attempt::Locked => Err(DashboardError::Refused),
            _ => {
                let answer = self.dashboard_log_in(username, password, now).await;
                let kind = match &answer {
                    Ok(_) => Some(LoginAnswerKind::Accepted),
                    Err(DashboardError::Refused) => Some(LoginAnswerKind::Refused),
                    Err(_) => None,
                };
                if let Some(kind) = kind {
                    self.refusal_floor.observe(started.elapsed(), kind);
                }
                answer
            }
        };
        match answer {
            Ok(login) => Ok(LoggedIn {
                user: Arc::new(User::from_dashboard(
                    username.to_string(),
                    login.grants.clone(),
                )),
                dashboard: Some(login),
                // The dashboard checks its own tokens against its accounts' changes.
                credential: None,
            }),
            Err(DashboardError::Refused) => {
                tracing::info!(username = ?username, locked_out = attempt == Attempt::Locked, "login refused");
                if attempt == Attempt::Last {
                    subject.locked = true;
                    self.locked_out(username);
                }
                tokio::time::sleep(self.refusal_floor.remaining(started.elapsed())).await;
                Err(GatewayError::InvalidCredentials)
            }
            Err(other) => Err(unavailable(other)),
        }
    }

    /// A local user's own dashboard account, logged in with the password the users file
    /// just accepted (`upstream.identity = "user"`).
    pub(super) async fn own_dashboard_login(
        &self,
        username: &str,
        password: &str,
        now: UnixTime,
    ) -> Result<DashboardLogin, GatewayError> {
        match self.dashboard_log_in(username, password, now).await {
            Ok(login) => Ok(login),
            Err(DashboardError::Refused) => {
                tracing::warn!(username = ?username, "the dashboard has no account with this user's name and password: upstream.identity = \"user\" refuses the login");
                Err(GatewayError::NoDashboardAccount)
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
    ) -> Result<(), GatewayError> {
        let Some(dashboard) = &self.dashboard else {
            return Ok(());
        };
        let session = UserSession {
            username: user.username.clone(),
            dashboard_token: login.token,
            // A local user's grants come from the users file, read on every request.
            permissions: (self.source == AuthSource::Dashboard)
                .then(|| login.grants.json().to_string()),
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
fn unavailable(e: DashboardError) -> GatewayError {
    match e {
        DashboardError::Store(e) => e.into(),
        other => {
            tracing::warn!(error = %other, "the dashboard could not answer a login");
            GatewayError::Unavailable {
                detail: "the dashboard cannot check the login now; try again".into(),
            }
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
            assert_eq!(refused.unwrap_err().status(), 503);
        }
        let lockouts = &auth.stores.lockouts;
        assert_eq!(
            lockouts.locked_until("admin", NOW_MS / 1000).await.unwrap(),
            None
        );
        assert_eq!(
            lockouts
                .record_failure("admin", NOW_MS / 1000)
                .await
                .unwrap(),
            1
        );
    }
}
