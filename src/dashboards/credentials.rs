//! The gateway's service account on the dashboards: it logs in, keeps the token (behind
//! the `UpstreamTokens` store), renews it ahead of its expiry, and logs in again when a
//! backend refuses it, at most once per [`MIN_RENEWAL_INTERVAL`]. One login runs at a time;
//! the others wait for its result.
//!
//! A refused login backs off, on every gateway of the deployment: the next waits
//! `upstream.login_backoff_min_ms`, doubling with each consecutive refusal. Every login is
//! reserved first in the dashboard's own count of consecutive failures (`DashboardAttempts`,
//! shared through the state store, as for users' logins), and none is sent that could be
//! the dashboard's 10th (it disables the account): a refused password is tried again up to
//! [`RETRY_CEILING`] failures, and a new one (at start, or after a reload that changed
//! `upstream.password_file`) up to [`NEW_PASSWORD_CEILING`].

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::client::ClientError;
use super::login::{self, LoginError};
use super::{Backend, Upstreams};
use crate::config::{LoginBackoff, DASHBOARD_LOCKOUT_ATTEMPTS};
use crate::observe::metrics::Metrics;
use crate::secrets::Secret;
use crate::state::{
    unix_now_ms, DashboardAttempts, Hold, StateError, UnixMillis, UnixTime, UpstreamToken,
    UpstreamTokens,
};

/// While another gateway logs in, its stored token is looked for this often, this many
/// times (a login takes a dashboard well under a second).
const OTHER_LOGIN_POLL: std::time::Duration = std::time::Duration::from_millis(100);
const OTHER_LOGIN_CHECKS: u32 = 30;

/// A refused token is replaced at most this often. The dashboard answers 401 for other
/// reasons than a revoked token too (a request carrying another credential it prefers,
/// say): replacing the token on each of those cost a login (~0.23 s of the manager's CPU)
/// per request. A token revoked within this time of the last renewal is refused until it
/// has passed.
pub const MIN_RENEWAL_INTERVAL: Duration = Duration::from_secs(10);

/// The dashboard's consecutive failures up to which a password it refused is tried again
/// (after its backoff): 6 of its 10, so that 3 are left for a corrected password.
pub const RETRY_CEILING: u32 = DASHBOARD_LOCKOUT_ATTEMPTS - 4;
/// Up to which a new password is tried: one short of the dashboard's limit.
pub const NEW_PASSWORD_CEILING: u32 = DASHBOARD_LOCKOUT_ATTEMPTS - 1;

/// How long past a login's own time limit its reservation lasts (a gateway that died
/// mid-login: the dashboard may have counted it, and so does the store after this).
const HOLD_MARGIN: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    #[error(transparent)]
    Login(#[from] LoginError),
    #[error(transparent)]
    Store(#[from] StateError),
    /// The dashboard refused the last login; the next one waits.
    #[error("the dashboard refused the account's login; the next attempt is in {} s", .retry_in.as_secs().max(1))]
    BackingOff { retry_in: Duration },
    /// The dashboard's count of consecutive failures leaves no attempt for this password.
    #[error("the dashboard's count of the account's consecutive failed logins leaves no attempt for this password")]
    Withheld,
}

impl CredentialError {
    /// Whether the dashboard refused the service account's password (now or before).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            CredentialError::Login(LoginError::Refused(_))
                | CredentialError::BackingOff { .. }
                | CredentialError::Withheld
        )
    }
}

/// The service account's password, and whether it is new: not yet refused since the
/// process started or a reload changed it.
struct Password {
    secret: Secret,
    new: bool,
}

/// Which account of the gateway's logs in: what its log lines call it, and what an
/// operator does when the dashboard refuses its password.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccountKind {
    /// `upstream.username`, with `upstream.password_file`.
    Service,
    /// An account the gateway manages for `upstream.identity = "roles"`, with a password
    /// derived from the deployment key.
    Role,
}

