//! A small [`Auth`] for unit tests: users admin/pw (administrator), viewer/pw (read-only),
//! disabled/pw (disabled); lockout after 3 failures for 60 s; no limit per client unless
//! asked for ([`auth_limited`]).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::{Auth, AuthParts, AuthRequest, KeyLimits, KeyPolicy};
use crate::config::{AuthSource, LockoutPolicy};
use crate::edge::respond::LocalResponse;
use crate::observe::metrics::Metrics;
use crate::secrets::Secret;
use crate::state::{BucketRate, StateConfig};
use crate::tokens::{SigningKey, TokenService};
use crate::users::{PasswordChecker, PasswordHash, Role, UserDb, UserSpec};

pub const NOW: u64 = 1_800_000_000;
pub const NOW_MS: u64 = NOW * 1000;
pub const LOCKOUT_SECONDS: u64 = 60;
/// The service account of [`auth_without_an_active_dashboard`].
pub const SERVICE_ACCOUNT: &str = "clustergate";

pub fn auth() -> Arc<Auth> {
    Arc::new(Auth::new(parts()))
}

/// A token for `username` issued at `now` with the user's credential, as a login issues it
/// (for a user that is not active, with none).
pub fn token_for(auth: &Auth, username: &str, now: u64) -> String {
    let users = auth.users.load();
    let fingerprint = users
        .active_with_credential(username)
        .map_or("", |(_, credential)| credential.fingerprint.as_str());
    auth.tokens
        .load()
        .issue_until(username, fingerprint, now, None)
        .unwrap()
        .token
}

/// Logins checked by a dashboard (`auth.source = "dashboard"`) that is never active: the
/// unit tests see what happens before the dashboard is asked.
pub fn auth_without_an_active_dashboard() -> Arc<Auth> {
    Arc::new(Auth::new(AuthParts {
        source: AuthSource::Dashboard,
        users: UserDb::new(Vec::new()).unwrap(),
        dashboard: Some(Arc::new(super::DashboardAccounts::new(
            Arc::new(crate::dashboards::Upstreams::for_tests(1)),
            "application/vnd.ceph.api.v1.0+json".into(),
            Arc::new(crate::state::MemoryUserSessions::new(10)),
            SERVICE_ACCOUNT.into(),
        ))),
        ..parts()
    }))
}

/// With each client's failed logins limited to `rate`.
pub fn auth_limited(rate: BucketRate) -> Arc<Auth> {
    Arc::new(Auth::new(AuthParts {
        failed_logins_per_client: Some(rate),
        ..parts()
    }))
}

/// Without a lockout per username.
pub fn auth_without_lockout() -> Arc<Auth> {
    Arc::new(Auth::new(AuthParts {
        lockout: None,
        ..parts()
    }))
}

/// The users of [`auth`], as the users file would give them.
pub fn user_specs() -> Vec<UserSpec> {
    static HASH: std::sync::OnceLock<PasswordHash> = std::sync::OnceLock::new();
    let hash = HASH.get_or_init(|| PasswordHash::hash_new("pw").unwrap());
    let user = |name: &str, role: Role, enabled: bool| UserSpec {
        username: name.into(),
        password_hash: hash.clone(),
        roles: vec![role],
        custom_roles: Vec::new(),
        enabled,
    };
    vec![
        user("admin", Role::Administrator, true),
        user("viewer", Role::ReadOnly, true),
        user("disabled", Role::Administrator, false),
    ]
}

/// The users file's users of [`user_specs`], a lockout after 3 failures, no limit per client.
pub fn parts() -> AuthParts {
    AuthParts {
        source: AuthSource::Local,
        lockout: Some(LockoutPolicy {
            attempts: 3,
            duration: Duration::from_secs(LOCKOUT_SECONDS),
        }),
        failed_logins_per_client: None,
        passwords: PasswordChecker::new(1, 8),
        vendor: "ceph".into(),
        tls: false,
        users: UserDb::new(user_specs()).unwrap(),
        tokens: TokenService::new(
            &[SigningKey {
                kid: SigningKey::DEFAULT_KID.into(),
                secret: Secret::new(b"0123456789abcdef0123456789abcdef".to_vec()),
            }],
            "clustergate".into(),
            Duration::from_secs(8 * 3600),
        ),
        // Auth records no account use: the state directory is never read or written.
        stores: StateConfig::Memory
            .build(std::path::Path::new("/nonexistent"), 100)
            .unwrap(),
        metrics: Metrics::new(&prometheus::Registry::new()).unwrap(),
        dashboard: None,
        oidc: None,
        key_limits: KeyLimits {
            rate: KEY_RATE,
            max_keys: 100,
        },
        key_policy: KeyPolicy {
            max_lifetime_seconds: 90 * 86_400,
        },
    }
}

/// Each API key's bucket in [`auth`]: 3 requests, then one a minute (no test waits).
pub const KEY_RATE: BucketRate = BucketRate {
    burst: 3,
    refill_ms: 60_000,
};

/// Headers of a JSON POST with this Accept.
pub fn post(accept: &str) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::ACCEPT, accept.parse().unwrap());
    headers.insert(
        http::header::CONTENT_TYPE,
        "application/json".parse().unwrap(),
    );
    headers
}

/// A request with these headers and body, and no query.
pub fn request(headers: &http::HeaderMap, body: impl Into<bytes::Bytes>) -> AuthRequest<'_> {
    AuthRequest {
        headers,
        query: None,
        body: body.into(),
        client: None,
        edition: crate::users::RoleEdition::Pacific,
    }
}

/// A login body.
pub fn credentials(username: &str, password: &str) -> String {
    serde_json::json!({"username": username, "password": password}).to_string()
}

pub fn body_of(response: &LocalResponse) -> Value {
    serde_json::from_slice(&response.body).unwrap()
}

/// Password hashes `auth` has computed, as its metrics count them.
pub fn hashes(auth: &Auth) -> u64 {
    let text = String::from_utf8(auth.metrics.render().unwrap()).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("clustergate_password_verifications_total "))
        .map_or(0, |n| n.parse().unwrap())
}
