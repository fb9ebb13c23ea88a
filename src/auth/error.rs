//! Why the auth endpoints, the single sign-on paths or the token check refused a request.
//! `error_answers` turns each into the dashboard's answer; nothing here knows a status.

use crate::oidc::LoginError;
use crate::state::StateError;
use crate::users::password::HashError;
use crate::versioning::VersionError;

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The body is not what the endpoint takes; the text tells the client what to send.
    #[error("{0}")]
    BadRequest(String),
    /// A body not declared as JSON (the dashboard's 415).
    #[error("the request body is not declared as JSON")]
    NotJson,
    #[error(transparent)]
    Version(#[from] VersionError),
    /// Wrong password, unknown, disabled or locked user: one refusal for all.
    #[error("invalid credentials")]
    InvalidCredentials,
    /// No token, or one that is not (or no longer) good.
    #[error("no valid token")]
    Unauthorized,
    /// A valid identity provider token whose groups map to no dashboard role.
    #[error("no dashboard role is mapped to the user")]
    NoRole,
    /// `upstream.identity = "user"` and the dashboard has no such account.
    #[error("the dashboard has no account with this username and password")]
    NoDashboardAccount,
    /// `oidc.local_login = false`.
    #[error("logging in with a password is turned off")]
    LocalLoginClosed,
    /// Authenticated, but this is not theirs to do (the text says why and what would be).
    #[error("{0}")]
    NotPermitted(String),
    #[error("no such path: {path}")]
    NotFound { path: String },
    #[error("method not allowed (allowed: {allow})")]
    MethodNotAllowed { allow: &'static str },
    /// The client's bucket of failed logins is empty.
    #[error("too many failed logins from this client")]
    RateLimited { retry_after: u64 },
    /// An API key's bucket is empty (`api_keys.rate_per_second`).
    #[error("too many requests with this API key")]
    KeyRateLimited { retry_after: u64 },
    /// The password could not be checked (`Busy`: too many checks wait already).
    #[error(transparent)]
    Password(#[from] HashError),
    #[error(transparent)]
    State(#[from] StateError),
    /// The dashboard that should check a login, or the provider's keys, cannot answer now.
    #[error("{0}")]
    Unavailable(String),
    /// A browser's single sign-on login that did not finish.
    #[error(transparent)]
    SingleSignOn(#[from] LoginError),
    /// The token service could not sign a token.
    #[error("cannot sign a token")]
    Signing,
}

impl AuthError {
    pub fn bad_request(detail: impl Into<String>) -> Self {
        AuthError::BadRequest(detail.into())
    }

    pub fn not_found(path: &str) -> Self {
        AuthError::NotFound {
            path: path.to_string(),
        }
    }
}
