//! The answer to each module's error: every conversion of a module's own error into a
//! [`GatewayError`], in one place. It sits above the modules it maps (they import
//! `errors` for the answer type, never this file), so the imports run one way.

use crate::access::{AccessError, AdmissionError};
use crate::auth::AuthError;
use crate::dashboard_identity::IdentityError;
use crate::dashboards::credentials::CredentialError;
use crate::dashboards::in_flight::Overload;
use crate::dashboards::login::LoginError;
use crate::dashboards::{AttemptError, ClientError};
use crate::docs::DocsError;
use crate::edge::connections::ConnectionError;
use crate::edge::paths::PathError;
use crate::edge::request::BodyError;
use crate::errors::GatewayError;
use crate::forward::ConnectionHeaderError;
use crate::oidc::{self, OidcError};
use crate::state::StateError;
use crate::users::password::HashError;

impl GatewayError {
    /// The answer to a request admission refused (`path`: the normalized path). Unknown
    /// operations, and public ones the gateway does not offer, do not exist here.
    pub fn refused_admission(e: AdmissionError, path: &str) -> Self {
        match e {
            AdmissionError::MethodNotAllowed { allow } => GatewayError::MethodNotAllowed { allow },
            AdmissionError::Auth(e) => e.into(),
            AdmissionError::Access(AccessError::UnknownPath | AccessError::Closed) => {
                GatewayError::not_found(path)
            }
            AdmissionError::Access(AccessError::NotOffered) | AdmissionError::ServiceAccount => {
                GatewayError::NotOffered
            }
            AdmissionError::Access(AccessError::Forbidden(..)) => GatewayError::Forbidden,
            AdmissionError::Version(e) => GatewayError::Version(e),
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
            BodyError::BudgetExhausted { .. } => GatewayError::Unavailable {
                detail: "The gateway holds as many request bodies as it may; try again later."
                    .into(),
            },
            BodyError::Continue(kind) => {
                GatewayError::bad_request(format!("Could not answer Expect: {kind}"))
            }
            BodyError::Unreadable(kind) => {
                GatewayError::bad_request(format!("Could not read the request body: {kind}"))
            }
        }
    }
}

impl From<AuthError> for GatewayError {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::BadRequest(detail) => GatewayError::BadRequest { detail },
            AuthError::NotJson => GatewayError::NotJson,
            AuthError::Version(e) => GatewayError::Version(e),
            AuthError::InvalidCredentials => GatewayError::InvalidCredentials,
            AuthError::Unauthorized => GatewayError::Unauthorized,
            AuthError::NoRole => GatewayError::Forbidden,
            AuthError::NoDashboardAccount => GatewayError::NoDashboardAccount,
            AuthError::LocalLoginClosed => GatewayError::LocalLoginClosed,
            AuthError::NotPermitted(detail) => GatewayError::NotPermitted { detail },
            AuthError::NotFound { path } => GatewayError::not_found(&path),
            AuthError::MethodNotAllowed { allow } => GatewayError::MethodNotAllowed { allow },
            AuthError::RateLimited { retry_after } => {
                GatewayError::LoginRateLimited { retry_after }
            }
            AuthError::KeyRateLimited { retry_after } => {
                GatewayError::KeyRateLimited { retry_after }
            }
            AuthError::Password(e) => e.into(),
            AuthError::State(e) => e.into(),
            AuthError::Unavailable(detail) => GatewayError::Unavailable { detail },
            AuthError::SingleSignOn(e) => e.into(),
            AuthError::Signing => GatewayError::Internal,
        }
    }
}

/// A browser's single sign-on that did not finish: the browser sees what went wrong, in
/// the dashboard's error shape.
impl From<oidc::LoginError> for GatewayError {
    fn from(e: oidc::LoginError) -> Self {
        use oidc::LoginError;
        match e {
            LoginError::Unavailable => GatewayError::Unavailable {
                detail: e.to_string(),
            },
            LoginError::Exchange(_) => GatewayError::BadGateway {
                detail: e.to_string(),
            },
            LoginError::Token(OidcError::NoRole { .. }) => GatewayError::Forbidden,
            LoginError::State
            | LoginError::Code
            | LoginError::Refused(_)
            | LoginError::Token(_) => GatewayError::bad_request(e.to_string()),
        }
    }
}

