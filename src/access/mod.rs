//! Admission at the edge: whether a request the gateway would forward may go on, as whom
//! and at which API version. Decided before anything is sent, in the dashboard's order:
//! the method (405), the token (401), the operation (404), the gateway's own account
//! (403), the role (403), the version (415). The operation table (`table`) says what each
//! dashboard operation needs.

mod drift;
mod releases;
mod table;

use std::net::IpAddr;

use std::sync::Arc;

use http::{HeaderMap, Method};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

pub use releases::{ReleaseTables, Rules, TableChoice};
pub use table::{AccessError, AccessTable, Lookup, OperationId, Requirement};

use crate::auth::{Auth, AuthError};
use crate::ceph_release::CephRelease;
use crate::dashboard_identity;
use crate::docs::Offer;
use crate::edge::headers::carries_only;
use crate::edge::request::joined_header;
use crate::forward::Forward;
use crate::routes::Route;
use crate::state::UnixTime;
use crate::token_redaction;
use crate::users::RoleEdition;
use crate::versioning::{self, ApiVersion, Negotiated, VersionError};

/// The methods the dashboard's operations use; others are refused before any check
/// (`delete` or `BREW` would otherwise be checked as a read).
const FORWARDED_METHODS: [Method; 6] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
];

/// What a path segment escapes (everything but RFC 3986's unreserved characters), as the
/// normalized path spells it.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Why admission refused a request, in the order it checks.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// A method no dashboard operation uses.
    #[error("the method is not forwarded")]
    MethodNotAllowed { allow: &'static str },
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error(transparent)]
    Access(#[from] AccessError),
    /// It would act on the gateway's own dashboard account.
    #[error("the request would change the gateway's own dashboard account")]
    ServiceAccount,
    #[error(transparent)]
    Version(#[from] VersionError),
}

/// What admission reads of a request.
pub struct Request<'a> {
    pub route: Route,
    pub method: &'a Method,
    /// Normalized (`paths::normalize`).
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub headers: &'a HeaderMap,
    /// The system roles of the manager's release.
    pub edition: RoleEdition,
    /// Who sent it (`client_addr`), which an API key may be limited to.
    pub client: Option<IpAddr>,
}

impl<'a> Request<'a> {
    pub fn of(
        header: &'a pingora::http::RequestHeader,
        route: Route,
        path: &'a str,
        edition: RoleEdition,
        client: Option<IpAddr>,
    ) -> Self {
        Request {
            route,
            method: &header.method,
            path,
            query: header.uri.query(),
            headers: &header.headers,
            edition,
            client,
        }
    }
}

/// The tables and what checking them needs.
pub struct Admission {
    tables: ReleaseTables,
    auth: Arc<Auth>,
    vendor: String,
    /// The v1.0 media type, which the dashboard's own clients send alone: taken as it is.
    usual_media_type: Arc<str>,
    /// `/api/user/<service account>`: changing or deleting it would cut the gateway off.
    /// `None` without backends.
    service_account_path: Option<String>,
    /// Whether the gateway manages accounts holding users' roles (`upstream.identity =
    /// "roles"`): then only it changes them and the roles it mirrors; a user allowed to
    /// change accounts could otherwise give every user of a set of roles more.
    managed_accounts: bool,
    /// The unknown operations forwarded and logged (since the last reload).
    drift: drift::DriftLog,
}

impl Admission {
    pub fn new(
        tables: ReleaseTables,
        auth: Arc<Auth>,
        vendor: String,
        service_account: Option<&str>,
        managed_accounts: bool,
    ) -> Admission {
        let service_account_path = service_account
            .map(|name| format!("/api/user/{}", utf8_percent_encode(name, PATH_SEGMENT)));
        Admission {
            tables,
            auth,
            usual_media_type: ApiVersion::V1_0.media_type(&vendor).into(),
            vendor,
            service_account_path,
            managed_accounts,
            drift: drift::DriftLog::default(),
        }
    }

    /// An API request no operation of the table matches, forwarded for `manager` to decide:
    /// the operation as the log names it (`drift::fold`), the first time only.
    pub fn first_unknown(&self, manager: &str, method: &Method, path: &str) -> Option<String> {
        self.drift.first_time(manager, method, path)
    }

    /// The table for a manager running `manager` (`None`: not known).
    pub fn table_for(&self, manager: Option<CephRelease>) -> TableChoice {
        self.tables.choose(manager)
    }

    /// The rules for a request to a manager running `manager` (`None`: not known).
    pub fn rules_for(&self, manager: Option<CephRelease>) -> Rules {
        self.tables.rules_for(manager)
    }

    /// The operation of the `choice` table `method path` matches, and what it needs.
    pub fn lookup(&self, choice: TableChoice, method: &Method, path: &str, route: Route) -> Lookup {
        self.tables
            .lookup(choice, method, path, route == Route::Api)
    }

    /// What the gateway does with the operation `method template` (an OpenAPI path
    /// template of the manager's document) by the `choice` table.
    pub fn offer(&self, choice: TableChoice, method: &Method, template: &str) -> Offer {
        let lookup = self.tables.lookup(choice, method, template, true);
        match (lookup.operation, lookup.requirement) {
            (Some(_), Ok(_)) => Offer::Checked,
            (None, Ok(_)) => Offer::Unknown { forwarded: true },
            (None, Err(AccessError::UnknownPath)) => Offer::Unknown { forwarded: false },
            _ => Offer::Refused,
        }
    }

