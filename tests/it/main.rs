//! The integration tests, one binary (one link of the dependency tree instead of one per
//! file): a module per area, each starting the real components it needs (the gateway
//! binary, real Ceph dashboards, Redis, HAProxy, Prometheus, Chromium, an OpenID provider)
//! on 127.0.0.1. `cargo test --test it MODULE::` runs one area.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use clustergate_test_support as common;

/// What a gateway of the test deployment sealed in the Redis key `key`.
fn unsealed(key: &str, stored: &str) -> Option<String> {
    use common::redis_server::{ENCRYPTION_KID, ENCRYPTION_SECRET};
    let opened = clustergate::testing::open_sealed(
        ENCRYPTION_KID,
        ENCRYPTION_SECRET.as_bytes(),
        key,
        stored,
    )?;
    String::from_utf8(opened).ok()
}

mod answer_cache;
mod api_fuzz;
mod api_keys;
mod api_paths;
mod book_examples;
mod check_logout;
mod cli;
mod cluster;
mod cluster_data;
mod cookies;
mod credential_sources;
mod credentials;
mod dashboard_accounts;
mod docs;
mod failover;
mod forward;
mod hardening;
mod import;
mod keepalive;
mod kubernetes;
mod lifecycle;
mod lockout;
mod login;
mod login_limits;
mod logs;
mod metrics;
mod monitoring;
mod multi_cluster;
mod oidc_bearer;
mod oidc_browser;
mod open_bodies;
mod parity;
mod path_spellings;
mod places;
mod redis_failover;
mod releases;
mod reload;
mod role_account_failures;
mod role_accounts;
mod scope_table;
mod secrets_in_logs;
mod slow_bodies;
mod tls_http2;
mod ui_browser;
mod ui_releases;
mod unknown_operations;
mod upgrade;
mod upstream_token;
mod versioning;
