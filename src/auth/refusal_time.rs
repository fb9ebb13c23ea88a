//! How long a login refused with the dashboard's help takes: every refusal is held until
//! a floor learned from the slow answers, so that an unknown username (the dashboard
//! answers at once) cannot be told from a wrong password (it runs bcrypt first).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The floor never exceeds this, whatever one slow answer took (a dashboard under load).
const MAX_FLOOR: Duration = Duration::from_secs(2);

/// Answers faster than this share of the floor are the fast kind (unknown users) and do
/// not teach it; the slow kind pulls it toward what they take.
const FAST_SHARE: u64 = 2;

/// A slow answer below the floor lowers it by this fraction of the difference, so that
/// one slow outlier is forgotten over a few dozen logins.
const DECAY_DIVISOR: u64 = 16;

/// The learned floor, in microseconds.
#[derive(Debug, Default)]
pub struct RefusalFloor {
    micros: AtomicU64,
}

impl RefusalFloor {
    /// How long every refusal takes at least, for now.
    pub fn floor(&self) -> Duration {
        Duration::from_micros(self.micros.load(Ordering::Relaxed))
    }

    /// Learns from how long the dashboard took to answer a login (success or refusal).
    pub fn observe(&self, took: Duration) {
        let took = micros(took.min(MAX_FLOOR));
        // Concurrent logins may each replace the other's update: the floor is an estimate.
        let _ = self
            .micros
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |floor| {
                Some(next_floor(floor, took))
            });
    }

    /// What is left to wait for a refusal that took `took` so far.
    pub fn remaining(&self, took: Duration) -> Duration {
        self.floor().saturating_sub(took)
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The floor after an answer that took `took`: raised at once by a slower one, lowered
/// slowly by a slow one that was faster, untouched by a fast one.
fn next_floor(floor: u64, took: u64) -> u64 {
    if took >= floor {
        took
    } else if took.saturating_mul(FAST_SHARE) < floor {
        floor
    } else {
        floor - (floor - took) / DECAY_DIVISOR
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slower_answer_raises_the_floor_at_once_up_to_its_bound() {
        let floor = RefusalFloor::default();
        floor.observe(Duration::from_millis(250));
        assert_eq!(floor.floor(), Duration::from_millis(250));
        floor.observe(Duration::from_secs(30));
        assert_eq!(floor.floor(), MAX_FLOOR);
    }

    #[test]
    fn fast_answers_do_not_lower_the_floor() {
        let floor = RefusalFloor::default();
        floor.observe(Duration::from_millis(300));
        for _ in 0..100 {
            floor.observe(Duration::from_millis(2));
        }
        assert_eq!(floor.floor(), Duration::from_millis(300));
    }

    #[test]
    fn slow_answers_below_the_floor_lower_it_slowly() {
        let floor = RefusalFloor::default();
        floor.observe(Duration::from_millis(1600));
        floor.observe(Duration::from_millis(1000));
        assert_eq!(floor.floor(), Duration::from_micros(1_562_500));
        for _ in 0..200 {
            floor.observe(Duration::from_millis(1000));
        }
        assert!(floor.floor() < Duration::from_millis(1001));
    }

    #[test]
    fn a_refusal_waits_what_is_left_of_the_floor() {
        let floor = RefusalFloor::default();
        assert_eq!(floor.remaining(Duration::from_millis(5)), Duration::ZERO);
        floor.observe(Duration::from_millis(200));
        assert_eq!(
            floor.remaining(Duration::from_millis(5)),
            Duration::from_millis(195)
        );
        assert_eq!(floor.remaining(Duration::from_millis(500)), Duration::ZERO);
    }
}
