//! The credential sources: who checks a login's password (the users file, `auth.source =
//! "local"`; the dashboard's own accounts, `auth.source = "dashboard"`) and whose bearer
//! tokens are accepted besides the gateway's own (single sign-on, `[oidc]`). Each lives in
//! its own file behind [`CredentialSource`] and imports no other; [`Sources::build`] is the
//! one place that picks them from the configuration. A new source is a file here and a line
//! in `build`.

mod api_keys;
mod dashboard;
mod oidc;
mod users_file;

use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use async_trait::async_trait;

use super::dashboard::{DashboardAccounts, DashboardLogin};
use super::policy::LoginPolicy;
use super::{AuthError, AuthSubject, Authenticated, TokenRejection};
use crate::config::AuthSource;
use crate::observe::metrics::Metrics;
use crate::oidc::Provider;
use crate::state::{Stores, UnixMillis, UnixTime};
use crate::tokens::Claims;
use crate::users::{User, UserDb};

pub use api_keys::{key_roles, ApiKeySource, KeyLimits, KeyRefusal};
pub use oidc::{OidcSource, LOGIN_URL};

/// A bearer token that is not the gateway's own, as a source sees it.
pub struct Bearer<'a> {
    pub token: &'a str,
    /// Who sent it (`client_addr`), when known.
    pub client: Option<IpAddr>,
    pub now: UnixTime,
    pub now_ms: UnixMillis,
}

/// One password login as a source sees it.
pub struct LoginAttempt<'a> {
    pub username: &'a str,
    pub password: String,
    pub now_ms: UnixMillis,
    pub policy: &'a LoginPolicy,
}

/// A login whose password was good: the user, what the token is issued for, and their own
/// dashboard login when the dashboard checked it or the user acts as themselves there.
pub struct LoggedIn {
    pub user: Arc<User>,
    pub dashboard: Option<DashboardLogin>,
    /// The fingerprint of the credential the password was checked against, which the token
    /// carries; empty when the dashboard checked it.
    pub fingerprint: String,
    /// When the token counts as issued (never before the user's last reset).
    pub issued_at: UnixTime,
    /// The permissions the user's dashboard session keeps (the dashboard's answer); `None`:
    /// the users file grants, read on every request.
    pub session_permissions: Option<String>,
}

/// What credential sources differ in (after oauth2-proxy's `providers.Provider`). Every
/// refusal of a password is `AuthError::InvalidCredentials`, whatever the cause.
#[async_trait]
pub trait CredentialSource: Send + Sync {
    /// The audit's `method` for a login this source checks.
    fn method(&self) -> &'static str;

    /// Checks a password login at `POST /api/auth`; `subject` learns whether this failure
    /// locked the username.
    async fn log_in(
        &self,
        attempt: LoginAttempt<'_>,
        subject: &mut AuthSubject,
    ) -> Result<LoggedIn, AuthError>;

    /// Whether the gateway token with these claims was issued by this source's login.
    fn issued(&self, claims: &Claims) -> bool;

    /// The user of a gateway token this source issued, its signature and revocation
    /// already checked.
    async fn authenticate(
        &self,
        claims: &Claims,
        now: UnixTime,
    ) -> Result<Authenticated, TokenRejection>;

    /// A bearer token that is not the gateway's own: `None` when it is not this source's.
    async fn authenticate_bearer(
        &self,
        _bearer: &Bearer<'_>,
    ) -> Option<Result<Authenticated, TokenRejection>> {
        None
    }

    /// Where the browser goes after a logout of this source's token (RP-initiated logout
    /// at the identity provider); `None`: the gateway's logout is the whole logout.
    fn logout_url(&self, _claims: &Claims) -> Option<String> {
        None
    }

    /// Where the UI's login page sends the browser instead of asking for a password.
    fn login_url(&self) -> Option<&'static str> {
        None
    }
}

