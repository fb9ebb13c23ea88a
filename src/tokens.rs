//! Gateway tokens: HS256 JWTs that we issue at login and verify on every request.
//! The algorithm is fixed here; a token's own `alg` header is never trusted.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::secrets::Secret;

/// The claims we put in a token; the dashboard reads `username`, standard tools `sub`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub sub: String,
    pub username: String,
    pub jti: String,
    pub iat: u64,
    pub exp: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("token is not a well-formed JWT with our claims")]
    Malformed,
    #[error("token signature, algorithm or issuer does not match ours")]
    Foreign,
    #[error("token has expired")]
    Expired,
    #[error("token could not be signed")]
    Signing,
}

/// A freshly issued token and its claims.
#[derive(Debug, Clone)]
pub struct Issued {
    pub token: String,
    pub claims: Claims,
}

/// Issues and verifies tokens with one HS256 secret.
pub struct TokenService {
    issuer: String,
    ttl: Duration,
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    verified: VerifiedTokens,
}

/// How many verified tokens are remembered (a few hundred bytes each).
const VERIFIED_TOKENS_MAX: usize = 10_000;

impl TokenService {
    pub fn new(secret: &Secret, issuer: String, ttl: Duration) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[issuer.as_str()]);
        // Expiry is checked by `verify` against the caller's clock, so that logout can
        // still recognise an expired token as one of ours.
        validation.validate_exp = false;
        validation.leeway = 0;
        validation.required_spec_claims = HashSet::from(["iss".to_string(), "sub".to_string()]);
        TokenService {
            encoding: EncodingKey::from_secret(secret.expose()),
            decoding: DecodingKey::from_secret(secret.expose()),
            issuer,
            ttl,
            validation,
            verified: VerifiedTokens::new(VERIFIED_TOKENS_MAX),
        }
    }

    pub fn issue(&self, username: &str, now: u64) -> Result<Issued, TokenError> {
        let claims = Claims {
            iss: self.issuer.clone(),
            sub: username.to_string(),
            username: username.to_string(),
            jti: uuid::Uuid::new_v4().to_string(),
            iat: now,
            exp: now.saturating_add(self.ttl.as_secs()),
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|_| TokenError::Signing)?;
        Ok(Issued { token, claims })
    }

    /// The claims of a token we issued that has not expired at `now`
    /// (`exp == now` is still valid, as on the dashboard). A token verified before is
    /// looked up instead of verified again: the same bytes carry the same signature.
    pub fn verify(&self, token: &str, now: u64) -> Result<Arc<Claims>, TokenError> {
        let claims = match self.verified.get(token) {
            Some(claims) => claims,
            None => {
                let claims = Arc::new(self.verify_issued(token)?);
                if claims.exp >= now {
                    self.verified.remember(token, &claims, now);
                }
                claims
            }
        };
        if claims.exp < now {
            self.verified.forget(token);
            return Err(TokenError::Expired);
        }
        Ok(claims)
    }

    /// Stops remembering `token` as verified (at logout; revocation is checked anyway).
    pub fn forget(&self, token: &str) {
        self.verified.forget(token);
    }

    /// The claims of a token we issued, expired or not.
    pub fn verify_issued(&self, token: &str) -> Result<Claims, TokenError> {
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map_err(|e| match e.kind() {
                ErrorKind::InvalidSignature
                | ErrorKind::InvalidAlgorithm
                | ErrorKind::InvalidIssuer
                | ErrorKind::MissingAlgorithm => TokenError::Foreign,
                _ => TokenError::Malformed,
            })?;
        if data.claims.sub != data.claims.username {
            return Err(TokenError::Malformed);
        }
        Ok(data.claims)
    }
}

/// Tokens whose signature and claims were verified, bounded in number. Expired entries
/// are swept when the cache is full, at most once a second; while it is full of live
/// tokens, new ones are verified every time instead of remembered.
struct VerifiedTokens {
    tokens: DashMap<Box<str>, Arc<Claims>>,
    max: usize,
    last_sweep: AtomicU64,
}

impl VerifiedTokens {
    fn new(max: usize) -> Self {
        VerifiedTokens {
            tokens: DashMap::new(),
            max,
            last_sweep: AtomicU64::new(0),
        }
    }

    fn get(&self, token: &str) -> Option<Arc<Claims>> {
        self.tokens.get(token).map(|claims| claims.clone())
    }

