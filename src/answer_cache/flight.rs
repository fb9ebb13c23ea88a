//! Coalescing: the first request of a key asks the dashboard (the leader); identical ones
//! arriving meanwhile wait for its answer (followers), a bounded number of them for a
//! bounded time. A leader that gets no shareable answer (an error, a failed connection, an
//! answer not to be shared) gives up its flight: its followers join again, so one of them
//! leads the next try while the others keep waiting: they neither all fail with it nor all
//! ask the dashboard at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;
use tokio::time::Instant;

use super::key::Key;
use super::Stored;

#[derive(Clone)]
enum Outcome {
    Pending,
    Answered(Arc<Stored>),
    Abandoned,
}

struct Flight {
    outcome: watch::Sender<Outcome>,
    followers: AtomicUsize,
}

/// The flights in progress, by key.
#[derive(Default)]
pub(super) struct Flights {
    map: Mutex<HashMap<Key, Arc<Flight>>>,
}

/// What joining a key's flight made of a request.
pub(super) enum Joined {
    /// It asks the dashboard; the others wait for it.
    Lead(Lead),
    /// It waits for the leader's answer.
    Follow(Follower),
    /// As many wait already as may: it asks the dashboard itself.
    Full,
}

/// What a follower's wait ended with.
pub(super) enum Waited {
    Answered(Arc<Stored>),
    /// The leader gave up: join again.
    Abandoned,
    TimedOut,
}

impl Flights {
    pub fn join(self: &Arc<Self>, key: &Key, max_followers: usize) -> Joined {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(flight) = map.get(key) {
            if flight.followers.fetch_add(1, Ordering::Relaxed) >= max_followers {
                flight.followers.fetch_sub(1, Ordering::Relaxed);
                return Joined::Full;
            }
            return Joined::Follow(Follower(flight.outcome.subscribe()));
        }
        let flight = Arc::new(Flight {
            outcome: watch::Sender::new(Outcome::Pending),
            followers: AtomicUsize::new(0),
        });
        map.insert(key.clone(), Arc::clone(&flight));
        Joined::Lead(Lead {
            flights: Arc::clone(self),
            key: key.clone(),
            flight,
            done: false,
        })
    }

    /// Ends `flight` (if still `key`'s) with `outcome`: it leaves the map first, so that
    /// a follower woken by an abandoned flight finds no flight and may lead the next.
    fn land(&self, key: &Key, flight: &Arc<Flight>, outcome: Outcome) {
        {
            let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
            if map.get(key).is_some_and(|f| Arc::ptr_eq(f, flight)) {
                map.remove(key);
            }
        }
        flight.outcome.send_replace(outcome);
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// A leader's hold on its flight. Dropped without an answer, the flight is abandoned.
pub(super) struct Lead {
    flights: Arc<Flights>,
    key: Key,
    flight: Arc<Flight>,
    done: bool,
}

impl Lead {
    /// Hands `answer` to every follower.
    pub fn answer(mut self, answer: Arc<Stored>) {
        self.done = true;
        self.flights
            .land(&self.key, &self.flight, Outcome::Answered(answer));
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        if !self.done {
            self.flights
                .land(&self.key, &self.flight, Outcome::Abandoned);
        }
    }
}

pub(super) struct Follower(watch::Receiver<Outcome>);

impl Follower {
    /// Waits for the leader's outcome until `deadline`.
    pub async fn wait(mut self, deadline: Instant) -> Waited {
        let landed = self.0.wait_for(|o| !matches!(o, Outcome::Pending));
        match tokio::time::timeout_at(deadline, landed).await {
            Err(_) => Waited::TimedOut,
            // (the sender outlives its flight's leader, which always lands it)
            Ok(Err(_)) => Waited::Abandoned,
            Ok(Ok(outcome)) => match &*outcome {
                Outcome::Answered(answer) => Waited::Answered(Arc::clone(answer)),
                Outcome::Pending | Outcome::Abandoned => Waited::Abandoned,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key() -> Key {
        Key::for_tests("/api/summary")
    }

    fn lead(joined: Joined) -> Lead {
        match joined {
            Joined::Lead(lead) => lead,
            _ => panic!("expected to lead"),
        }
    }

    fn follow(joined: Joined) -> Follower {
        match joined {
            Joined::Follow(follower) => follower,
            _ => panic!("expected to follow"),
        }
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[tokio::test]
    async fn followers_get_the_leaders_answer() {
        let flights = Arc::new(Flights::default());
        let leader = lead(flights.join(&key(), 10));
        let followers: Vec<_> = (0..5).map(|_| follow(flights.join(&key(), 10))).collect();
        let waits = tokio::spawn(async move {
            let mut answered = 0;
            for f in followers {
                if let Waited::Answered(a) = f.wait(soon()).await {
                    assert_eq!(&a.identity.body[..], b"ok");
                    answered += 1;
                }
            }
            answered
        });
        leader.answer(Arc::new(Stored::for_tests(b"ok".to_vec())));
        assert_eq!(waits.await.unwrap(), 5);
        assert_eq!(flights.len(), 0);
    }

    #[tokio::test]
    async fn an_abandoned_flight_is_led_again_by_one_follower() {
        let flights = Arc::new(Flights::default());
        let leader = lead(flights.join(&key(), 10));
        let a = follow(flights.join(&key(), 10));
        let b = follow(flights.join(&key(), 10));
        drop(leader);
        assert!(matches!(a.wait(soon()).await, Waited::Abandoned));
        assert!(matches!(b.wait(soon()).await, Waited::Abandoned));
        // Joining again: the first leads, the second follows it.
        let _next = lead(flights.join(&key(), 10));
        assert!(matches!(flights.join(&key(), 10), Joined::Follow(_)));
    }

    #[tokio::test]
    async fn followers_are_bounded_in_number_and_in_time() {
        let flights = Arc::new(Flights::default());
        let _leader = lead(flights.join(&key(), 1));
        let follower = follow(flights.join(&key(), 1));
        assert!(matches!(flights.join(&key(), 1), Joined::Full));
        let deadline = Instant::now() + Duration::from_millis(20);
        assert!(matches!(follower.wait(deadline).await, Waited::TimedOut));
    }
}
