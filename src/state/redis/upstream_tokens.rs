//! Dashboard tokens in Redis (the service account's and each managed account's): one key
//! per account, sealed, kept locally until due; one gateway logs in at a time (a short
//! `SET NX` claim).

use std::sync::{Arc, LazyLock, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;

use super::connection::Redis;
use crate::state::{
    AccountTokens, StateError, UnixMillis, UnixTime, UpstreamToken, UpstreamTokens,
};

/// Deletes KEYS[1] if it still holds ARGV[1].
static DELETE_IF_EQUAL: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"#,
    )
});

/// How long a stored token outlives its renewal time (the dashboard's tokens expire a
/// fifth of their lifetime, at most 5 minutes, after it).
const TOKEN_KEPT_PAST_RENEWAL: u64 = 300;

/// An account's dashboard token: one key, `<renew_at or 0> <token>` sealed, kept locally
/// until due.
pub struct RedisUpstreamTokens {
    redis: Arc<Redis>,
    /// The keys' kind: `upstream` for the service account's (the keys it always had),
    /// `account:<name>` for an account the gateway manages.
    kind: String,
    local: RwLock<Option<UpstreamToken>>,
    /// This gateway's name in the login claim.
    claimant: String,
}

/// The tokens of the accounts the gateway manages, each under its own keys.
pub(super) struct RedisAccountTokens {
    pub(super) redis: Arc<Redis>,
}

impl AccountTokens for RedisAccountTokens {
    fn of(&self, account: &str) -> Arc<dyn UpstreamTokens> {
        let kind = format!("account:{account}");
        Arc::new(RedisUpstreamTokens::new(self.redis.clone(), kind))
    }
}

impl RedisUpstreamTokens {
    pub(super) fn new(redis: Arc<Redis>, kind: String) -> Self {
        RedisUpstreamTokens {
            redis,
            kind,
            local: RwLock::new(None),
            claimant: uuid::Uuid::new_v4().to_string(),
        }
    }

    fn local(&self) -> Option<UpstreamToken> {
        self.local.read().ok().and_then(|t| t.clone())
    }

    fn set_local(&self, token: Option<UpstreamToken>) {
        if let Ok(mut local) = self.local.write() {
            *local = token;
        }
    }

    fn encode(token: &UpstreamToken) -> String {
        format!("{} {}", token.renew_at.unwrap_or(0), token.token)
    }

    fn decode(text: &str) -> Option<UpstreamToken> {
        let (renew_at, token) = text.split_once(' ')?;
        let renew_at = renew_at.parse::<UnixTime>().ok()?;
        Some(UpstreamToken {
            token: Arc::from(token),
            renew_at: (renew_at > 0).then_some(renew_at),
        })
    }

    /// The stored value as Redis holds it, and the token it seals (none if no key opens it).
    async fn stored(&self) -> Result<Option<(String, UpstreamToken)>, StateError> {
        let key = self.redis.key(&self.kind, "token");
        let stored: Option<String> = self
            .redis
            .run("upstream token", redis::cmd("GET").arg(&key))
            .await?;
        Ok(stored.and_then(|sealed| {
            let token = Self::decode(&self.redis.open(&key, &sealed)?)?;
            Some((sealed, token))
        }))
    }
}

#[async_trait]
impl UpstreamTokens for RedisUpstreamTokens {
    async fn current(&self, now: UnixTime) -> Result<Option<UpstreamToken>, StateError> {
        if let Some(token) = self.local().filter(|t| !t.due(now)) {
            return Ok(Some(token));
        }
        let token = self.stored().await?.map(|(_, token)| token);
        let token = token.filter(|t| !t.due(now));
        self.set_local(token.clone());
        Ok(token)
    }

    async fn store(&self, token: UpstreamToken) -> Result<(), StateError> {
        let key = self.redis.key(&self.kind, "token");
        let sealed = self.redis.seal(&key, &Self::encode(&token))?;
        let mut set = redis::cmd("SET");
        set.arg(key).arg(sealed);
        if let Some(renew_at) = token.renew_at {
            set.arg("EXAT").arg(renew_at + TOKEN_KEPT_PAST_RENEWAL);
        }
        self.redis.run::<()>("upstream token", &set).await?;
        self.set_local(Some(token));
        Ok(())
    }

    async fn discard(&self, token: &str) -> Result<(), StateError> {
        if self.local().is_some_and(|t| &*t.token == token) {
            self.set_local(None);
        }
        // Deleted only if Redis still holds what was read: a token stored meanwhile stays.
        if let Some((sealed, stored)) = self.stored().await? {
            if &*stored.token == token {
                let key = self.redis.key(&self.kind, "token");
                self.redis
                    .run_script::<i64>("upstream token", &DELETE_IF_EQUAL, key, sealed)
                    .await?;
            }
        }
        Ok(())
    }

