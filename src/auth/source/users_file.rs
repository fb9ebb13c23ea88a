//! The users file (`auth.source = "local"`): it checks the password against the user's
//! argon2id hash, with the per-username lockout; its tokens carry the credential's
//! fingerprint, and are refused once the user's password or roles change or the user is
//! reset. With `upstream.identity = "user"` the user's own dashboard account is logged in
//! as well, and every token needs its dashboard session.

use std::sync::Arc;

use arc_swap::ArcSwap;
use async_trait::async_trait;

use super::{CredentialSource, LoggedIn, LoginAttempt};
use crate::auth::dashboard::{self, DashboardAccounts, DashboardError, DashboardLogin};
use crate::auth::policy::LoginPolicy;
use crate::auth::{AuthError, AuthSubject, Authenticated, TokenRejection};
use crate::config::LockoutPolicy;
use crate::state::{CredentialResets, Lockouts, StateError, Stores, UnixTime};
use crate::tokens::Claims;
use crate::users::{Credential, User, UserDb};

pub struct UsersFile {
    users: Arc<ArcSwap<UserDb>>,
    lockouts: Arc<dyn Lockouts>,
    resets: Arc<dyn CredentialResets>,
    /// With `upstream.identity = "user"`: the users' own dashboard accounts.
    own_accounts: Option<Arc<DashboardAccounts>>,
}

/// Where a login attempt stands with the username's lockout, decided before its password
/// is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    Allowed,
    /// The last one allowed: the username is locked unless it succeeds.
    Last,
    /// Locked: refused without checking the password.
    Locked,
}

#[async_trait]
impl CredentialSource for UsersFile {
    fn method(&self) -> &'static str {
        "local"
    }

    /// With `upstream.identity = "user"` the user's own dashboard account is logged in too.
    async fn log_in(
        &self,
        attempt: LoginAttempt<'_>,
        subject: &mut AuthSubject,
    ) -> Result<LoggedIn, AuthError> {
        let LoginAttempt {
            username,
            password,
            now_ms,
            policy,
        } = attempt;
        let now = now_ms / 1000;
        // Kept only when the dashboard is asked too (the hash check consumes it).
        let own_password = self.own_accounts.is_some().then(|| password.clone());
        let (user, credential) = self
            .check_password(username, password, now, policy, subject)
            .await?;
        let dashboard = match (&self.own_accounts, own_password) {
            (Some(accounts), Some(password)) => {
                Some(own_dashboard_login(accounts, username, &password, now).await?)
            }
            _ => None,
        };
        if policy.lockout.is_some() {
            self.lockouts.clear(username).await?;
        }
        // Never issued before the user's last reset, which may be the next second when
        // the user was removed and is back within the same second.
        let reset = self.last_reset(&user.username, &credential, now).await?;
        Ok(LoggedIn {
            user,
            dashboard,
            fingerprint: credential.fingerprint.clone(),
            issued_at: reset.map_or(now, |at| at.max(now)),
            session_permissions: None,
        })
    }

    fn issued(&self, claims: &Claims) -> bool {
        claims.idp.is_none()
    }

    async fn authenticate(
        &self,
        claims: &Claims,
        now: UnixTime,
    ) -> Result<Authenticated, TokenRejection> {
        let session = match &self.own_accounts {
            Some(accounts) => Some(accounts.session(&claims.jti, now).await?),
            None => None,
        };
        Ok(Authenticated {
            user: self.user_of(claims, now).await?,
            upstream: session.map(|s| s.token.clone()),
        })
    }
}

impl UsersFile {
    pub fn new(
        users: Arc<ArcSwap<UserDb>>,
        stores: &Stores,
        own_accounts: Option<Arc<DashboardAccounts>>,
    ) -> UsersFile {
        UsersFile {
            users,
            lockouts: stores.lockouts.clone(),
            resets: stores.credential_resets.clone(),
            own_accounts,
        }
    }