impl AccountKind {
    /// What the log lines call the account.
    fn noun(self) -> &'static str {
        match self {
            AccountKind::Service => "service account",
            AccountKind::Role => "role account",
        }
    }

    /// What to do when the dashboard refuses the account's password.
    fn fix(self) -> &'static str {
        match self {
            AccountKind::Service => {
                "check upstream.username and upstream.password_file, then reload (SIGHUP)"
            }
            AccountKind::Role => {
                "the gateway sets the account's password again; check that every gateway of the deployment has the same upstream.accounts_key_file"
            }
        }
    }
}

pub struct ServiceAccount {
    username: String,
    kind: AccountKind,
    password: Mutex<Password>,
    /// The Accept header of the dashboard's login endpoint (version 1.0).
    login_accept: String,
    tokens: Arc<dyn UpstreamTokens>,
    /// The dashboard's count of consecutive failed logins, shared with users' logins.
    attempts: Arc<dyn DashboardAttempts>,
    backoff: LoginBackoff,
    login: tokio::sync::Mutex<()>,
    /// The last token discarded after a refusal, and when.
    last_renewal: Mutex<Option<Renewal>>,
    metrics: Arc<Metrics>,
}

struct Renewal {
    refused: Arc<str>,
    at: Instant,
}

/// What the account needs of the state store.
pub struct AccountStores {
    pub tokens: Arc<dyn UpstreamTokens>,
    pub attempts: Arc<dyn DashboardAttempts>,
}

fn millis(d: Duration) -> UnixMillis {
    UnixMillis::try_from(d.as_millis()).unwrap_or(UnixMillis::MAX)
}

impl ServiceAccount {
    pub fn new(
        username: String,
        password: Secret,
        login_accept: String,
        stores: AccountStores,
        backoff: LoginBackoff,
        metrics: Arc<Metrics>,
    ) -> Self {
        ServiceAccount {
            username,
            kind: AccountKind::Service,
            password: Mutex::new(Password {
                secret: password,
                new: true,
            }),
            login_accept,
            tokens: stores.tokens,
            attempts: stores.attempts,
            backoff,
            login: tokio::sync::Mutex::new(()),
            last_renewal: Mutex::new(None),
            metrics,
        }
    }

    /// The same login machinery for an account the gateway manages (its log lines name it
    /// as one).
    pub fn role_account(self) -> Self {
        ServiceAccount {
            kind: AccountKind::Role,
            ..self
        }
    }

    /// The Accept header of the dashboard's version 1.0 endpoints.
    pub fn accept(&self) -> &str {
        &self.login_accept
    }

    /// A reload read `password`: when it changed, the next login uses it at once,
    /// whatever the backoff, as a new password.
    pub fn set_password(&self, password: Secret) {
        let mut current = self.password.lock().unwrap_or_else(PoisonError::into_inner);
        if current.secret == password {
            return;
        }
        *current = Password {
            secret: password,
            new: true,
        };
        tracing::info!(user = %self.username, "upstream.password_file changed: the service account logs in with the new password");
    }

    /// The gateway has just set this account's password on the dashboard itself (an
    /// account it manages, brought back in step after a refused login): the next login is
    /// tried at once, as with a new password, whatever the backoff.
    pub async fn password_set_by_gateway(&self) -> Result<(), StateError> {
        self.password
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .new = true;
        self.tokens.set_login_backoff(None).await
    }

    /// The password, and whether it is new.
    fn password(&self) -> (Secret, bool) {
        let current = self.password.lock().unwrap_or_else(PoisonError::into_inner);
        (current.secret.clone(), current.new)
    }

    /// The dashboard refused (or may have refused) `secret`: it is new no more.
    fn refused_password(&self, secret: &Secret) {
        let mut current = self.password.lock().unwrap_or_else(PoisonError::into_inner);
        if current.secret == *secret {
            current.new = false;
        }
    }

    /// A token that is not due for renewal at `now`, logging in through `backend` first
    /// when there is none.
    pub async fn token(
        &self,
        upstreams: &Upstreams,
        backend: &Backend,
        now: UnixTime,
    ) -> Result<Arc<str>, CredentialError> {
        if let Some(token) = self.usable(now).await? {
            return Ok(token);
        }
        // Boxed: a login's future is large, and the caller's future (moved into a box on
        // every request by `async_trait`) would otherwise carry it on every request.
        Box::pin(self.renew(upstreams, backend, now)).await
    }

