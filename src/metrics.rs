//! What the gateway measures. The admin listener (`admin`) serves it.

use std::sync::Arc;
use std::time::Duration;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

use crate::routes::Route;
use crate::state::StoreHealth;

/// The gateway's metrics, registered once at start-up.
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    request_duration: HistogramVec,
    logins: IntCounterVec,
    token_checks: IntCounterVec,
    password_verifications: IntCounter,
    upstream_up: IntGaugeVec,
    upstream_requests: IntCounterVec,
    upstream_duration: HistogramVec,
    upstream_logins: IntCounterVec,
    state_up: IntGauge,
    state_errors: IntCounter,
    connections_refused: IntCounterVec,
    log_lines_dropped: IntCounter,
    audit_write_errors: IntCounter,
}

/// Why a client was refused before its request was parsed, as the `reason` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionRefusal {
    HeaderTooLarge,
    TooManyHeaderLines,
    HeaderTimeout,
    TooManyConnections,
}

/// How a login ended, as the `result` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginResult {
    Success,
    InvalidCredentials,
    BadRequest,
    Busy,
    Error,
}

/// How a token check ended, as the `result` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenCheckResult {
    Valid,
    Missing,
    Invalid,
    Expired,
    Revoked,
    UnknownUser,
    Error,
}

