//! The state store (`state`): whether it answers, its failed commands, and the revocations
//! dropped for want of the deployment's signature.

use prometheus::{IntCounter, IntGauge, Registry};

use super::registered;
use crate::state::StoreHealth;

pub struct StateMetrics {
    up: IntGauge,
    errors: IntCounter,
    revocations_refused: IntCounter,
}

impl StateMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let up = IntGauge::new(
            "clustergate_state_up",
            "1 while the state store answers and the revocations follow it",
        )?;
        let errors = IntCounter::new(
            "clustergate_state_errors_total",
            "State store commands that failed or timed out",
        )?;
        let revocations_refused = IntCounter::new(
            "clustergate_state_revocations_refused_total",
            "Revocations read from Redis without the deployment's signature, dropped",
        )?;
        Ok(StateMetrics {
            up: registered(registry, up)?,
            errors: registered(registry, errors)?,
            revocations_refused: registered(registry, revocations_refused)?,
        })
    }

    /// Reads the state store's health into its metrics (at each scrape: the store keeps
    /// its own counts, so the request path pays nothing for them).
    pub fn observe(&self, health: &StoreHealth) {
        self.up.set(i64::from(health.up()));
        let counted = self.errors.get();
        self.errors.inc_by(health.errors().saturating_sub(counted));
        let refused = self.revocations_refused.get();
        self.revocations_refused
            .inc_by(health.revocations_refused().saturating_sub(refused));
    }
}