    /// Logs in, unless another request did while this one waited for the login lock.
    async fn renew(
        &self,
        upstreams: &Upstreams,
        backend: &Backend,
        now: UnixTime,
    ) -> Result<Arc<str>, CredentialError> {
        let _only_login = self.login.lock().await;
        // Another request may have logged in while this one waited.
        if let Some(token) = self.usable(now).await? {
            return Ok(token);
        }
        let (password, new) = self.password();
        if !new {
            self.not_backing_off().await?;
        }
        let ceiling = match new {
            true => NEW_PASSWORD_CEILING,
            false => RETRY_CEILING,
        };
        let claimed = self.tokens.claim_login(upstreams.timeouts.login).await?;
        if !claimed {
            if let Some(token) = self.await_other_login(now).await? {
                return Ok(token);
            }
        }
        let fresh = self
            .attempt(upstreams, backend, now, &password, ceiling)
            .await;
        if claimed {
            if let Err(e) = self.tokens.release_login().await {
                tracing::debug!(error = %e, "cannot release the login claim; it expires by itself");
            }
        }
        let fresh = fresh?;
        let token = fresh.token.clone();
        self.tokens.store(fresh).await?;
        Ok(token)
    }

    /// `Err` while the logins back off after a refusal (on any gateway).
    async fn not_backing_off(&self) -> Result<(), CredentialError> {
        let now_ms = unix_now_ms();
        let Some(until) = self.tokens.login_backoff(now_ms).await? else {
            return Ok(());
        };
        self.metrics.upstream.login("deferred");
        Err(CredentialError::BackingOff {
            retry_in: Duration::from_millis(until.saturating_sub(now_ms)),
        })
    }

    /// One login with `password`, reserved under `ceiling` in the dashboard's count first
    /// and settled there with its outcome.
    async fn attempt(
        &self,
        upstreams: &Upstreams,
        backend: &Backend,
        now: UnixTime,
        password: &Secret,
        ceiling: u32,
    ) -> Result<UpstreamToken, CredentialError> {
        let now_ms = unix_now_ms();
        let hold_until = now_ms.saturating_add(millis(upstreams.timeouts.login + HOLD_MARGIN));
        let reserved = self
            .attempts
            .reserve(&self.username, ceiling, now_ms, hold_until)
            .await?;
        let Some(hold) = reserved else {
            self.metrics.upstream.login("withheld");
            tracing::debug!(user = %self.username, "{} login withheld: the dashboard's count of failures is at the gateway's ceiling", self.kind.noun());
            return Err(CredentialError::Withheld);
        };
        let result = self.log_in(upstreams, backend, now, password).await;
        self.settle(&hold, &result, password).await?;
        result
    }

    /// Records a login's outcome: a success clears the count and the backoff; a refusal,
    /// or an answer that did not come (the dashboard may have counted it), is one more
    /// failure and a longer wait; a login no password check saw counts for nothing.
    async fn settle(
        &self,
        hold: &Hold,
        result: &Result<UpstreamToken, CredentialError>,
        password: &Secret,
    ) -> Result<(), StateError> {
        let user = &self.username;
        match result {
            Ok(_) => {
                self.attempts.succeeded(user, hold, None).await?;
                self.tokens.set_login_backoff(None).await
            }
            Err(CredentialError::Login(
                LoginError::NotActive(_) | LoginError::Client(ClientError::Connect(_)),
            )) => self.attempts.cancel(user, hold).await,
            Err(_) => {
                self.refused_password(password);
                let failures = self.attempts.failed(user, hold).await?;
                let wait = self.backoff.after(failures);
                let until = unix_now_ms().saturating_add(millis(wait));
                self.tokens.set_login_backoff(Some(until)).await?;
                let left = RETRY_CEILING.saturating_sub(failures);
                tracing::error!(user = %user, failures, next_attempt_in_s = wait.as_secs(), retries_left = left, "the {}'s login failed: {}; logins back off, and stop before the dashboard would disable the account", self.kind.noun(), self.kind.fix());
                Ok(())
            }
        }
    }

