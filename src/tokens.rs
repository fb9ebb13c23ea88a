//! Gateway tokens: HS256 JWTs that we issue at login and verify on every request.
//! The algorithm is fixed here; a token's own `alg` header is never trusted. Several
//! signing keys rotate without logging anyone out: the first signs (its id in the token's
//! `kid` header), all verify, and a key taken off the list takes its tokens with it.

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
    /// The fingerprint of the credential the token was issued for (the users file's
    /// password hash and roles); empty for the dashboard's accounts. Tokens issued before
    /// there was one have none, and match no user of the users file.
    #[serde(default)]
    pub cred: String,
    /// A single sign-on user's: the identity provider's `sub` and the user's groups there,
    /// mapped to roles by the current `oidc.role_map` on every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idp: Option<ProviderIdentity>,
}

/// Who the identity provider said a single sign-on user is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderIdentity {
    pub sub: String,
    pub groups: Vec<String>,
    /// The provider's login session (its ID token's `sid`), which a back-channel logout
    /// may name instead of `sub`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sid: Option<String>,
}

/// A browser login under way at the identity provider (authorization code flow), kept in
/// a short-lived cookie signed like the tokens: any gateway of the deployment finishes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingLogin {
    /// `<auth.issuer>#oidc-login`: never taken for a token (and a token never for this).
    pub iss: String,
    pub state: String,
    pub nonce: String,
    /// The PKCE verifier (RFC 7636).
    pub verifier: String,
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

/// One HS256 secret and the id tokens name it by.
#[derive(Debug, Clone)]
pub struct SigningKey {
    pub kid: String,
    pub secret: Secret,
}

impl SigningKey {
    /// The id of a key given alone (`auth.secret_file`, or the generated secret). Tokens
    /// without a `kid` (issued before keys had ids) verify against the key with this id.
    pub const DEFAULT_KID: &'static str = "default";
}

/// A signing key, ready to use.
struct Key {
    kid: String,
    encoding: EncodingKey,
    decoding: DecodingKey,
}

/// Issues tokens with the first key and verifies them with any.
pub struct TokenService {
    issuer: String,
    ttl: Duration,
    keys: Vec<Key>,
    validation: Validation,
    verified: VerifiedTokens,
}

/// How many verified tokens are remembered (a few hundred bytes each).
const VERIFIED_TOKENS_MAX: usize = 10_000;