    /// The user and the credential checked, if `password` is theirs and
    /// their username is not locked out; every refusal is `InvalidCredentials`. `subject`
    /// learns whether this failure locked the username.
    async fn check_password(
        &self,
        username: &str,
        password: String,
        now: UnixTime,
        policy: &LoginPolicy,
        subject: &mut AuthSubject,
    ) -> Result<(Arc<User>, Arc<Credential>), AuthError> {
        let (user, stand_in) = {
            let users = self.users.load();
            let user = users
                .active_with_credential(username)
                .map(|(user, credential)| (user.clone(), credential.clone()));
            (user, users.stand_in.clone())
        };
        let attempt = match (&user, policy.lockout) {
            (Some(_), Some(lockout)) => self.admit(username, lockout, now).await?,
            _ => Attempt::Allowed,
        };
        // A refused or unknown user is checked against the stand-in: same cost, never a match.
        let hash = user
            .as_ref()
            .filter(|_| attempt != Attempt::Locked)
            .and_then(|(u, _)| u.password_hash.clone());
        policy.metrics.auth.password_verified();
        let verified = policy.passwords.verify(hash, &stand_in, password).await?;

        // `?username`: the name is the client's text, escaped so it cannot forge log lines.
        let Some(user) = user.filter(|_| verified) else {
            let locked_out = attempt == Attempt::Locked;
            tracing::info!(username = ?username, locked_out, "login refused");
            if attempt == Attempt::Last {
                subject.locked = true;
                policy.locked_out(username);
            }
            return Err(AuthError::InvalidCredentials);
        };
        Ok(user)
    }

    /// Counts this attempt before the slow hash, so that concurrent attempts cannot all
    /// slip past the limit (a success clears the count). Once the count passes the
    /// policy's attempts, the username is locked and refused without checking its password.
    async fn admit(
        &self,
        username: &str,
        lockout: LockoutPolicy,
        now: UnixTime,
    ) -> Result<Attempt, AuthError> {
        if self.lockouts.locked_until(username, now).await?.is_some() {
            return Ok(Attempt::Locked);
        }
        let attempts = self.lockouts.record_failure(username, now).await?;
        if attempts < lockout.attempts {
            return Ok(Attempt::Allowed);
        }
        // The last attempt allowed may still succeed; the lock holds if it does not.
        let until = now.saturating_add(lockout.duration.as_secs());
        self.lockouts.lock(username, until).await?;
        Ok(match attempts == lockout.attempts {
            true => Attempt::Last,
            false => Attempt::Locked,
        })
    }

    /// The users file's user a token names, if the token was issued for the credential
    /// the user has now (the same password hash and roles) and after the user's last reset
    /// (removed, disabled or changed by a reload, on any gateway). The reset is read from the
    /// store once per user and load of the users, then kept.
    async fn user_of(&self, claims: &Claims, now: UnixTime) -> Result<Arc<User>, TokenRejection> {
        let (user, credential) = {
            let users = self.users.load();
            let (user, credential) = users
                .active_with_credential(&claims.username)
                .ok_or(TokenRejection::UnknownUser)?;
            (user.clone(), credential.clone())
        };
        if claims.cred != credential.fingerprint {
            return Err(TokenRejection::CredentialReset);
        }
        if self
            .last_reset(&claims.username, &credential, now)
            .await?
            .is_some_and(|at| claims.iat < at)
        {
            return Err(TokenRejection::CredentialReset);
        }
        Ok(user)
    }

    /// The user's last reset, read from the store once per load of the users.
    async fn last_reset(
        &self,
        username: &str,
        credential: &Credential,
        now: UnixTime,
    ) -> Result<Option<UnixTime>, StateError> {
        let reset_at = credential
            .reset_at
            .get_or_try_init(|| self.resets.reset_at(username, now));
        Ok(*reset_at.await?)
    }
}

/// A local user's own dashboard account, logged in with the password the users file
/// just accepted (`upstream.identity = "user"`).
async fn own_dashboard_login(
    accounts: &DashboardAccounts,
    username: &str,
    password: &str,
    now: UnixTime,
) -> Result<DashboardLogin, AuthError> {
    match accounts.log_in(username, password, now).await {
        Ok(login) => Ok(login),
        Err(DashboardError::Refused) => {
            tracing::warn!(username = ?username, "the dashboard has no account with this user's name and password: upstream.identity = \"user\" refuses the login");
            Err(AuthError::NoDashboardAccount)
        }
        Err(other) => Err(dashboard::unavailable(other)),
    }
}
