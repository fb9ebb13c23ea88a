//! The auth endpoints the gateway answers itself (`/api/auth`, `/api/auth/check`,
//! `/api/auth/logout`), with the dashboard's observable behaviour, and the token check
//! every other API request goes through.

mod check;
mod client_limit;
mod dashboard;
mod error;
mod key_api;
mod logout;
mod password_login;
mod policy;
mod refusal_time;
pub mod request;
mod source;
mod sso;

use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::config::{AuthSource, LockoutPolicy};
use crate::edge::respond::LocalResponse;
pub use crate::observe::audit::AuthSubject;
use crate::observe::metrics::{Metrics, TokenCheckResult};
use crate::oidc::{KeyError, OidcError, Provider};
use crate::routes::Route;
use crate::state::{unix_now_ms, BucketRate, StateError, Stores, UnixMillis, UnixTime};
use crate::tokens::{TokenError, TokenService};
use crate::users::{PasswordChecker, User, UserDb};
use crate::versioning::{ApiVersion, Negotiated};

pub use dashboard::{DashboardAccounts, UserToken};
pub use error::AuthError;
pub use key_api::{KeyApiRequest, KeyPolicy, KEYS_PATH};
use policy::LoginPolicy;
pub use refusal_time::RefusalFloor;
pub use request::AuthRequest;
pub use source::KeyLimits;
use source::{Bearer, KeyRefusal, SourceParts, Sources};

/// The version of all three auth endpoints, as on the dashboard.
const AUTH_VERSION: ApiVersion = ApiVersion::V1_0;

/// Auth request bodies are a few hundred bytes; anything near this is abuse.
pub const BODY_LIMIT: usize = 64 * 1024;

/// Everything the auth endpoints need, shared by all requests: the policy every login
/// follows whoever checks it, the token service, and the configured credential sources.
pub struct Auth {
    /// Replaced whole by a reload: a user removed or disabled there is refused at once.
    pub users: Arc<ArcSwap<UserDb>>,
    /// Replaced whole by a reload of the signing keys (its cache of verified tokens with it).
    pub tokens: ArcSwap<TokenService>,
    pub stores: Stores,
    /// The lockout, the password hashing and the refusal floor.
    policy: LoginPolicy,
    /// Each client address's bucket of failed logins; `None`: no limit.
    failed_logins_per_client: Option<BucketRate>,
    metrics: Arc<Metrics>,
    vendor: String,
    /// Whether clients reach us over TLS (cookies then carry `Secure`).
    tls: bool,
    /// Who checks passwords, and whose bearer tokens are accepted.
    sources: Sources,
    /// The users' own dashboard sessions (`auth.source = "dashboard"` or
    /// `upstream.identity = "user"`); `None`: the dashboards see the service account.
    dashboard: Option<Arc<DashboardAccounts>>,
    /// How long an API key may live.
    key_policy: KeyPolicy,
}

/// What [`Auth`] is built from, at start-up (`app::server`) and in unit tests.
pub struct AuthParts {
    /// Who checks passwords at login.
    pub source: AuthSource,
    pub lockout: Option<LockoutPolicy>,
    pub failed_logins_per_client: Option<BucketRate>,
    pub passwords: PasswordChecker,
    pub vendor: String,
    pub tls: bool,
    pub users: UserDb,
    pub tokens: TokenService,
    pub stores: Stores,
    pub metrics: Arc<Metrics>,
    /// The users' own dashboard accounts, with `upstream.identity = "user"`.
    pub dashboard: Option<Arc<DashboardAccounts>>,
    /// Single sign-on (`[oidc]`): the provider whose access tokens are accepted too.
    pub oidc: Option<Arc<Provider>>,
    /// Each API key's rate, and how many keys the caches hold.
    pub key_limits: KeyLimits,
    /// How long a key may live.
    pub key_policy: KeyPolicy,
}

