//! Client connections refused before a request was parsed (`edge`), by reason.

use prometheus::{IntCounterVec, Opts, Registry};

use super::labels::ConnectionRefusal;
use super::registered;

pub struct ConnectionMetrics {
    refused: IntCounterVec,
}

impl ConnectionMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let refused = IntCounterVec::new(
            Opts::new(
                "clustergate_connections_refused_total",
                "Client connections refused before a request was parsed, by reason",
            ),
            &["reason"],
        )?;
        // Every reason exported from the start (at 0), for `increase()` and the alerts.
        for reason in ConnectionRefusal::ALL {
            refused.with_label_values(&[reason.label()]);
        }
        Ok(ConnectionMetrics {
            refused: registered(registry, refused)?,
        })
    }

    pub fn refused(&self, reason: ConnectionRefusal) {
        self.refused.with_label_values(&[reason.label()]).inc();
    }
}