    async fn claim_login(&self, ttl: Duration) -> Result<bool, StateError> {
        let claim = redis::cmd("SET")
            .arg(self.redis.key(&self.kind, "login"))
            .arg(&self.claimant)
            .arg("NX")
            .arg("PX")
            .arg(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1))
            .clone();
        let set: Option<String> = self.redis.run("login claim", &claim).await?;
        Ok(set.is_some())
    }

    async fn release_login(&self) -> Result<(), StateError> {
        let key = self.redis.key(&self.kind, "login");
        let claimant = self.claimant.as_str();
        self.redis
            .run_script::<i64>("login claim", &DELETE_IF_EQUAL, key, claimant)
            .await?;
        Ok(())
    }

    /// One key, expiring when the wait is over.
    async fn set_login_backoff(&self, until: Option<UnixMillis>) -> Result<(), StateError> {
        let key = self.redis.key("upstream", "login_backoff");
        let command = match until {
            Some(until) => redis::cmd("SET")
                .arg(key)
                .arg(until)
                .arg("PXAT")
                .arg(until.max(1))
                .clone(),
            None => redis::cmd("DEL").arg(key).clone(),
        };
        self.redis.run::<()>("login backoff", &command).await
    }

    async fn login_backoff(&self, now: UnixMillis) -> Result<Option<UnixMillis>, StateError> {
        let key = self.redis.key("upstream", "login_backoff");
        let until: Option<UnixMillis> = self
            .redis
            .run("login backoff", redis::cmd("GET").arg(key))
            .await?;
        Ok(until.filter(|until| *until > now))
    }

    async fn ready(&self) -> Result<(), StateError> {
        self.redis.ping("ping").await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::redis::test_support::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_gateway_at_a_time_logs_in_and_all_share_its_token() {
        let server = RedisServer::start();
        let a = stores(settings(&server, "cg:"), MAX_API_KEYS)
            .unwrap()
            .upstream_tokens;
        let b = stores(settings(&server, "cg:"), MAX_API_KEYS)
            .unwrap()
            .upstream_tokens;
        let ttl = Duration::from_millis(300);
        assert!(a.claim_login(ttl).await.unwrap());
        assert!(!b.claim_login(ttl).await.unwrap(), "A holds the claim");
        let now = crate::state::unix_now();
        a.store(UpstreamToken {
            token: "shared".into(),
            renew_at: Some(now + 600),
        })
        .await
        .unwrap();
        a.release_login().await.unwrap();
        assert_eq!(
            b.current(now).await.unwrap().map(|t| t.token),
            Some("shared".into())
        );
        // A claim not released expires by itself.
        assert!(b.claim_login(ttl).await.unwrap());
        tokio::time::sleep(ttl + Duration::from_millis(100)).await;
        assert!(a.claim_login(ttl).await.unwrap());
        // A token B discarded (the dashboard refused it) is gone from Redis: a gateway
        // without a copy gets none. A keeps its copy until the dashboard refuses it to A.
        b.discard("shared").await.unwrap();
        let c = stores(settings(&server, "cg:"), MAX_API_KEYS)
            .unwrap()
            .upstream_tokens;
        assert_eq!(c.current(now).await.unwrap(), None);
        assert!(a.current(now).await.unwrap().is_some());
    }

    /// Each managed account's token lives under its own keys: storing one neither shows
    /// as the service account's nor as another account's, and another gateway reads it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_managed_accounts_token_has_its_own_keys() {
        let server = RedisServer::start();
        let gateway = gateway(&server, "accounts:").await;
        let accounts = &gateway.stores.account_tokens;
        contract::upstream_tokens(accounts.of("cg-a").as_ref()).await;
        let token = UpstreamToken {
            token: "role-token".into(),
            renew_at: None,
        };
        accounts.of("cg-b").store(token.clone()).await.unwrap();
        let now = 1;
        assert_eq!(accounts.of("cg-c").current(now).await.unwrap(), None);
        let service = gateway.stores.upstream_tokens.current(now).await.unwrap();
        assert_eq!(service, None);
        let other = stores(settings(&server, "accounts:"), MAX_API_KEYS)
            .unwrap()
            .account_tokens;
        assert_eq!(other.of("cg-b").current(now).await.unwrap(), Some(token));
        assert!(other
            .of("cg-c")
            .claim_login(Duration::from_secs(5))
            .await
            .unwrap());
        assert!(accounts
            .of("cg-b")
            .claim_login(Duration::from_secs(5))
            .await
            .unwrap());
    }
}
