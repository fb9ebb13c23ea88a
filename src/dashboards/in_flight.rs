//! At most `upstream.max_in_flight` forwarded requests at once per dashboard. The dashboard
//! (CherryPy) serves with a small fixed pool of threads, each held by one request until its
//! answer is written; a burst that takes them all leaves nothing for the health checks (the
//! gateway would mark the manager down) or for anyone else. Requests past the limit wait in
//! a bounded queue (first come, first served) for a bounded time, then are refused (503 with
//! `Retry-After`).
//!
//! No one takes every place: each holder (a user, or the client address of a request
//! without a token) has a fair share, half the places and half the queue (rounded up), and
//! waits for one of its own places beyond it. A user's slow reads (a dashboard call that
//! hangs) then leave the other half to everyone else. A place is held from the try's
//! connection until the dashboard's answer has been read (`answer_buffer`), not until the
//! client has taken it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{timeout_at, Instant};

use crate::config::InFlightLimits;
use crate::queue_slot::QueueSlot;

/// Whose share a request's place counts in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Holder {
    /// A request with a token: its user, wherever it comes from (behind a balancer every
    /// user has the balancer's address).
    User(String),
    /// A request without a token: the client's address.
    Address(IpAddr),
    /// A request whose client address is not known (no inet peer).
    Unknown,
}

/// One dashboard's places.
#[derive(Debug)]
pub struct InFlight {
    places: Arc<Semaphore>,
    waiting: AtomicUsize,
    limits: InFlightLimits,
    /// The holders with a place or waiting for one, each with the number of its entries
    /// ([`ShareEntry`]); removed with its last entry.
    shares: Mutex<HashMap<Holder, (Arc<Share>, usize)>>,
}

/// One holder's places and waiting requests.
#[derive(Debug)]
struct Share {
    places: Arc<Semaphore>,
    waiting: AtomicUsize,
}

/// A place on the dashboard, held until the dashboard's answer has been read (dropped).
#[derive(Debug)]
pub struct Place {
    _permit: OwnedSemaphorePermit,
    _own: OwnedSemaphorePermit,
    _share: ShareEntry,
}

/// Why a request got no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Overload {
    #[error("{0} requests wait for the dashboard already")]
    QueueFull(usize),
    #[error("no place on the dashboard within {0:?}")]
    Timeout(Duration),
    /// The request's user (or address) held its share of the places for the whole wait,
    /// or has its share of the queue waiting already.
    #[error("the client holds its share of the places on the dashboard ({0})")]
    OverShare(usize),
}

impl Overload {
    /// The metric's label.
    pub fn reason(self) -> &'static str {
        match self {
            Overload::QueueFull(_) => "queue_full",
            Overload::Timeout(_) => "timeout",
            Overload::OverShare(_) => "over_share",
        }
    }
}

/// Half of `n`, rounded up: one holder's share of the places (or of the queue).
fn share_of(n: usize) -> usize {
    n.div_ceil(2)
}

impl InFlight {
    pub fn new(limits: InFlightLimits) -> InFlight {
        InFlight {
            places: Arc::new(Semaphore::new(limits.max)),
            waiting: AtomicUsize::new(0),
            limits,
            shares: Mutex::new(HashMap::new()),
        }
    }

    /// A place for `holder` now, or after waiting in the queue (when it and the holder's
    /// share of it have room) at most `limits.wait`: first for one of the holder's own
    /// places, then for one of the dashboard's.
    pub async fn enter(self: &Arc<Self>, holder: Holder) -> Result<Place, Overload> {
        let share = self.entry_for(holder);
        let own_now = share.places().try_acquire_owned().ok();
        if let Some(own) = own_now {
            if let Ok(permit) = self.places.clone().try_acquire_owned() {
                return Ok(share.place(permit, own));
            }
            return self.wait(share, Some(own)).await;
        }
        self.wait(share, None).await
    }

    /// The wait in the queue for `own` (the holder's place), unless given, then for a place.
    async fn wait(
        &self,
        share: ShareEntry,
        own: Option<OwnedSemaphorePermit>,
    ) -> Result<Place, Overload> {
        let (permit, own) = self.queued_permits(&share, own).await?;
        Ok(share.place(permit, own))
    }

