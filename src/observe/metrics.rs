//! What the gateway measures. The admin listener (`admin`) serves it.

mod answer_cache;
mod bodies;
mod children;
mod deployment;
mod labels;
mod logs;
mod oidc;

use std::sync::Arc;
use std::time::Duration;

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::routes::Route;
use crate::state::StoreHealth;
use children::Children;

pub use answer_cache::{AnswerCacheMetrics, CacheResult};
pub use bodies::BodyMetrics;
pub use deployment::DeploymentMetrics;
use labels::{method_index, status_label, METHOD_LABELS};
pub use labels::{ConnectionRefusal, LoginResult, TokenCheckResult};
pub use logs::LogMetrics;
pub use oidc::OidcMetrics;

/// One dashboard backend as the upstream gauges show it.
pub struct BackendSeries<'a> {
    pub server: &'a str,
    /// It answers (as the active manager or as a standby).
    pub up: bool,
    /// It is the one requests go to.
    pub active: bool,
    pub in_flight: usize,
    pub queued: usize,
    /// The Ceph release its manager runs and the release of the table that applies to it.
    pub release: Option<(String, String)>,
}

/// The gateway's metrics, registered once at start-up.
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    /// `requests`' children by route, method and status (`requests_key`).
    requests_by_key: Children<u32, IntCounter>,
    /// `clustergate_request_duration_seconds`, one child per route (`Route as usize`).
    request_duration: [Histogram; Route::ALL.len()],
    logins: IntCounterVec,
    login_rate_limited: IntCounterVec,
    token_checks: IntCounterVec,
    password_verifications: IntCounter,
    lockouts: IntCounter,
    upstream_up: IntGaugeVec,
    upstream_active: IntGaugeVec,
    upstream_requests: IntCounterVec,
    upstream_duration: HistogramVec,
    /// The two upstream metrics' children by server.
    upstream_by_server: Children<Box<str>, ServerChildren>,
    upstream_logins: IntCounterVec,
    upstream_in_flight: IntGaugeVec,
    upstream_queued: IntGaugeVec,
    upstream_release: IntGaugeVec,
    upstream_overload: IntCounterVec,
    dashboard_accounts: IntCounterVec,
    unknown_operations: IntCounterVec,
    state_up: IntGauge,
    state_errors: IntCounter,
    state_revocations_refused: IntCounter,
    connections_refused: IntCounterVec,
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
        let login_rate_limited = IntCounterVec::new(
            Opts::new(
                "clustergate_login_rate_limited_total",
                "Logins refused with 429 because the client address failed too often, by address family",
            ),
            &["family"],
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
        let lockouts = IntCounter::new(
            "clustergate_lockouts_total",
            "Usernames locked out after consecutive failed logins",
        )?;
        let upstream_up = IntGaugeVec::new(
            Opts::new(
                "clustergate_upstream_up",
                "1 while the dashboard backend answers its health check (active or standby)",
            ),
            &["server"],
        )?;
        let upstream_active = IntGaugeVec::new(
            Opts::new(
                "clustergate_upstream_active",
                "1 for the dashboard backend requests are forwarded to (the active manager)",
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
        let upstream_in_flight = IntGaugeVec::new(
            Opts::new(
                "clustergate_upstream_in_flight",
                "Forwarded requests a dashboard backend serves for this gateway now (at most upstream.max_in_flight)",
            ),
            &["server"],
        )?;
        let upstream_queued = IntGaugeVec::new(
            Opts::new(
                "clustergate_upstream_queued",
                "Forwarded requests waiting for a place on a dashboard backend now (at most upstream.max_queued)",
            ),
            &["server"],
        )?;
        let upstream_release = IntGaugeVec::new(
            Opts::new(
                "clustergate_upstream_release_info",
                "1 for each dashboard backend whose Ceph release is known: its release, and the release of the operation table its requests are checked against (the nearest lower one when the binary has none of its own)",
            ),
            &["server", "release", "table"],
        )?;
        let dashboard_accounts = IntCounterVec::new(
            Opts::new(
                "clustergate_dashboard_accounts_total",
                "What the gateway did to the dashboard accounts and roles it manages (upstream.identity = \"roles\"), by action and result",
            ),
            &["action", "result"],
        )?;
        let unknown_operations = IntCounterVec::new(
            Opts::new(
                "clustergate_unknown_operations_total",
                "API requests no operation of the gateway's table matches, forwarded for the dashboard to decide as the user's roles (access.unknown_operations = \"forward\"), by the manager's Ceph release and method: a release newer than the table",
            ),
            &["release", "method"],
        )?;
        let upstream_overload = IntCounterVec::new(
            Opts::new(
                "clustergate_upstream_overload_total",
                "Requests refused with 503 because the backend served upstream.max_in_flight requests (or the client its share of them) and none came free in time; reason: queue_full, timeout, over_share",
            ),
            &["server", "reason"],
        )?;
        let state_up = IntGauge::new(
            "clustergate_state_up",
            "1 while the state store answers and the revocations follow it",
        )?;
        let state_errors = IntCounter::new(
            "clustergate_state_errors_total",
            "State store commands that failed or timed out",
        )?;
        let state_revocations_refused = IntCounter::new(
            "clustergate_state_revocations_refused_total",
            "Revocations read from Redis without the deployment's signature, dropped",
        )?;
        let connections_refused = IntCounterVec::new(
            Opts::new(
                "clustergate_connections_refused_total",
                "Client connections refused before a request was parsed, by reason",
            ),
            &["reason"],
        )?;
        // Every label value exported from the start (at 0), so that `increase()` and the
        // alert rules see the first event of each kind.
        for result in LoginResult::ALL {
            logins.with_label_values(&[result.label()]);
        }
        for result in TokenCheckResult::ALL {
            token_checks.with_label_values(&[result.label()]);
        }
        for reason in ConnectionRefusal::ALL {
            connections_refused.with_label_values(&[reason.label()]);
        }
        registry.register(Box::new(connections_refused.clone()))?;
        registry.register(Box::new(state_up.clone()))?;
        registry.register(Box::new(state_errors.clone()))?;
        registry.register(Box::new(state_revocations_refused.clone()))?;
        registry.register(Box::new(upstream_up.clone()))?;
        registry.register(Box::new(upstream_active.clone()))?;
        registry.register(Box::new(lockouts.clone()))?;
        registry.register(Box::new(upstream_requests.clone()))?;
        registry.register(Box::new(upstream_duration.clone()))?;
        registry.register(Box::new(upstream_logins.clone()))?;
        registry.register(Box::new(upstream_in_flight.clone()))?;
        registry.register(Box::new(upstream_queued.clone()))?;
        registry.register(Box::new(upstream_release.clone()))?;
        registry.register(Box::new(upstream_overload.clone()))?;
        registry.register(Box::new(dashboard_accounts.clone()))?;
        registry.register(Box::new(unknown_operations.clone()))?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(request_duration.clone()))?;
        registry.register(Box::new(logins.clone()))?;
        registry.register(Box::new(login_rate_limited.clone()))?;
        registry.register(Box::new(token_checks.clone()))?;
        registry.register(Box::new(password_verifications.clone()))?;
        let request_duration =
            Route::ALL.map(|route| request_duration.with_label_values(&[route.label()]));
        Ok(Arc::new(Metrics {
            registry: registry.clone(),
            requests,
            requests_by_key: Children::new(),
            request_duration,
            logins,
            login_rate_limited,
            token_checks,
            password_verifications,
            lockouts,
            upstream_up,
            upstream_active,
            upstream_requests,
            upstream_duration,
            upstream_by_server: Children::new(),
            upstream_logins,
            upstream_in_flight,
            upstream_queued,
            upstream_release,
            upstream_overload,
            dashboard_accounts,
            unknown_operations,
            state_up,
            state_errors,
            state_revocations_refused,
            connections_refused,
            deployment: DeploymentMetrics::new(registry)?,
            oidc: OidcMetrics::new(registry)?,
            logs: LogMetrics::new(registry)?,
            answer_cache: AnswerCacheMetrics::new(registry)?,
            bodies: BodyMetrics::new(registry)?,
        }))
    }

    pub fn observe_request(
        &self,
        route: Route,
        method: &http::Method,
        status: u16,
        elapsed: Duration,
    ) {
        let method = method_index(method);
        let key = requests_key(route, method, status);
        let requests = self.requests_by_key.get(&key, || {
            let status = status_label(status);
            let child =
                self.requests
                    .with_label_values(&[route.label(), METHOD_LABELS[method], &status]);
            (key, child)
        });
        requests.inc();
        self.request_duration[route as usize].observe(elapsed.as_secs_f64());
    }

    pub fn login(&self, result: LoginResult) {
        self.logins.with_label_values(&[result.label()]).inc();
    }

    /// A login refused for its client's failed logins; the label is `ipv4` or `ipv6`.
    pub fn login_rate_limited(&self, ipv6: bool) {
        let family = if ipv6 { "ipv6" } else { "ipv4" };
        self.login_rate_limited.with_label_values(&[family]).inc();
    }

    pub fn token_check(&self, result: TokenCheckResult) {
        self.token_checks.with_label_values(&[result.label()]).inc();
    }

    pub fn connection_refused(&self, reason: ConnectionRefusal) {
        self.connections_refused
            .with_label_values(&[reason.label()])
            .inc();
    }

    pub fn password_verified(&self) {
        self.password_verifications.inc();
    }

    /// A username was locked out (once per lock, not per refused attempt).
    pub fn lockout(&self) {
        self.lockouts.inc();
    }

    /// Sets `clustergate_upstream_up`, `clustergate_upstream_active`,
    /// `clustergate_upstream_in_flight` and `clustergate_upstream_queued` to `backends`
    /// (read at each scrape, so that the series are exactly the servers configured now, a
    /// reload's included).
    pub fn observe_backends(&self, backends: &[BackendSeries<'_>]) {
        self.upstream_up.reset();
        self.upstream_active.reset();
        self.upstream_in_flight.reset();
        self.upstream_queued.reset();
        self.upstream_release.reset();
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        for backend in backends {
            let server = [backend.server];
            let gauge = |family: &IntGaugeVec| family.with_label_values(&server);
            gauge(&self.upstream_up).set(i64::from(backend.up));
            gauge(&self.upstream_active).set(i64::from(backend.active));
            gauge(&self.upstream_in_flight).set(count(backend.in_flight));
            gauge(&self.upstream_queued).set(count(backend.queued));
            if let Some((release, table)) = &backend.release {
                self.upstream_release
                    .with_label_values(&[backend.server, release, table])
                    .set(1);
            }
        }
    }

    pub fn upstream_response(&self, server: &str, status: u16, elapsed: Duration) {
        let children = self.upstream_by_server.get(server, || {
            let duration = self.upstream_duration.with_label_values(&[server]);
            let statuses = Arc::new(Children::new());
            (server.into(), ServerChildren { duration, statuses })
        });
        let responses = children.statuses.get(&status, || {
            let label = status_label(status);
            let child = self.upstream_requests.with_label_values(&[server, &label]);
            (status, child)
        });
        responses.inc();
        children.duration.observe(elapsed.as_secs_f64());
    }

    /// A request refused because `server` stayed busy (`upstream::in_flight`).
    /// `reason`: why no place came (a fixed set: `queue_full`, `timeout`, `over_share`).
    pub fn upstream_overload(&self, server: &str, reason: &'static str) {
        self.upstream_overload
            .with_label_values(&[server, reason])
            .inc();
    }

    pub fn upstream_login(&self, result: &'static str) {
        self.upstream_logins.with_label_values(&[result]).inc();
    }

    /// One change (or refusal) of a dashboard account or role the gateway manages; both
    /// labels are the caller's constants.
    pub fn dashboard_account(&self, action: &'static str, result: &'static str) {
        self.dashboard_accounts
            .with_label_values(&[action, result])
            .inc();
    }

    /// A request to an operation the table does not know, forwarded to a manager running
    /// `release` (`X.Y`: as many values as the managers run).
    pub fn unknown_operation(&self, release: &str, method: &http::Method) {
        self.unknown_operations
            .with_label_values(&[release, METHOD_LABELS[method_index(method)]])
            .inc();
    }

    /// Reads the state store's health into its metrics (at each scrape: the store keeps
    /// its own counts, so the request path pays nothing for them).
    pub fn observe_state(&self, health: &StoreHealth) {
        self.state_up.set(i64::from(health.up()));
        let counted = self.state_errors.get();
        self.state_errors
            .inc_by(health.errors().saturating_sub(counted));
        let refused = self.state_revocations_refused.get();
        self.state_revocations_refused
            .inc_by(health.revocations_refused().saturating_sub(refused));
    }

    /// Every metric in Prometheus' text format.
    pub fn render(&self) -> Result<Vec<u8>, prometheus::Error> {
        let mut out = Vec::with_capacity(16 * 1024);
        TextEncoder::new().encode(&self.registry.gather(), &mut out)?;
        Ok(out)
    }
}

/// One server's children of the upstream metrics.
#[derive(Clone)]
struct ServerChildren {
    duration: Histogram,
    statuses: Arc<Children<u16, IntCounter>>,
}

/// `clustergate_requests_total`'s labels as one key: the route, the method label's place
/// in [`METHOD_LABELS`], and the status.
fn requests_key(route: Route, method: usize, status: u16) -> u32 {
    (route as u32) << 24 | (method as u32) << 16 | u32::from(status)
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
        metrics.observe_backends(&[series("a", true, false), series("b", true, true)]);
        metrics.observe_backends(&[series("b", false, false)]);
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
        metrics.lockout();
        let text = String::from_utf8(metrics.render().unwrap()).unwrap();
        assert!(text.contains("clustergate_lockouts_total 1\n"), "{text}");
    }
}