    fn remember(&self, token: &str, claims: &Arc<Claims>, now: u64) {
        if self.tokens.len() >= self.max {
            let last = self.last_sweep.load(Ordering::Relaxed);
            if last >= now
                || self
                    .last_sweep
                    .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                return;
            }
            self.tokens.retain(|_, claims| claims.exp >= now);
            if self.tokens.len() >= self.max {
                return;
            }
        }
        self.tokens.insert(token.into(), claims.clone());
    }

    fn forget(&self, token: &str) {
        self.tokens.remove(token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    const NOW: u64 = 1_800_000_000;

    fn service(secret: &str) -> TokenService {
        TokenService::new(
            &Secret::new(secret.as_bytes().to_vec()),
            "clustergate".into(),
            Duration::from_secs(100),
        )
    }

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    #[test]
    fn issued_tokens_verify_with_their_claims() {
        let s = service("0123456789abcdef0123456789abcdef");
        let issued = s.issue("admin", NOW).unwrap();
        let claims = s.verify(&issued.token, NOW).unwrap();
        assert_eq!(*claims, issued.claims);
        assert_eq!(claims.exp, NOW + 100);
        assert_eq!(claims.username, "admin");
        assert_eq!(claims.iss, "clustergate");
    }

    #[test]
    fn tokens_expire_after_ttl_but_stay_recognisable() {
        let s = service("0123456789abcdef0123456789abcdef");
        let issued = s.issue("admin", NOW).unwrap();
        assert!(s.verify(&issued.token, NOW + 100).is_ok());
        assert_eq!(s.verify(&issued.token, NOW + 101), Err(TokenError::Expired));
        assert!(s.verify_issued(&issued.token).is_ok());
    }

    #[test]
    fn another_secret_is_foreign() {
        let issued = service("0123456789abcdef0123456789abcdef")
            .issue("admin", NOW)
            .unwrap();
        let other = service("fedcba9876543210fedcba9876543210");
        assert_eq!(other.verify(&issued.token, NOW), Err(TokenError::Foreign));
    }

    #[test]
    fn alg_none_is_refused() {
        let s = service("0123456789abcdef0123456789abcdef");
        let payload = format!(
            r#"{{"iss":"clustergate","sub":"admin","username":"admin","jti":"x","iat":{NOW},"exp":{}}}"#,
            NOW + 10
        );
        let token = format!(
            "{}.{}.",
            b64(br#"{"alg":"none","typ":"JWT"}"#),
            b64(payload.as_bytes())
        );
        assert!(s.verify(&token, NOW).is_err());
    }

    #[test]
    fn garbage_is_malformed() {
        let s = service("0123456789abcdef0123456789abcdef");
        for token in ["", "abc", "a.b.c", "....", "eyJ.eyJ.sig"] {
            assert!(s.verify(token, NOW).is_err(), "{token}");
        }
    }

    #[test]
    fn a_dashboard_token_with_its_own_issuer_is_foreign() {
        let secret = "0123456789abcdef0123456789abcdef";
        let ours = service(secret);
        let dashboard = TokenService::new(
            &Secret::new(secret.as_bytes().to_vec()),
            "ceph-dashboard".into(),
            Duration::from_secs(100),
        );
        let issued = dashboard.issue("admin", NOW).unwrap();
        assert_eq!(ours.verify(&issued.token, NOW), Err(TokenError::Foreign));
    }

    #[test]
    fn remembered_tokens_still_expire_and_tampered_ones_stay_foreign() {
        let s = service("0123456789abcdef0123456789abcdef");
        let issued = s.issue("admin", NOW).unwrap();
        assert!(s.verify(&issued.token, NOW).is_ok());
        assert!(s.verify(&issued.token, NOW + 1).is_ok(), "from the cache");
        assert_eq!(s.verify(&issued.token, NOW + 101), Err(TokenError::Expired));
        let mut tampered = issued.token.clone();
        tampered.pop();
        tampered.push(if issued.token.ends_with('A') {
            'B'
        } else {
            'A'
        });
        assert!(s.verify(&tampered, NOW).is_err());
    }

    #[test]
    fn the_cache_is_bounded_and_swept_of_expired_tokens() {
        let cache = VerifiedTokens::new(2);
        let claims = |exp| {
            Arc::new(Claims {
                iss: "i".into(),
                sub: "u".into(),
                username: "u".into(),
                jti: "j".into(),
                iat: 0,
                exp,
            })
        };
        cache.remember("a", &claims(NOW + 10), NOW);
        cache.remember("b", &claims(NOW + 100), NOW);
        cache.remember("c", &claims(NOW + 100), NOW);
        assert!(cache.get("c").is_none(), "full of live tokens");
        // Later, "a" has expired: the sweep makes room.
        cache.remember("c", &claims(NOW + 100), NOW + 11);
        assert!(cache.get("a").is_none());
        assert!(cache.get("b").is_some() && cache.get("c").is_some());
        cache.forget("b");
        assert!(cache.get("b").is_none());
    }
}
