//! At most `upstream.max_in_flight` forwarded requests at once per dashboard. The
//! dashboard (CherryPy) serves with a small fixed pool of threads, each held by one request
//! until its answer is written; a burst that takes them all leaves nothing for the health
//! checks (the gateway would mark the manager down) or for anyone else. Requests past the
//! limit wait in a bounded queue (first come, first served) for a bounded time, then are
//! refused (503 with `Retry-After`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::InFlightLimits;
use crate::queue_slot::QueueSlot;

/// One dashboard's places.
#[derive(Debug)]
pub struct InFlight {
    places: Arc<Semaphore>,
    waiting: AtomicUsize,
    limits: InFlightLimits,
}

/// A place on the dashboard, held until the request's answer is through (dropped).
#[derive(Debug)]
pub struct Place {
    _permit: OwnedSemaphorePermit,
}

/// Why a request got no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Overload {
    #[error("{0} requests wait for the dashboard already")]
    QueueFull(usize),
    #[error("no place on the dashboard within {0:?}")]
    Timeout(Duration),
}

impl InFlight {
    pub fn new(limits: InFlightLimits) -> InFlight {
        InFlight {
            places: Arc::new(Semaphore::new(limits.max)),
            waiting: AtomicUsize::new(0),
            limits,
        }
    }

    /// A place now, or after waiting in the queue (when it has room) at most
    /// `limits.wait`.
    pub async fn enter(&self) -> Result<Place, Overload> {
        if let Ok(permit) = self.places.clone().try_acquire_owned() {
            return Ok(Place { _permit: permit });
        }
        let queued = self.limits.queued;
        let _waiting = QueueSlot::take(&self.waiting, queued).ok_or(Overload::QueueFull(queued))?;
        let wait = self.limits.wait;
        // The semaphore is never closed: an error can only be the deadline.
        match tokio::time::timeout(wait, self.places.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(Place { _permit: permit }),
            Ok(Err(_)) | Err(_) => Err(Overload::Timeout(wait)),
        }
    }

    /// Requests holding a place now.
    pub fn in_flight(&self) -> usize {
        self.limits
            .max
            .saturating_sub(self.places.available_permits())
    }

    /// Requests waiting for a place now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize, queued: usize, wait_ms: u64) -> InFlightLimits {
        InFlightLimits {
            max,
            queued,
            wait: Duration::from_millis(wait_ms),
        }
    }

    #[tokio::test]
    async fn past_the_limit_requests_wait_then_are_refused() {
        let in_flight = InFlight::new(limits(2, 1, 50));
        let first = in_flight.enter().await.unwrap();
        let _second = in_flight.enter().await.unwrap();
        assert_eq!(in_flight.in_flight(), 2);
        assert_eq!(
            in_flight.enter().await.unwrap_err(),
            Overload::Timeout(Duration::from_millis(50))
        );
        assert_eq!(
            in_flight.waiting(),
            0,
            "a request that gave up left the queue"
        );
        drop(first);
        assert_eq!(in_flight.in_flight(), 1);
        let _third = in_flight.enter().await.unwrap();
    }

    #[tokio::test]
    async fn a_full_queue_refuses_at_once_and_a_freed_place_goes_to_the_waiting() {
        let in_flight = Arc::new(InFlight::new(limits(1, 1, 60_000)));
        let held = in_flight.enter().await.unwrap();
        let waiter = {
            let in_flight = in_flight.clone();
            tokio::spawn(async move { in_flight.enter().await.map(drop) })
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while in_flight.waiting() == 0 && tokio::time::Instant::now() < deadline {
            tokio::task::yield_now().await;
        }
        assert_eq!(in_flight.waiting(), 1);
        assert_eq!(in_flight.enter().await.unwrap_err(), Overload::QueueFull(1));
        drop(held);
        assert_eq!(waiter.await.unwrap(), Ok(()));
        assert_eq!(in_flight.waiting(), 0);
    }

    #[tokio::test]
    async fn no_queue_refuses_at_once() {
        let in_flight = InFlight::new(limits(1, 0, 60_000));
        let _held = in_flight.enter().await.unwrap();
        assert_eq!(in_flight.enter().await.unwrap_err(), Overload::QueueFull(0));
    }
}