/// Whom a valid token authenticates, and the dashboard token their requests carry
/// upstream (`None`: the service account's).
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub user: Arc<User>,
    pub upstream: Option<UserToken>,
}

/// Why a token was not accepted.
#[derive(Debug, thiserror::Error)]
enum TokenRejection {
    #[error("no token")]
    Missing,
    #[error(transparent)]
    Invalid(#[from] TokenError),
    #[error("token was revoked")]
    Revoked,
    #[error("token's user does not exist or is disabled")]
    UnknownUser,
    #[error("token was issued for a password or roles its user no longer has")]
    CredentialReset,
    #[error("token's dashboard session has ended")]
    NoSession,
    #[error("identity provider token: {0}")]
    Provider(#[from] OidcError),
    #[error("API key: {0}")]
    ApiKey(KeyRefusal),
    #[error(transparent)]
    Store(#[from] StateError),
}

impl Auth {
    /// The one assembly of the auth endpoints; the sources come from [`Sources::build`].
    pub fn new(parts: AuthParts) -> Auth {
        let AuthParts {
            source,
            lockout,
            failed_logins_per_client,
            passwords,
            vendor,
            tls,
            users,
            tokens,
            stores,
            metrics,
            dashboard,
            oidc,
            key_limits,
            key_policy,
        } = parts;
        let users = Arc::new(ArcSwap::from_pointee(users));
        let sources = Sources::build(SourceParts {
            source,
            users: &users,
            stores: &stores,
            metrics: &metrics,
            dashboard: dashboard.as_ref(),
            oidc: oidc.as_ref(),
            key_limits,
        });
        Auth {
            users,
            tokens: ArcSwap::from_pointee(tokens),
            stores,
            policy: LoginPolicy {
                lockout,
                passwords,
                refusal_floor: RefusalFloor::default(),
                metrics: metrics.clone(),
            },
            failed_logins_per_client,
            metrics,
            vendor,
            tls,
            sources,
            dashboard,
            key_policy,
        }
    }

    /// Single sign-on's provider, when configured (a reload gives it the new role map).
    pub fn provider(&self) -> Option<&Provider> {
        self.sources.sso().map(|sso| sso.provider())
    }

    /// Answers an auth endpoint's request at `now_ms`, telling `subject` whom it was about.
    /// `serving`: whether the dashboards can serve; the token check tells balancers when
    /// they cannot.
    pub async fn answer(
        &self,
        route: Route,
        req: &AuthRequest<'_>,
        now_ms: UnixMillis,
        serving: bool,
        subject: &mut AuthSubject,
    ) -> Result<LocalResponse, AuthError> {
        let now = now_ms / 1000;
        match route {
            Route::Login if !self.sources.password_login_open() => Err(AuthError::LocalLoginClosed),
            // Boxed: a login's future is large, and the caller's future (moved into a box on
            // every request by `async_trait`) would otherwise be as large.
            Route::Login => Box::pin(self.login(req, now_ms, subject)).await,
            Route::TokenCheck => self.check(req, now, serving).await,
            // Boxed too: a logout may end the dashboard session (a request to it).
            Route::Logout => Box::pin(self.logout(req, now, subject)).await,
            _ => Err(AuthError::not_found("/api/auth")),
        }
    }

    /// The user behind the request's token, for every API path the gateway forwards.
    /// `client`: who sent it (`client_addr`), which an API key may be limited to.
    pub async fn authenticate(
        &self,
        headers: &http::HeaderMap,
        client: Option<IpAddr>,
        now: UnixTime,
    ) -> Result<Authenticated, AuthError> {
        self.verify_token(request::client_token(headers), client, now)
            .await
            .map_err(|rejection| match rejection {
                TokenRejection::Store(e) => AuthError::State(e),
                TokenRejection::ApiKey(KeyRefusal::RateLimited { retry_after }) => {
                    AuthError::KeyRateLimited { retry_after }
                }
                // Valid, but no group of the user's maps to a dashboard role.
                TokenRejection::Provider(OidcError::NoRole { .. }) => AuthError::NoRole,
                // Fail closed: no key set was ever fetched, or it is too old.
                TokenRejection::Provider(OidcError::Key(e @ KeyError::Unavailable)) => {
                    AuthError::Unavailable(e.to_string())
                }
                _ => AuthError::Unauthorized,
            })
    }

    /// A token is valid while it verifies, is not revoked, and the source that issued it
    /// still knows its user (in the users file, the dashboard's session, the provider's
    /// role map).
    async fn verify_token(
        &self,
        token: Option<&str>,
        client: Option<IpAddr>,
        now: UnixTime,
    ) -> Result<Authenticated, TokenRejection> {
        let result = self.verify_token_uncounted(token, client, now).await;
        self.metrics.auth.token_check(token_check_result(&result));
        result
    }

    /// A revoked token is refused before its source is asked.
    async fn verify_token_uncounted(
        &self,
        token: Option<&str>,
        client: Option<IpAddr>,
        now: UnixTime,
    ) -> Result<Authenticated, TokenRejection> {
        let token = token
            .filter(|t| !t.is_empty())
            .ok_or(TokenRejection::Missing)?;
        let claims = match self.tokens.load().verify(token, now) {
            Ok(claims) => claims,
            // Not one of ours: a source's own (the provider's, if it names the provider
            // as its issuer).
            Err(e) => {
                let bearer = Bearer {
                    token,
                    client,
                    now,
                    // (an API key's bucket refills by the millisecond)
                    now_ms: unix_now_ms(),
                };
                let owned = self.sources.authenticate_bearer(&bearer).await;
                return owned.unwrap_or(Err(e.into()));
            }
        };
        if self.stores.revocations.is_revoked(&claims.jti, now).await? {
            return Err(TokenRejection::Revoked);
        }
        let source = self
            .sources
            .issuer_of(&claims)
            .ok_or(TokenRejection::UnknownUser)?;
        source.authenticate(&claims, now).await
    }

    /// The dashboard refused the user's own token (their password changed, or an admin
    /// logged them out there): the gateway token and the session end with it, and the
    /// client logs in again. Never retried with the service account's token.
    pub async fn user_token_refused(&self, token: &UserToken, now: UnixTime) {
        tracing::info!(jti = %token.jti, "the dashboard refused the user's own token: the session ends");
        if let Err(e) = self
            .stores
            .revocations
            .revoke(&token.jti, token.until, now)
            .await
        {
            tracing::warn!(error = %e, jti = %token.jti, "cannot revoke the token of a refused session");
        }
        if let Some(dashboard) = &self.dashboard {
            if let Err(e) = dashboard.end(token, false).await {
                tracing::warn!(error = %e, jti = %token.jti, "cannot end a refused session");
            }
        }
    }

    /// The Content-Type of an auth endpoint's answer: the vendor type at the endpoint's
    /// version when the client asked for one, else plain JSON.
    fn content_type(&self, negotiated: Negotiated) -> String {
        match negotiated {
            Negotiated::Vendor(_) => AUTH_VERSION.media_type(&self.vendor),
            Negotiated::Plain => "application/json".to_string(),
        }
    }

    /// The `token` cookie's attributes, as the dashboard sets them.
    fn cookie_attributes(&self) -> &'static str {
        if self.tls {
            "HttpOnly; Path=/; SameSite=Strict; Secure"
        } else {
            "HttpOnly; Path=/; SameSite=Strict"
        }
    }
}

/// A token check's `clustergate_token_checks_total` label.
fn token_check_result(result: &Result<Authenticated, TokenRejection>) -> TokenCheckResult {
    match result {
        Ok(_) => TokenCheckResult::Valid,
        Err(TokenRejection::Missing) => TokenCheckResult::Missing,
        Err(TokenRejection::Invalid(TokenError::Expired)) => TokenCheckResult::Expired,
        Err(TokenRejection::Invalid(_)) => TokenCheckResult::Invalid,
        Err(TokenRejection::Revoked | TokenRejection::CredentialReset) => TokenCheckResult::Revoked,
        Err(TokenRejection::UnknownUser | TokenRejection::NoSession) => {
            TokenCheckResult::UnknownUser
        }
        Err(TokenRejection::Provider(e)) => match e {
            OidcError::Expired => TokenCheckResult::Expired,
            OidcError::NoRole { .. } => TokenCheckResult::UnknownUser,
            OidcError::Key(KeyError::Unavailable) => TokenCheckResult::Error,
            _ => TokenCheckResult::Invalid,
        },
        Err(TokenRejection::ApiKey(refusal)) => match refusal {
            KeyRefusal::Expired => TokenCheckResult::Expired,
            KeyRefusal::Revoked => TokenCheckResult::Revoked,
            KeyRefusal::Owner => TokenCheckResult::UnknownUser,
            _ => TokenCheckResult::Invalid,
        },
        Err(TokenRejection::Store(_)) => TokenCheckResult::Error,
    }
}

#[cfg(test)]
mod audited_logins;
#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use super::testing::{auth, token_for, user_specs, NOW};
    use super::*;
    use crate::users::{PasswordHash, Role, UserSpec};

    /// The users of `auth` with `change` made to admin's, loaded again as a reload does.
    fn reload_admin(auth: &Auth, change: impl FnOnce(&mut UserSpec)) {
        let mut specs = user_specs();
        change(&mut specs[0]);
        auth.users.store(Arc::new(UserDb::new(specs).unwrap()));
    }

    async fn valid(auth: &Auth, token: &str, now: UnixTime) -> bool {
        auth.verify_token(Some(token), None, now).await.is_ok()
    }

    #[tokio::test]
    async fn the_same_users_loaded_again_keep_their_tokens() {
        let auth = auth();
        let token = token_for(&auth, "admin", NOW);
        reload_admin(&auth, |_| {});
        assert!(valid(&auth, &token, NOW).await);
    }

    #[tokio::test]
    async fn another_password_hash_or_other_roles_refuse_the_tokens_issued_before() {
        let changes: [fn(&mut UserSpec); 3] = [
            |admin| admin.password_hash = PasswordHash::hash_new("pw").unwrap(),
            |admin| admin.roles = vec![Role::ReadOnly],
            |admin| admin.roles.push(Role::PoolManager),
        ];
        for change in changes {
            let auth = auth();
            let token = token_for(&auth, "admin", NOW);
            reload_admin(&auth, change);
            assert!(matches!(
                auth.verify_token(Some(&token), None, NOW).await,
                Err(TokenRejection::CredentialReset)
            ));
            assert!(valid(&auth, &token_for(&auth, "admin", NOW), NOW).await);
        }
    }

    #[tokio::test]
    async fn after_a_reset_only_the_tokens_issued_since_are_good_with_the_same_credential() {
        let auth = auth();
        let before = token_for(&auth, "admin", NOW - 1);
        let since = token_for(&auth, "admin", NOW);
        auth.stores
            .credential_resets
            .reset("admin", NOW, NOW + 3600, NOW)
            .await
            .unwrap();
        // The users loaded again (the user back): the reset is read from the store.
        reload_admin(&auth, |_| {});
        assert!(!valid(&auth, &before, NOW).await);
        assert!(valid(&auth, &since, NOW).await);
        assert!(valid(&auth, &token_for(&auth, "viewer", NOW - 1), NOW).await);
    }

    #[tokio::test]
    async fn a_token_without_a_credential_matches_no_user_of_the_users_file() {
        let auth = auth();
        let token = auth.tokens.load().issue("admin", NOW).unwrap().token;
        assert!(!valid(&auth, &token, NOW).await);
    }
}
