//! The metrics about the deployment rather than the traffic, which operators alert on:
//! which build runs, when the serving certificate expires, and how configuration reloads
//! went.

use prometheus::{IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

use crate::state::UnixTime;

/// The `result` label values of `clustergate_config_reloads_total`, each exported from the
/// start (at 0), so that `increase()` sees a reload's first failure.
const RELOAD_RESULTS: [&str; 2] = ["success", "failure"];

pub struct DeploymentMetrics {
    tls_cert_expiry: IntGaugeVec,
    config_reloads: IntCounterVec,
    config_last_reload_success: IntGauge,
    config_last_reload_successful: IntGauge,
}

impl DeploymentMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let build_info = IntGaugeVec::new(
            Opts::new(
                "clustergate_build_info",
                "Always 1; the version label says which build runs",
            ),
            &["version"],
        )?;
        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        // A vector without labels has no sample until a certificate is served: a gateway
        // without TLS exposes no expiry, rather than one in 1970 that an alert would take
        // for an expired certificate.
        let tls_cert_expiry = IntGaugeVec::new(
            Opts::new(
                "clustergate_tls_cert_expiry_timestamp_seconds",
                "When the listener's certificate expires (its notAfter, Unix seconds)",
            ),
            &[],
        )?;
        let config_reloads = IntCounterVec::new(
            Opts::new(
                "clustergate_config_reloads_total",
                "Configuration reloads (SIGHUP), by result",
            ),
            &["result"],
        )?;
        for result in RELOAD_RESULTS {
            config_reloads.with_label_values(&[result]);
        }
        let config_last_reload_success = IntGauge::new(
            "clustergate_config_last_reload_success_timestamp_seconds",
            "When the configuration was last reloaded successfully (Unix seconds; 0: never)",
        )?;
        let config_last_reload_successful = IntGauge::new(
            "clustergate_config_last_reload_successful",
            "0 after a reload failed (the gateway runs the previous configuration), else 1",
        )?;
        // The configuration read at start is the one on disk until a reload says otherwise.
        config_last_reload_successful.set(1);
        registry.register(Box::new(build_info))?;
        registry.register(Box::new(tls_cert_expiry.clone()))?;
        registry.register(Box::new(config_reloads.clone()))?;
        registry.register(Box::new(config_last_reload_success.clone()))?;
        registry.register(Box::new(config_last_reload_successful.clone()))?;
        Ok(DeploymentMetrics {
            tls_cert_expiry,
            config_reloads,
            config_last_reload_success,
            config_last_reload_successful,
        })
    }

    /// Records the `notAfter` of the certificate the listener serves (at start, and again
    /// whenever another one is loaded).
    pub fn tls_cert_expiry(&self, not_after: i64) {
        self.tls_cert_expiry
            .with_label_values::<&str>(&[])
            .set(not_after);
    }

    /// Records a reload whose configuration now runs.
    pub fn config_reload_succeeded(&self, now: UnixTime) {
        self.config_reloads.with_label_values(&["success"]).inc();
        self.config_last_reload_success
            .set(i64::try_from(now).unwrap_or(i64::MAX));
        self.config_last_reload_successful.set(1);
    }

    /// Records a reload refused (the previous configuration keeps running).
    pub fn config_reload_failed(&self) {
        self.config_reloads.with_label_values(&["failure"]).inc();
        self.config_last_reload_successful.set(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::metrics::render_text as render;

    #[test]
    fn build_info_carries_the_crate_version() {
        let registry = Registry::new();
        DeploymentMetrics::new(&registry).unwrap();
        let want = format!(
            "clustergate_build_info{{version=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION")
        );
        assert!(render(&registry).contains(&want), "{}", render(&registry));
    }

    #[test]
    fn certificate_expiry_is_absent_until_a_certificate_is_served() {
        let registry = Registry::new();
        let metrics = DeploymentMetrics::new(&registry).unwrap();
        let name = "clustergate_tls_cert_expiry_timestamp_seconds";
        assert!(!render(&registry).contains(&format!("{name} ")));
        metrics.tls_cert_expiry(1_900_000_000);
        metrics.tls_cert_expiry(1_950_000_000);
        assert!(render(&registry).contains(&format!("{name} 1950000000\n")));
    }

    #[test]
    fn reloads_start_at_zero_and_a_failure_holds_until_a_success() {
        let registry = Registry::new();
        let metrics = DeploymentMetrics::new(&registry).unwrap();
        let text = render(&registry);
        for line in [
            "clustergate_config_reloads_total{result=\"success\"} 0\n",
            "clustergate_config_reloads_total{result=\"failure\"} 0\n",
            "clustergate_config_last_reload_success_timestamp_seconds 0\n",
            "clustergate_config_last_reload_successful 1\n",
        ] {
            assert!(text.contains(line), "no {line} in\n{text}");
        }
        metrics.config_reload_failed();
        let text = render(&registry);
        assert!(text.contains("clustergate_config_reloads_total{result=\"failure\"} 1\n"));
        assert!(text.contains("clustergate_config_last_reload_successful 0\n"));
        metrics.config_reload_succeeded(1_800_000_000);
        let text = render(&registry);
        assert!(text.contains("clustergate_config_reloads_total{result=\"success\"} 1\n"));
        assert!(
            text.contains("clustergate_config_last_reload_success_timestamp_seconds 1800000000\n")
        );
        assert!(text.contains("clustergate_config_last_reload_successful 1\n"));
    }
}