    /// Another gateway is logging in: its token is used once stored. `None`: it did not
    /// come within the wait, and this gateway logs in itself.
    async fn await_other_login(&self, now: UnixTime) -> Result<Option<Arc<str>>, StateError> {
        for _ in 0..OTHER_LOGIN_CHECKS {
            tokio::time::sleep(OTHER_LOGIN_POLL).await;
            if let Some(token) = self.usable(now).await? {
                return Ok(Some(token));
            }
        }
        Ok(None)
    }

    /// A backend refused `refused`: whether the request is sent again with a new token.
    /// Yes when another request already replaced it or is replacing it (one login for all
    /// of them), or when it is discarded now, so that the next token is a fresh login; that
    /// happens at most once per [`MIN_RENEWAL_INTERVAL`]. No: the 401 is the dashboard's
    /// answer to the request, and reaches the client.
    pub async fn refused(&self, refused: &Arc<str>, now: UnixTime) -> Result<bool, StateError> {
        if self.usable(now).await?.as_ref() != Some(refused) {
            return Ok(true);
        }
        {
            let mut last = self
                .last_renewal
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match &*last {
                Some(renewal) if renewal.refused == *refused => return Ok(true),
                Some(renewal) if renewal.at.elapsed() < MIN_RENEWAL_INTERVAL => return Ok(false),
                _ => {
                    *last = Some(Renewal {
                        refused: refused.clone(),
                        at: Instant::now(),
                    })
                }
            }
        }
        self.tokens.discard(refused).await?;
        Ok(true)
    }

    async fn usable(&self, now: UnixTime) -> Result<Option<Arc<str>>, StateError> {
        Ok(self.tokens.current(now).await?.map(|t| t.token))
    }

    async fn log_in(
        &self,
        upstreams: &Upstreams,
        backend: &Backend,
        now: UnixTime,
        password: &Secret,
    ) -> Result<UpstreamToken, CredentialError> {
        let result = self.try_log_in(upstreams, backend, now, password).await;
        match &result {
            Ok(_) => {
                self.metrics.upstream.login("success");
                tracing::info!(server = %backend.base, user = %self.username, "{} logged in", self.kind.noun());
            }
            Err(CredentialError::Login(LoginError::Refused(_))) => {
                self.metrics.upstream.login("refused");
                tracing::error!(server = %backend.base, user = %self.username, "the dashboard refused the {}'s credentials", self.kind.noun());
            }
            Err(e) => {
                self.metrics.upstream.login("error");
                tracing::warn!(server = %backend.base, user = %self.username, error = %e, "{} login failed", self.kind.noun());
            }
        }
        result
    }

    async fn try_log_in(
        &self,
        upstreams: &Upstreams,
        backend: &Backend,
        now: UnixTime,
        password: &Secret,
    ) -> Result<UpstreamToken, CredentialError> {
        let password = String::from_utf8_lossy(password.expose());
        let answer = login::log_in(
            upstreams,
            backend,
            &self.login_accept,
            &self.username,
            &password,
        )
        .await?;
        Ok(UpstreamToken {
            renew_at: renew_at(&answer.token, now),
            token: Arc::from(answer.token),
        })
    }
}

