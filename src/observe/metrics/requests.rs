//! The requests the gateway answers (`proxy`): how many by route, method and status, how
//! long each route takes, and the API requests its operation table does not know.

use std::time::Duration;

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts, Registry,
};

use super::children::Children;
use super::labels::{method_index, status_label, METHOD_LABELS};
use super::registered;
use crate::routes::Route;

pub struct RequestMetrics {
    requests: IntCounterVec,
    /// `requests`' children by route, method and status (`requests_key`).
    requests_by_key: Children<u32, IntCounter>,
    /// `clustergate_request_duration_seconds`, one child per route (`Route as usize`).
    duration: [Histogram; Route::ALL.len()],
    unknown_operations: IntCounterVec,
}

impl RequestMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let requests = IntCounterVec::new(
            Opts::new(
                "clustergate_requests_total",
                "Requests answered, by route, method and status",
            ),
            &["route", "method", "status"],
        )?;
        let duration = HistogramVec::new(
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
        let unknown_operations = IntCounterVec::new(
            Opts::new(
                "clustergate_unknown_operations_total",
                "API requests no operation of the gateway's table matches, forwarded for the dashboard to decide as the user's roles (access.unknown_operations = \"forward\"), by the manager's Ceph release and method: a release newer than the table",
            ),
            &["release", "method"],
        )?;
        let duration = registered(registry, duration)?;
        Ok(RequestMetrics {
            requests: registered(registry, requests)?,
            requests_by_key: Children::new(),
            duration: Route::ALL.map(|route| duration.with_label_values(&[route.label()])),
            unknown_operations: registered(registry, unknown_operations)?,
        })
    }

    /// A request answered with `status` after `elapsed`.
    pub fn observe(&self, route: Route, method: &http::Method, status: u16, elapsed: Duration) {
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
        self.duration[route as usize].observe(elapsed.as_secs_f64());
    }

    /// A request to an operation the table does not know, forwarded to a manager running
    /// `release` (`X.Y`: as many values as the managers run).
    pub fn unknown_operation(&self, release: &str, method: &http::Method) {
        self.unknown_operations
            .with_label_values(&[release, METHOD_LABELS[method_index(method)]])
            .inc();
    }
}

/// `clustergate_requests_total`'s labels as one key: the route, the method label's place
/// in [`METHOD_LABELS`], and the status.
fn requests_key(route: Route, method: usize, status: u16) -> u32 {
    (route as u32) << 24 | (method as u32) << 16 | u32::from(status)
}
