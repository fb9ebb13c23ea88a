//! API keys (`api_keys`) as bearer tokens: `Authorization: Bearer cgk_...` on any API
//! path. A key acts as its owner with the key's roles, never more than the owner holds
//! now (a users-file owner removed, disabled or no longer granted all the key grants ends
//! the key until that changes), so the dashboard's own checks see the key's roles as any
//! user's
//! (`dashboard_identity`). Each key is limited per gateway by a token bucket
//! (`api_keys.rate_per_second`, `api_keys.burst`).
//!
//! Per request: the form (no store asked for text that is not a key), the record (kept
//! here once read, with the user it acts as; a key's record never changes, and its end is a
//! revocation, asked every time), the digest, the expiry, the revocation, the address, the
//! bucket. When it was last used is written at most once a minute per key.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use async_trait::async_trait;
use dashmap::DashMap;

use super::{Bearer, CredentialSource, LoggedIn, LoginAttempt};
use crate::api_keys::{KeyLabel, KeyRecord, PresentedKey, RecordDigest};
use crate::auth::{AuthError, AuthSubject, Authenticated, TokenRejection};
use crate::observe::metrics::{KeyResult, Metrics};
use crate::state::{ApiKeys, BucketRate, Revocations, StateError, UnixMillis, UnixTime};
use crate::tokens::Claims;
use crate::users::{CustomRole, Grants, Role, User, UserDb};

/// How often a key's last use is written, at most (per gateway).
const TOUCH_EVERY_SECONDS: u64 = 60;

/// Why a presented key was refused. Every refusal but the rate limit answers 401 alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyRefusal {
    #[error("no such API key")]
    Unknown,
    #[error("the API key has expired")]
    Expired,
    #[error("the API key was revoked")]
    Revoked,
    #[error("the API key's owner is disabled, removed or no longer holds all it grants")]
    Owner,
    #[error("the API key is not accepted from this address")]
    Address,
    #[error("the API key's requests are over its rate")]
    RateLimited { retry_after: u64 },
}

impl KeyRefusal {
    fn result(self) -> KeyResult {
        match self {
            KeyRefusal::Unknown => KeyResult::Unknown,
            KeyRefusal::Expired => KeyResult::Expired,
            KeyRefusal::Revoked => KeyResult::Revoked,
            KeyRefusal::Owner => KeyResult::Owner,
            KeyRefusal::Address => KeyResult::Address,
            KeyRefusal::RateLimited { .. } => KeyResult::RateLimited,
        }
    }
}

/// What the key source is built from.
pub struct KeyLimits {
    /// Each key's bucket.
    pub rate: BucketRate,
    /// The most keys a store holds: what the caches here are bounded by.
    pub max_keys: usize,
}

/// A key's record as read once, with whom it acts as under the users file it was built
/// from (rebuilt when a reload replaces the file), and its use on this gateway.
struct Known {
    record: KeyRecord,
    /// `None`: a stored digest no key matches.
    digest: Option<RecordDigest>,
    revocation_id: String,
    users: Arc<UserDb>,
    user: Result<Arc<User>, KeyRefusal>,
    /// When the key's bucket is full again.
    bucket: Mutex<UnixMillis>,
    /// When its last use was last written.
    touched: AtomicU64,
}

pub struct ApiKeySource {
    keys: Arc<dyn ApiKeys>,
    revocations: Arc<dyn Revocations>,
    users: Arc<ArcSwap<UserDb>>,
    limits: KeyLimits,
    known: DashMap<String, Arc<Known>, foldhash::fast::RandomState>,
    metrics: Arc<Metrics>,
}

impl ApiKeySource {
    pub fn new(
        keys: Arc<dyn ApiKeys>,
        revocations: Arc<dyn Revocations>,
        users: Arc<ArcSwap<UserDb>>,
        limits: KeyLimits,
        metrics: Arc<Metrics>,
    ) -> ApiKeySource {
        ApiKeySource {
            keys,
            revocations,
            users,
            limits,
            known: DashMap::default(),
            metrics,
        }
    }

