//! What the gateway measures. The admin listener (`admin`) serves it.
//!
//! Each module's metrics are one family here, in its own file: the family registers its
//! metrics and has the methods that count them; `Metrics` holds one of each.

mod answer_cache;
mod api_keys;
mod auth;
mod backends;
mod bodies;
mod children;
mod connections;
mod dashboard_accounts;
mod deployment;
mod labels;
mod logs;
mod oidc;
mod requests;
mod state;
mod upstream;

use std::sync::Arc;

use prometheus::core::Collector;
use prometheus::{Encoder, Registry, TextEncoder};

pub use answer_cache::{AnswerCacheMetrics, CacheResult};
pub use api_keys::{ApiKeyMetrics, KeyChange, KeyResult};
pub use auth::AuthMetrics;
pub use backends::{BackendMetrics, BackendSeries};
pub use bodies::BodyMetrics;
pub use connections::ConnectionMetrics;
pub use dashboard_accounts::DashboardAccountMetrics;
pub use deployment::DeploymentMetrics;
pub use labels::{ConnectionRefusal, LoginResult, TokenCheckResult};
pub use logs::LogMetrics;
pub use oidc::OidcMetrics;
pub use requests::RequestMetrics;
pub use state::StateMetrics;
pub use upstream::UpstreamMetrics;

/// The gateway's metrics, registered once at start-up: one family per module that counts.
pub struct Metrics {
    registry: Registry,
    /// Requests answered, and those to operations the table does not know.
    pub requests: RequestMetrics,
    /// Logins, token checks, lockouts.
    pub auth: AuthMetrics,
    /// Requests with API keys, and the keys' changes.
    pub api_keys: ApiKeyMetrics,
    /// The dashboard backends' health and load, read at each scrape.
    pub backends: BackendMetrics,
    /// The backends' answers, overloads and the service account's logins.
    pub upstream: UpstreamMetrics,
    /// The dashboard accounts and roles the gateway manages.
    pub dashboard_accounts: DashboardAccountMetrics,
    /// The state store's health, read at each scrape.
    pub state: StateMetrics,
    /// Connections refused before a request was parsed.
    pub connections: ConnectionMetrics,
    /// Build, certificate and configuration reloads.
    pub deployment: DeploymentMetrics,
    /// Log lines dropped, audit lines not written.
    pub logs: LogMetrics,
    /// Single sign-on: the provider's keys and tokens.
    pub oidc: OidcMetrics,
    pub answer_cache: AnswerCacheMetrics,
    /// The request body budget.
    pub bodies: BodyMetrics,
}

impl Metrics {
    /// Registers the metrics in `registry` (the process-wide default one in production,
    /// which also carries the process metrics).
    pub fn new(registry: &Registry) -> Result<Arc<Self>, prometheus::Error> {
        Ok(Arc::new(Metrics {
            registry: registry.clone(),
            requests: RequestMetrics::new(registry)?,
            auth: AuthMetrics::new(registry)?,
            api_keys: ApiKeyMetrics::new(registry)?,
            backends: BackendMetrics::new(registry)?,
            upstream: UpstreamMetrics::new(registry)?,
            dashboard_accounts: DashboardAccountMetrics::new(registry)?,
            state: StateMetrics::new(registry)?,
            connections: ConnectionMetrics::new(registry)?,
            deployment: DeploymentMetrics::new(registry)?,
            oidc: OidcMetrics::new(registry)?,
            logs: LogMetrics::new(registry)?,
            answer_cache: AnswerCacheMetrics::new(registry)?,
            bodies: BodyMetrics::new(registry)?,
        }))
    }

    /// Every metric in Prometheus' text format.
    pub fn render(&self) -> Result<Vec<u8>, prometheus::Error> {
        let mut out = Vec::with_capacity(16 * 1024);
        TextEncoder::new().encode(&self.registry.gather(), &mut out)?;
        Ok(out)
    }
}

/// Registers `metric` in `registry` and gives it back, for a family to keep.
fn registered<M: Collector + Clone + 'static>(
    registry: &Registry,
    metric: M,
) -> Result<M, prometheus::Error> {
    registry.register(Box::new(metric.clone()))?;
    Ok(metric)
}

/// `registry`'s metrics in Prometheus' text format, for the tests of its parts.
#[cfg(test)]
pub(crate) fn render_text(registry: &Registry) -> String {
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut out)
        .unwrap_or_default();
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::routes::Route;

    #[test]
    fn requests_are_counted_by_route_method_and_status() {
        let registry = Registry::new();
        let metrics = Metrics::new(&registry).unwrap();
        metrics.requests.observe(
            Route::Login,
            &http::Method::POST,
            201,
            Duration::from_millis(3),
        );
        metrics.requests.observe(
            Route::Api,
            &http::Method::from_bytes(b"BREW").unwrap(),
            404,
            Duration::ZERO,
        );
        metrics.auth.login(LoginResult::Success);
        let text = String::from_utf8(metrics.render().unwrap()).unwrap();
        assert!(
            text.contains(
                r#"clustergate_requests_total{method="POST",route="auth",status="201"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"clustergate_requests_total{method="other",route="proxy",status="404"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"clustergate_logins_total{result="success"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("clustergate_request_duration_seconds_bucket"),
            "{text}"
        );
    }

    #[test]
    fn upstream_series_are_the_backends_observed_last() {
        let registry = Registry::new();
        let metrics = Metrics::new(&registry).unwrap();
        let series = |server, up, active| BackendSeries {
            server,
            up,
            active,
            in_flight: 2,
            queued: 1,
            release: Some(("19.2".into(), "18.2".into())),
        };
        metrics
            .backends
            .observe(&[series("a", true, false), series("b", true, true)]);
        metrics.backends.observe(&[series("b", false, false)]);
        let text = String::from_utf8(metrics.render().unwrap()).unwrap();
        assert!(!text.contains("server=\"a\""), "{text}");
        for line in [
            "clustergate_upstream_up{server=\"b\"} 0\n",
            "clustergate_upstream_active{server=\"b\"} 0\n",
            "clustergate_upstream_in_flight{server=\"b\"} 2\n",
            "clustergate_upstream_queued{server=\"b\"} 1\n",
            "clustergate_upstream_release_info{release=\"19.2\",server=\"b\",table=\"18.2\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn result_labels_are_exported_at_zero_before_any_event() {
        let registry = Registry::new();
        let metrics = Metrics::new(&registry).unwrap();
        let text = String::from_utf8(metrics.render().unwrap()).unwrap();
        for line in [
            "clustergate_logins_total{result=\"invalid_credentials\"} 0\n",
            "clustergate_token_checks_total{result=\"revoked\"} 0\n",
            "clustergate_connections_refused_total{reason=\"header_timeout\"} 0\n",
            "clustergate_lockouts_total 0\n",
        ] {
            assert!(text.contains(line), "no {line} in\n{text}");
        }
        metrics.auth.lockout();
        let text = String::from_utf8(metrics.render().unwrap()).unwrap();
        assert!(text.contains("clustergate_lockouts_total 1\n"), "{text}");
    }
}