    /// The dashboard's permit and the holder's, waited for in the queue.
    async fn queued_permits(
        &self,
        share: &ShareEntry,
        own: Option<OwnedSemaphorePermit>,
    ) -> Result<(OwnedSemaphorePermit, OwnedSemaphorePermit), Overload> {
        let (queued, wait) = (self.limits.queued, self.limits.wait);
        let _waiting = QueueSlot::take(&self.waiting, queued).ok_or(Overload::QueueFull(queued))?;
        let own_share = share_of(self.limits.max);
        let _own_waiting = QueueSlot::take(&share.share.waiting, share_of(queued))
            .ok_or(Overload::OverShare(own_share))?;
        let deadline = Instant::now() + wait;
        // The semaphores are never closed: an error can only be the deadline.
        let own = match own {
            Some(own) => own,
            None => match timeout_at(deadline, share.places().acquire_owned()).await {
                Ok(Ok(own)) => own,
                Ok(Err(_)) | Err(_) => return Err(Overload::OverShare(own_share)),
            },
        };
        match timeout_at(deadline, self.places.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok((permit, own)),
            Ok(Err(_)) | Err(_) => Err(Overload::Timeout(wait)),
        }
    }

    /// `holder`'s share, entered in the table until the entry is dropped.
    fn entry_for(self: &Arc<Self>, holder: Holder) -> ShareEntry {
        let mut shares = self.shares();
        let (share, entries) = shares.entry(holder.clone()).or_insert_with(|| {
            let share = Share {
                places: Arc::new(Semaphore::new(share_of(self.limits.max))),
                waiting: AtomicUsize::new(0),
            };
            (Arc::new(share), 0)
        });
        *entries += 1;
        ShareEntry {
            share: share.clone(),
            in_flight: self.clone(),
            holder,
        }
    }

    fn shares(&self) -> MutexGuard<'_, HashMap<Holder, (Arc<Share>, usize)>> {
        // A panic while the table was locked left it whole (each change is one call).
        self.shares.lock().unwrap_or_else(|e| e.into_inner())
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

    /// Holders with a place or waiting for one now.
    #[cfg(test)]
    fn holders(&self) -> usize {
        self.shares().len()
    }
}

/// A holder's share, in the table while an entry for it lives.
#[derive(Debug)]
struct ShareEntry {
    in_flight: Arc<InFlight>,
    holder: Holder,
    share: Arc<Share>,
}

impl ShareEntry {
    fn places(&self) -> Arc<Semaphore> {
        self.share.places.clone()
    }

    fn place(self, permit: OwnedSemaphorePermit, own: OwnedSemaphorePermit) -> Place {
        Place {
            _permit: permit,
            _own: own,
            _share: self,
        }
    }
}