    /// Forgets what was read of key `id` (its revocation on this gateway).
    pub fn forget(&self, id: &str) {
        self.known.remove(id);
    }

    async fn check(
        &self,
        key: PresentedKey<'_>,
        bearer: &Bearer<'_>,
    ) -> Result<Arc<User>, KeyCheckError> {
        let known = self.known(key.id, bearer.now).await?;
        let record = &known.record;
        if !known
            .digest
            .as_ref()
            .is_some_and(|digest| key.matches(digest))
        {
            return Err(KeyRefusal::Unknown.into());
        }
        if record.expires_at <= bearer.now {
            return Err(KeyRefusal::Expired.into());
        }
        if self
            .revocations
            .is_revoked(&known.revocation_id, bearer.now)
            .await?
        {
            return Err(KeyRefusal::Revoked.into());
        }
        if !record.admits(bearer.client) {
            return Err(KeyRefusal::Address.into());
        }
        let user = known.user.clone()?;
        self.take_from_bucket(&known, bearer.now_ms)?;
        self.touch(&known, bearer.now);
        Ok(user)
    }

    /// The record of key `id` with its user, as read before when the users file is the
    /// same; read from the store otherwise.
    async fn known(&self, id: &str, now: UnixTime) -> Result<Arc<Known>, KeyCheckError> {
        let users = self.users.load();
        if let Some(known) = self.known.get(id) {
            if Arc::ptr_eq(&known.users, &users) {
                return Ok(known.clone());
            }
        }
        let record = self.keys.get(id, now).await?.ok_or(KeyRefusal::Unknown)?;
        let users = self.users.load_full();
        let known = Arc::new(Known {
            digest: RecordDigest::of(&record),
            revocation_id: record.revocation_id(),
            user: acting_user(&users, &record).map(Arc::new),
            record,
            users,
            bucket: Mutex::new(0),
            touched: AtomicU64::new(0),
        });
        if self.known.len() >= self.limits.max_keys {
            self.known.clear();
        }
        self.known.insert(id.to_string(), known.clone());
        Ok(known)
    }

    /// Takes a token from the key's bucket.
    fn take_from_bucket(&self, known: &Known, now_ms: UnixMillis) -> Result<(), KeyRefusal> {
        let mut bucket = known.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        let full_at = Some(*bucket).filter(|at| *at > now_ms);
        match self.limits.rate.take(full_at, now_ms) {
            Ok(next) => {
                *bucket = next;
                Ok(())
            }
            Err(wait_ms) => Err(KeyRefusal::RateLimited {
                retry_after: wait_ms.div_ceil(1000).max(1),
            }),
        }
    }

    /// Writes the key's last use, at most every [`TOUCH_EVERY_SECONDS`], off the request.
    fn touch(&self, known: &Known, now: UnixTime) {
        let last = known.touched.load(Ordering::Relaxed);
        if now < last.saturating_add(TOUCH_EVERY_SECONDS) {
            return;
        }
        let exchanged =
            known
                .touched
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed);
        if exchanged.is_err() {
            return; // (another request of this key writes it)
        }
        let (keys, id) = (self.keys.clone(), known.record.id.clone());
        tokio::spawn(async move {
            if let Err(e) = keys.touch(&id, now).await {
                tracing::debug!(key = %id, error = %e, "cannot record an API key's last use");
            }
        });
    }
}

/// Why a key was not accepted: a refusal, or a store that cannot answer.
enum KeyCheckError {
    Refused(KeyRefusal),
    Store(StateError),
}

impl From<KeyRefusal> for KeyCheckError {
    fn from(refusal: KeyRefusal) -> Self {
        KeyCheckError::Refused(refusal)
    }
}

impl From<StateError> for KeyCheckError {
    fn from(error: StateError) -> Self {
        KeyCheckError::Store(error)
    }
}

/// The roles an API key names, as they grant.
pub struct KeyRoles {
    pub roles: Vec<Role>,
    pub custom_roles: Vec<CustomRole>,
    pub grants: Grants,
}

