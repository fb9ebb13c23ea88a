//! The users' dashboard sessions in Redis: one key per gateway token,
//! `<prefix>session:<jti>`, holding the session as JSON, sealed (it holds the user's
//! dashboard token), and expiring when it ends, so that any gateway of the deployment
//! serves the session another one opened.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::connection::Redis;
use crate::state::{StateError, UnixTime, UserSession, UserSessions};

pub struct RedisUserSessions {
    pub(super) redis: Arc<Redis>,
}

fn encode(session: &UserSession) -> String {
    json!({
        "username": session.username,
        "token": &*session.dashboard_token,
        "permissions": session.permissions,
        "until": session.until,
    })
    .to_string()
}

/// `None` for what this gateway did not write (then the session is not served).
fn decode(text: &str) -> Option<UserSession> {
    let value: Value = serde_json::from_str(text).ok()?;
    Some(UserSession {
        username: value.get("username")?.as_str()?.to_string(),
        dashboard_token: Arc::from(value.get("token")?.as_str()?),
        permissions: match value.get("permissions")? {
            Value::Null => None,
            other => Some(other.as_str()?.to_string()),
        },
        until: value.get("until")?.as_u64()?,
    })
}

#[async_trait]
impl UserSessions for RedisUserSessions {
    async fn open(
        &self,
        jti: &str,
        session: &UserSession,
        now: UnixTime,
    ) -> Result<(), StateError> {
        if session.until < now {
            return Ok(()); // already ended: nothing to keep
        }
        let key = self.redis.key("session", jti);
        let sealed = self.redis.seal(&key, &encode(session))?;
        let mut set = redis::cmd("SET");
        set.arg(key)
            .arg(sealed)
            // Expires the second after `until`: `find` still serves it at `until`.
            .arg("EXAT")
            .arg(session.until + 1);
        self.redis.run::<()>("user session", &set).await
    }

    async fn find(&self, jti: &str, now: UnixTime) -> Result<Option<UserSession>, StateError> {
        let key = self.redis.key("session", jti);
        let stored: Option<String> = self
            .redis
            .run("user session", redis::cmd("GET").arg(&key))
            .await?;
        Ok(stored
            .and_then(|sealed| self.redis.open(&key, &sealed))
            .as_deref()
            .and_then(decode)
            .filter(|s| s.until >= now))
    }

    async fn close(&self, jti: &str) -> Result<(), StateError> {
        let mut del = redis::pipe();
        del.cmd("DEL").arg(self.redis.key("session", jti)).ignore();
        self.redis.run_replicated("user session", del).await
    }

    async fn ready(&self) -> Result<(), StateError> {
        self.redis.ping("user session").await
    }
}
