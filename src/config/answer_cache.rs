//! `[answer_cache]`: which read operations share one dashboard request while it is in
//! flight and keep its answer for a moment (`ttl_ms`, per operation template), and the
//! bounds on what that holds (entries, bytes, one answer's size) and on who waits for it
//! (`max_wait_ms`, `max_followers`); and how long the web UI's files are kept at the edge
//! (`ui_files`, `ui_files_ttl_ms`, `ui_hashed_files_ttl_ms`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::file::AnswerCacheSection;
use super::parse::{key_name, Source};
use super::ConfigErrors;

/// The longest time an answer may be kept: this is a cache against polling, not a store.
const MAX_TTL_MS: u64 = 60_000;
/// The longest a request may wait for another's answer.
const MAX_WAIT_MS: u64 = 60_000;

/// What the web UI polls while a page is open (bench/results/ui-polling-16.2.md and
/// -20.2.md: the landing page and the pools page, recorded in Chromium): each every 5 s
/// (the feature toggles every 30 s) from every open tab, with the same query from all of
/// them. Kept two seconds: one dashboard request per account (per set of roles) every two
/// seconds serves every tab, and no answer is older than that. One second was the first
/// choice, when every user's request was the service account's; with an account per set of
/// roles the manager answers each once per set, and 50 tabs of three roles made it work
/// 0.27x what the same tabs cost it directly (bench/manager_load.py; docs/protecting-the-manager.md, Protecting the
/// manager), over the 0.2x aimed at. The UI polls every 5 s: answers up to 2 s old do not
/// show, and a write through the gateway drops them at once.
pub const POLLED_OPERATIONS: [(&str, u64); 8] = [
    ("/api/summary", 2000),
    ("/api/health/minimal", 2000),
    ("/api/health/snapshot", 2000),
    ("/api/prometheus/notifications", 2000),
    ("/api/multi-cluster/get_config", 2000),
    ("/api/feature_toggles", 2000),
    ("/api/pool", 2000),
    ("/api/erasure_code_profile", 2000),
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerCacheConfig {
    /// `false`: every request goes to the dashboard (nothing shared, nothing kept).
    pub enabled: bool,
    /// GET operations by the scope table's template (`/api/summary`): how long their
    /// answer is kept. Zero: concurrent requests share one answer, none is kept.
    pub ttl: BTreeMap<String, Duration>,
    pub max_entries: usize,
    pub max_bytes: usize,
    /// A larger answer is passed on, not kept nor shared.
    pub max_answer_bytes: usize,
    /// How long a request waits for the answer of an identical one in flight before it
    /// asks the dashboard itself.
    pub max_wait: Duration,
    /// How many requests may wait for one answer; the next ones ask the dashboard.
    pub max_followers: usize,
    /// Whether the web UI's files are kept (and compressed, and validated) at the edge.
    pub ui_files: bool,
    /// How long a UI file with a plain name (`index.html`) is kept.
    pub ui_files_ttl: Duration,
    /// How long a UI file whose name carries a content hash is kept.
    pub ui_hashed_files_ttl: Duration,
}

impl Default for AnswerCacheConfig {
    fn default() -> Self {
        Source::defaults(validate)
    }
}

pub(super) fn validate(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    section: AnswerCacheSection,
) -> AnswerCacheConfig {
    let f = at.file;
    let ttl_ms = section.ttl_ms.unwrap_or_else(|| {
        POLLED_OPERATIONS
            .iter()
            .map(|(op, ms)| (op.to_string(), *ms))
            .collect()
    });
    let mut ttl = BTreeMap::new();
    for (operation, ms) in ttl_ms {
        let key = format!("answer_cache.ttl_ms.{}", key_name(&operation));
        if !(operation.starts_with("/api/") || operation.starts_with("/ui-api/")) {
            errors.push(f, &key, "name a GET operation by its scope table path, e.g. \"/api/summary\" (answers of other paths are never kept)");
        } else if ms > MAX_TTL_MS {
            errors.push(f, &key, format!("{ms} ms is longer than {MAX_TTL_MS}: keep answers of polled operations a second or two"));
        } else {
            ttl.insert(operation, Duration::from_millis(ms));
        }
    }
    let mut bounded = |key: &str, value: usize, low: usize, high: usize| {
        if !(low..=high).contains(&value) {
            errors.push(
                f,
                format!("answer_cache.{key}"),
                format!("{value} is out of range: {low} to {high}"),
            );
        }
    };
    bounded("max_entries", section.max_entries, 1, 1_000_000);
    bounded("max_bytes", section.max_bytes, 1024, 1 << 34);
    bounded("max_answer_bytes", section.max_answer_bytes, 1, 1 << 30);
    bounded("max_followers", section.max_followers, 0, 100_000);
    bounded(
        "max_wait_ms",
        section.max_wait_ms as usize,
        1,
        MAX_WAIT_MS as usize,
    );
    if section.max_answer_bytes > section.max_bytes {
        errors.push(
            f,
            "answer_cache.max_answer_bytes",
            format!(
                "{} is larger than answer_cache.max_bytes ({}): lower it, or raise max_bytes",
                section.max_answer_bytes, section.max_bytes
            ),
        );
    }
    AnswerCacheConfig {
        enabled: section.enabled,
        ttl,
        max_entries: section.max_entries,
        max_bytes: section.max_bytes,
        max_answer_bytes: section.max_answer_bytes,
        max_wait: Duration::from_millis(section.max_wait_ms),
        max_followers: section.max_followers,
        ui_files: section.ui_files,
        ui_files_ttl: Duration::from_millis(section.ui_files_ttl_ms),
        ui_hashed_files_ttl: Duration::from_millis(section.ui_hashed_files_ttl_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn check(section: AnswerCacheSection) -> (AnswerCacheConfig, ConfigErrors) {
        let mut errors = ConfigErrors::default();
        let at = Source {
            file: Path::new("gw.toml"),
            dir: Path::new("."),
        };
        (validate(&mut errors, &at, section), errors)
    }

    #[test]
    fn defaults_are_the_polled_operations_for_a_second() {
        let (config, errors) = check(AnswerCacheSection::default());
        assert!(errors.is_empty(), "{errors}");
        assert_eq!(config.ttl.len(), POLLED_OPERATIONS.len());
        assert_eq!(config.ttl["/api/summary"], Duration::from_secs(2));
    }

    #[test]
    fn a_configured_table_replaces_the_defaults() {
        let section = AnswerCacheSection {
            ttl_ms: Some(BTreeMap::from([("/api/pool".to_string(), 2000)])),
            ..AnswerCacheSection::default()
        };
        let (config, errors) = check(section);
        assert!(errors.is_empty(), "{errors}");
        assert_eq!(config.ttl.keys().collect::<Vec<_>>(), ["/api/pool"]);
    }

    #[test]
    fn every_problem_is_named_at_once() {
        let section = AnswerCacheSection {
            ttl_ms: Some(BTreeMap::from([
                ("/docs".to_string(), 1000),
                ("/api/summary".to_string(), 600_000),
            ])),
            max_entries: 0,
            max_answer_bytes: 1 << 30,
            max_bytes: 1 << 20,
            max_wait_ms: 0,
            ..AnswerCacheSection::default()
        };
        let (_, errors) = check(section);
        for key in [
            "answer_cache.ttl_ms.\"/docs\"",
            "answer_cache.ttl_ms.\"/api/summary\"",
            "answer_cache.max_entries",
            "answer_cache.max_answer_bytes",
            "answer_cache.max_wait_ms",
        ] {
            assert!(errors.mentions(key), "{key}: {errors}");
        }
    }
}
