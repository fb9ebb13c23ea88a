//! What the dashboard backends answer (`dashboards`, `proxy`): their responses by server and
//! status and how long they took, the requests refused because a backend stayed busy, and
//! the logins of the gateway's service account on them.

use std::sync::Arc;
use std::time::Duration;

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts, Registry,
};

use super::children::Children;
use super::labels::status_label;
use super::registered;

pub struct UpstreamMetrics {
    requests: IntCounterVec,
    duration: HistogramVec,
    /// The two metrics above's children by server.
    by_server: Children<Box<str>, ServerChildren>,
    logins: IntCounterVec,
    overload: IntCounterVec,
}

/// One server's children of the upstream metrics.
#[derive(Clone)]
struct ServerChildren {
    duration: Histogram,
    statuses: Arc<Children<u16, IntCounter>>,
}

impl UpstreamMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let requests = IntCounterVec::new(
            Opts::new(
                "clustergate_upstream_requests_total",
                "Responses from dashboard backends, by server and status",
            ),
            &["server", "status"],
        )?;
        let duration = HistogramVec::new(
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
        let logins = IntCounterVec::new(
            Opts::new(
                "clustergate_upstream_logins_total",
                "Logins of the gateway's service account on the backends, by result",
            ),
            &["result"],
        )?;
        let overload = IntCounterVec::new(
            Opts::new(
                "clustergate_upstream_overload_total",
                "Requests refused with 503 because the backend served upstream.max_in_flight requests (or the client its share of them) and none came free in time; reason: queue_full, timeout, over_share",
            ),
            &["server", "reason"],
        )?;
        Ok(UpstreamMetrics {
            requests: registered(registry, requests)?,
            duration: registered(registry, duration)?,
            by_server: Children::new(),
            logins: registered(registry, logins)?,
            overload: registered(registry, overload)?,
        })
    }

    /// `server` answered with `status` after `elapsed`.
    pub fn response(&self, server: &str, status: u16, elapsed: Duration) {
        let children = self.by_server.get(server, || {
            let duration = self.duration.with_label_values(&[server]);
            let statuses = Arc::new(Children::new());
            (server.into(), ServerChildren { duration, statuses })
        });
        let responses = children.statuses.get(&status, || {
            let label = status_label(status);
            let child = self.requests.with_label_values(&[server, &label]);
            (status, child)
        });
        responses.inc();
        children.duration.observe(elapsed.as_secs_f64());
    }

    /// A request refused because `server` stayed busy (`dashboards::in_flight`).
    /// `reason`: why no place came (a fixed set: `queue_full`, `timeout`, `over_share`).
    pub fn overload(&self, server: &str, reason: &'static str) {
        self.overload.with_label_values(&[server, reason]).inc();
    }

    /// A login of the service account; `result` is the caller's constant.
    pub fn login(&self, result: &'static str) {
        self.logins.with_label_values(&[result]).inc();
    }
}