impl TokenService {
    /// `keys` is never empty (configuration guarantees it); the first one signs.
    pub fn new(keys: &[SigningKey], issuer: String, ttl: Duration) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[issuer.as_str()]);
        // Expiry is checked by `verify` against the caller's clock, so that logout can
        // still recognise an expired token as one of ours.
        validation.validate_exp = false;
        validation.leeway = 0;
        validation.required_spec_claims = HashSet::from(["iss".to_string(), "sub".to_string()]);
        let keys = keys
            .iter()
            .map(|key| Key {
                kid: key.kid.clone(),
                encoding: EncodingKey::from_secret(key.secret.expose()),
                decoding: DecodingKey::from_secret(key.secret.expose()),
            })
            .collect();
        TokenService {
            keys,
            issuer,
            ttl,
            validation,
            verified: VerifiedTokens::new(VERIFIED_TOKENS_MAX),
        }
    }

    /// A token for a credential no user has (tests of what does not depend on it).
    #[cfg(test)]
    pub fn issue(&self, username: &str, now: u64) -> Result<Issued, TokenError> {
        self.issue_until(username, "", now, None)
    }

    /// A token for `username` holding the credential `fingerprint`, that expires after the
    /// TTL, or at `not_after` if that comes first (a user's dashboard token: ours never
    /// outlives it).
    pub fn issue_until(
        &self,
        username: &str,
        fingerprint: &str,
        now: u64,
        not_after: Option<u64>,
    ) -> Result<Issued, TokenError> {
        let ttl_end = now.saturating_add(self.ttl.as_secs());
        let exp = not_after.map_or(ttl_end, |end| end.min(ttl_end));
        self.sign(self.claims(username, fingerprint, now, exp, None))
    }

    /// A new token's claims (a fresh `jti`).
    fn claims(
        &self,
        username: &str,
        fingerprint: &str,
        iat: u64,
        exp: u64,
        idp: Option<ProviderIdentity>,
    ) -> Claims {
        Claims {
            iss: self.issuer.clone(),
            sub: username.to_string(),
            username: username.to_string(),
            jti: uuid::Uuid::new_v4().to_string(),
            iat,
            exp,
            cred: fingerprint.to_string(),
            idp,
        }
    }

    /// How long a token lives.
    pub fn ttl_seconds(&self) -> u64 {
        self.ttl.as_secs()
    }

    /// A token for a single sign-on user, expiring after the TTL.
    pub fn issue_sso(
        &self,
        username: &str,
        identity: ProviderIdentity,
        now: u64,
    ) -> Result<Issued, TokenError> {
        let exp = now.saturating_add(self.ttl.as_secs());
        self.sign(self.claims(username, "", now, exp, Some(identity)))
    }

    /// `pending` signed with the signing key.
    pub fn seal_pending_login(&self, mut pending: PendingLogin) -> Result<String, TokenError> {
        pending.iss = self.pending_issuer();
        let signing = self.keys.first().ok_or(TokenError::Signing)?;
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(signing.kid.clone());
        jsonwebtoken::encode(&header, &pending, &signing.encoding).map_err(|_| TokenError::Signing)
    }

    /// The pending login `sealed` holds, if we sealed it and it has not expired at `now`.
    pub fn open_pending_login(&self, sealed: &str, now: u64) -> Result<PendingLogin, TokenError> {
        let key = self.key_of(sealed)?;
        let mut validation = self.validation.clone();
        validation.set_issuer(&[self.pending_issuer()]);
        validation.required_spec_claims = HashSet::from(["iss".to_string()]);
        let pending = jsonwebtoken::decode::<PendingLogin>(sealed, &key.decoding, &validation)
            .map_err(|_| TokenError::Foreign)?
            .claims;
        if pending.exp < now {
            return Err(TokenError::Expired);
        }
        Ok(pending)
    }

    fn pending_issuer(&self) -> String {
        format!("{}#oidc-login", self.issuer)
    }

    fn sign(&self, claims: Claims) -> Result<Issued, TokenError> {
        let signing = self.keys.first().ok_or(TokenError::Signing)?;
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(signing.kid.clone());
        let token = jsonwebtoken::encode(&header, &claims, &signing.encoding)
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
        let key = self.key_of(token)?;
        let data = jsonwebtoken::decode::<Claims>(token, &key.decoding, &self.validation).map_err(
            |e| match e.kind() {
                ErrorKind::InvalidSignature
                | ErrorKind::InvalidAlgorithm
                | ErrorKind::InvalidIssuer
                | ErrorKind::MissingAlgorithm => TokenError::Foreign,
                _ => TokenError::Malformed,
            },
        )?;
        if data.claims.sub != data.claims.username {
            return Err(TokenError::Malformed);
        }
        Ok(data.claims)
    }
}

impl TokenService {
    /// The key a token names; one without a `kid` names the default key.
    fn key_of(&self, token: &str) -> Result<&Key, TokenError> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| TokenError::Malformed)?;
        let kid = header.kid.as_deref().unwrap_or(SigningKey::DEFAULT_KID);
        self.keys
            .iter()
            .find(|key| key.kid == kid)
            .ok_or(TokenError::Foreign)
    }
}

/// Tokens whose signature and claims were verified, bounded in number. Expired entries
/// are swept when the cache is full, at most once a second; while it is full of live
/// tokens, new ones are verified every time instead of remembered.
struct VerifiedTokens {
    tokens: DashMap<Box<str>, Arc<Claims>, foldhash::fast::RandomState>,
    max: usize,
    last_sweep: AtomicU64,
}

