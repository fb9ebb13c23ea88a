//! Failed logins per client in this process's memory: a bounded table of token buckets
//! (their arithmetic in `state/failed_logins.rs`).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;

use crate::client_addr::ClientNet;
use crate::state::{BucketRate, FailedLogins, StateError, Take, UnixMillis};

/// The buckets of one process, at most `max_entries` of them.
///
/// When the table is full and a client without a bucket takes a token, room is made:
/// 1. every refilled bucket is dropped (it says nothing an absent one does not);
/// 2. else the least recently used bucket of the newcomer's own network (IPv4 /24, IPv6
///    /48: what one operator or subscriber is commonly given) is dropped, so an attacker
///    filling the table from its addresses pushes out its own buckets;
/// 3. else, the newcomer's network having none, the least recently used bucket of the
///    network with the most buckets is dropped: whoever filled the table pays, not the
///    few clients of other networks.
///
/// A dropped bucket is forgotten, i.e. full again. Every step is a map or ordered-set
/// operation: an attacker's newcomers cost no scan of the table.
pub struct MemoryFailedLogins {
    table: Mutex<Table>,
    max_entries: usize,
}

/// The network a client is evicted with (rule 2 above).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Network {
    V4(u32),
    V6(u64),
}

impl Network {
    fn of(client: &ClientNet) -> Network {
        match client {
            ClientNet::V4(v4) => Network::V4(u32::from(*v4) >> 8),
            ClientNet::V6(prefix64) => Network::V6(prefix64 >> 16),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    full_at: UnixMillis,
    /// When it was last used, in uses of the table.
    used: u64,
}

#[derive(Default)]
struct Table {
    buckets: HashMap<ClientNet, Bucket>,
    /// Every bucket by the time it is full again: the refilled ones come first.
    by_full_at: BTreeSet<(UnixMillis, ClientNet)>,
    /// Each network's buckets by last use, least recent first.
    networks: HashMap<Network, BTreeSet<(u64, ClientNet)>>,
    /// Networks by how many buckets they hold.
    by_size: BTreeSet<(usize, Network)>,
    uses: u64,
}

impl Table {
    fn remove(&mut self, client: &ClientNet) {
        let Some(bucket) = self.buckets.remove(client) else {
            return;
        };
        self.by_full_at.remove(&(bucket.full_at, *client));
        let network = Network::of(client);
        if let Some(members) = self.networks.get_mut(&network) {
            self.by_size.remove(&(members.len(), network));
            members.remove(&(bucket.used, *client));
            match members.len() {
                0 => {
                    self.networks.remove(&network);
                }
                size => {
                    self.by_size.insert((size, network));
                }
            }
        }
    }

    /// Sets `client`'s bucket, as used now.
    fn put(&mut self, client: ClientNet, full_at: UnixMillis) {
        self.remove(&client);
        self.uses += 1;
        let used = self.uses;
        self.buckets.insert(client, Bucket { full_at, used });
        self.by_full_at.insert((full_at, client));
        let network = Network::of(&client);
        let members = self.networks.entry(network).or_default();
        self.by_size.remove(&(members.len(), network));
        members.insert((used, client));
        self.by_size.insert((members.len(), network));
    }

    /// Makes room for a bucket of `newcomer`, by the rule on [`MemoryFailedLogins`].
    fn make_room(&mut self, newcomer: &ClientNet, max_entries: usize, now: UnixMillis) {
        if self.buckets.len() < max_entries {
            return;
        }
        // Each turn removes a bucket: at most the table's size.
        while let Some(&(full_at, client)) = self.by_full_at.first() {
            if full_at > now {
                break;
            }
            self.remove(&client);
        }
        if self.buckets.len() < max_entries {
            return;
        }
        let own = self.networks.get(&Network::of(newcomer));
        let members = own.or_else(|| {
            let (_, largest) = self.by_size.last()?;
            self.networks.get(largest)
        });
        if let Some(&(_, victim)) = members.and_then(BTreeSet::first) {
            self.remove(&victim);
        }
    }
}

impl MemoryFailedLogins {
    pub fn new(max_entries: usize) -> Self {
        Self {
            table: Mutex::new(Table::default()),
            max_entries,
        }
    }

    fn table(&self) -> Result<MutexGuard<'_, Table>, StateError> {
        self.table
            .lock()
            .map_err(|_| StateError::Unavailable("failed-login table lock poisoned".into()))
    }
}

#[async_trait]
impl FailedLogins for MemoryFailedLogins {
    async fn take(
        &self,
        client: &ClientNet,
        rate: BucketRate,
        now: UnixMillis,
    ) -> Result<Take, StateError> {
        let mut table = self.table()?;
        let full_at = table.buckets.get(client).map(|b| b.full_at);
        match rate.take(full_at, now) {
            Ok(after) => {
                if full_at.is_none() {
                    table.make_room(client, self.max_entries, now);
                }
                table.put(*client, after);
                Ok(Take::Taken)
            }
            Err(retry_in_ms) => {
                if let Some(full_at) = full_at {
                    table.put(*client, full_at); // a refused client is still a recent one
                }
                Ok(Take::Empty { retry_in_ms })
            }
        }
    }