/// The dashboard's 400 for a bad request, the text naming what is wrong.
impl From<ConnectionHeaderError> for GatewayError {
    fn from(e: ConnectionHeaderError) -> Self {
        GatewayError::bad_request(e.to_string())
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
            // A logout at a full revocation store, say: not done, and not said to be.
            StateError::Full(_) => {
                "session store is full: the change was not made; try again later"
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
/// A refused password is the operator's to fix: 503 saying what to do, also while the
/// logins back off.
impl From<CredentialError> for GatewayError {
    fn from(e: CredentialError) -> Self {
        if e.is_refusal() {
            return GatewayError::Unavailable {
                detail: format!("The dashboard refuses the gateway's service account ({e}). Check upstream.username and the password in upstream.password_file, then reload the gateway (SIGHUP)."),
            };
        }
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

/// No token of the account holding the user's roles: 503 when the gateway holds back
/// (too many role sets), 502 when the dashboard refused, each saying what to do.
impl From<IdentityError> for GatewayError {
    fn from(e: IdentityError) -> Self {
        match e {
            IdentityError::TooManyRoleSets(max) => GatewayError::Unavailable {
                detail: format!("The gateway already acts for {max} distinct sets of roles on the dashboard (upstream.max_role_accounts): raise it, or give users fewer distinct combinations of roles."),
            },
            IdentityError::Refused { action, name, status, detail } => GatewayError::BadGateway {
                detail: format!("The dashboard refused to {action} {name}, which the gateway acts as for these roles (status {status}: {detail}). {}", refusal_remedy(status)),
            },
            IdentityError::LoginStillRefused(name) => GatewayError::BadGateway {
                detail: format!("The dashboard refuses the login of {name}, which the gateway acts as for these roles, although the gateway has just set its password: check the dashboard's password policy and expiry."),
            },
            IdentityError::Service(e) | IdentityError::Login(e) => e.into(),
            IdentityError::Client(ClientError::Timeout) => GatewayError::GatewayTimeout,
            IdentityError::Standby(_) => GatewayError::no_active_backend(),
            IdentityError::Client(_) | IdentityError::BadReply(_) => GatewayError::unreachable_backend(),
            IdentityError::Uses(e) => e.into(),
        }
    }
}

/// What the operator does about the dashboard refusing to make or set a managed account or
/// role, by the status it refused with: its permission check (403), its checks of what was
/// sent (400: the password policy, as the role and account themselves are the gateway's),
/// or a failure to save (a cluster that cannot write).
fn refusal_remedy(status: u16) -> &'static str {
    match status {
        401 | 403 => "The gateway's service account needs the user scope (create, read, update).",
        400 => "The dashboard's password policy must allow the gateway's passwords (32 characters of upper- and lower-case letters, digits and special characters, no word): check ceph dashboard get-pwd-policy-min-length (at most 32) and get-pwd-policy-min-complexity (at most 56), or turn the policy off with ceph dashboard set-pwd-policy-enabled false.",
        _ => "The dashboard could not save it: check that the cluster accepts writes (monitors in quorum, not full) and the manager's log.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::users::{Permission, Scope};
    use crate::versioning::VersionError;

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
                BodyError::BudgetExhausted { total: 1000 },
                503,
                "The gateway holds as many request bodies as it may; try again later.",
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
    fn a_full_store_says_the_change_was_not_made() {
        let answer = GatewayError::from(StateError::Full(100_000));
        assert_eq!(answer.status(), 503);
        assert!(answer.to_string().contains("not made"), "{answer}");
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

    #[test]
    fn auth_errors_are_answered_as_the_gateway_answered_them_before_they_had_a_type() {
        let answers = [
            (AuthError::bad_request("Missing field: username."), 400),
            (AuthError::NotJson, 415),
            (AuthError::Version(VersionError::Missing), 415),
            (AuthError::InvalidCredentials, 400),
            (AuthError::Unauthorized, 401),
            (AuthError::NoRole, 403),
            (AuthError::NoDashboardAccount, 403),
            (AuthError::LocalLoginClosed, 403),
            (AuthError::NotPermitted("not yours".into()), 403),
            (AuthError::not_found("/auth/oidc/x"), 404),
            (AuthError::MethodNotAllowed { allow: "POST" }, 405),
            (AuthError::RateLimited { retry_after: 20 }, 429),
            (AuthError::KeyRateLimited { retry_after: 2 }, 429),
            (AuthError::Password(HashError::Busy), 429),
            (AuthError::Password(HashError::Bcrypt), 500),
            (
                AuthError::State(StateError::Unavailable("down".into())),
                503,
            ),
            (AuthError::Unavailable("no keys".into()), 503),
            (AuthError::SingleSignOn(oidc::LoginError::State), 400),
            (AuthError::SingleSignOn(oidc::LoginError::Code), 400),
            (AuthError::SingleSignOn(oidc::LoginError::Unavailable), 503),
            (
                AuthError::SingleSignOn(oidc::LoginError::Exchange("x".into())),
                502,
            ),
            (AuthError::Signing, 500),
        ];
        for (error, status) in answers {
            let shown = error.to_string();
            assert_eq!(GatewayError::from(error).status(), status, "{shown}");
        }
        let bad = GatewayError::from(AuthError::bad_request("Missing field: username."));
        assert_eq!(bad.to_string(), "Missing field: username.");
        let limited = GatewayError::from(AuthError::RateLimited { retry_after: 20 });
        assert_eq!(limited.headers(), vec![("retry-after", "20".to_string())]);
        let method = GatewayError::from(AuthError::MethodNotAllowed { allow: "POST" });
        assert_eq!(method.headers(), vec![("allow", "POST".to_string())]);
    }

    #[test]
    fn admission_refusals_are_a_405_401_404_403_or_415_and_404s_name_the_path() {
        let answer = |e| GatewayError::refused_admission(e, "/api/nothing");
        let method = answer(AdmissionError::MethodNotAllowed { allow: "GET" });
        assert_eq!(method.status(), 405);
        assert_eq!(answer(AuthError::Unauthorized.into()).status(), 401);
        let unknown = answer(AccessError::UnknownPath.into());
        assert_eq!(unknown.status(), 404);
        assert!(unknown.to_string().contains("/api/nothing"), "{unknown}");
        assert_eq!(answer(AccessError::Closed.into()).status(), 404);
        assert_eq!(
            answer(AccessError::NotOffered.into()),
            GatewayError::NotOffered
        );
        assert_eq!(
            answer(AdmissionError::ServiceAccount),
            GatewayError::NotOffered
        );
        let forbidden = AccessError::Forbidden(Scope::Pool, Permission::Create);
        assert_eq!(answer(forbidden.into()), GatewayError::Forbidden);
        assert_eq!(answer(VersionError::Missing.into()).status(), 415);
    }

    #[test]
    fn a_connection_header_refusal_is_the_dashboards_400_naming_the_problem() {
        let answer = GatewayError::from(ConnectionHeaderError::TooManyOptions);
        assert_eq!(answer.status(), 400);
        assert!(answer.to_string().contains("more than"), "{answer}");
    }

    #[test]
    fn a_refused_account_says_what_to_do_about_the_refusal_the_dashboard_gave() {
        let refused = |status| {
            GatewayError::from(IdentityError::Refused {
                action: "create the account",
                name: "cg-0123456789abcdef".into(),
                status,
                detail: "the dashboard's words".into(),
            })
        };
        for (status, remedy) in [
            (403, "needs the user scope"),
            (400, "ceph dashboard get-pwd-policy-min-length"),
            (500, "accepts writes"),
        ] {
            let answer = refused(status);
            assert_eq!(answer.status(), 502);
            let detail = answer.to_string();
            assert!(detail.contains("the dashboard's words"), "{detail}");
            assert!(detail.contains(remedy), "{status}: {detail}");
        }
    }
}
