//! The metrics about the logs themselves: access lines dropped because standard error fell
//! behind, and audit lines that could not be written. The logs keep their own counts (the
//! request path pays nothing for these); each scrape reads them in.

use prometheus::{IntCounter, Registry};

pub struct LogMetrics {
    log_lines_dropped: IntCounter,
    audit_write_errors: IntCounter,
}

impl LogMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
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
        Ok(LogMetrics {
            log_lines_dropped,
            audit_write_errors,
        })
    }

    /// Reads the logs' own counts (totals since start) into their metrics, at each scrape.
    pub fn observe(&self, dropped_lines: u64, audit_write_errors: u64) {
        for (counter, count) in [
            (&self.log_lines_dropped, dropped_lines),
            (&self.audit_write_errors, audit_write_errors),
        ] {
            counter.inc_by(count.saturating_sub(counter.get()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::metrics::render_text as render;

    #[test]
    fn each_scrape_reads_the_logs_totals() {
        let registry = Registry::new();
        let metrics = LogMetrics::new(&registry).unwrap();
        let text = render(&registry);
        assert!(
            text.contains("clustergate_log_lines_dropped_total 0\n"),
            "{text}"
        );
        assert!(
            text.contains("clustergate_audit_write_errors_total 0\n"),
            "{text}"
        );
        metrics.observe(5, 1);
        metrics.observe(7, 1);
        let text = render(&registry);
        assert!(
            text.contains("clustergate_log_lines_dropped_total 7\n"),
            "{text}"
        );
        assert!(
            text.contains("clustergate_audit_write_errors_total 1\n"),
            "{text}"
        );
    }
}
