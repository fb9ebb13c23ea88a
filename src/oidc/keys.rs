//! The provider's signing keys (its JWKS): fetched at start, again on a schedule, and once
//! (single flight, at most every `min_refresh`) when a token names a key the set lacks; the
//! last good set is used through a provider outage for `max_stale` after it was fetched,
//! and with none usable every provider token is refused with 503 (fail closed).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use jsonwebtoken::jwk::{Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use tokio::time::Instant;

use super::fetch::{Fetch, FetchError};
use super::Discovery;
use crate::config::{KeyPolicy, ProviderUrl};
use crate::observe::metrics::Metrics;
use crate::state::unix_now;

/// Why no key was found for a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// No set was ever fetched, or the last one is older than `max_stale`.
    #[error("the identity provider's keys are not available")]
    Unavailable,
    /// The set, fetched again if allowed, has no such key.
    #[error("the token names a key the identity provider does not publish")]
    Unknown,
}

/// Why a refresh failed.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error("the discovery document: {0}")]
    Discovery(String),
    #[error("the JWKS: {0}")]
    Jwks(String),
}

/// One usable public key.
pub struct Key {
    pub decoding: DecodingKey,
    /// The JWK's own `alg`, when it names one: a token must use it.
    pub alg: Option<String>,
}

/// A fetched set: keys by `kid` (a key without one under "").
pub struct KeySet {
    keys: HashMap<String, Arc<Key>>,
    fetched: Instant,
}

impl KeySet {
    /// The signature keys of a JWKS document; keys for encryption and those the library
    /// cannot use are skipped (a provider may publish kinds it does not sign with).
    pub fn parse(body: &[u8], fetched: Instant) -> Result<KeySet, String> {
        let set: JwkSet = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        let keys: HashMap<String, Arc<Key>> = set
            .keys
            .iter()
            .filter(|jwk| jwk.common.public_key_use != Some(PublicKeyUse::Encryption))
            .filter_map(|jwk| Some((kid_of(jwk), Arc::new(key_of(jwk)?))))
            .collect();
        if keys.is_empty() {
            return Err("no signature key in it".into());
        }
        Ok(KeySet { keys, fetched })
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The key a token's `kid` names; a token without one takes the only key there is.
    fn find(&self, kid: Option<&str>) -> Option<Arc<Key>> {
        match kid {
            Some(kid) => self.keys.get(kid).cloned(),
            None if self.keys.len() == 1 => self.keys.values().next().cloned(),
            None => None,
        }
    }
}

fn kid_of(jwk: &Jwk) -> String {
    jwk.common.key_id.clone().unwrap_or_default()
}

fn key_of(jwk: &Jwk) -> Option<Key> {
    let decoding = DecodingKey::from_jwk(jwk).ok()?;
    let alg = jwk.common.key_algorithm.map(|a| format!("{a:?}"));
    Some(Key { decoding, alg })
}

/// The key set and how it is kept fresh.
pub struct KeyStore {
    fetch: Arc<dyn Fetch>,
    issuer: ProviderUrl,
    policy: KeyPolicy,
    discovery: ArcSwapOption<Discovery>,
    set: ArcSwapOption<KeySet>,
    /// One refresh at a time; those who waited for it use its result.
    refreshing: tokio::sync::Mutex<Option<Instant>>,
    /// Counts sets installed, so that a waiter knows one came while it waited.
    generation: AtomicU64,
    metrics: Arc<Metrics>,
}

impl KeyStore {
    pub fn new(
        fetch: Arc<dyn Fetch>,
        issuer: ProviderUrl,
        policy: KeyPolicy,
        metrics: Arc<Metrics>,
    ) -> KeyStore {
        KeyStore {
            fetch,
            issuer,
            policy,
            discovery: ArcSwapOption::empty(),
            set: ArcSwapOption::empty(),
            refreshing: tokio::sync::Mutex::new(None),
            generation: AtomicU64::new(0),
            metrics,
        }
    }

    /// How the provider is reached (the token endpoint's exchange uses it too).
    pub fn fetch(&self) -> &dyn Fetch {
        self.fetch.as_ref()
    }

    /// The provider's endpoints, once its discovery document was fetched.
    pub fn discovery(&self) -> Option<Arc<Discovery>> {
        self.discovery.load_full()
    }

    /// The set in use: `None` when none was fetched or it is past `max_stale`.
    pub fn current(&self) -> Option<Arc<KeySet>> {
        let set = self.set.load_full()?;
        if set.fetched.elapsed() <= self.policy.max_stale {
            return Some(set);
        }
        self.metrics.oidc.keys_dropped();
        None
    }

    /// The key for a token's `kid`, fetching the set again (rate-limited, single flight)
    /// when it does not have it.
    pub async fn key(&self, kid: Option<&str>) -> Result<Arc<Key>, KeyError> {
        let seen = self.generation.load(Ordering::Acquire);
        if let Some(key) = self.current().and_then(|set| set.find(kid)) {
            return Ok(key);
        }
        // A refresh's failure is logged by it; the answer is what the set holds after.
        let _ = self.refresh_if_due(seen).await;
        match self.current() {
            None => Err(KeyError::Unavailable),
            Some(set) => set.find(kid).ok_or(KeyError::Unknown),
        }
    }

    /// Fetches the set now unless one arrived since generation `seen` or the last attempt
    /// was within `min_refresh`. `Ok(false)`: nothing fetched.
    async fn refresh_if_due(&self, seen: u64) -> Result<bool, RefreshError> {
        let mut last = self.refreshing.lock().await;
        if self.generation.load(Ordering::Acquire) != seen {
            return Ok(false);
        }
        if last.is_some_and(|at| at.elapsed() < self.policy.min_refresh) {
            return Ok(false);
        }
        *last = Some(Instant::now());
        let fetched = self.fetch_set().await;
        if let Err(e) = &fetched {
            tracing::warn!(issuer = %self.issuer.text, error = %e, "a token names an unknown key, and the identity provider's keys cannot be fetched");
        }
        fetched.map(|_| true)
    }

