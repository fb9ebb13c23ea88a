//! The dashboard backends as the gateway sees them now (`dashboards`): which answer, which
//! one requests go to, what each serves and queues, and the Ceph release each runs. Read
//! at each scrape, so that the series are exactly the servers configured now.

use prometheus::{IntGaugeVec, Opts, Registry};

use super::registered;

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

pub struct BackendMetrics {
    up: IntGaugeVec,
    active: IntGaugeVec,
    in_flight: IntGaugeVec,
    queued: IntGaugeVec,
    release: IntGaugeVec,
}

impl BackendMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let by_server = |name: &str, help: &str| {
            registered(
                registry,
                IntGaugeVec::new(Opts::new(name, help), &["server"])?,
            )
        };
        let release = IntGaugeVec::new(
            Opts::new(
                "clustergate_upstream_release_info",
                "1 for each dashboard backend whose Ceph release is known: its release, and the release of the operation table its requests are checked against (the nearest lower one when the binary has none of its own)",
            ),
            &["server", "release", "table"],
        )?;
        Ok(BackendMetrics {
            up: by_server(
                "clustergate_upstream_up",
                "1 while the dashboard backend answers its health check (active or standby)",
            )?,
            active: by_server(
                "clustergate_upstream_active",
                "1 for the dashboard backend requests are forwarded to (the active manager)",
            )?,
            in_flight: by_server(
                "clustergate_upstream_in_flight",
                "Forwarded requests a dashboard backend serves for this gateway now (at most upstream.max_in_flight)",
            )?,
            queued: by_server(
                "clustergate_upstream_queued",
                "Forwarded requests waiting for a place on a dashboard backend now (at most upstream.max_queued)",
            )?,
            release: registered(registry, release)?,
        })
    }

    /// Sets `clustergate_upstream_up`, `clustergate_upstream_active`,
    /// `clustergate_upstream_in_flight`, `clustergate_upstream_queued` and
    /// `clustergate_upstream_release_info` to `backends`, and drops the series of servers
    /// no longer among them (a reload's).
    pub fn observe(&self, backends: &[BackendSeries<'_>]) {
        self.up.reset();
        self.active.reset();
        self.in_flight.reset();
        self.queued.reset();
        self.release.reset();
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        for backend in backends {
            let server = [backend.server];
            let gauge = |family: &IntGaugeVec| family.with_label_values(&server);
            gauge(&self.up).set(i64::from(backend.up));
            gauge(&self.active).set(i64::from(backend.active));
            gauge(&self.in_flight).set(count(backend.in_flight));
            gauge(&self.queued).set(count(backend.queued));
            if let Some((release, table)) = &backend.release {
                self.release
                    .with_label_values(&[backend.server, release, table])
                    .set(1);
            }
        }
    }
}
