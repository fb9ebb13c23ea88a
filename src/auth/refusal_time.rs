//! How long a login refused with the dashboard's help takes: every refusal is held until
//! a floor learned from the slow answers, so that an unknown username (the dashboard
//! answers at once) cannot be told from a wrong password (it runs bcrypt first). Until a
//! login has succeeded (the one answer sure to include the dashboard's bcrypt) the floor
//! is at least `UNTIL_LEARNED`, so the first guesses after a start learn nothing either.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The floor never exceeds this, whatever one slow answer took (a dashboard under load).
const MAX_FLOOR: Duration = Duration::from_secs(2);

/// The least floor until a login has succeeded: above what the dashboard's bcrypt takes.
const UNTIL_LEARNED: Duration = Duration::from_secs(1);

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
    /// A login has succeeded: the floor has seen what a bcrypt takes.
    learned: AtomicBool,
}

/// How the dashboard answered a login.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginAnswerKind {
    Accepted,
    Refused,
}

impl RefusalFloor {
    /// How long every refusal takes at least, for now.
    pub fn floor(&self) -> Duration {
        let learned = Duration::from_micros(self.micros.load(Ordering::Relaxed));
        match self.learned.load(Ordering::Relaxed) {
            true => learned,
            false => learned.max(UNTIL_LEARNED),
        }
    }

    /// Learns from how long the dashboard took to answer a login.
    pub fn observe(&self, took: Duration, kind: LoginAnswerKind) {
        if kind == LoginAnswerKind::Accepted {
            self.learned.store(true, Ordering::Relaxed);
        }
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

    /// A floor that has seen a login succeed (in no time, so it teaches nothing else).
    fn learned() -> RefusalFloor {
        let floor = RefusalFloor::default();
        floor.observe(Duration::ZERO, LoginAnswerKind::Accepted);
        floor
    }

    #[test]
    fn until_a_login_succeeds_refusals_take_at_least_a_second() {
        let floor = RefusalFloor::default();
        floor.observe(Duration::from_millis(8), LoginAnswerKind::Refused);
        assert_eq!(
            floor.remaining(Duration::from_millis(8)),
            Duration::from_millis(992)
        );
        floor.observe(Duration::from_millis(375), LoginAnswerKind::Accepted);
        assert_eq!(floor.floor(), Duration::from_millis(375));
    }

    #[test]
    fn a_slower_answer_raises_the_floor_at_once_up_to_its_bound() {
        let floor = learned();
        floor.observe(Duration::from_millis(250), LoginAnswerKind::Refused);
        assert_eq!(floor.floor(), Duration::from_millis(250));
        floor.observe(Duration::from_secs(30), LoginAnswerKind::Refused);
        assert_eq!(floor.floor(), MAX_FLOOR);
    }

    #[test]
    fn fast_answers_do_not_lower_the_floor() {
        let floor = learned();
        floor.observe(Duration::from_millis(300), LoginAnswerKind::Refused);
        for _ in 0..100 {
            floor.observe(Duration::from_millis(2), LoginAnswerKind::Refused);
        }
        assert_eq!(floor.floor(), Duration::from_millis(300));
    }

    #[test]
    fn slow_answers_below_the_floor_lower_it_slowly() {
        let floor = learned();
        floor.observe(Duration::from_millis(1600), LoginAnswerKind::Refused);
        floor.observe(Duration::from_millis(1000), LoginAnswerKind::Refused);
        assert_eq!(floor.floor(), Duration::from_micros(1_562_500));
        for _ in 0..200 {
            floor.observe(Duration::from_millis(1000), LoginAnswerKind::Refused);
        }
        assert!(floor.floor() < Duration::from_millis(1001));
    }

    #[test]
    fn a_refusal_waits_what_is_left_of_the_floor() {
        let floor = learned();
        assert_eq!(floor.remaining(Duration::from_millis(5)), Duration::ZERO);
        floor.observe(Duration::from_millis(200), LoginAnswerKind::Refused);
        assert_eq!(
            floor.remaining(Duration::from_millis(5)),
            Duration::from_millis(195)
        );
        assert_eq!(floor.remaining(Duration::from_millis(500)), Duration::ZERO);
    }
}
