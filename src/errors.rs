//! Every error the gateway answers itself, and the one place that maps each to a status
//! and the dashboard's JSON shape: `{"status", "detail", "request_id"}` for 4xx/5xx
//! raised by the framework, `{"detail", "code", "component"}` for 400s about the request.
//!
//! Module errors become a [`GatewayError`] in `error_answers`, above the modules, and
//! nowhere else; this file imports none of them. Inside pingora's hooks
//! an answer travels as the cause of a pingora error ([`GatewayError::into_pingora`]), and
//! `fail_to_proxy` reads it back ([`GatewayError::from_pingora`]): one failure channel.

use pingora::{ErrorSource, ErrorType, ImmutStr};
use serde_json::{json, Value};

use crate::edge::respond::LocalResponse;
use crate::versioning::VersionError;

/// Paths are echoed in 404 details up to this many bytes.
const MAX_ECHOED_PATH: usize = 256;

/// The type of a pingora error that sends the request again (see `dashboards::Attempt`).
const RETRY: ErrorType = ErrorType::Custom("retry on a dashboard backend");

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatewayError {
    /// The request body is not what the endpoint takes.
    #[error("{detail}")]
    BadRequest { detail: String },
    /// A request path that cannot be normalized safely.
    #[error("{detail}")]
    InvalidPath { detail: String },
    /// Wrong password, unknown, disabled or locked user: one answer for all.
    #[error("Invalid credentials")]
    InvalidCredentials,
    #[error("You are not authorized to access that resource")]
    Unauthorized,
    #[error("You don't have permissions to access that resource")]
    Forbidden,
    /// Authenticated, but not allowed this, for the reason `detail` gives.
    #[error("{detail}")]
    NotPermitted { detail: String },
    /// `upstream.identity = "user"`: the password is good here, but the dashboard has no
    /// account with this name and password to act as.
    #[error("The dashboard has no account with this username and password: the gateway acts as each user's own dashboard account (upstream.identity = \"user\"), so create or import that account on the dashboard with the same password.")]
    NoDashboardAccount,
    /// `oidc.local_login = false`: only the identity provider logs users in.
    #[error("Logging in with a username and password is turned off on this gateway: log in through the identity provider (single sign-on), or send its access token as a Bearer token.")]
    LocalLoginClosed,
    /// Refused whoever asks: it would act on the gateway's own dashboard account.
    #[error("This operation is not offered through the gateway: it would act on the gateway's own dashboard account.")]
    NotOffered,
    #[error("The path '{path}' was not found.")]
    NotFound { path: String },
    #[error("The method is not allowed for the requested URL.")]
    MethodNotAllowed { allow: &'static str },
    #[error("The request body is larger than {limit} bytes.")]
    PayloadTooLarge { limit: usize },
    #[error("Expected an entity of content type application/json, text/javascript")]
    NotJson,
    #[error(transparent)]
    Version(#[from] VersionError),
    #[error("Too many requests; try again later.")]
    TooManyRequests,
    /// The request head is over `server.max_header_bytes` or `server.max_header_count`.
    #[error("The request header is larger than {limit}.")]
    HeaderTooLarge { limit: String },
    /// The request head did not arrive within `server.header_timeout_ms`.
    #[error("The request header did not arrive within {millis} ms.")]
    HeaderTimeout { millis: u128 },
    /// A request body did not arrive whole within `server.body_timeout_ms`.
    #[error("The request body did not arrive within {millis} ms.")]
    BodyTimeout { millis: u128 },
    /// GET and HEAD take no body: one is never forwarded, nor left on the connection.
    #[error("A {method} request cannot have a body.")]
    UnexpectedBody { method: &'static str },
    /// The dashboard serves `upstream.max_in_flight` requests of this gateway already and
    /// no place came free in time (`dashboards::in_flight`).
    #[error("The dashboard is busy; try again later.")]
    Overloaded,
    /// The client's address holds `server.max_connections_per_ip` connections already.
    #[error("Too many connections from this address (at most {limit}).")]
    TooManyConnections { limit: usize },
    /// This client address failed to log in too often: its bucket is empty.
    #[error("Too many failed logins from this address; try again in {retry_after} seconds.")]
    LoginRateLimited { retry_after: u64 },
    /// This API key's bucket is empty (`api_keys.rate_per_second`, `api_keys.burst`).
    #[error("Too many requests with this API key; try again in {retry_after} seconds.")]
    KeyRateLimited { retry_after: u64 },
    #[error("{detail}")]
    BadGateway { detail: String },
    #[error("{detail}")]
    Unavailable { detail: String },
    #[error("The dashboard backend did not answer in time.")]
    GatewayTimeout,
    #[error("The server encountered an unexpected condition which prevented it from fulfilling the request.")]
    Internal,
}

impl GatewayError {
    pub fn bad_request(detail: impl Into<String>) -> Self {
        GatewayError::BadRequest {
            detail: detail.into(),
        }
    }

    /// No manager is known to serve (as during a failover): clients should retry.
    pub fn no_active_backend() -> Self {
        GatewayError::Unavailable {
            detail: "no active dashboard backend".into(),
        }
    }

    /// The release the managers run is not known yet (a fresh process, a manager that will
    /// not say): no table or system roles are guessed, which could grant more than the
    /// dashboard would. Clients should retry.
    pub fn release_unknown() -> Self {
        GatewayError::Unavailable {
            detail: "the dashboard's Ceph release is not known yet; try again in a few seconds"
                .into(),
        }
    }

    /// The active manager closed or reset the connection before its answer was complete.
    pub fn backend_closed() -> Self {
        GatewayError::BadGateway {
            detail: "the dashboard closed the connection".into(),
        }
    }

    /// A backend that failed in a way the gateway cannot name better.
    pub fn unreachable_backend() -> Self {
        GatewayError::BadGateway {
            detail: "the dashboard backend could not be reached".into(),
        }
    }

    /// 404 for `path`, echoed up to [`MAX_ECHOED_PATH`] bytes.
    pub fn not_found(path: &str) -> Self {
        let end = (0..=MAX_ECHOED_PATH.min(path.len()))
            .rev()
            .find(|i| path.is_char_boundary(*i))
            .unwrap_or(0);
        GatewayError::NotFound {
            path: path[..end].to_string(),
        }
    }

    /// The answer written to the client, in the dashboard's JSON shape.
    pub fn answer(&self, request_id: &str) -> LocalResponse {
        let mut response =
            LocalResponse::json(self.status(), "application/json", &self.body(request_id));
        response.headers = self.headers();
        response
    }

    /// A pingora error that carries this answer to `fail_to_proxy`.
    pub fn into_pingora(self) -> Box<pingora::Error> {
        let status = ErrorType::HTTPStatus(self.status());
        pingora::Error::because(status, "answered by the gateway", self)
    }

    /// A pingora error that sends the request to a backend again (the attempt decided
    /// it); `self` is the answer should no retry be possible.
    pub fn into_retry(self, why: impl Into<ImmutStr>) -> Box<pingora::Error> {
        pingora::Error::because(RETRY, why, self)
    }

    /// The answer for an error that reached `fail_to_proxy`: the one a hook decided on,
    /// else one by the error's kind. `None`: the client went away; nothing to answer.
    pub fn from_pingora(e: &pingora::Error) -> Option<GatewayError> {
        if let Some(decided) = e.root_cause().downcast_ref::<GatewayError>() {
            return Some(decided.clone());
        }
        match (e.etype(), e.esource()) {
            (
                ErrorType::ReadTimedout | ErrorType::WriteTimedout | ErrorType::ConnectTimedout,
                ErrorSource::Upstream,
            ) => Some(GatewayError::GatewayTimeout),
            (_, ErrorSource::Downstream) => None,
            (
                ErrorType::ConnectionClosed | ErrorType::ReadError | ErrorType::WriteError,
                ErrorSource::Upstream,
            ) => Some(GatewayError::backend_closed()),
            _ => Some(GatewayError::unreachable_backend()),
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            GatewayError::BadRequest { .. }
            | GatewayError::InvalidPath { .. }
            | GatewayError::InvalidCredentials
            | GatewayError::UnexpectedBody { .. } => 400,
            GatewayError::Unauthorized => 401,
            GatewayError::Forbidden
            | GatewayError::NotOffered
            | GatewayError::LocalLoginClosed
            | GatewayError::NoDashboardAccount
            | GatewayError::NotPermitted { .. } => 403,
            GatewayError::NotFound { .. } => 404,
            GatewayError::MethodNotAllowed { .. } => 405,
            GatewayError::PayloadTooLarge { .. } => 413,
            GatewayError::NotJson | GatewayError::Version(_) => 415,
            GatewayError::HeaderTimeout { .. } | GatewayError::BodyTimeout { .. } => 408,
            GatewayError::TooManyRequests
            | GatewayError::TooManyConnections { .. }
            | GatewayError::LoginRateLimited { .. }
            | GatewayError::KeyRateLimited { .. } => 429,
            GatewayError::HeaderTooLarge { .. } => 431,
            GatewayError::BadGateway { .. } => 502,
            GatewayError::Unavailable { .. } | GatewayError::Overloaded => 503,
            GatewayError::GatewayTimeout => 504,
            GatewayError::Internal => 500,
        }
    }

    /// Extra response headers this error needs.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        match self {
            GatewayError::MethodNotAllowed { allow } => vec![("allow", allow.to_string())],
            GatewayError::TooManyRequests
            | GatewayError::TooManyConnections { .. }
            | GatewayError::Unavailable { .. }
            | GatewayError::Overloaded => {
                vec![("retry-after", "1".to_string())]
            }
            GatewayError::LoginRateLimited { retry_after }
            | GatewayError::KeyRateLimited { retry_after } => {
                vec![("retry-after", retry_after.to_string())]
            }
            _ => Vec::new(),
        }
    }

    /// The JSON body, in the shape the dashboard uses for this kind of error.
    pub fn body(&self, request_id: &str) -> Value {
        match self {
            GatewayError::InvalidCredentials => json!({
                "detail": self.to_string(), "code": "invalid_credentials", "component": "auth",
            }),
            GatewayError::NoDashboardAccount => json!({
                "detail": self.to_string(), "code": "no_dashboard_account", "component": "auth",
            }),
            GatewayError::LocalLoginClosed => json!({
                "detail": self.to_string(), "code": "local_login_disabled", "component": "auth",
            }),
            GatewayError::BadRequest { detail } => json!({
                "detail": detail, "code": "invalid_request", "component": "auth",
            }),
            GatewayError::InvalidPath { detail } => json!({
                "detail": detail, "code": "invalid_path", "component": "gateway",
            }),
            _ => json!({
                "status": status_line(self.status()),
                "detail": self.to_string(),
                "request_id": request_id,
            }),
        }
    }
}

/// CherryPy's status text, e.g. "401 Unauthorized".
pub fn status_line(status: u16) -> String {
    let reason = http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error");
    format!("{status} {reason}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unauthorized_has_the_dashboard_body() {
        let body = GatewayError::Unauthorized.body("rid");
        assert_eq!(
            body,
            json!({"status": "401 Unauthorized", "detail": "You are not authorized to access that resource", "request_id": "rid"})
        );
    }

    #[test]
    fn invalid_credentials_has_the_dashboard_body() {
        let e = GatewayError::InvalidCredentials;
        assert_eq!(e.status(), 400);
        assert_eq!(
            e.body("rid"),
            json!({"detail": "Invalid credentials", "code": "invalid_credentials", "component": "auth"})
        );
    }

    #[test]
    fn version_errors_are_415_with_the_dashboard_detail() {
        let e = GatewayError::from(VersionError::Missing);
        assert_eq!(e.status(), 415);
        assert_eq!(
            e.body("r")["detail"],
            "Unable to find version in request header"
        );
        assert_eq!(e.body("r")["status"], "415 Unsupported Media Type");
    }

    #[test]
    fn a_decided_answer_travels_through_pingora_errors() {
        let e = GatewayError::Forbidden
            .into_pingora()
            .more_context("Peer: x");
        let answer = GatewayError::from_pingora(&e).unwrap();
        assert_eq!(answer.status(), 403);
        let retry = GatewayError::no_active_backend().into_retry("a standby answered");
        assert_eq!(GatewayError::from_pingora(&retry).unwrap().status(), 503);
    }

    #[test]
    fn pingora_errors_are_classified_by_kind_and_side() {
        let timeout = pingora::Error::new_up(ErrorType::ReadTimedout);
        assert_eq!(GatewayError::from_pingora(&timeout).unwrap().status(), 504);
        let gone = pingora::Error::new_down(ErrorType::ConnectionClosed);
        assert!(GatewayError::from_pingora(&gone).is_none());
        let reset = pingora::Error::new_up(ErrorType::ConnectionClosed);
        assert_eq!(GatewayError::from_pingora(&reset).unwrap().status(), 502);
    }

    #[test]
    fn long_paths_are_echoed_cut_at_a_character_boundary() {
        let path = format!("/{}", "é".repeat(300));
        let GatewayError::NotFound { path: echoed } = GatewayError::not_found(&path) else {
            panic!("not a 404");
        };
        assert!(echoed.len() <= MAX_ECHOED_PATH && path.starts_with(&echoed));
    }

    #[test]
    fn a_rate_limited_login_is_429_with_retry_after_in_the_status_shape() {
        let e = GatewayError::LoginRateLimited { retry_after: 7 };
        assert_eq!(e.status(), 429);
        assert_eq!(e.headers(), vec![("retry-after", "7".to_string())]);
        assert_eq!(
            e.body("r"),
            json!({
                "status": "429 Too Many Requests",
                "detail": "Too many failed logins from this address; try again in 7 seconds.",
                "request_id": "r",
            })
        );
    }

    #[test]
    fn a_rate_limited_api_key_is_429_with_retry_after_in_the_status_shape() {
        let e = GatewayError::KeyRateLimited { retry_after: 3 };
        assert_eq!(e.status(), 429);
        assert_eq!(e.headers(), vec![("retry-after", "3".to_string())]);
        assert_eq!(
            e.body("r")["detail"],
            "Too many requests with this API key; try again in 3 seconds."
        );
    }

    #[test]
    fn payload_too_large_is_413_in_the_status_shape() {
        let e = GatewayError::PayloadTooLarge { limit: 10 };
        assert_eq!(e.status(), 413);
        assert_eq!(e.body("r")["status"], "413 Payload Too Large");
    }
}
