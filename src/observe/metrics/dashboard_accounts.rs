//! The dashboard accounts and roles the gateway manages (`dashboard_identity`, with
//! `upstream.identity = "roles"`): what it did to them, by action and result.

use prometheus::{IntCounterVec, Opts, Registry};

use super::registered;

pub struct DashboardAccountMetrics {
    changes: IntCounterVec,
}

impl DashboardAccountMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let changes = IntCounterVec::new(
            Opts::new(
                "clustergate_dashboard_accounts_total",
                "What the gateway did to the dashboard accounts and roles it manages (upstream.identity = \"roles\"), by action and result",
            ),
            &["action", "result"],
        )?;
        Ok(DashboardAccountMetrics {
            changes: registered(registry, changes)?,
        })
    }

    /// One change (or refusal) of a dashboard account or role the gateway manages; both
    /// labels are the caller's constants.
    pub fn change(&self, action: &'static str, result: &'static str) {
        self.changes.with_label_values(&[action, result]).inc();
    }
}
