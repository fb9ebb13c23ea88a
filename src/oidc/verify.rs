//! A provider access token (a JWT) into a user: the signature with a key of the provider's
//! set under an allowed asymmetric algorithm, then `iss`, `aud`, `exp` and `nbf` (with the
//! configured clock skew), then that it is an access token (its header's `typ` one of
//! `oidc.access_token_types`; no `nonce`, which ID tokens carry; no `events`, which
//! logout tokens carry), then the user's name and the dashboard roles their groups map
//! to. A user no group maps is refused (403): there is no default role.

use std::sync::Arc;

use jsonwebtoken::{decode, decode_header, Header, Validation};
use serde_json::Value;

use super::keys::{usable_for, KeyError};
use super::Provider;
use crate::config::normal_token_type;
use crate::state::UnixTime;
use crate::tokens::ProviderIdentity;
use crate::users::User;

/// Why a provider token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OidcError {
    #[error("not a well-formed JWT")]
    Malformed,
    #[error("signed with an algorithm that is not allowed")]
    Algorithm,
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("bad signature, issuer or audience")]
    Invalid,
    #[error("expired")]
    Expired,
    #[error("not valid yet")]
    NotYet,
    #[error("names no user")]
    NoUser,
    /// Signed by the provider, but another kind of token than an access token.
    #[error("not an access token: {0}")]
    NotAccessToken(&'static str),
    /// Signed by the provider, but not a good back-channel logout token.
    #[error("not a logout token: {0}")]
    NotLogoutToken(&'static str),
    /// Valid, but none of the user's groups maps to a dashboard role.
    #[error("user {username:?} holds no group mapped to a dashboard role")]
    NoRole { username: String },
}

/// A verified provider access token: whom it names (the provider's name for them, not yet
/// the name they are shown as) and when it was issued.
#[derive(Debug)]
pub struct ProviderToken {
    pub username: String,
    pub identity: ProviderIdentity,
    /// `iat`; `None`: the token does not say (a back-channel logout then ends it too).
    pub issued_at: Option<UnixTime>,
}

impl Provider {
    /// Whom a provider access token names at `now`.
    pub async fn verify(&self, token: &str, now: UnixTime) -> Result<ProviderToken, OidcError> {
        let claims = self.access_claims(token, now).await?;
        let (username, identity) = self.identity_of(&claims)?;
        Ok(ProviderToken {
            username,
            identity,
            issued_at: claims.get("iat").and_then(Value::as_u64),
        })
    }

    /// The claims of an access token for `oidc.audience`: signed by the provider, and not
    /// its ID token or logout token, which may carry the same audience and groups.
    pub(super) async fn access_claims(
        &self,
        token: &str,
        now: UnixTime,
    ) -> Result<Value, OidcError> {
        let (header, claims) = self.verified_claims(token, &self.audience, now).await?;
        let typ = header
            .typ
            .as_deref()
            .map(normal_token_type)
            .unwrap_or_default();
        if !self.access_token_types.contains(&typ) {
            return Err(OidcError::NotAccessToken(
                "its header's typ is none of oidc.access_token_types",
            ));
        }
        if claims.get("nonce").is_some() {
            return Err(OidcError::NotAccessToken("it has a nonce, as ID tokens do"));
        }
        if claims.get("events").is_some() {
            return Err(OidcError::NotAccessToken(
                "it has events, as logout tokens do",
            ));
        }
        // Keycloak's ID tokens say so in a claim (its access tokens say "Bearer").
        if claims.get("typ").and_then(Value::as_str) == Some("ID") {
            return Err(OidcError::NotAccessToken("its typ claim is \"ID\""));
        }
        Ok(claims)
    }

    /// The header and claims of a token the provider signed for `audience`, valid at `now`.
    pub(super) async fn verified_claims(
        &self,
        token: &str,
        audience: &str,
        now: UnixTime,
    ) -> Result<(Header, Value), OidcError> {
        let header = decode_header(token).map_err(|_| OidcError::Malformed)?;
        if !self.algorithms.contains(&header.alg) {
            return Err(OidcError::Algorithm);
        }
        let key = self.keys.key(header.kid.as_deref()).await?;
        if !usable_for(&key, header.alg) {
            return Err(OidcError::Algorithm);
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[self.issuer.text.as_str()]);
        validation.set_audience(&[audience]);
        // Times are checked below against the caller's clock.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.required_spec_claims.clear();
        let claims = decode::<Value>(token, &key.decoding, &validation)
            .map_err(|_| OidcError::Invalid)?
            .claims;
        self.check_times(&claims, now)?;
        Ok((header, claims))
    }

    /// `exp` is required; `nbf` when present; both with the clock skew.
    fn check_times(&self, claims: &Value, now: UnixTime) -> Result<(), OidcError> {
        let skew = self.clock_skew.as_secs();
        let exp = claims
            .get("exp")
            .and_then(Value::as_u64)
            .ok_or(OidcError::Invalid)?;
        if exp.saturating_add(skew) < now {
            return Err(OidcError::Expired);
        }
        match claims.get("nbf").map(Value::as_u64) {
            None => Ok(()),
            Some(Some(nbf)) if nbf <= now.saturating_add(skew) => Ok(()),
            Some(Some(_)) => Err(OidcError::NotYet),
            Some(None) => Err(OidcError::Invalid),
        }
    }

    /// The username (`username_claim`, else `sub`) and the provider's view of the user.
    pub(super) fn identity_of(
        &self,
        claims: &Value,
    ) -> Result<(String, ProviderIdentity), OidcError> {
        let text = |name: &str| {
            claims
                .get(name)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty() && !s.chars().any(char::is_control))
        };
        let sub = text("sub").ok_or(OidcError::NoUser)?;
        let username = text(&self.username_claim).unwrap_or(sub).to_string();
        let identity = ProviderIdentity {
            sub: sub.to_string(),
            groups: self.roles_claim.values(claims),
            sid: text("sid").map(str::to_string),
        };
        Ok((username, identity))
    }

    /// The user with the roles `identity`'s groups map to now (`oidc.role_map`, reloaded by
    /// SIGHUP); none mapped: refused.
    pub fn user_for(
        &self,
        username: String,
        identity: &ProviderIdentity,
    ) -> Result<Arc<User>, OidcError> {
        let Some(mapped) = self.role_map.load().map(&identity.groups) else {
            return Err(OidcError::NoRole { username });
        };
        let user = User {
            username,
            password_hash: None,
            roles: mapped.roles,
            custom_roles: mapped.custom_roles,
            grants: mapped.grants,
            enabled: true,
            provider_subject: Some(identity.sub.clone()),
            api_key: None,
        };
        Ok(Arc::new(user))
    }
}

