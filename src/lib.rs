//! clustergate: an authenticating reverse proxy, built on pingora, in front of Ceph
//! manager dashboards.
//!
//! The request path, in the order `proxy.rs` runs it:
//! 1. `routes` classifies the path into a [`routes::Route`].
//! 2. The auth endpoints are answered by `auth` (login, check, logout), with `versioning`
//!    deciding the API version from Accept, `users` the passwords and roles, `tokens` the
//!    JWTs, and `state` the revocations and lockouts.
//! 3. Every other API path needs a valid token (`auth::Auth::authenticate`).
//! 4. `errors` maps every refusal to the dashboard's status and JSON shape, `respond`
//!    writes it with the security headers, and `metrics` counts it.
//!
//! Start-up: `config` reads and validates the files once; `server` creates the state
//! (`tls`, `secrets`, the initial admin) and hands the services to pingora, the proxy
//! wrapped by `keepalive` so that idle client connections stay small.

pub mod access;
pub mod auth;
pub mod config;
pub mod docs;
pub mod errors;
pub mod forward;
pub mod keepalive;
pub mod metrics;
pub mod paths;
pub mod proxy;
pub mod respond;
pub mod routes;
pub mod secrets;
pub mod server;
pub mod state;
pub mod tls;
pub mod tokens;
pub mod upstream;
pub mod users;
pub mod versioning;
