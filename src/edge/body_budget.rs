//! One byte budget for every request body the gateway holds (forwarded bodies, read whole
//! before they are sent, and the auth endpoints'): each body reserves its bytes before it
//! is read and gives them back when its request ends. The sum is bounded by
//! `server.body_budget_bytes`, by default derived from the memory the process is given,
//! so that many clients sending bodies at once cannot take the process's memory.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::observe::metrics::BodyMetrics;

/// Without a memory limit (a host, no cgroup limit): as for a pod of 256 MiB.
const UNLIMITED_MEMORY_BUDGET: usize = 64 * 1024 * 1024;
/// The share of a memory limit bodies may take: the rest holds the answer cache, the
/// answers in flight and the process itself (`tests/it/kubernetes.rs` adds them up).
const MEMORY_SHARE_DIVISOR: u64 = 4;
/// cgroup v2, then v1: the memory limit of the process's own cgroup, as a container sees
/// it.
const CGROUP_MEMORY_LIMITS: [&str; 2] = [
    "/sys/fs/cgroup/memory.max",
    "/sys/fs/cgroup/memory/memory.limit_in_bytes",
];
/// cgroup v1 writes "no limit" as a number near `i64::MAX`; anything above this is none.
const NO_LIMIT_ABOVE: u64 = 1 << 50;

/// The bytes all held request bodies may take together.
pub struct BodyBudget {
    bytes: Arc<Semaphore>,
    total: usize,
    metrics: BodyMetrics,
}

/// No place for a body within its deadline: 503 with `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("request bodies hold the whole budget of {total} bytes")]
pub struct BudgetExhausted {
    pub total: usize,
}

/// A body's bytes in the budget, given back when dropped (with its request).
pub struct Reservation {
    _permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
    metrics: BodyMetrics,
}

impl BodyBudget {
    /// A budget of `total` bytes (at least 1).
    pub fn new(total: usize, metrics: BodyMetrics) -> BodyBudget {
        let total = total.clamp(1, Semaphore::MAX_PERMITS);
        metrics.budget(total);
        BodyBudget {
            bytes: Arc::new(Semaphore::new(total)),
            total,
            metrics,
        }
    }

    /// Reserves `bytes`, waiting until `deadline` for other bodies to give theirs back;
    /// `BudgetExhausted` when none came free in time (counted).
    pub async fn reserve(
        &self,
        bytes: usize,
        deadline: Instant,
    ) -> Result<Reservation, BudgetExhausted> {
        let exhausted = BudgetExhausted { total: self.total };
        // The whole budget at most: a larger body is refused by its limit anyway.
        let bytes = bytes.min(self.total);
        let permit = if bytes == 0 {
            None
        } else {
            let wanted = u32::try_from(bytes).map_err(|_| exhausted)?;
            let acquire = self.bytes.clone().acquire_many_owned(wanted);
            match tokio::time::timeout_at(deadline, acquire).await {
                Ok(Ok(permit)) => Some(permit),
                // Never closed; a full wait is the budget's refusal.
                Ok(Err(_)) | Err(_) => {
                    self.metrics.refused();
                    return Err(exhausted);
                }
            }
        };
        self.metrics.held(bytes_as_i64(bytes));
        Ok(Reservation {
            _permit: permit,
            bytes,
            metrics: self.metrics.clone(),
        })
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.metrics.held(-bytes_as_i64(self.bytes));
    }
}

fn bytes_as_i64(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// The budget when `server.body_budget_bytes` is not set: a quarter of the memory limit
/// (`memory_limit`), 64 MiB without one; never less than `largest_body`, the largest body
/// a request may send.
pub fn derived_total(memory_limit: Option<u64>, largest_body: usize) -> usize {
    let share = memory_limit.map_or(UNLIMITED_MEMORY_BUDGET, |limit| {
        usize::try_from(limit / MEMORY_SHARE_DIVISOR).unwrap_or(usize::MAX)
    });
    share.max(largest_body)
}

/// The memory limit of the process's cgroup (a container's), if there is one.
pub fn memory_limit() -> Option<u64> {
    CGROUP_MEMORY_LIMITS
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok())
        .and_then(|text| parse_memory_limit(&text))
}

/// A cgroup memory limit file's value: bytes, or "max" (v2) or a huge number (v1) for
/// none.
fn parse_memory_limit(text: &str) -> Option<u64> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|bytes| *bytes < NO_LIMIT_ABOVE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn budget(total: usize) -> BodyBudget {
        let metrics = BodyMetrics::new(&prometheus::Registry::new()).unwrap();
        BodyBudget::new(total, metrics)
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_millis(50)
    }

    #[tokio::test]
    async fn bodies_share_the_budget_and_give_it_back() {
        let budget = budget(100);
        let first = budget.reserve(60, soon()).await.unwrap();
        assert_eq!(
            budget.reserve(41, soon()).await.err(),
            Some(BudgetExhausted { total: 100 }),
            "41 more bytes than the 40 left wait, then are refused"
        );
        let second = budget.reserve(40, soon()).await.unwrap();
        drop(first);
        let third = budget.reserve(60, soon()).await.unwrap();
        drop((second, third));
        assert_eq!(budget.bytes.available_permits(), 100);
    }

    #[tokio::test]
    async fn a_waiting_body_gets_the_bytes_given_back_before_its_deadline() {
        let budget = Arc::new(budget(10));
        let held = budget.reserve(10, soon()).await.unwrap();
        let waiting = {
            let budget = budget.clone();
            tokio::spawn(async move {
                let deadline = Instant::now() + Duration::from_secs(10);
                budget.reserve(5, deadline).await.is_ok()
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(held);
        assert!(waiting.await.unwrap());
    }

    #[tokio::test]
    async fn an_empty_body_takes_nothing() {
        let budget = budget(1);
        let _held = budget.reserve(1, soon()).await.unwrap();
        assert!(budget.reserve(0, soon()).await.is_ok());
    }

    #[test]
    fn the_default_is_a_quarter_of_the_memory_limit_or_64_mib_without_one() {
        let mib = 1024 * 1024;
        assert_eq!(derived_total(Some(256 * mib as u64), 10 * mib), 64 * mib);
        assert_eq!(derived_total(None, 10 * mib), 64 * mib);
        assert_eq!(
            derived_total(Some(16 * mib as u64), 10 * mib),
            10 * mib,
            "never less than the largest body"
        );
    }

    #[test]
    fn cgroup_limits_are_read_in_both_spellings_of_none() {
        assert_eq!(parse_memory_limit("268435456\n"), Some(268_435_456));
        assert_eq!(parse_memory_limit("max\n"), None);
        assert_eq!(parse_memory_limit("9223372036854771712\n"), None);
    }
}
