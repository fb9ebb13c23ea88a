//! The browser's login at the provider: OpenID Connect's authorization code flow with
//! PKCE (S256), `state` and `nonce`. `start_login` makes the provider's address and what
//! must come back with the browser (kept by the caller in a signed cookie);
//! `finish_login` trades the code at the token endpoint, checks the ID token (signature,
//! `iss`, `aud` = the client id, `exp`, `nonce`) and takes the user and their groups from
//! the access token, verified as a script's bearer token is. `logout_token` checks the
//! provider's back-channel logout tokens.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::verify::OidcError;
use super::Provider;
use crate::state::UnixTime;
use crate::tokens::{PendingLogin, ProviderIdentity};

/// How long the browser may take at the provider (typing a password, a second factor).
const LOGIN_SECONDS: u64 = 600;

#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// The discovery document or the keys were never fetched, or name no endpoint.
    #[error("the identity provider is not available")]
    Unavailable,
    /// The callback's `state` or cookie is missing, forged, stale or for another login.
    #[error("the login's state does not match; start the login again")]
    State,
    /// The provider answered the callback with an error (e.g. access_denied).
    #[error("the identity provider refused the login: {0}")]
    Refused(String),
    /// The provider refused the callback's code (`invalid_grant`: used already, expired,
    /// or not this login's): the client's error, not the gateway's.
    #[error("the identity provider refused the authorization code (used already, expired or not this login's); start the login again")]
    Code,
    /// The token endpoint could not be used.
    #[error("the identity provider's token endpoint: {0}")]
    Exchange(String),
    #[error("the identity provider's token: {0}")]
    Token(#[from] OidcError),
}

/// Where to send the browser, and what must come back with it.
pub struct LoginStart {
    pub location: String,
    pub pending: PendingLogin,
}

/// A finished login: the provider's name for the user (not yet the name they are shown
/// as), and what the gateway's token keeps.
pub struct BrowserLogin {
    pub username: String,
    pub identity: ProviderIdentity,
}

/// A verified back-channel logout token: whose sessions end, from when, and until when
/// it must be remembered (its `jti`) so that it is good once.
#[derive(Debug)]
pub struct LogoutToken {
    pub sub: Option<String>,
    pub sid: Option<String>,
    pub jti: String,
    pub iat: UnixTime,
    /// Its `exp` with the clock skew: it verifies until then.
    pub good_until: UnixTime,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    id_token: String,
}

fn random_text() -> String {
    URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

fn query(pairs: &[(&str, &str)]) -> String {
    let encoded: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", utf8_percent_encode(v, NON_ALPHANUMERIC)))
        .collect();
    encoded.join("&")
}

/// `url` with `pairs` added to its query.
fn with_query(url: &str, pairs: &[(&str, &str)]) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}{}", query(pairs))
}

/// The `error` of a token endpoint's error answer (RFC 6749, 5.2).
fn token_error(body: &[u8]) -> Option<&str> {
    #[derive(Deserialize)]
    struct ErrorAnswer<'a> {
        error: &'a str,
    }
    serde_json::from_slice::<ErrorAnswer<'_>>(body)
        .ok()
        .map(|answer| answer.error)
}

