//! clustergate: an authenticating reverse proxy, built on pingora, in front of Ceph
//! manager dashboards. The map of its modules (their levels, one request's walk through
//! them, where a new thing goes) is docs/architecture.md; `deploy/tools/check-imports.py`
//! keeps the imports running one way and the map true.

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