impl VerifiedTokens {
    fn new(max: usize) -> Self {
        VerifiedTokens {
            tokens: DashMap::with_hasher(foldhash::fast::RandomState::default()),
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

    fn key(kid: &str, secret: &str) -> SigningKey {
        SigningKey {
            kid: kid.into(),
            secret: Secret::new(secret.as_bytes().to_vec()),
        }
    }

    fn with_keys(keys: &[SigningKey], issuer: &str) -> TokenService {
        TokenService::new(keys, issuer.into(), Duration::from_secs(100))
    }

    fn service(secret: &str) -> TokenService {
        with_keys(&[key(SigningKey::DEFAULT_KID, secret)], "clustergate")
    }

    const OLD: &str = "0123456789abcdef0123456789abcdef";
    const NEW: &str = "fedcba9876543210fedcba9876543210";

    #[test]
    fn a_pending_login_opens_only_as_sealed_and_is_never_taken_for_a_token() {
        let tokens = service(OLD);
        let pending = PendingLogin {
            iss: String::new(),
            state: "s".into(),
            nonce: "n".into(),
            verifier: "v".into(),
            exp: NOW + 600,
        };
        let sealed = tokens.seal_pending_login(pending).unwrap();
        let opened = tokens.open_pending_login(&sealed, NOW).unwrap();
        assert_eq!(
            (opened.state, opened.nonce, opened.verifier),
            ("s".into(), "n".into(), "v".into())
        );
        assert_eq!(
            tokens.open_pending_login(&sealed, NOW + 601),
            Err(TokenError::Expired)
        );
        assert!(service(NEW).open_pending_login(&sealed, NOW).is_err());
        assert!(tokens.verify(&sealed, NOW).is_err());
        let token = tokens.issue("admin", NOW).unwrap().token;
        assert!(tokens.open_pending_login(&token, NOW).is_err());
    }

    #[test]
    fn a_single_sign_on_token_carries_the_providers_subject_and_groups() {
        let tokens = service(OLD);
        let identity = ProviderIdentity {
            sub: "f3a1".into(),
            groups: vec!["ceph-pools".into()],
            sid: Some("s-1".into()),
        };
        let issued = tokens.issue_sso("alice", identity.clone(), NOW).unwrap();
        assert_eq!(
            tokens.verify(&issued.token, NOW).unwrap().idp,
            Some(identity)
        );
        let local = tokens.issue("alice", NOW).unwrap();
        assert!(tokens.verify(&local.token, NOW).unwrap().idp.is_none());
    }

    #[test]
    fn a_new_key_signs_while_the_old_one_still_verifies() {
        let before = with_keys(&[key("k1", OLD)], "clustergate");
        let old_token = before.issue("admin", NOW).unwrap().token;
        let rotated = with_keys(&[key("k2", NEW), key("k1", OLD)], "clustergate");
        assert!(
            rotated.verify(&old_token, NOW).is_ok(),
            "no one is logged out"
        );
        let new_token = rotated.issue("admin", NOW).unwrap().token;
        let header = jsonwebtoken::decode_header(&new_token).unwrap();
        assert_eq!(header.kid.as_deref(), Some("k2"));
        assert_eq!(
            before.verify(&new_token, NOW),
            Err(TokenError::Foreign),
            "a gateway without the new key refuses its tokens"
        );
        // The old key taken off the list: its tokens are refused.
        let retired = with_keys(&[key("k2", NEW)], "clustergate");
        assert_eq!(retired.verify(&old_token, NOW), Err(TokenError::Foreign));
        assert!(retired.verify(&new_token, NOW).is_ok());
    }

    #[test]
    fn a_token_without_kid_verifies_against_the_default_key_only() {
        let legacy = {
            let claims = Claims {
                iss: "clustergate".into(),
                sub: "admin".into(),
                username: "admin".into(),
                jti: "j".into(),
                iat: NOW,
                exp: NOW + 10,
                cred: String::new(),
                idp: None,
            };
            let secret = EncodingKey::from_secret(OLD.as_bytes());
            jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &secret).unwrap()
        };
        assert!(service(OLD).verify(&legacy, NOW).is_ok());
        let named = with_keys(&[key("k1", OLD)], "clustergate");
        assert_eq!(named.verify(&legacy, NOW), Err(TokenError::Foreign));
    }

    #[test]
    fn a_kid_naming_an_unknown_key_is_foreign_even_with_a_known_secret() {
        let a = with_keys(&[key("a", OLD)], "clustergate");
        let token = a.issue("admin", NOW).unwrap().token;
        let b = with_keys(&[key("b", OLD)], "clustergate");
        assert_eq!(b.verify(&token, NOW), Err(TokenError::Foreign));
    }

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    #[test]
    fn a_token_never_outlives_the_end_it_is_given() {
        let s = service("0123456789abcdef0123456789abcdef");
        assert_eq!(
            s.issue_until("u", "", 1000, Some(1050)).unwrap().claims.exp,
            1050
        );
        let ttl_end = s.issue("u", 1000).unwrap().claims.exp;
        assert_eq!(
            s.issue_until("u", "", 1000, Some(ttl_end + 1))
                .unwrap()
                .claims
                .exp,
            ttl_end
        );
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
        let dashboard = with_keys(&[key(SigningKey::DEFAULT_KID, secret)], "ceph-dashboard");
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
                cred: String::new(),
                idp: None,
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