impl Provider {
    /// The provider's authorization request for a login returning to `redirect_uri`.
    pub fn start_login(&self, redirect_uri: &str, now: UnixTime) -> Result<LoginStart, LoginError> {
        let discovery = self.keys.discovery().ok_or(LoginError::Unavailable)?;
        let endpoint = discovery
            .authorization_endpoint
            .as_ref()
            .ok_or(LoginError::Unavailable)?;
        let pending = PendingLogin {
            iss: String::new(),
            state: random_text(),
            nonce: random_text(),
            verifier: random_text(),
            exp: now + LOGIN_SECONDS,
        };
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(pending.verifier.as_bytes()));
        let scope = self.scopes.join(" ");
        let location = with_query(
            &endpoint.text,
            &[
                ("response_type", "code"),
                ("client_id", &self.client_id),
                ("redirect_uri", redirect_uri),
                ("scope", &scope),
                ("state", &pending.state),
                ("nonce", &pending.nonce),
                ("code_challenge", &challenge),
                ("code_challenge_method", "S256"),
            ],
        );
        Ok(LoginStart { location, pending })
    }

    /// The user of a login the provider sent back with `code` for `pending`.
    pub async fn finish_login(
        &self,
        code: &str,
        pending: &PendingLogin,
        redirect_uri: &str,
        now: UnixTime,
    ) -> Result<BrowserLogin, LoginError> {
        let answer = self.exchange_code(code, pending, redirect_uri).await?;
        let (_, id) = self
            .verified_claims(&answer.id_token, &self.client_id, now)
            .await?;
        if id.get("nonce").and_then(|n| n.as_str()) != Some(pending.nonce.as_str()) {
            return Err(LoginError::State);
        }
        let access = self.access_claims(&answer.access_token, now).await?;
        let (username, mut identity) = self.identity_of(&access)?;
        if id.get("sub").and_then(|s| s.as_str()) != Some(identity.sub.as_str()) {
            return Err(LoginError::Token(OidcError::NoUser));
        }
        // The login session a back-channel logout may name: the ID token says it.
        if let Some(sid) = id.get("sid").and_then(|s| s.as_str()) {
            identity.sid = Some(sid.to_string());
        }
        Ok(BrowserLogin { username, identity })
    }

    async fn exchange_code(
        &self,
        code: &str,
        pending: &PendingLogin,
        redirect_uri: &str,
    ) -> Result<TokenAnswer, LoginError> {
        let discovery = self.keys.discovery().ok_or(LoginError::Unavailable)?;
        let endpoint = discovery
            .token_endpoint
            .as_ref()
            .ok_or(LoginError::Unavailable)?;
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", pending.verifier.as_str()),
        ];
        // client_secret_basic for a confidential client; a public one names itself.
        let authorization = match &self.client_secret {
            Some(secret) => {
                let encode = |t: &str| utf8_percent_encode(t, NON_ALPHANUMERIC).to_string();
                let secret = String::from_utf8_lossy(secret.expose());
                let pair = format!("{}:{}", encode(&self.client_id), encode(&secret));
                Some(format!("Basic {}", STANDARD.encode(pair)))
            }
            None => {
                form.push(("client_id", self.client_id.as_str()));
                None
            }
        };
        let (status, body) = self
            .keys
            .fetch()
            .post_form(endpoint, query(&form), authorization)
            .await
            .map_err(|e| LoginError::Exchange(e.to_string()))?;
        match status {
            200 => serde_json::from_slice(&body).map_err(|e| LoginError::Exchange(e.to_string())),
            400 if token_error(&body) == Some("invalid_grant") => Err(LoginError::Code),
            _ => Err(LoginError::Exchange(format!("answered {status}"))),
        }
    }

    /// A back-channel logout token (OpenID Connect Back-Channel Logout 1.0, 2.4 and 2.6):
    /// signed by the provider for this client, with the logout event, without a nonce,
    /// with `jti` and `iat`, naming `sub`, `sid` or both.
    pub async fn logout_token(&self, token: &str, now: UnixTime) -> Result<LogoutToken, OidcError> {
        const EVENT: &str = "http://schemas.openid.net/event/backchannel-logout";
        let (_, claims) = self.verified_claims(token, &self.client_id, now).await?;
        let is_logout = claims
            .get("events")
            .and_then(|events| events.get(EVENT))
            .is_some_and(serde_json::Value::is_object);
        if !is_logout {
            return Err(OidcError::NotLogoutToken(
                "it has no back-channel logout event",
            ));
        }
        if claims.get("nonce").is_some() {
            return Err(OidcError::NotLogoutToken("it has a nonce"));
        }
        let text = |name: &str| {
            claims
                .get(name)
                .and_then(|v| v.as_str())
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let number = |name: &str| claims.get(name).and_then(serde_json::Value::as_u64);
        let (sub, sid) = (text("sub"), text("sid"));
        if sub.is_none() && sid.is_none() {
            return Err(OidcError::NotLogoutToken("it names neither sub nor sid"));
        }
        Ok(LogoutToken {
            sub,
            sid,
            jti: text("jti").ok_or(OidcError::NotLogoutToken("it has no jti"))?,
            iat: number("iat").ok_or(OidcError::NotLogoutToken("it has no iat"))?,
            good_until: number("exp")
                .ok_or(OidcError::Invalid)?
                .saturating_add(self.clock_skew.as_secs()),
        })
    }

    /// Where the browser goes to log out at the provider too (RP-initiated logout), then
    /// back to `back_to`; `None` when the provider has no end_session_endpoint.
    pub fn logout_url(&self, back_to: &str) -> Option<String> {
        let discovery = self.keys.discovery()?;
        let endpoint = discovery.end_session_endpoint.as_ref()?;
        Some(with_query(
            &endpoint.text,
            &[
                ("client_id", &self.client_id),
                ("post_logout_redirect_uri", back_to),
            ],
        ))
    }
}
