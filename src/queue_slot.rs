//! A place in a bounded waiting line: the logins waiting for the password hasher, the
//! requests waiting for a place on a dashboard. The line is a counter; a place is given
//! back however its wait ends (the waiting future may be dropped: its client went away).

use std::sync::atomic::{AtomicUsize, Ordering};

/// One place in the line `counter` counts, held until dropped.
pub struct QueueSlot<'a>(&'a AtomicUsize);

impl<'a> QueueSlot<'a> {
    /// A place, unless `max` are taken already (the counter never passes `max`).
    pub fn take(counter: &'a AtomicUsize, max: usize) -> Option<QueueSlot<'a>> {
        counter
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| QueueSlot(counter))
    }
}

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_slots_are_bounded_and_released() {
        let counter = AtomicUsize::new(0);
        let a = QueueSlot::take(&counter, 2).unwrap();
        let _b = QueueSlot::take(&counter, 2).unwrap();
        assert!(QueueSlot::take(&counter, 2).is_none());
        assert_eq!(counter.load(Ordering::Acquire), 2);
        drop(a);
        assert!(QueueSlot::take(&counter, 2).is_some());
    }
}