#[cfg(test)]
mod tests {
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
    use serde_json::json;

    use super::*;
    use crate::config::ClaimPath;
    use crate::oidc::fetch::testing::KEYS;
    use crate::users::{Permission, Role, RoleEdition, Scope};

    const NOW: UnixTime = 1_900_000_000;

    fn provider() -> Provider {
        crate::oidc::testing::provider()
    }

    fn claims(groups: &[&str]) -> Value {
        json!({
            "iss": "https://idp.example.com/realms/ceph", "aud": "ceph", "sub": "f3a1",
            "preferred_username": "alice", "exp": NOW + 300, "iat": NOW,
            "realm_access": {"roles": groups},
        })
    }

    /// An access token as RFC 9068 has it (`typ` `at+jwt`).
    fn signed(claims: &Value, kid: &str) -> String {
        signed_as(claims, kid, Some("at+jwt"))
    }

    fn signed_as(claims: &Value, kid: &str, typ: Option<&str>) -> String {
        let (_, _, der) = KEYS.iter().find(|(k, _, _)| *k == kid).unwrap();
        let der = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, der).unwrap();
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(kid.into());
        header.typ = typ.map(str::to_string);
        encode(&header, claims, &EncodingKey::from_ed_der(&der)).unwrap()
    }

    async fn verified(p: &Provider, token: &str) -> Result<Arc<User>, OidcError> {
        let token = p.verify(token, NOW).await?;
        p.user_for(token.username, &token.identity)
    }

    #[tokio::test]
    async fn a_good_token_is_its_user_with_the_mapped_roles_union() {
        let p = provider();
        p.keys.refresh().await.unwrap();
        let user = verified(
            &p,
            &signed(&claims(&["ceph-pools", "ceph-viewers", "other"]), "k1"),
        )
        .await
        .unwrap();
        assert_eq!(user.username, "alice");
        assert_eq!(user.provider_subject.as_deref(), Some("f3a1"));
        assert_eq!(user.roles, [Role::PoolManager, Role::ReadOnly]);
        assert!(user
            .grants
            .allows(RoleEdition::Pacific, Scope::Pool, Permission::Delete));
        assert!(user
            .grants
            .allows(RoleEdition::Pacific, Scope::Osd, Permission::Read));
        assert!(!user
            .grants
            .allows(RoleEdition::Pacific, Scope::Osd, Permission::Update));
    }

    #[tokio::test]
    async fn forged_or_stale_tokens_are_refused() {
        let p = provider();
        p.keys.refresh().await.unwrap();
        let with = |change: &dyn Fn(&mut Value)| {
            let mut c = claims(&["ceph-pools"]);
            change(&mut c);
            signed(&c, "k1")
        };
        let cases: Vec<(String, OidcError)> = vec![
            (
                with(&|c| c["iss"] = json!("https://evil.example.com")),
                OidcError::Invalid,
            ),
            (with(&|c| c["aud"] = json!("other")), OidcError::Invalid),
            (with(&|c| c["exp"] = json!(NOW - 61)), OidcError::Expired),
            (with(&|c| c["nbf"] = json!(NOW + 61)), OidcError::NotYet),
            (
                with(&|c| {
                    c.as_object_mut()
                        .unwrap()
                        .remove("exp")
                        .map(drop)
                        .unwrap_or(())
                }),
                OidcError::Invalid,
            ),
            (
                signed(&claims(&["ceph-pools"]), "k2"),
                OidcError::Key(KeyError::Unknown),
            ),
            (
                with(&|c| c["realm_access"]["roles"] = json!(["nobody"])),
                OidcError::NoRole {
                    username: "alice".into(),
                },
            ),
        ];
        for (token, expected) in cases {
            assert_eq!(verified(&p, &token).await.err(), Some(expected));
        }
        // Within the skew, still good.
        assert!(verified(&p, &with(&|c| c["exp"] = json!(NOW - 59)))
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn id_tokens_logout_tokens_and_other_types_are_not_access_tokens() {
        let p = provider();
        p.keys.refresh().await.unwrap();
        let admin = claims(&["ceph-pools"]);
        let with = |extra: Value| {
            let mut c = admin.clone();
            c.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            c
        };
        let not_access =
            |e: Result<Arc<User>, OidcError>| matches!(e, Err(OidcError::NotAccessToken(_)));
        let id_token = with(json!({"nonce": "n-1", "sid": "s-1"}));
        let logout = with(
            json!({"events": {"http://schemas.openid.net/event/backchannel-logout": {}}, "jti": "j"}),
        );
        for token in [
            signed(&id_token, "k1"),
            signed_as(&id_token, "k1", None),
            signed_as(&logout, "k1", Some("logout+jwt")),
            signed(&logout, "k1"),
            signed_as(&admin, "k1", Some("JWT")),
            signed_as(&admin, "k1", None),
            signed(&with(json!({"typ": "ID"})), "k1"),
        ] {
            assert!(not_access(verified(&p, &token).await));
        }
        for typ in ["at+jwt", "application/at+jwt", "AT+JWT"] {
            assert!(
                verified(&p, &signed_as(&admin, "k1", Some(typ)))
                    .await
                    .is_ok(),
                "{typ}"
            );
        }
        let token = p.verify(&signed(&admin, "k1"), NOW).await.unwrap();
        assert_eq!(token.issued_at, Some(NOW));
    }

    #[tokio::test]
    async fn alg_none_and_hmac_with_the_public_key_are_refused() {
        let p = provider();
        p.keys.refresh().await.unwrap();
        let b64 = |v: &Value| {
            base64::Engine::encode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                v.to_string(),
            )
        };
        let none = format!(
            "{}.{}.",
            b64(&json!({"alg": "none", "kid": "k1"})),
            b64(&claims(&["ceph-pools"]))
        );
        assert!(verified(&p, &none).await.is_err());
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("k1".into());
        let public = KEYS[0].1.as_bytes();
        let hmac = encode(
            &header,
            &claims(&["ceph-pools"]),
            &EncodingKey::from_secret(public),
        )
        .unwrap();
        assert_eq!(verified(&p, &hmac).await.err(), Some(OidcError::Algorithm));
    }

    #[test]
    fn claim_paths_read_lists_and_single_strings() {
        let path = |t: &str| ClaimPath::parse(t).unwrap();
        let c =
            json!({"groups": ["a", 1, "b"], "resource_access": {"ceph-dashboard": {"roles": "x"}}});
        assert_eq!(path("groups").values(&c), ["a", "b"]);
        assert_eq!(
            path("resource_access.\"ceph-dashboard\".roles").values(&c),
            ["x"]
        );
        assert!(path("missing.roles").values(&c).is_empty());
        for bad in [
            "",
            "a..b",
            "a.",
            "resource_access.ceph-dashboard",
            "\"open",
            "a\"b\"",
        ] {
            assert!(ClaimPath::parse(bad).is_err(), "{bad}");
        }
    }
}
