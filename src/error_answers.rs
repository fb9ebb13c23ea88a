//! The answer to each module's error: every conversion of a module's own error into a
//! [`GatewayError`], in one place. It sits above the modules it maps (they import
//! `errors` for the answer type, never this file), so the imports run one way.

use crate::access::AccessError;
use crate::docs::DocsError;
use crate::edge::connections::ConnectionError;
use crate::edge::paths::PathError;
use crate::edge::request::BodyError;
use crate::errors::GatewayError;
use crate::state::StateError;
use crate::upstream::credentials::CredentialError;
use crate::upstream::in_flight::Overload;
use crate::upstream::login::LoginError;
use crate::upstream::{AttemptError, ClientError};
use crate::users::password::HashError;

impl GatewayError {
    /// The answer to a request the operation table refuses. Unknown operations, and
    /// public ones the gateway does not offer, do not exist here.
    pub fn refused_access(e: AccessError, path: &str) -> Self {
        match e {
            AccessError::UnknownPath | AccessError::Closed => GatewayError::not_found(path),
            AccessError::NotOffered => GatewayError::NotOffered,
            AccessError::Forbidden(..) => GatewayError::Forbidden,
        }
    }
}

impl From<PathError> for GatewayError {
    fn from(e: PathError) -> Self {
        GatewayError::InvalidPath {
            detail: format!("Invalid request path: {e}."),
        }
    }
}

impl From<BodyError> for GatewayError {
    fn from(e: BodyError) -> Self {
        match e {
            BodyError::UnexpectedBody { method } => GatewayError::UnexpectedBody { method },
            BodyError::TooLarge { limit } => GatewayError::PayloadTooLarge { limit },
            BodyError::Timeout { millis } => GatewayError::BodyTimeout { millis },
            BodyError::Continue(kind) => {
                GatewayError::bad_request(format!("Could not answer Expect: {kind}"))
            }
            BodyError::Unreadable(kind) => {
                GatewayError::bad_request(format!("Could not read the request body: {kind}"))
            }
        }
    }
}

impl From<AttemptError> for GatewayError {
    fn from(e: AttemptError) -> Self {
        match e {
            AttemptError::BackendClosed => GatewayError::backend_closed(),
            AttemptError::NoActiveBackend => GatewayError::no_active_backend(),
            AttemptError::ChangedDuringLargeRequest => GatewayError::Unavailable {
                detail: e.to_string(),
            },
        }
    }
}

impl From<ConnectionError> for GatewayError {
    fn from(e: ConnectionError) -> Self {
        match e {
            ConnectionError::TooManyConnections { limit } => {
                GatewayError::TooManyConnections { limit }
            }
            ConnectionError::HeaderTooLarge { bytes } => GatewayError::HeaderTooLarge {
                limit: format!("{bytes} bytes"),
            },
            ConnectionError::TooManyHeaderLines { lines } => GatewayError::HeaderTooLarge {
                limit: format!("{lines} header lines"),
            },
            ConnectionError::HeaderTimeout { millis } => GatewayError::HeaderTimeout { millis },
        }
    }
}

impl From<DocsError> for GatewayError {
    fn from(e: DocsError) -> Self {
        match e {
            DocsError::NoActiveBackend => GatewayError::no_active_backend(),
            DocsError::Fetch(detail) => GatewayError::BadGateway { detail },
            DocsError::MethodNotAllowed => GatewayError::MethodNotAllowed { allow: "GET, HEAD" },
            DocsError::NotFound(path) => GatewayError::not_found(&path),
        }
    }
}

impl From<Overload> for GatewayError {
    fn from(_: Overload) -> Self {
        GatewayError::Overloaded
    }
}

/// A state store that cannot answer, or whose change the replicas did not confirm (a
/// failover could forget it): fail closed.
impl From<StateError> for GatewayError {
    fn from(e: StateError) -> Self {
        tracing::error!(error = %e, "state store failed");
        let detail = match e {
            StateError::NotReplicated { .. } => {
                "session store could not confirm the change on its replicas; try again"
            }
            _ => "session store unavailable",
        };
        GatewayError::Unavailable {
            detail: detail.into(),
        }
    }
}

impl From<HashError> for GatewayError {
    fn from(e: HashError) -> Self {
        match e {
            HashError::Busy => GatewayError::TooManyRequests,
            other => {
                tracing::error!(error = %other, "password verification failed");
                GatewayError::Internal
            }
        }
    }
}

/// The service account could not log in (a standby's refusal is retried before this).
impl From<CredentialError> for GatewayError {
    fn from(e: CredentialError) -> Self {
        match e {
            CredentialError::Login(LoginError::Client(ClientError::Timeout)) => {
                GatewayError::GatewayTimeout
            }
            _ => GatewayError::BadGateway {
                detail: "the gateway could not log in to the dashboard backend".into(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_errors_are_answered_as_the_gateway_answered_them_before_they_had_a_type() {
        let answers = [
            (
                BodyError::UnexpectedBody { method: "GET" },
                400,
                "A GET request cannot have a body.",
            ),
            (
                BodyError::TooLarge { limit: 10 },
                413,
                "The request body is larger than 10 bytes.",
            ),
            (
                BodyError::Timeout { millis: 30 },
                408,
                "The request body did not arrive within 30 ms.",
            ),
            (
                BodyError::Unreadable("ReadError"),
                400,
                "Could not read the request body: ReadError",
            ),
            (
                BodyError::Continue("WriteError"),
                400,
                "Could not answer Expect: WriteError",
            ),
        ];
        for (error, status, detail) in answers {
            let answer = GatewayError::from(error);
            assert_eq!(
                (answer.status(), answer.to_string()),
                (status, detail.to_string())
            );
        }
    }

    #[test]
    fn attempts_end_with_a_502_or_a_503() {
        let answer = |e| {
            let answer = GatewayError::from(e);
            (answer.status(), answer.to_string())
        };
        let closed = answer(AttemptError::BackendClosed);
        assert_eq!(closed, (502, "the dashboard closed the connection".into()));
        assert_eq!(answer(AttemptError::NoActiveBackend).0, 503);
        let changed = answer(AttemptError::ChangedDuringLargeRequest);
        assert_eq!(changed.0, 503);
        assert!(changed.1.contains("large request"), "{}", changed.1);
    }

    #[test]
    fn refused_connections_are_a_429_a_431_or_a_408() {
        let answers = [
            (ConnectionError::TooManyConnections { limit: 3 }, 429),
            (ConnectionError::HeaderTooLarge { bytes: 8192 }, 431),
            (ConnectionError::TooManyHeaderLines { lines: 100 }, 431),
            (ConnectionError::HeaderTimeout { millis: 5000 }, 408),
        ];
        for (error, status) in answers {
            assert_eq!(GatewayError::from(error).status(), status, "{error}");
        }
        let lines = GatewayError::from(ConnectionError::TooManyHeaderLines { lines: 100 });
        assert!(lines.to_string().contains("100 header lines"), "{lines}");
    }

    #[test]
    fn docs_errors_are_a_503_a_502_a_405_and_a_404() {
        let statuses = [
            (DocsError::NoActiveBackend, 503),
            (DocsError::Fetch("the backend answered 500".into()), 502),
            (DocsError::MethodNotAllowed, 405),
            (DocsError::NotFound("/docs/x".into()), 404),
        ];
        for (error, status) in statuses {
            assert_eq!(GatewayError::from(error).status(), status);
        }
        let allow = GatewayError::from(DocsError::MethodNotAllowed).headers();
        assert_eq!(allow, vec![("allow", "GET, HEAD".to_string())]);
    }
}