    /// Fetches the discovery document (until it was had once) and the set, now; the
    /// scheduled refresh. Returns how many keys the new set holds.
    pub async fn refresh(&self) -> Result<usize, RefreshError> {
        let mut last = self.refreshing.lock().await;
        *last = Some(Instant::now());
        self.fetch_set().await
    }

    async fn fetch_set(&self) -> Result<usize, RefreshError> {
        let fetched = self.fetch_set_uncounted().await;
        let held = fetched.as_ref().ok().map(|held| (*held, unix_now()));
        self.metrics.oidc.key_refresh(held);
        fetched
    }

    async fn fetch_set_uncounted(&self) -> Result<usize, RefreshError> {
        let discovery = match self.discovery.load_full() {
            Some(d) => d,
            None => {
                let url = self.issuer.discovery().map_err(RefreshError::Discovery)?;
                let body = self.fetch.get(&url).await?;
                let d = Arc::new(Discovery::parse(&body, &self.issuer)?);
                self.discovery.store(Some(d.clone()));
                d
            }
        };
        let body = self.fetch.get(&discovery.jwks_uri).await?;
        let set = KeySet::parse(&body, Instant::now()).map_err(RefreshError::Jwks)?;
        let held = set.len();
        self.set.store(Some(Arc::new(set)));
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(held)
    }
}

/// Whether `key` may verify a token signed with `alg`.
pub fn usable_for(key: &Key, alg: Algorithm) -> bool {
    key.alg
        .as_deref()
        .is_none_or(|named| named == format!("{alg:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oidc::fetch::testing::FakeProvider;
    use std::time::Duration;

    fn policy() -> KeyPolicy {
        KeyPolicy {
            refresh: Duration::from_secs(300),
            min_refresh: Duration::from_secs(10),
            max_stale: Duration::from_secs(3600),
        }
    }

    fn store(provider: &Arc<FakeProvider>) -> KeyStore {
        let issuer = ProviderUrl::parse(&provider.issuer).unwrap();
        let metrics = Metrics::new(&prometheus::Registry::new()).unwrap();
        KeyStore::new(provider.clone(), issuer, policy(), metrics)
    }

    #[tokio::test(start_paused = true)]
    async fn no_set_ever_fetched_is_unavailable_and_a_fetched_one_serves_its_keys() {
        let provider = FakeProvider::new(&["k1"]);
        provider.set_down(true);
        let keys = store(&provider);
        assert_eq!(
            keys.key(Some("k1")).await.err(),
            Some(KeyError::Unavailable)
        );
        provider.set_down(false);
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(keys.key(Some("k1")).await.is_ok());
        assert_eq!(keys.key(Some("k9")).await.err(), Some(KeyError::Unknown));
    }

    #[tokio::test(start_paused = true)]
    async fn an_unknown_kid_fetches_once_per_min_refresh_and_finds_a_rotated_key() {
        let provider = FakeProvider::new(&["k1"]);
        let keys = store(&provider);
        keys.refresh().await.unwrap();
        let fetched = provider.jwks_fetches();
        provider.set_keys(&["k1", "k2"]);
        // Within min_refresh of the last fetch: not fetched again, however often asked.
        for _ in 0..5 {
            assert_eq!(keys.key(Some("k2")).await.err(), Some(KeyError::Unknown));
        }
        assert_eq!(provider.jwks_fetches(), fetched);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(keys.key(Some("k2")).await.is_ok());
        assert_eq!(provider.jwks_fetches(), fetched + 1);
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_unknown_kids_share_one_fetch() {
        let provider = FakeProvider::new(&["k1"]);
        let keys = Arc::new(store(&provider));
        keys.refresh().await.unwrap();
        tokio::time::advance(Duration::from_secs(60)).await;
        provider.set_keys(&["k2"]);
        let before = provider.jwks_fetches();
        let asks: Vec<_> = (0..8)
            .map(|_| {
                let keys = keys.clone();
                tokio::spawn(async move { keys.key(Some("k2")).await.is_ok() })
            })
            .collect();
        for ask in asks {
            assert!(ask.await.unwrap());
        }
        assert_eq!(provider.jwks_fetches(), before + 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_good_set_serves_through_an_outage_until_max_stale() {
        let provider = FakeProvider::new(&["k1"]);
        let keys = store(&provider);
        keys.refresh().await.unwrap();
        provider.set_down(true);
        tokio::time::advance(Duration::from_secs(3000)).await;
        assert!(keys.refresh().await.is_err());
        assert!(keys.key(Some("k1")).await.is_ok());
        tokio::time::advance(Duration::from_secs(601)).await;
        assert_eq!(
            keys.key(Some("k1")).await.err(),
            Some(KeyError::Unavailable)
        );
    }

    #[test]
    fn encryption_keys_and_an_empty_set_are_not_signature_keys() {
        let now = Instant::now();
        assert!(KeySet::parse(br#"{"keys": []}"#, now).is_err());
        let enc = FakeProvider::jwks_with_use(&["k1"], "enc");
        assert!(KeySet::parse(enc.as_bytes(), now).is_err());
        let sig = FakeProvider::jwks_with_use(&["k1"], "sig");
        assert_eq!(KeySet::parse(sig.as_bytes(), now).unwrap().len(), 1);
    }
}
