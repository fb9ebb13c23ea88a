//! Each user's own dashboard session: the login the gateway makes to the active dashboard
//! as the user (`auth.source = "dashboard"` checks the password there; `upstream.identity
//! = "user"` logs a local user in there too), the session kept server side in the state
//! store under the gateway token's id, and its end (logout, or the dashboard refusing
//! its token). The dashboard's token goes upstream only: never to the client, never to a
//! log.

use std::sync::Arc;

use dashmap::DashMap;
use serde_json::Value;

use super::{AuthError, TokenRejection};
use crate::dashboards::login::{self, LoginError};
use crate::dashboards::{health, BackendState, Upstreams};
use crate::state::{StateError, UnixTime, UserSession, UserSessions};
use crate::users::{Grants, User};

/// Sessions this gateway remembers between requests; beyond it, the store is asked.
const CACHE_MAX: usize = 10_000;

/// What a hold on a login attempt lasts beyond the login's own time limit: the state
/// store's round trips to settle it.
const ATTEMPT_HOLD_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    /// Wrong password, or no such (enabled) account on the dashboard.
    #[error("the dashboard refused the login")]
    Refused,
    /// No active dashboard could answer: the client may try again.
    #[error("the dashboard cannot check the login: {0}")]
    Unavailable(String),
    #[error(transparent)]
    Store(#[from] StateError),
}

/// What the dashboard answered to a login.
pub struct DashboardLogin {
    pub token: Arc<str>,
    /// What the answer's `permissions` grant; names this gateway does not know grant nothing.
    pub grants: Grants,
    /// The dashboard token's `exp` (`None`: it has none the gateway can read).
    pub exp: Option<UnixTime>,
}

/// The credential a user's forwarded request carries upstream instead of the service
/// account's token, and the gateway token it belongs to.
#[derive(Clone)]
pub struct UserToken {
    pub jti: String,
    pub token: Arc<str>,
    /// When the session ends (the gateway token's `exp` too).
    pub until: UnixTime,
}

impl std::fmt::Debug for UserToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserToken")
            .field("jti", &self.jti)
            .field("token", &"[redacted]")
            .field("until", &self.until)
            .finish()
    }
}

/// A session as requests use it.
pub struct Session {
    pub token: UserToken,
    /// The user the dashboard's answer describes; `None` for a local user's session
    /// (the users file grants).
    pub user: Option<Arc<User>>,
}

pub struct DashboardAccounts {
    upstreams: Arc<Upstreams>,
    /// The Accept header of the dashboard's auth endpoints (version 1.0).
    accept: String,
    store: Arc<dyn UserSessions>,
    cache: DashMap<String, Arc<Session>>,
    /// At most this many sessions in `cache` ([`CACHE_MAX`]).
    cache_max: usize,
    /// The gateway's own account (`upstream.username`): never logged in for a client.
    service_account: String,
}

impl DashboardAccounts {
    pub fn new(
        upstreams: Arc<Upstreams>,
        accept: String,
        store: Arc<dyn UserSessions>,
        service_account: String,
    ) -> Self {
        DashboardAccounts {
            upstreams,
            accept,
            store,
            cache: DashMap::new(),
            cache_max: CACHE_MAX,
            service_account,
        }
    }

    /// Whether `username` is the gateway's own account.
    pub fn is_service_account(&self, username: &str) -> bool {
        username == self.service_account
    }

    /// The longest a login at the dashboard can take, plus room for settling it: a hold on
    /// an attempt lasts this long before it counts as a failure.
    pub fn attempt_hold(&self) -> std::time::Duration {
        self.upstreams.timeouts.login + ATTEMPT_HOLD_MARGIN
    }

    /// Whether an active dashboard is known to ask.
    pub fn available(&self) -> bool {
        self.upstreams.active().is_some()
    }

    /// Logs in to the active dashboard as `username` with `password`.
    pub async fn log_in(
        &self,
        username: &str,
        password: &str,
        now: UnixTime,
    ) -> Result<DashboardLogin, DashboardError> {
        let backend = self
            .upstreams
            .active()
            .ok_or_else(|| DashboardError::Unavailable("no active dashboard backend".into()))?;
        let answer = match login::log_in(
            &self.upstreams,
            &backend,
            &self.accept,
            username,
            password,
        )
        .await
        {
            Ok(answer) => answer,
            Err(LoginError::Refused(_)) => return Err(DashboardError::Refused),
            Err(LoginError::NotActive(status)) => {
                // A standby (or a manager going away): the health check confirms it.
                health::record(&backend, BackendState::Standby);
                return Err(DashboardError::Unavailable(format!(
                    "{} answered the login with {status}",
                    backend.base
                )));
            }
            Err(e) => return Err(DashboardError::Unavailable(e.to_string())),
        };
        let grants = grants_of(answer.body.get("permissions"), username);
        let exp = login::lifetime(&answer.token, now).map(|(_, exp)| exp);
        Ok(DashboardLogin {
            token: Arc::from(answer.token),
            grants,
            exp,
        })
    }

