//! clustergate: an authenticating reverse proxy, built on pingora, in front of Ceph
//! manager dashboards. Imports run downward only (`deploy/tools/check-imports.py`).
//!
//! The request path, in the order `proxy` runs it:
//! 1. `edge::paths` normalizes the path and `routes` classifies it into a
//!    [`routes::Route`].
//! 2. The auth endpoints are answered by `auth` (login, check, logout), with `versioning`
//!    deciding the API version from Accept, `users` the passwords and roles, `tokens` the
//!    JWTs, `client_addr` who the client is, and `state` the revocations, lockouts,
//!    failed logins per client and users' dashboard sessions (with `auth.source =
//!    "dashboard"` the dashboard checks the password; with `upstream.identity = "user"` each
//!    user acts upstream as their own dashboard account); `docs` answers `/docs`. With
//!    `[oidc]`, `oidc` verifies the identity provider's tokens (and `auth::sso` serves the
//!    browser's login under `/auth/oidc/`). API keys (`api_keys`: the format and the record)
//!    are bearer tokens too (`auth::source::api_keys`), managed under
//!    `/api/clustergate/keys` (`auth::key_api`).
//! 3. Everything else is admitted by `access` (method, token, operation, role, version),
//!    its body read by `edge::request`, and forwarded by `dashboards` (which manager, one
//!    request's attempts, what a try learns: `dashboards::failover`) and `forward` (what
//!    changes on the way), as the dashboard account `dashboard_identity` says (with
//!    `upstream.identity = "roles"` one the gateway manages, holding the user's roles). Admitted GETs of the operations the web UI polls are first
//!    asked of `answer_cache`: identical ones in flight share one dashboard request, and
//!    its answer is kept a second.
//! 4. `error_answers` turns every module's error into an answer (`errors`: the dashboard's
//!    status and JSON shape), `edge::respond` writes it with the security headers;
//!    `observe` counts it (`metrics`) and writes its access line and audit record.
//!
//! Start-up and reload (`app`): `config` reads and validates the files once;
//! `app::parts` builds what a reload replaces, the same code both times; `app::server`
//! creates the state (`tls`, `secrets`, the initial admin) and hands the services to
//! pingora: the proxy, wrapped by `edge::connections` (request heads bounded in size and
//! time, idle client connections kept small, connections per client address capped), the
//! admin listener (`/metrics`, `/healthz`, `/readyz`), the dashboards' health checks, and
//! the reload on SIGHUP (`app::restart` names what only a restart applies).
//! `observe::logs` sets up where log lines go (`main`). `import` is
//! `clustergate users import`: the dashboard's accounts as a users file and a roles file;
//! `keys_cli` is `clustergate keys`: API keys managed through a running gateway's HTTP API.

// The few libc calls allow it where they are, each with its SAFETY note.
#![deny(unsafe_code)]

mod access;
mod answer_cache;
mod api_keys;
mod app;
mod auth;
mod ceph_release;
mod client_addr;
pub mod config;
mod dashboard_identity;
mod dashboards;
mod decimal;
mod docs;
mod edge;
mod error_answers;
mod errors;
mod forward;
pub mod import;
pub mod keys_cli;
mod observe;
mod oidc;
pub use observe::logs;
mod proxy;
mod queue_slot;
mod readiness;
mod releases;
mod routes;
pub mod secrets;
mod state;
pub use app::{accounts, server};
#[cfg(feature = "test-support")]
pub mod testing;
mod tls;
mod token_redaction;
mod tokens;
pub mod users;
mod versioning;

#[cfg(test)]
mod fuzz_properties;