    /// The template of an operation `lookup` found, e.g. `/api/pool/{pool_name}`.
    pub fn template(&self, id: OperationId) -> &str {
        self.tables.template(id)
    }

    /// The forwarding decision, or the refusal, given the request's `lookup`. API paths
    /// need a token unless the gateway opened the operation; the web UI's files need none.
    pub async fn admit(
        &self,
        request: Request<'_>,
        lookup: Lookup,
        now: UnixTime,
    ) -> Result<Forward, AdmissionError> {
        if !FORWARDED_METHODS.contains(request.method) {
            return Err(AdmissionError::MethodNotAllowed {
                allow: "GET, HEAD, POST, PUT, PATCH, DELETE",
            });
        }
        let requirement = lookup.requirement;
        let authenticated = match requirement {
            Ok(Requirement::Open) => None,
            Err(_) if request.route != Route::Api => None,
            _ => Some(
                self.auth
                    .authenticate(request.headers, request.client, now)
                    .await?,
            ),
        };
        let (user, user_token) = match authenticated {
            Some(a) => (Some(a.user), a.upstream),
            None => (None, None),
        };
        let requirement = requirement?;
        if self.changes_service_account(request.method, request.path) {
            return Err(AdmissionError::ServiceAccount);
        }
        if let Some(user) = &user {
            AccessTable::authorize(user, requirement, request.edition)?;
        }
        let accept = self.media_type(&request, lookup.version)?;
        let path_and_query = match request.query {
            Some(query) => format!("{}?{query}", request.path),
            None => request.path.to_string(),
        };
        let redact_tokens = token_redaction::carries_tokens(request.method, request.path);
        Ok(Forward {
            redact_tokens,
            path_and_query,
            user,
            user_token,
            // Set by the request path, which knows whom the dashboard sees.
            seen_as: None,
            accept,
        })
    }

    /// The single media type the dashboard gets for an API path, from the client's Accept:
    /// one the operation serves when the table knows its `version` (else the dashboard's
    /// 415, answered here), the client's preferred one when it does not.
    fn media_type(
        &self,
        request: &Request<'_>,
        version: Option<ApiVersion>,
    ) -> Result<Option<Arc<str>>, VersionError> {
        if request.route != Route::Api {
            return Ok(None);
        }
        // (negotiating it would cost 2,000 instructions, on nearly every request; compared
        // as bytes, the usual Accept costs no text check either)
        let usual = carries_only(
            request.headers,
            http::header::ACCEPT,
            self.usual_media_type.as_bytes(),
        );
        if usual && version.is_none_or(|v| v.serves(ApiVersion::V1_0)) {
            return Ok(Some(Arc::clone(&self.usual_media_type)));
        }
        let accept = joined_header(request.headers, http::header::ACCEPT);
        let chosen = match version {
            Some(endpoint) => {
                match versioning::negotiate(accept.as_deref(), &self.vendor, endpoint, false)? {
                    Negotiated::Vendor(version) => version,
                    // (`plain_ok` false: never)
                    Negotiated::Plain => endpoint,
                }
            }
            None => versioning::choose(accept.as_deref(), &self.vendor)?,
        };
        Ok(Some(chosen.media_type(&self.vendor).into()))
    }

    fn changes_service_account(&self, method: &Method, path: &str) -> bool {
        if method == Method::GET || method == Method::HEAD {
            return false;
        }
        let on_service_account = self.service_account_path.as_ref().is_some_and(|account| {
            path.strip_prefix(account.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        });
        on_service_account || (self.managed_accounts && on_managed_account_or_role(path))
    }
}

/// Whether `path` names an account or a role the gateway manages (`/api/user/cg-<16 hex>`,
/// `/api/role/cg-role-<tag>-...`): only names of the gateway's shape, so that the cluster's
/// own accounts that merely start alike stay the dashboard's to decide.
fn on_managed_account_or_role(path: &str) -> bool {
    let name_after = |prefix: &str| {
        let rest = path.strip_prefix(prefix)?;
        rest.split('/').next()
    };
    name_after("/api/user/").is_some_and(dashboard_identity::is_managed_account)
        || name_after("/api/role/").is_some_and(dashboard_identity::is_mirrored_role)
}

#[cfg(test)]
mod tests {
    use super::on_managed_account_or_role as managed;

    #[test]
    fn only_names_of_the_gateways_shape_are_its_accounts_and_roles() {
        assert!(managed("/api/user/cg-0123456789abcdef"));
        assert!(managed("/api/user/cg-0123456789abcdef/change_password"));
        assert!(managed("/api/role/cg-role-a1b2c3-auditors"));
        assert!(managed("/api/role/cg-role-a1b2c3-auditors/clone"));
        assert!(!managed("/api/user/cg-probe-nonexistent"));
        assert!(!managed("/api/user/cg-0123456789abcdeg"));
        assert!(!managed("/api/user/cg-0123456789abcdef0"));
        assert!(!managed("/api/role/cg-role-auditors"));
        assert!(!managed("/api/role/cg-role-a1b2c3"));
        assert!(!managed("/api/pool/cg-0123456789abcdef"));
    }
}
