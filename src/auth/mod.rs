//! The auth endpoints the gateway answers itself (`/api/auth`, `/api/auth/check`,
//! `/api/auth/logout`), with the dashboard's observable behaviour, and the token check
//! every other API request goes through.

mod check;
mod client_limit;
mod dashboard;
mod dashboard_login;
mod login;
mod logout;
mod refusal_time;
pub mod request;

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::config::{AuthSource, LockoutPolicy};
use crate::errors::GatewayError;
use crate::metrics::{Metrics, TokenCheckResult};
use crate::respond::LocalResponse;
use crate::routes::Route;
use crate::state::{BucketRate, StateError, Stores, UnixMillis, UnixTime};
use crate::tokens::{TokenError, TokenService};
use crate::users::{PasswordChecker, User, UserDb};
use crate::versioning::{ApiVersion, Negotiated};

pub use dashboard::{DashboardAccounts, UserToken};
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
}

/// Whom a valid token authenticates, and the dashboard token their requests carry
/// upstream (`None`: the service account's).
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub user: Arc<User>,
    pub upstream: Option<UserToken>,
}

/// Whom an auth endpoint's request was about, for the logs: the username a login tried
/// (the client's text, whether or not such a user exists) or the user whose token logged
/// out; and whether this login's failure locked the username.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AuthSubject {
    pub username: Option<String>,
    pub locked: bool,
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
    #[error("token's dashboard session has ended")]
    NoSession,
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
    ) -> Result<LocalResponse, GatewayError> {
        let now = now_ms / 1000;
        match route {
            // Boxed: a login's future is large, and the caller's future (moved into a box on
            // every request by `async_trait`) would otherwise be as large.
            Route::Login => Box::pin(self.login(req, now_ms, subject)).await,
            Route::TokenCheck => self.check(req, now, serving).await,
            // Boxed too: a logout may end the dashboard session (a request to it).
            Route::Logout => Box::pin(self.logout(req, now, subject)).await,
            _ => Err(GatewayError::not_found("/api/auth")),
        }
    }

    /// The user behind the request's token, for every API path the gateway forwards.
    pub async fn authenticate(
        &self,
        headers: &http::HeaderMap,
        now: UnixTime,
    ) -> Result<Authenticated, GatewayError> {
        self.verify_token(request::client_token(headers), now)
            .await
            .map_err(|rejection| match rejection {
                TokenRejection::Store(e) => e.into(),
                _ => GatewayError::Unauthorized,
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
        self.metrics.token_check(match &result {
            Ok(_) => TokenCheckResult::Valid,
            Err(TokenRejection::Missing) => TokenCheckResult::Missing,
            Err(TokenRejection::Invalid(TokenError::Expired)) => TokenCheckResult::Expired,
            Err(TokenRejection::Invalid(_)) => TokenCheckResult::Invalid,
            Err(TokenRejection::Revoked) => TokenCheckResult::Revoked,
            Err(TokenRejection::UnknownUser | TokenRejection::NoSession) => {
                TokenCheckResult::UnknownUser
            }
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
        let claims = self.tokens.load().verify(token, now)?;
        if self.stores.revocations.is_revoked(&claims.jti, now).await? {
            return Err(TokenRejection::Revoked);
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
            (AuthSource::Local, _) => self
                .users
                .load()
                .active(&claims.username)
                .cloned()
                .ok_or(TokenRejection::UnknownUser)?,
        };
        Ok(Authenticated {
            user,
            upstream: session.map(|s| s.token.clone()),
        })
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
pub(crate) mod testing;
