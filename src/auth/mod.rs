//! The auth endpoints the gateway answers itself (`/api/auth`, `/api/auth/check`,
//! `/api/auth/logout`), with the dashboard's observable behaviour, and the token check
//! every other API request goes through.

mod check;
mod client_limit;
mod dashboard;
mod dashboard_login;
mod error;
mod login;
mod logout;
mod refusal_time;
pub mod request;
mod sso;

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::config::{AuthSource, LockoutPolicy};
use crate::edge::respond::LocalResponse;
pub use crate::observe::audit::AuthSubject;
use crate::observe::metrics::{Metrics, TokenCheckResult};
use crate::oidc::{KeyError, OidcError, Provider};
use crate::routes::Route;
use crate::state::{BucketRate, StateError, Stores, UnixMillis, UnixTime};
use crate::tokens::{Claims, TokenError, TokenService};
use crate::users::{Credential, PasswordChecker, User, UserDb};
use crate::versioning::{ApiVersion, Negotiated};

pub use dashboard::{DashboardAccounts, UserToken};
pub use error::AuthError;
pub use refusal_time::RefusalFloor;
pub use request::AuthRequest;

/// The version of all three auth endpoints, as on the dashboard.
const AUTH_VERSION: ApiVersion = ApiVersion::V1_0;

/// Auth request bodies are a few hundred bytes; anything near this is abuse.
pub const BODY_LIMIT: usize = 64 * 1024;

