//! The answer cache's metrics (`answer_cache`): what became of the requests it was asked
//! about, what it pushed out for room, and what it holds.

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

/// What a request the answer cache was asked about became.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheResult {
    /// Answered from a kept answer.
    Hit,
    /// Asked the dashboard, for itself and whoever waited for it.
    Miss,
    /// Answered with another request's answer, waited for.
    Coalesced,
    /// Asked the dashboard on its own: too many waiting, waited too long, or a UI file
    /// past the minute's fetches to be kept.
    Passed,
}

impl CacheResult {
    const ALL: [CacheResult; 4] = [
        CacheResult::Hit,
        CacheResult::Miss,
        CacheResult::Coalesced,
        CacheResult::Passed,
    ];

    fn label(self) -> &'static str {
        match self {
            CacheResult::Hit => "hit",
            CacheResult::Miss => "miss",
            CacheResult::Coalesced => "coalesced",
            CacheResult::Passed => "passed",
        }
    }
}

#[derive(Clone)]
pub struct AnswerCacheMetrics {
    results: [IntCounter; 4],
    evictions: IntCounter,
    bytes: IntGauge,
    entries: IntGauge,
}

impl AnswerCacheMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let results = IntCounterVec::new(
            Opts::new(
                "clustergate_answer_cache_requests_total",
                "Requests of cached operations by result: hit (a kept answer), miss (asked the dashboard), coalesced (another request's answer, waited for), passed (asked the dashboard alone)",
            ),
            &["result"],
        )?;
        let evictions = IntCounter::new(
            "clustergate_answer_cache_evictions_total",
            "Kept answers pushed out before their expiry to make room",
        )?;
        let bytes = IntGauge::new(
            "clustergate_answer_cache_bytes",
            "Bytes the kept answers take",
        )?;
        let entries = IntGauge::new("clustergate_answer_cache_entries", "Kept answers")?;
        registry.register(Box::new(results.clone()))?;
        registry.register(Box::new(evictions.clone()))?;
        registry.register(Box::new(bytes.clone()))?;
        registry.register(Box::new(entries.clone()))?;
        Ok(AnswerCacheMetrics {
            results: CacheResult::ALL.map(|r| results.with_label_values(&[r.label()])),
            evictions,
            bytes,
            entries,
        })
    }

    pub fn result(&self, result: CacheResult) {
        self.results[result as usize].inc();
    }

    pub fn evicted(&self, count: usize) {
        self.evictions.inc_by(count as u64);
    }

    /// What the cache holds now.
    pub fn held(&self, entries: usize, bytes: usize) {
        self.entries.set(entries as i64);
        self.bytes.set(bytes as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::metrics::render_text as render;

    #[test]
    fn each_result_has_its_series() {
        let registry = Registry::new();
        let metrics = AnswerCacheMetrics::new(&registry).unwrap();
        metrics.result(CacheResult::Coalesced);
        metrics.evicted(2);
        metrics.held(3, 300);
        let text = render(&registry);
        for line in [
            "clustergate_answer_cache_requests_total{result=\"coalesced\"} 1\n",
            "clustergate_answer_cache_requests_total{result=\"hit\"} 0\n",
            "clustergate_answer_cache_evictions_total 2\n",
            "clustergate_answer_cache_entries 3\n",
            "clustergate_answer_cache_bytes 300\n",
        ] {
            assert!(text.contains(line), "{line}: {text}");
        }
    }
}