/// What `names` stand for: the dashboard's system roles by name, else the owner's roles
/// of the roles file; `Err` with the first name neither knows.
pub fn key_roles<'a>(names: &'a [String], owner: Option<&User>) -> Result<KeyRoles, &'a str> {
    let (mut roles, mut custom_roles) = (Vec::new(), Vec::new());
    for name in names {
        if let Some(role) = Role::from_name(name) {
            roles.push(role);
            continue;
        }
        let custom = owner.and_then(|o| o.custom_roles.iter().find(|c| &c.name == name));
        custom_roles.push(custom.ok_or(name.as_str())?.clone());
    }
    let grants = custom_roles
        .iter()
        .fold(Grants::of(&roles), |all, custom| all.union(&custom.grants));
    Ok(KeyRoles {
        roles,
        custom_roles,
        grants,
    })
}

/// Whom `record` acts as: its owner with the key's roles. An owner the users file names
/// must be enabled and still hold all the key grants; one it does not name (single
/// sign-on's, the dashboard's) gives the system roles checked at the key's creation.
fn acting_user(users: &UserDb, record: &KeyRecord) -> Result<User, KeyRefusal> {
    let owner = users.active(&record.owner).map(AsRef::as_ref);
    if owner.is_none() && users.contains(&record.owner) {
        return Err(KeyRefusal::Owner);
    }
    let key = key_roles(&record.roles, owner).map_err(|_| KeyRefusal::Owner)?;
    if owner.is_some_and(|owner| !key.grants.within(&owner.grants)) {
        return Err(KeyRefusal::Owner);
    }
    Ok(User {
        username: record.owner.clone(),
        password_hash: None,
        roles: key.roles,
        custom_roles: key.custom_roles,
        grants: key.grants,
        enabled: true,
        provider_subject: None,
        api_key: Some(Arc::new(KeyLabel {
            id: record.id.clone(),
            name: record.name.clone(),
        })),
    })
}

#[async_trait]
impl CredentialSource for ApiKeySource {
    fn method(&self) -> &'static str {
        "api_key"
    }

    /// Keys are not logged in with: `POST /api/auth` is the password source's.
    async fn log_in(
        &self,
        _attempt: LoginAttempt<'_>,
        _subject: &mut AuthSubject,
    ) -> Result<LoggedIn, AuthError> {
        Err(AuthError::InvalidCredentials)
    }

    /// No gateway token is issued for a key.
    fn issued(&self, _claims: &Claims) -> bool {
        false
    }

    async fn authenticate(
        &self,
        _claims: &Claims,
        _now: UnixTime,
    ) -> Result<Authenticated, TokenRejection> {
        Err(TokenRejection::UnknownUser)
    }

    /// A bearer token with the key prefix is this source's, whatever follows.
    async fn authenticate_bearer(
        &self,
        bearer: &Bearer<'_>,
    ) -> Option<Result<Authenticated, TokenRejection>> {
        if !bearer.token.starts_with(crate::api_keys::PREFIX) {
            return None;
        }
        let result = match PresentedKey::parse(bearer.token) {
            Ok(key) => self.check(key, bearer).await,
            Err(_) => {
                self.metrics.api_keys.request(KeyResult::Malformed);
                return Some(Err(TokenRejection::ApiKey(KeyRefusal::Unknown)));
            }
        };
        self.metrics.api_keys.request(match &result {
            Ok(_) => KeyResult::Accepted,
            Err(KeyCheckError::Refused(refusal)) => refusal.result(),
            Err(KeyCheckError::Store(_)) => KeyResult::Error,
        });
        Some(match result {
            Ok(user) => Ok(Authenticated {
                user,
                upstream: None,
            }),
            Err(KeyCheckError::Refused(refusal)) => Err(TokenRejection::ApiKey(refusal)),
            Err(KeyCheckError::Store(e)) => Err(TokenRejection::Store(e)),
        })
    }
}