/// The configured sources.
pub struct Sources {
    /// Who checks passwords at `POST /api/auth` (`auth.source`).
    password: Arc<dyn CredentialSource>,
    /// Single sign-on (`[oidc]`), whose browser endpoints need the provider itself.
    sso: Option<Arc<OidcSource>>,
    /// API keys, whose management forgets a revoked key here.
    keys: Arc<ApiKeySource>,
}

/// What the sources are built from.
pub struct SourceParts<'a> {
    pub source: AuthSource,
    /// The users file, replaced whole by a reload; the single sign-on source reads the
    /// names it takes.
    pub users: &'a Arc<ArcSwap<UserDb>>,
    pub stores: &'a Stores,
    pub metrics: &'a Arc<Metrics>,
    /// The users' own dashboard sessions; with `auth.source = "dashboard"` the dashboard
    /// checks the passwords through them.
    pub dashboard: Option<&'a Arc<DashboardAccounts>>,
    pub oidc: Option<&'a Arc<Provider>>,
    pub key_limits: KeyLimits,
}

impl Sources {
    /// The sources the configuration names: the one switch a new source is added to.
    pub fn build(parts: SourceParts<'_>) -> Sources {
        let SourceParts {
            source,
            users,
            stores,
            metrics,
            dashboard,
            oidc,
            key_limits,
        } = parts;
        let password: Arc<dyn CredentialSource> = match (source, dashboard) {
            (AuthSource::Dashboard, Some(accounts)) => Arc::new(dashboard::DashboardSource::new(
                accounts.clone(),
                stores.dashboard_attempts.clone(),
            )),
            // (`Config` refuses `auth.source = "dashboard"` without an upstream)
            _ => Arc::new(users_file::UsersFile::new(
                users.clone(),
                stores,
                dashboard.cloned(),
            )),
        };
        let sso = oidc.map(|provider| {
            Arc::new(OidcSource::new(
                provider.clone(),
                users.clone(),
                stores.credential_resets.clone(),
                metrics.clone(),
            ))
        });
        let keys = Arc::new(ApiKeySource::new(
            stores.api_keys.clone(),
            stores.revocations.clone(),
            users.clone(),
            key_limits,
            metrics.clone(),
        ));
        Sources {
            password,
            sso,
            keys,
        }
    }

    /// The API keys.
    pub fn keys(&self) -> &ApiKeySource {
        &self.keys
    }

    /// The source that checks passwords.
    pub fn password(&self) -> &dyn CredentialSource {
        &*self.password
    }

    /// Single sign-on, when configured.
    pub fn sso(&self) -> Option<&OidcSource> {
        self.sso.as_deref()
    }

    /// Whether `POST /api/auth` takes passwords (`oidc.local_login = false` closes it).
    pub fn password_login_open(&self) -> bool {
        self.sso().is_none_or(OidcSource::local_login)
    }

    /// The sources that issue gateway tokens (a key is no gateway token).
    fn all(&self) -> impl Iterator<Item = &dyn CredentialSource> {
        let sso = self.sso.as_ref().map(|s| &**s as &dyn CredentialSource);
        std::iter::once(&*self.password).chain(sso)
    }

    /// The source whose login issued the token with `claims`.
    pub fn issuer_of(&self, claims: &Claims) -> Option<&dyn CredentialSource> {
        self.all().find(|source| source.issued(claims))
    }

    /// The user of a bearer token that is not the gateway's own, if a source owns it.
    pub async fn authenticate_bearer(
        &self,
        bearer: &Bearer<'_>,
    ) -> Option<Result<Authenticated, TokenRejection>> {
        let keys = &*self.keys as &dyn CredentialSource;
        for source in std::iter::once(keys).chain(self.all()) {
            if let Some(result) = source.authenticate_bearer(bearer).await {
                return Some(result);
            }
        }
        None
    }

    /// Where the UI's login page sends the browser, if a source says.
    pub fn login_url(&self) -> Option<&'static str> {
        self.all().find_map(CredentialSource::login_url)
    }
}