impl Drop for ShareEntry {
    /// The last entry of a holder removes its share from the table.
    fn drop(&mut self) {
        let mut shares = self.in_flight.shares();
        if let Some((_, entries)) = shares.get_mut(&self.holder) {
            *entries -= 1;
            if *entries == 0 {
                shares.remove(&self.holder);
            }
        }
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

    fn user(name: &str) -> Holder {
        Holder::User(name.into())
    }

    async fn waiting_for(in_flight: &InFlight, n: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while in_flight.waiting() != n && tokio::time::Instant::now() < deadline {
            tokio::task::yield_now().await;
        }
        assert_eq!(in_flight.waiting(), n);
    }

    #[tokio::test]
    async fn past_the_limit_requests_wait_then_are_refused() {
        let in_flight = Arc::new(InFlight::new(limits(2, 1, 50)));
        let first = in_flight.enter(user("a")).await.unwrap();
        let _second = in_flight.enter(user("b")).await.unwrap();
        assert_eq!(in_flight.in_flight(), 2);
        assert_eq!(
            in_flight.enter(user("c")).await.unwrap_err(),
            Overload::Timeout(Duration::from_millis(50))
        );
        assert_eq!(
            in_flight.waiting(),
            0,
            "a request that gave up left the queue"
        );
        drop(first);
        assert_eq!(in_flight.in_flight(), 1);
        let _third = in_flight.enter(user("c")).await.unwrap();
    }

    #[tokio::test]
    async fn a_full_queue_refuses_at_once_and_a_freed_place_goes_to_the_waiting() {
        let in_flight = Arc::new(InFlight::new(limits(2, 1, 60_000)));
        let held = in_flight.enter(user("a")).await.unwrap();
        let _other = in_flight.enter(user("b")).await.unwrap();
        let waiter = {
            let in_flight = in_flight.clone();
            tokio::spawn(async move { in_flight.enter(user("c")).await.map(drop) })
        };
        waiting_for(&in_flight, 1).await;
        assert_eq!(
            in_flight.enter(user("d")).await.unwrap_err(),
            Overload::QueueFull(1)
        );
        drop(held);
        assert_eq!(waiter.await.unwrap(), Ok(()));
        assert_eq!(in_flight.waiting(), 0);
    }

    #[tokio::test]
    async fn no_queue_refuses_at_once() {
        let in_flight = Arc::new(InFlight::new(limits(1, 0, 60_000)));
        let _held = in_flight.enter(user("a")).await.unwrap();
        assert_eq!(
            in_flight.enter(user("b")).await.unwrap_err(),
            Overload::QueueFull(0)
        );
    }

    #[tokio::test]
    async fn one_holder_gets_half_the_places_and_the_others_the_rest() {
        let in_flight = Arc::new(InFlight::new(limits(8, 64, 50)));
        let reader = user("reader");
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(in_flight.enter(reader.clone()).await.unwrap());
        }
        assert_eq!(
            in_flight.enter(reader.clone()).await.unwrap_err(),
            Overload::OverShare(4),
            "a fifth place for the same user waits for one of its own, then is refused"
        );
        let address = Holder::Address(IpAddr::from([192, 0, 2, 1]));
        for _ in 0..4 {
            held.push(in_flight.enter(address.clone()).await.unwrap());
        }
        assert_eq!(in_flight.in_flight(), 8);
        assert_eq!(
            in_flight.enter(user("admin")).await.unwrap_err(),
            Overload::Timeout(Duration::from_millis(50))
        );
        held.truncate(4);
        let _admin = in_flight.enter(user("admin")).await.unwrap();
    }

    #[tokio::test]
    async fn a_holder_waits_for_its_own_place_and_then_for_the_dashboard() {
        let in_flight = Arc::new(InFlight::new(limits(3, 4, 60_000)));
        let first = in_flight.enter(user("a")).await.unwrap();
        let _second = in_flight.enter(user("a")).await.unwrap();
        let third = {
            let in_flight = in_flight.clone();
            tokio::spawn(async move { in_flight.enter(user("a")).await.map(drop) })
        };
        waiting_for(&in_flight, 1).await;
        let _other = in_flight.enter(user("b")).await.unwrap();
        drop(first);
        assert_eq!(third.await.unwrap(), Ok(()));
    }

    #[tokio::test]
    async fn one_holder_fills_half_the_queue_at_most() {
        let in_flight = Arc::new(InFlight::new(limits(2, 4, 60_000)));
        let _held = in_flight.enter(user("a")).await.unwrap();
        let mut waiters = Vec::new();
        for _ in 0..2 {
            let in_flight = in_flight.clone();
            waiters.push(tokio::spawn(async move {
                in_flight.enter(user("a")).await.map(drop)
            }));
        }
        waiting_for(&in_flight, 2).await;
        assert_eq!(
            in_flight.enter(user("a")).await.unwrap_err(),
            Overload::OverShare(1)
        );
        let _b = in_flight.enter(user("b")).await.unwrap();
        for waiter in waiters {
            waiter.abort();
        }
    }

    #[tokio::test]
    async fn a_holder_leaves_the_table_with_its_last_place_or_wait() {
        let in_flight = Arc::new(InFlight::new(limits(2, 2, 20)));
        let a = in_flight.enter(user("a")).await.unwrap();
        let b = in_flight.enter(user("b")).await.unwrap();
        assert_eq!(in_flight.holders(), 2);
        assert!(in_flight.enter(user("c")).await.is_err());
        assert_eq!(in_flight.holders(), 2, "a refused holder left");
        drop((a, b));
        assert_eq!(in_flight.holders(), 0);
    }
}