    /// Keeps the session of gateway token `jti`.
    pub async fn open(
        &self,
        jti: &str,
        session: &UserSession,
        now: UnixTime,
    ) -> Result<(), StateError> {
        self.store.open(jti, session, now).await
    }

    /// The session of gateway token `jti` (checked not revoked by the caller): from this
    /// gateway's memory, else from the store (another gateway may have opened it).
    pub async fn find(&self, jti: &str, now: UnixTime) -> Result<Option<Arc<Session>>, StateError> {
        if let Some(session) = self.cache.get(jti).filter(|s| s.token.until >= now) {
            return Ok(Some(session.clone()));
        }
        let Some(stored) = self.store.find(jti, now).await? else {
            return Ok(None);
        };
        let session = Arc::new(session_of(jti, stored));
        self.remember(jti, &session, now);
        Ok(Some(session))
    }

    /// The session a gateway token needs (`TokenRejection::NoSession` once it has ended).
    pub(super) async fn session(
        &self,
        jti: &str,
        now: UnixTime,
    ) -> Result<Arc<Session>, TokenRejection> {
        self.find(jti, now).await?.ok_or(TokenRejection::NoSession)
    }

    /// Ends the session of `jti` here and in the store; with `log_out`, on the dashboard
    /// too (its token is refused from then on). A dashboard that cannot be told is logged:
    /// its token then ends at its own `exp`.
    pub async fn end(&self, token: &UserToken, log_out: bool) -> Result<(), StateError> {
        self.cache.remove(&token.jti);
        self.store.close(&token.jti).await?;
        if !log_out {
            return Ok(());
        }
        let Some(backend) = self.upstreams.active() else {
            tracing::warn!(jti = %token.jti, "no active dashboard to log the user's dashboard token out");
            return Ok(());
        };
        match login::log_out(&self.upstreams, &backend, &self.accept, &token.token).await {
            Ok(200..=299) => {}
            Ok(status) => {
                tracing::warn!(server = %backend.base, jti = %token.jti, status, "the dashboard did not log the user's token out")
            }
            Err(e) => {
                tracing::warn!(server = %backend.base, jti = %token.jti, error = %e, "cannot log the user's dashboard token out")
            }
        }
        Ok(())
    }

    /// Remembers `session`, unless the cache is full of sessions that have not ended.
    fn remember(&self, jti: &str, session: &Arc<Session>, now: UnixTime) {
        if self.cache.len() >= self.cache_max {
            self.cache.retain(|_, s| s.token.until >= now);
            if self.cache.len() >= self.cache_max {
                return;
            }
        }
        self.cache.insert(jti.to_string(), session.clone());
    }
}

/// A dashboard that could not answer a login: 503 (the client tries again), never a 500.
pub(super) fn unavailable(e: DashboardError) -> AuthError {
    match e {
        DashboardError::Store(e) => AuthError::State(e),
        other => {
            tracing::warn!(error = %other, "the dashboard could not answer a login");
            AuthError::Unavailable("the dashboard cannot check the login now; try again".into())
        }
    }
}

/// What a dashboard's `permissions` object grants (nothing when there is none).
fn grants_of(permissions: Option<&Value>, username: &str) -> Grants {
    let lists: Vec<(&str, Vec<String>)> = permissions
        .and_then(Value::as_object)
        .map(|scopes| {
            scopes
                .iter()
                .map(|(scope, names)| (scope.as_str(), string_list(names)))
                .collect()
        })
        .unwrap_or_default();
    let (grants, unknown) = Grants::from_permissions(lists.iter().map(|(s, p)| (*s, p.as_slice())));
    if !unknown.0.is_empty() {
        tracing::info!(username = ?username, unknown = ?unknown.0, "the dashboard grants scopes this gateway does not know; they grant nothing here");
    }
    grants
}