impl Metrics {
    /// Registers the metrics in `registry` (the process-wide default one in production,
    /// which also carries the process metrics).
    pub fn new(registry: &Registry) -> Result<Arc<Self>, prometheus::Error> {
        let requests = IntCounterVec::new(
            Opts::new(
                "clustergate_requests_total",
                "Requests answered, by route, method and status",
            ),
            &["route", "method", "status"],
        )?;
        let request_duration = HistogramVec::new(
            HistogramOpts::new(
                "clustergate_request_duration_seconds",
                "Time to answer a request, by route",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0,
            ]),
            &["route"],
        )?;
        let logins = IntCounterVec::new(
            Opts::new("clustergate_logins_total", "Login attempts, by result"),
            &["result"],
        )?;
        let token_checks = IntCounterVec::new(
            Opts::new(
                "clustergate_token_checks_total",
                "Token verifications, by result",
            ),
            &["result"],
        )?;
        let password_verifications = IntCounter::new(
            "clustergate_password_verifications_total",
            "Password hashes computed for logins (one per attempt, known user or not)",
        )?;
        let upstream_up = IntGaugeVec::new(
            Opts::new(
                "clustergate_upstream_up",
                "1 while the dashboard backend is healthy and the active manager",
            ),
            &["server"],
        )?;
        let upstream_requests = IntCounterVec::new(
            Opts::new(
                "clustergate_upstream_requests_total",
                "Responses from dashboard backends, by server and status",
            ),
            &["server", "status"],
        )?;
        let upstream_duration = HistogramVec::new(
            HistogramOpts::new(
                "clustergate_upstream_duration_seconds",
                "Time from sending a request to a backend to its response header",
            )
            .buckets(vec![
                0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                120.0,
            ]),
            &["server"],
        )?;
        let upstream_logins = IntCounterVec::new(
            Opts::new(
                "clustergate_upstream_logins_total",
                "Logins of the gateway's service account on the backends, by result",
            ),
            &["result"],
        )?;
        let state_up = IntGauge::new(
            "clustergate_state_up",
            "1 while the state store answers and the revocations follow it",
        )?;
        let state_errors = IntCounter::new(
            "clustergate_state_errors_total",
            "State store commands that failed or timed out",
        )?;
        let connections_refused = IntCounterVec::new(
            Opts::new(
                "clustergate_connections_refused_total",
                "Client connections refused before a request was parsed, by reason",
            ),
            &["reason"],
        )?;
        let log_lines_dropped = IntCounter::new(
            "clustergate_log_lines_dropped_total",
            "Log lines (access lines among them) dropped because standard error fell behind",
        )?;
        let audit_write_errors = IntCounter::new(
            "clustergate_audit_write_errors_total",
            "Audit lines that could not be written",
        )?;
        registry.register(Box::new(log_lines_dropped.clone()))?;
        registry.register(Box::new(audit_write_errors.clone()))?;
        registry.register(Box::new(connections_refused.clone()))?;
        registry.register(Box::new(state_up.clone()))?;
        registry.register(Box::new(state_errors.clone()))?;
        registry.register(Box::new(upstream_up.clone()))?;
        registry.register(Box::new(upstream_requests.clone()))?;
        registry.register(Box::new(upstream_duration.clone()))?;
        registry.register(Box::new(upstream_logins.clone()))?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(request_duration.clone()))?;
        registry.register(Box::new(logins.clone()))?;
        registry.register(Box::new(token_checks.clone()))?;
        registry.register(Box::new(password_verifications.clone()))?;
        Ok(Arc::new(Metrics {
            registry: registry.clone(),
            requests,
            request_duration,
            logins,
            token_checks,
            password_verifications,
            upstream_up,
            upstream_requests,
            upstream_duration,
            upstream_logins,
            state_up,
            state_errors,
            connections_refused,
            log_lines_dropped,
            audit_write_errors,
        }))
    }

    pub fn observe_request(
        &self,
        route: Route,
        method: &http::Method,
        status: u16,
        elapsed: Duration,
    ) {
        let digits = itoa_status(status);
        let status = std::str::from_utf8(&digits).unwrap_or("0");
        self.requests
            .with_label_values(&[route.label(), method_label(method), status])
            .inc();
        self.request_duration
            .with_label_values(&[route.label()])
            .observe(elapsed.as_secs_f64());
    }

    pub fn login(&self, result: LoginResult) {
        let label = match result {
            LoginResult::Success => "success",
            LoginResult::InvalidCredentials => "invalid_credentials",
            LoginResult::BadRequest => "bad_request",
            LoginResult::Busy => "busy",
            LoginResult::Error => "error",
        };
        self.logins.with_label_values(&[label]).inc();
    }

    pub fn token_check(&self, result: TokenCheckResult) {
        let label = match result {
            TokenCheckResult::Valid => "valid",
            TokenCheckResult::Missing => "missing",
            TokenCheckResult::Invalid => "invalid",
            TokenCheckResult::Expired => "expired",
            TokenCheckResult::Revoked => "revoked",
            TokenCheckResult::UnknownUser => "unknown_user",
            TokenCheckResult::Error => "error",
        };
        self.token_checks.with_label_values(&[label]).inc();
    }

    pub fn connection_refused(&self, reason: ConnectionRefusal) {
        let label = match reason {
            ConnectionRefusal::HeaderTooLarge => "header_too_large",
            ConnectionRefusal::TooManyHeaderLines => "too_many_header_lines",
            ConnectionRefusal::HeaderTimeout => "header_timeout",
            ConnectionRefusal::TooManyConnections => "too_many_connections",
        };
        self.connections_refused.with_label_values(&[label]).inc();
    }

    pub fn password_verified(&self) {
        self.password_verifications.inc();
    }

    pub fn upstream_up(&self, server: &str, up: bool) {
        self.upstream_up
            .with_label_values(&[server])
            .set(i64::from(up));
    }

    pub fn upstream_response(&self, server: &str, status: u16, elapsed: Duration) {
        let digits = itoa_status(status);
        let status = std::str::from_utf8(&digits).unwrap_or("0");
        self.upstream_requests
            .with_label_values(&[server, status])
            .inc();
        self.upstream_duration
            .with_label_values(&[server])
            .observe(elapsed.as_secs_f64());
    }

    pub fn upstream_login(&self, result: &'static str) {
        self.upstream_logins.with_label_values(&[result]).inc();
    }

    /// Reads the state store's health into its metrics (at each scrape: the store keeps
    /// its own counts, so the request path pays nothing for them).
    pub fn observe_state(&self, health: &StoreHealth) {
        self.state_up.set(i64::from(health.up()));
        let counted = self.state_errors.get();
        self.state_errors
            .inc_by(health.errors().saturating_sub(counted));
    }

    /// Reads the logs' own counts into their metrics (at each scrape, as `observe_state`).
    pub fn observe_logs(&self, dropped_lines: u64, audit_write_errors: u64) {
        for (counter, count) in [
            (&self.log_lines_dropped, dropped_lines),
            (&self.audit_write_errors, audit_write_errors),
        ] {
            counter.inc_by(count.saturating_sub(counter.get()));
        }
    }

    /// Every metric in Prometheus' text format.
    pub fn render(&self) -> Result<Vec<u8>, prometheus::Error> {
        let mut out = Vec::with_capacity(16 * 1024);
        TextEncoder::new().encode(&self.registry.gather(), &mut out)?;
        Ok(out)
    }
}

/// Three ASCII digits of an HTTP status, without allocating.
fn itoa_status(status: u16) -> [u8; 3] {
    let s = status.min(999);
    [
        b'0' + (s / 100) as u8,
        b'0' + (s / 10 % 10) as u8,
        b'0' + (s % 10) as u8,
    ]
}

/// Methods outside the standard set share one label, so clients cannot grow the series.
fn method_label(method: &http::Method) -> &'static str {
    match *method {
        http::Method::GET => "GET",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::DELETE => "DELETE",
        http::Method::PATCH => "PATCH",
        http::Method::HEAD => "HEAD",
        http::Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_route_method_and_status() {
        let registry = Registry::new();
        let metrics = Metrics::new(&registry).unwrap();
        metrics.observe_request(
            Route::Login,
            &http::Method::POST,
            201,
            Duration::from_millis(3),
        );
        metrics.observe_request(
            Route::Api,
            &http::Method::from_bytes(b"BREW").unwrap(),
            404,
            Duration::ZERO,
        );
        metrics.login(LoginResult::Success);
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
    fn status_digits() {
        assert_eq!(&itoa_status(201), b"201");
        assert_eq!(&itoa_status(5), b"005");
    }
}
