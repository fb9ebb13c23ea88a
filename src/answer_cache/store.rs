//! The kept answers: each until its expiry, within a bound on entries and on bytes. When
//! full, the answer closest to its expiry goes first (the one with the least use left).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use super::key::Key;
use super::Stored;

struct Entry {
    answer: Arc<Stored>,
    expires: Instant,
    /// Tells apart entries that expire at the same instant in `by_expiry`.
    seq: u64,
    size: usize,
}

/// What an insert did to the other entries.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Inserted {
    /// Entries pushed out before their expiry to make room.
    pub evicted: usize,
}

pub(super) struct Store {
    map: HashMap<Key, Entry>,
    by_expiry: BTreeMap<(Instant, u64), Key>,
    bytes: usize,
    seq: u64,
    max_entries: usize,
    max_bytes: usize,
}

impl Store {
    pub fn new(max_entries: usize, max_bytes: usize) -> Store {
        Store {
            map: HashMap::new(),
            by_expiry: BTreeMap::new(),
            bytes: 0,
            seq: 0,
            max_entries,
            max_bytes,
        }
    }

    /// The answer kept for `key`, unless it expired by `now`.
    pub fn get(&mut self, key: &Key, now: Instant) -> Option<Arc<Stored>> {
        let entry = self.map.get(key)?;
        if entry.expires > now {
            return Some(Arc::clone(&entry.answer));
        }
        self.remove(key);
        None
    }

    /// Keeps `answer` for `key` until `expires`; expired entries go first, then, while
    /// there is no room, the ones closest to their expiry. An answer larger than the
    /// whole store is not kept.
    pub fn insert(
        &mut self,
        key: Key,
        answer: Arc<Stored>,
        expires: Instant,
        now: Instant,
    ) -> Inserted {
        let size = key.size() + answer.size();
        let mut inserted = Inserted::default();
        if size > self.max_bytes {
            return inserted;
        }
        self.remove(&key);
        self.purge_expired(now);
        while self.map.len() >= self.max_entries || self.bytes + size > self.max_bytes {
            let Some((_, oldest)) = self.by_expiry.pop_first() else {
                break;
            };
            self.forget(&oldest);
            inserted.evicted += 1;
        }
        self.seq += 1;
        self.by_expiry.insert((expires, self.seq), key.clone());
        self.bytes += size;
        let entry = Entry {
            answer,
            expires,
            seq: self.seq,
            size,
        };
        self.map.insert(key, entry);
        inserted
    }

    /// Drops every answer.
    pub fn clear(&mut self) {
        self.map.clear();
        self.by_expiry.clear();
        self.bytes = 0;
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn purge_expired(&mut self, now: Instant) {
        while let Some(entry) = self.by_expiry.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            self.forget(&key);
        }
    }

    fn remove(&mut self, key: &Key) {
        if let Some(entry) = self.map.remove(key) {
            self.by_expiry.remove(&(entry.expires, entry.seq));
            self.bytes -= entry.size;
        }
    }

    /// Removes `key`'s entry, already taken out of `by_expiry`.
    fn forget(&mut self, key: &Key) {
        if let Some(entry) = self.map.remove(key) {
            self.bytes -= entry.size;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key(path: &str) -> Key {
        Key::for_tests(path)
    }

    fn answer(bytes: usize) -> Arc<Stored> {
        Arc::new(Stored::for_tests(vec![b'x'; bytes]))
    }

    #[test]
    fn an_answer_is_served_until_its_expiry_and_not_after() {
        let mut store = Store::new(10, 1 << 20);
        let now = Instant::now();
        let expires = now + Duration::from_secs(1);
        store.insert(key("/a"), answer(10), expires, now);
        assert!(store
            .get(&key("/a"), expires - Duration::from_millis(1))
            .is_some());
        assert!(store.get(&key("/a"), expires).is_none());
        assert_eq!((store.len(), store.bytes()), (0, 0));
    }

    #[test]
    fn entries_are_bounded_and_the_closest_to_expiry_goes_first() {
        let mut store = Store::new(2, 1 << 20);
        let now = Instant::now();
        let at = |ms| now + Duration::from_millis(ms);
        store.insert(key("/late"), answer(1), at(3000), now);
        store.insert(key("/soon"), answer(1), at(1000), now);
        let inserted = store.insert(key("/new"), answer(1), at(2000), now);
        assert_eq!(inserted.evicted, 1);
        assert!(store.get(&key("/soon"), now).is_none());
        assert!(store.get(&key("/late"), now).is_some());
        assert!(store.get(&key("/new"), now).is_some());
    }

    #[test]
    fn bytes_are_bounded() {
        let mut store = Store::new(100, 4096);
        let now = Instant::now();
        let expires = now + Duration::from_secs(1);
        for i in 0..10 {
            store.insert(key(&format!("/{i}")), answer(1000), expires, now);
            assert!(store.bytes() <= 4096, "{}", store.bytes());
        }
        assert!(store.len() < 10);
        // Larger than the whole store: not kept, nothing pushed out for it.
        let before = store.len();
        store.insert(key("/huge"), answer(5000), expires, now);
        assert_eq!(store.len(), before);
    }

    #[test]
    fn expired_entries_make_room_without_counting_as_evictions() {
        let mut store = Store::new(1, 1 << 20);
        let now = Instant::now();
        store.insert(key("/a"), answer(1), now + Duration::from_millis(5), now);
        let later = now + Duration::from_millis(10);
        let inserted = store.insert(key("/b"), answer(1), later + Duration::from_secs(1), later);
        assert_eq!(inserted.evicted, 0);
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn a_key_inserted_again_replaces_its_answer() {
        let mut store = Store::new(10, 1 << 20);
        let now = Instant::now();
        let expires = now + Duration::from_secs(1);
        store.insert(key("/a"), answer(10), expires, now);
        store.insert(key("/a"), answer(20), expires, now);
        assert_eq!(store.len(), 1);
        assert_eq!(
            store.get(&key("/a"), now).map(|a| a.identity.body.len()),
            Some(20)
        );
        store.clear();
        assert_eq!((store.len(), store.bytes()), (0, 0));
    }
}