/// When to renew a dashboard token: a fifth of its lifetime before `exp` (between 1 s and
/// 5 min), read from the unverified payload; it is the backend's token, not ours to verify.
fn renew_at(token: &str, now: UnixTime) -> Option<UnixTime> {
    let (iat, exp) = login::lifetime(token, now)?;
    let margin = (exp.saturating_sub(iat) / 5).clamp(1, 300);
    Some(exp.saturating_sub(margin))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{MemoryDashboardAttempts, MemoryUpstreamTokens};
    use base64::Engine;

    fn account() -> (ServiceAccount, Arc<MemoryUpstreamTokens>) {
        let tokens = Arc::new(MemoryUpstreamTokens::default());
        let metrics = Metrics::new(&prometheus::Registry::new()).unwrap();
        let stores = AccountStores {
            tokens: tokens.clone(),
            attempts: Arc::new(MemoryDashboardAttempts::new(10)),
        };
        let backoff = LoginBackoff {
            min: Duration::from_secs(10),
            max: Duration::from_secs(600),
        };
        let account = ServiceAccount::new(
            "clustergate".into(),
            Secret::new(b"pw".to_vec()),
            "application/vnd.ceph.api.v1.0+json".into(),
            stores,
            backoff,
            metrics,
        );
        (account, tokens)
    }

    async fn store(tokens: &MemoryUpstreamTokens, token: &Arc<str>) {
        let token = UpstreamToken {
            token: token.clone(),
            renew_at: None,
        };
        tokens.store(token).await.unwrap();
    }

    #[tokio::test]
    async fn refusals_renew_the_token_once_per_interval_whatever_their_number() {
        let first: Arc<str> = Arc::from("first");
        let (account, tokens) = account();
        store(&tokens, &first).await;
        // A hundred requests refused with the same token: one discard, all sent again.
        for _ in 0..100 {
            assert!(account.refused(&first, 1).await.unwrap());
        }
        assert!(tokens.current(1).await.unwrap().is_none(), "discarded");
        // The login that followed stored a new token; the dashboard refuses it too.
        let second: Arc<str> = Arc::from("second");
        store(&tokens, &second).await;
        assert!(
            account.refused(&first, 1).await.unwrap(),
            "already replaced"
        );
        for _ in 0..100 {
            assert!(
                !account.refused(&second, 1).await.unwrap(),
                "within the interval the 401 is the answer"
            );
        }
        assert_eq!(tokens.current(1).await.unwrap().unwrap().token, second);
    }

    #[tokio::test]
    async fn a_refusal_after_the_interval_renews_again() {
        let (account, tokens) = account();
        let old: Arc<str> = Arc::from("old");
        store(&tokens, &old).await;
        assert!(account.refused(&old, 1).await.unwrap());
        let next: Arc<str> = Arc::from("next");
        store(&tokens, &next).await;
        if let Some(renewal) = account.last_renewal.lock().unwrap().as_mut() {
            renewal.at -= MIN_RENEWAL_INTERVAL;
        }
        assert!(account.refused(&next, 1).await.unwrap());
        assert!(tokens.current(1).await.unwrap().is_none());
    }

    #[test]
    fn a_password_is_new_until_refused_and_a_reload_that_changes_it_makes_it_new() {
        let (account, _) = account();
        let new = |account: &ServiceAccount| account.password().1;
        assert!(new(&account), "at start");
        const { assert!(RETRY_CEILING < NEW_PASSWORD_CEILING) };
        const { assert!(NEW_PASSWORD_CEILING < DASHBOARD_LOCKOUT_ATTEMPTS) };
        account.refused_password(&Secret::new(b"pw".to_vec()));
        assert!(!new(&account));
        // A reload that reads the same password changes nothing; another one is new.
        account.set_password(Secret::new(b"pw".to_vec()));
        assert!(!new(&account));
        account.set_password(Secret::new(b"right".to_vec()));
        assert!(new(&account));
        // A refusal of the password it replaced does not touch the new one.
        account.refused_password(&Secret::new(b"pw".to_vec()));
        assert!(new(&account));
    }

    fn token_with(payload: &str) -> String {
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.sig", b64(r#"{"alg":"HS256"}"#), b64(payload))
    }

    #[test]
    fn renewal_comes_a_fifth_of_the_lifetime_early() {
        assert_eq!(
            renew_at(&token_with(r#"{"iat":1000,"exp":1050}"#), 1000),
            Some(1040)
        );
        assert_eq!(
            renew_at(&token_with(r#"{"iat":0,"exp":28800}"#), 0),
            Some(28500)
        );
        assert_eq!(
            renew_at(&token_with(r#"{"iat":100,"exp":102}"#), 100),
            Some(101)
        );
    }

    #[test]
    fn tokens_without_exp_are_renewed_only_when_refused() {
        assert_eq!(renew_at(&token_with(r#"{"iat":1}"#), 1), None);
        assert_eq!(renew_at("not-a-jwt", 1), None);
    }
}