    async fn give_back(
        &self,
        client: &ClientNet,
        rate: BucketRate,
        now: UnixMillis,
    ) -> Result<(), StateError> {
        let mut table = self.table()?;
        let Some(bucket) = table.buckets.get(client).copied() else {
            return Ok(());
        };
        match rate.give_back(Some(bucket.full_at), now) {
            Some(full_at) => table.put(*client, full_at),
            None => table.remove(client),
        }
        Ok(())
    }

    async fn ready(&self) -> Result<(), StateError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::contract;

    const RATE: BucketRate = BucketRate {
        burst: 2,
        refill_ms: 1000,
    };

    fn client(ip: &str) -> ClientNet {
        ClientNet::of(ip.parse().unwrap())
    }

    fn holds(store: &MemoryFailedLogins, ip: &str) -> bool {
        store.table().unwrap().buckets.contains_key(&client(ip))
    }

    async fn take(store: &MemoryFailedLogins, ip: &str, now: UnixMillis) -> Take {
        store.take(&client(ip), RATE, now).await.unwrap()
    }

    /// Empties `ip`'s bucket at `now`.
    async fn exhaust(store: &MemoryFailedLogins, ip: &str, now: UnixMillis) {
        for _ in 0..RATE.burst {
            assert_eq!(take(store, ip, now).await, Take::Taken);
        }
        assert!(matches!(take(store, ip, now).await, Take::Empty { .. }));
    }

    #[tokio::test]
    async fn memory_failed_logins_pass_the_contract() {
        contract::failed_logins(&MemoryFailedLogins::new(10)).await;
    }

    #[tokio::test]
    async fn a_full_table_drops_refilled_buckets_first() {
        let store = MemoryFailedLogins::new(3);
        take(&store, "192.0.2.1", 0).await;
        take(&store, "198.51.100.1", 0).await;
        take(&store, "203.0.113.1", 500).await;
        // At 1200 the first two are full again; the third is not.
        take(&store, "203.0.113.2", 1200).await;
        assert!(!holds(&store, "192.0.2.1") && !holds(&store, "198.51.100.1"));
        assert!(holds(&store, "203.0.113.1") && holds(&store, "203.0.113.2"));
    }

    #[tokio::test]
    async fn an_attacker_filling_the_table_evicts_only_its_own_buckets() {
        let store = MemoryFailedLogins::new(4);
        exhaust(&store, "192.0.2.10", 0).await;
        for i in 0..200 {
            take(&store, &format!("198.51.100.{i}"), 0).await;
            take(&store, &format!("2001:db8:1:{i:x}::1"), 0).await;
        }
        assert!(matches!(
            take(&store, "192.0.2.10", 0).await,
            Take::Empty { .. }
        ));
        assert_eq!(store.table().unwrap().buckets.len(), 4);
    }

    #[tokio::test]
    async fn within_its_network_the_least_recently_used_bucket_goes() {
        let store = MemoryFailedLogins::new(3);
        take(&store, "198.51.100.1", 0).await;
        take(&store, "198.51.100.2", 0).await;
        take(&store, "198.51.100.3", 0).await;
        take(&store, "198.51.100.1", 0).await;
        take(&store, "198.51.100.4", 0).await;
        assert!(!holds(&store, "198.51.100.2"));
        assert!(holds(&store, "198.51.100.1") && holds(&store, "198.51.100.3"));
    }

    #[tokio::test]
    async fn a_newcomer_from_a_network_without_buckets_evicts_from_the_largest_network() {
        let store = MemoryFailedLogins::new(4);
        exhaust(&store, "192.0.2.10", 0).await;
        for i in 1..=3 {
            take(&store, &format!("198.51.100.{i}"), 0).await;
        }
        take(&store, "203.0.113.7", 0).await;
        assert!(
            !holds(&store, "198.51.100.1"),
            "the largest network's oldest"
        );
        assert!(holds(&store, "192.0.2.10") && holds(&store, "203.0.113.7"));
        assert!(matches!(
            take(&store, "192.0.2.10", 0).await,
            Take::Empty { .. }
        ));
    }

    #[tokio::test]
    async fn a_bucket_given_back_to_full_is_forgotten() {
        let store = MemoryFailedLogins::new(4);
        take(&store, "192.0.2.1", 0).await;
        store
            .give_back(&client("192.0.2.1"), RATE, 0)
            .await
            .unwrap();
        assert!(!holds(&store, "192.0.2.1"));
        let table = store.table().unwrap();
        assert!(
            table.by_full_at.is_empty() && table.networks.is_empty() && table.by_size.is_empty()
        );
    }
}
