//! Failed logins per client as token buckets: the rate and the arithmetic every store
//! shares (the memory store in `memory/failed_logins.rs`; the Redis store's Lua script
//! does the same).
//!
//! A bucket is kept as one number, the time it is full again (`full_at`; the "theoretical
//! arrival time" of GCRA, which is a token bucket written this way). At `now` it holds
//! `burst - (full_at - now) / refill_ms` tokens, it refills continuously, and a bucket whose
//! `full_at` has passed is the same as none: stores forget it.

use super::UnixMillis;

/// A bucket of `burst` tokens that refills one token every `refill_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketRate {
    pub burst: u32,
    pub refill_ms: u64,
}

/// What taking a token found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    Taken,
    /// The bucket is empty; a token is there in this long.
    Empty {
        retry_in_ms: u64,
    },
}

impl BucketRate {
    /// How long an empty bucket takes to fill.
    pub fn span_ms(self) -> u64 {
        u64::from(self.burst).saturating_mul(self.refill_ms)
    }

    /// Takes a token at `now` from the bucket full at `full_at` (`None`: full): the new
    /// `full_at`, or `Err(ms)` until a token is there.
    pub fn take(self, full_at: Option<UnixMillis>, now: UnixMillis) -> Result<UnixMillis, u64> {
        let after = full_at.map_or(now, |f| f.max(now)) + self.refill_ms;
        match (after - now).saturating_sub(self.span_ms()) {
            0 => Ok(after),
            wait => Err(wait),
        }
    }

    /// Gives a token back at `now`: the new `full_at`, `None` once full.
    pub fn give_back(self, full_at: Option<UnixMillis>, now: UnixMillis) -> Option<UnixMillis> {
        full_at
            .map(|f| f.saturating_sub(self.refill_ms))
            .filter(|f| *f > now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: BucketRate = BucketRate {
        burst: 2,
        refill_ms: 1000,
    };

    #[test]
    fn the_bucket_arithmetic_refills_continuously() {
        assert_eq!(RATE.take(None, 0), Ok(1000));
        assert_eq!(RATE.take(Some(1000), 0), Ok(2000));
        assert_eq!(RATE.take(Some(2000), 0), Err(1000));
        assert_eq!(RATE.take(Some(2000), 250), Err(750));
        assert_eq!(RATE.take(Some(2000), 1000), Ok(3000));
        // A bucket full long ago is full, no fuller.
        assert_eq!(RATE.take(Some(5), 10_000), Ok(11_000));
        assert_eq!(RATE.give_back(Some(3000), 1000), Some(2000));
        assert_eq!(RATE.give_back(Some(2000), 1000), None);
        assert_eq!(RATE.give_back(None, 1000), None);
    }
}
