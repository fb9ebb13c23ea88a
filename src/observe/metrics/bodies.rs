//! The request body budget's metrics (`edge::body_budget`): its size, what the bodies
//! hold of it now, and the requests refused for want of room.

use prometheus::{IntCounter, IntGauge, Registry};

#[derive(Clone)]
pub struct BodyMetrics {
    budget: IntGauge,
    held: IntGauge,
    refused: IntCounter,
}

impl BodyMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let budget = IntGauge::new(
            "clustergate_body_budget_bytes",
            "Bytes of request bodies the gateway may hold at once, all requests together (server.body_budget_bytes)",
        )?;
        let held = IntGauge::new(
            "clustergate_body_bytes_held",
            "Bytes of the body budget the requests hold now",
        )?;
        let refused = IntCounter::new(
            "clustergate_body_budget_refused_total",
            "Requests answered 503 because the body budget had no room for their body within server.body_timeout_ms",
        )?;
        registry.register(Box::new(budget.clone()))?;
        registry.register(Box::new(held.clone()))?;
        registry.register(Box::new(refused.clone()))?;
        Ok(BodyMetrics {
            budget,
            held,
            refused,
        })
    }

    pub fn budget(&self, bytes: usize) {
        self.budget.set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// Bytes reserved (positive) or given back (negative).
    pub fn held(&self, delta: i64) {
        self.held.add(delta);
    }

    pub fn refused(&self) {
        self.refused.inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::metrics::render_text as render;

    #[test]
    fn the_budget_what_is_held_and_the_refusals_have_their_series() {
        let registry = Registry::new();
        let metrics = BodyMetrics::new(&registry).unwrap();
        metrics.budget(1000);
        metrics.held(300);
        metrics.held(-100);
        metrics.refused();
        let text = render(&registry);
        for line in [
            "clustergate_body_budget_bytes 1000\n",
            "clustergate_body_bytes_held 200\n",
            "clustergate_body_budget_refused_total 1\n",
        ] {
            assert!(text.contains(line), "{line}: {text}");
        }
    }
}