/// Everything the auth endpoints need, shared by all requests.
pub struct Auth {
    /// Replaced whole by a reload: a user removed or disabled there is refused at once.
    pub users: ArcSwap<UserDb>,
    /// Replaced whole by a reload of the signing keys (its cache of verified tokens with it).
    pub tokens: ArcSwap<TokenService>,
    pub stores: Stores,
    pub passwords: PasswordChecker,
    pub lockout: Option<LockoutPolicy>,
    /// Each client address's bucket of failed logins; `None`: no limit.
    pub failed_logins_per_client: Option<BucketRate>,
    pub metrics: Arc<Metrics>,
    pub vendor: String,
    /// Whether clients reach us over TLS (cookies then carry `Secure`).
    pub tls: bool,
    /// Who checks passwords at login.
    pub source: AuthSource,
    /// The users' own dashboard sessions (`auth.source = "dashboard"` or
    /// `upstream.identity = "user"`); `None`: the dashboards see the service account.
    pub dashboard: Option<Arc<DashboardAccounts>>,
    /// How long a login the dashboard refused takes at least.
    pub refusal_floor: RefusalFloor,
    /// Single sign-on (`[oidc]`): the provider whose access tokens are accepted too.
    pub oidc: Option<Arc<Provider>>,
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
    #[error(transparent)]
    Store(#[from] StateError),
}

impl Auth {
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
            // Boxed: a login's future is large, and the caller's future (moved into a box on
            // every request by `async_trait`) would otherwise be as large.
            Route::Login if self.oidc.as_ref().is_some_and(|p| !p.local_login) => {
                Err(AuthError::LocalLoginClosed)
            }
            Route::Login => Box::pin(self.login(req, now_ms, subject)).await,
            Route::TokenCheck => self.check(req, now, serving).await,
            // Boxed too: a logout may end the dashboard session (a request to it).
            Route::Logout => Box::pin(self.logout(req, now, subject)).await,
            _ => Err(AuthError::not_found("/api/auth")),
        }
    }

    /// The user behind the request's token, for every API path the gateway forwards.
    pub async fn authenticate(
        &self,
        headers: &http::HeaderMap,
        now: UnixTime,
    ) -> Result<Authenticated, AuthError> {
        self.verify_token(request::client_token(headers), now)
            .await
            .map_err(|rejection| match rejection {
                TokenRejection::Store(e) => AuthError::State(e),
                // Valid, but no group of the user's maps to a dashboard role.
                TokenRejection::Provider(OidcError::NoRole { .. }) => AuthError::NoRole,
                // Fail closed: no key set was ever fetched, or it is too old.
                TokenRejection::Provider(OidcError::Key(e @ KeyError::Unavailable)) => {
                    AuthError::Unavailable(e.to_string())
                }
                _ => AuthError::Unauthorized,
            })
    }

    /// A token is valid while it verifies, is not revoked, and its user exists and is
    /// enabled (in the users file, or as the dashboard's session describes it).
    async fn verify_token(
        &self,
        token: Option<&str>,
        now: UnixTime,
    ) -> Result<Authenticated, TokenRejection> {
        let result = self.verify_token_uncounted(token, now).await;
        self.metrics.auth.token_check(match &result {
            Ok(_) => TokenCheckResult::Valid,
            Err(TokenRejection::Missing) => TokenCheckResult::Missing,
            Err(TokenRejection::Invalid(TokenError::Expired)) => TokenCheckResult::Expired,
            Err(TokenRejection::Invalid(_)) => TokenCheckResult::Invalid,
            Err(TokenRejection::Revoked | TokenRejection::CredentialReset) => {
                TokenCheckResult::Revoked
            }
            Err(TokenRejection::UnknownUser | TokenRejection::NoSession) => {
                TokenCheckResult::UnknownUser
            }
            Err(TokenRejection::Provider(e)) => match e {
                OidcError::Expired => TokenCheckResult::Expired,
                OidcError::NoRole { .. } => TokenCheckResult::UnknownUser,
                OidcError::Key(KeyError::Unavailable) => TokenCheckResult::Error,
                _ => TokenCheckResult::Invalid,
            },
            Err(TokenRejection::Store(_)) => TokenCheckResult::Error,
        });
        result
    }

    /// A revoked token is refused before its session is looked for.
    async fn verify_token_uncounted(
        &self,
        token: Option<&str>,
        now: UnixTime,
    ) -> Result<Authenticated, TokenRejection> {
        let token = token
            .filter(|t| !t.is_empty())
            .ok_or(TokenRejection::Missing)?;
        let claims = match (self.tokens.load().verify(token, now), &self.oidc) {
            (Ok(claims), _) => claims,
            // Not one of ours: the provider's, if it names the provider as its issuer.
            (Err(_), Some(provider)) if provider.named_in(token) => {
                return self.provider_user(provider, token, now).await;
            }
            (Err(e), _) => return Err(e.into()),
        };
        if self.stores.revocations.is_revoked(&claims.jti, now).await? {
            return Err(TokenRejection::Revoked);
        }
        if let Some(identity) = &claims.idp {
            // A single sign-on session: the groups map to roles as the role map says now.
            let provider = self.oidc.as_ref().ok_or(TokenRejection::UnknownUser)?;
            // The provider's back-channel logout ended the user's sessions (any gateway).
            let ended = self.provider_logout_at(provider, identity, now).await?;
            if sso::ended_by_logout(ended, Some(claims.iat)) {
                return Err(TokenRejection::Revoked);
            }
            // The users file has taken the name since the login: a new login shows the
            // user apart (`oidc:<name>`).
            if self.users.load().contains(&claims.username) {
                return Err(TokenRejection::UnknownUser);
            }
            let user = provider.user_for(claims.username.clone(), identity)?;
            return Ok(Authenticated {
                user,
                upstream: None,
            });
        }
        let session = match &self.dashboard {
            Some(dashboard) => Some(
                dashboard
                    .find(&claims.jti, now)
                    .await?
                    .ok_or(TokenRejection::NoSession)?,
            ),
            None => None,
        };
        let user = match (self.source, session.as_ref().and_then(|s| s.user.clone())) {
            (AuthSource::Dashboard, Some(user)) => user,
            (AuthSource::Dashboard, None) => return Err(TokenRejection::NoSession),
            (AuthSource::Local, _) => self.user_of(&claims, now).await?,
        };
        Ok(Authenticated {
            user,
            upstream: session.map(|s| s.token.clone()),
        })
    }

    /// The user of a provider access token, with the roles their groups map to; the
    /// service account acts for them upstream.
    async fn provider_user(
        &self,
        provider: &Provider,
        token: &str,
        now: UnixTime,
    ) -> Result<Authenticated, TokenRejection> {
        let user = self.provider_token_user(provider, token, now).await;
        self.metrics.oidc.provider_token(match &user {
            Ok(_) => "valid",
            Err(TokenRejection::Provider(e)) => match e {
                OidcError::Expired => "expired",
                OidcError::NoRole { .. } => "no_role",
                OidcError::Key(KeyError::Unavailable) => "keys_unavailable",
                OidcError::NotAccessToken(_) => "not_access_token",
                _ => "invalid",
            },
            Err(TokenRejection::Revoked) => "logged_out",
            Err(_) => "error",
        });
        Ok(Authenticated {
            user: user?,
            upstream: None,
        })
    }

    /// A provider token is refused once the provider's back-channel logout ended the
    /// sessions of its user (or of its login session) after it was issued.
    async fn provider_token_user(
        &self,
        provider: &Provider,
        token: &str,
        now: UnixTime,
    ) -> Result<Arc<User>, TokenRejection> {
        let token = provider.verify(token, now).await?;
        let ended = self
            .provider_logout_at(provider, &token.identity, now)
            .await?;
        if sso::ended_by_logout(ended, token.issued_at) {
            return Err(TokenRejection::Revoked);
        }
        let name = self.provider_display_name(token.username);
        Ok(provider.user_for(name, &token.identity)?)
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
            .get_or_try_init(|| self.stores.credential_resets.reset_at(username, now));
        Ok(*reset_at.await?)
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
        auth.verify_token(Some(token), now).await.is_ok()
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
                auth.verify_token(Some(&token), NOW).await,
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
