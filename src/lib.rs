//! clustergate: an authenticating reverse proxy, built on pingora, in front of Ceph
//! manager dashboards.
//!
//! The request path, in the order `proxy.rs` runs it:
//! 1. `paths` normalizes the path and `routes` classifies it into a [`routes::Route`].
//! 2. The auth endpoints are answered by `auth` (login, check, logout), with `versioning`
//!    deciding the API version from Accept, `users` the passwords and roles, `tokens` the
//!    JWTs, `client_addr` who the client is, and `state` the revocations, lockouts,
//!    failed logins per client and users' dashboard sessions (with `auth.source =
//!    "dashboard"` the dashboard checks the password; with `upstream.identity = "user"` each
//!    user acts upstream as their own dashboard account); `docs` answers `/docs`.
//! 3. Everything else is admitted by `access` (method, token, operation, role, version),
//!    its body checked by `request`, and forwarded by `upstream` (which manager, one
//!    request's attempts) and `forward` (what changes on the way).
//! 4. `errors` maps every refusal to the dashboard's status and JSON shape, `respond`
//!    writes it with the security headers, and `metrics` counts it; `access_log` writes
//!    its line and `audit` the logins, logouts, lockouts and changes it made.
//!
//! Start-up: `config` reads and validates the files once; `server` creates the state
//! (`tls`, `secrets`, the initial admin) and hands the services to pingora: the proxy,
//! wrapped by `connections` (request heads bounded in size and time, idle client
//! connections kept small, connections per client address capped), the `admin`
//! listener (`/metrics`, `/healthz`, `/readyz`), the dashboards' health checks, and
//! `reload` (SIGHUP reloads the configuration and reopens the audit file). `logs` sets up
//! where log lines go (`main`). `import` is `clustergate users import`: the dashboard's
//! accounts as a users file and a roles file.

// The few libc calls allow it where they are, each with its SAFETY note.
#![deny(unsafe_code)]

mod access;
mod access_log;
mod app;
mod audit;
mod auth;
mod client_addr;
pub mod config;
mod connections;
mod decimal;
mod docs;
mod error_answers;
mod errors;
mod forward;
mod headers;
pub mod import;
pub mod logs;
mod metrics;
mod paths;
mod proxy;
mod queue_slot;
mod readiness;
mod request;
mod respond;
mod routes;
pub mod secrets;
mod state;
pub use app::server;
#[cfg(test)]
mod test_ports;
mod tls;
mod tokens;
mod upstream;
pub mod users;
mod versioning;

#[cfg(test)]
mod fuzz_properties;
