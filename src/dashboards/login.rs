//! The dashboard's `POST /api/auth` and `POST /api/auth/logout`, as the gateway calls them
//! for its service account and for each user logging in with their own account: one
//! exchange serving both.

use base64::Engine;
use bytes::Bytes;
use serde_json::Value;

use super::{Backend, ClientError, Upstreams};
use crate::state::UnixTime;

/// A login answer is a few kilobytes.
const MAX_LOGIN_REPLY: usize = 256 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// Wrong password, unknown, disabled or locked account: the dashboard does not say which.
    #[error("the dashboard refused the credentials (status {0})")]
    Refused(u16),
    #[error("the backend is not the active manager (status {0})")]
    NotActive(u16),
    #[error("unexpected login answer: {0}")]
    BadReply(String),
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// A dashboard's answer to a login that succeeded.
pub struct LoginAnswer {
    /// The dashboard's token; never logged.
    pub token: String,
    /// The whole answer (`permissions`, `username`, ...).
    pub body: Value,
}

impl std::fmt::Debug for LoginAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginAnswer")
            .field("token", &"[redacted]")
            .finish_non_exhaustive()
    }
}

/// Logs in to `backend` as `username`. `accept`: the login endpoint's version (1.0).
pub async fn log_in(
    upstreams: &Upstreams,
    backend: &Backend,
    accept: &str,
    username: &str,
    password: &str,
) -> Result<LoginAnswer, LoginError> {
    let body = serde_json::json!({"username": username, "password": password}).to_string();
    let mut req = upstreams.request(backend, "POST", "/api/auth")?;
    let header = |e: Box<pingora::Error>| ClientError::Protocol(e.to_string());
    req.insert_header("accept", accept).map_err(header)?;
    req.insert_header("content-type", "application/json")
        .map_err(header)?;
    req.insert_header("content-length", body.len().to_string())
        .map_err(header)?;
    let peer = upstreams.peer(backend, upstreams.timeouts.login_answer);
    let reply = upstreams
        .client
        .send(
            &peer,
            req,
            Some(Bytes::from(body)),
            MAX_LOGIN_REPLY,
            upstreams.timeouts.login,
        )
        .await?;
    match reply.status() {
        201 | 200 => {}
        400 | 401 | 403 => return Err(LoginError::Refused(reply.status())),
        other => return Err(LoginError::NotActive(other)),
    }
    let body: Value =
        serde_json::from_slice(&reply.body).map_err(|e| LoginError::BadReply(e.to_string()))?;
    let token = body
        .get("token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| LoginError::BadReply("no token in the login answer".into()))?
        .to_string();
    Ok(LoginAnswer { token, body })
}

/// Logs `token` out on `backend` (the dashboard blocklists its `jti`); the status it
/// answered.
pub async fn log_out(
    upstreams: &Upstreams,
    backend: &Backend,
    accept: &str,
    token: &str,
) -> Result<u16, ClientError> {
    let mut req = upstreams.request(backend, "POST", "/api/auth/logout")?;
    let header = |e: Box<pingora::Error>| ClientError::Protocol(e.to_string());
    req.insert_header("accept", accept).map_err(header)?;
    req.insert_header("authorization", format!("Bearer {token}"))
        .map_err(header)?;
    req.insert_header("content-length", "0").map_err(header)?;
    let peer = upstreams.peer(backend, upstreams.timeouts.login_answer);
    let reply = upstreams
        .client
        .send(&peer, req, None, MAX_LOGIN_REPLY, upstreams.timeouts.login)
        .await?;
    Ok(reply.status())
}

/// A dashboard token's `(iat, exp)`, read from its unverified payload: it is the backend's
/// token, not ours to verify. `iat` is `now` when absent.
pub fn lifetime(token: &str, now: UnixTime) -> Option<(UnixTime, UnixTime)> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    let exp = claims.get("exp")?.as_u64()?;
    let iat = claims.get("iat").and_then(Value::as_u64).unwrap_or(now);
    Some((iat, exp))
}