fn string_list(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

fn session_of(jti: &str, stored: UserSession) -> Session {
    let UserSession {
        username,
        dashboard_token,
        permissions,
        until,
    } = stored;
    let user = permissions.map(|text| {
        let permissions = serde_json::from_str::<Value>(&text).ok();
        let grants = grants_of(permissions.as_ref(), &username);
        Arc::new(User::from_dashboard(username.clone(), grants))
    });
    Session {
        token: UserToken {
            jti: jti.to_string(),
            token: dashboard_token,
            until,
        },
        user,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::MemoryUserSessions;
    use crate::users::{Permission, Scope};

    fn accounts() -> DashboardAccounts {
        DashboardAccounts::new(
            Arc::new(Upstreams::for_tests(1)),
            "application/vnd.ceph.api.v1.0+json".into(),
            Arc::new(MemoryUserSessions::new(10)),
            "clustergate".into(),
        )
    }

    #[test]
    fn a_login_answers_permissions_grant_what_they_name_and_nothing_else() {
        let permissions = serde_json::json!(
            {"pool": ["read", "update"], "nvmeof": ["read"], "osd": "read"}
        );
        let grants = grants_of(Some(&permissions), "u");
        assert!(grants.allows(
            crate::users::RoleEdition::Pacific,
            Scope::Pool,
            Permission::Update
        ));
        assert!(!grants.allows(
            crate::users::RoleEdition::Pacific,
            Scope::Pool,
            Permission::Delete
        ));
        assert!(!grants.allows(
            crate::users::RoleEdition::Pacific,
            Scope::Osd,
            Permission::Read
        ));
        assert_eq!(
            grants.json(crate::users::RoleEdition::Pacific),
            r#"{"pool":["read","update"]}"#
        );
        assert_eq!(
            grants_of(None, "u").json(crate::users::RoleEdition::Pacific),
            "{}"
        );
    }

    #[tokio::test]
    async fn a_stored_session_is_found_with_its_dashboard_grants_until_it_ends() {
        let accounts = accounts();
        let stored = UserSession {
            username: "ops".into(),
            dashboard_token: "dash".into(),
            permissions: Some(r#"{"pool":["read"]}"#.into()),
            until: 200,
        };
        accounts.open("j", &stored, 100).await.unwrap();
        let session = accounts.find("j", 150).await.unwrap().unwrap();
        assert_eq!(&*session.token.token, "dash");
        let user = session.user.clone().unwrap();
        assert_eq!(user.username, "ops");
        assert!(user.grants.allows(
            crate::users::RoleEdition::Pacific,
            Scope::Pool,
            Permission::Read
        ));
        assert!(user.password_hash.is_none());
        // Cached or not, an ended session is not served.
        assert!(accounts.find("j", 201).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn the_cache_stays_bounded_and_what_it_cannot_hold_comes_from_the_store() {
        let mut accounts = accounts();
        accounts.cache_max = 2;
        let session = |until| UserSession {
            username: "ops".into(),
            dashboard_token: "dash".into(),
            permissions: None,
            until,
        };
        for (jti, until) in [("a", 150), ("b", 300), ("c", 300)] {
            accounts.open(jti, &session(until), 100).await.unwrap();
            assert!(accounts.find(jti, 100).await.unwrap().is_some());
        }
        assert_eq!(accounts.cache.len(), 2);
        assert!(!accounts.cache.contains_key("c"));
        assert!(accounts.find("c", 100).await.unwrap().is_some());
        // Once "a" has ended, it makes room.
        assert!(accounts.find("c", 200).await.unwrap().is_some());
        assert!(accounts.cache.contains_key("c") && !accounts.cache.contains_key("a"));
    }

    #[tokio::test]
    async fn an_ended_session_is_gone_from_the_cache_and_the_store() {
        let accounts = accounts();
        let stored = UserSession {
            username: "ops".into(),
            dashboard_token: "dash".into(),
            permissions: None,
            until: 200,
        };
        accounts.open("j", &stored, 100).await.unwrap();
        let session = accounts.find("j", 100).await.unwrap().unwrap();
        assert!(session.user.is_none());
        accounts.end(&session.token, false).await.unwrap();
        assert!(accounts.find("j", 100).await.unwrap().is_none());
        assert!(accounts.store.find("j", 100).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn without_an_active_dashboard_a_login_is_unavailable_not_refused() {
        let accounts = accounts();
        assert!(matches!(
            accounts.log_in("u", "p", 100).await,
            Err(DashboardError::Unavailable(_))
        ));
    }
}
