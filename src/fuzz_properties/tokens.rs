//! The JWT reader (`tokens`): tokens the `TokenService` issued, changed anywhere; tokens
//! forged part by part (header, claims, signing key), accepted exactly when every part is
//! ours; and arbitrary text. None may panic, and only an unchanged token of ours verifies.

use std::time::Duration;

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::cases;
use super::mutate::Corpus;
use crate::secrets::Secret;
use crate::tokens::{SigningKey, TokenError, TokenService};

const NOW: u64 = 1_800_000_000;
const ISSUER: &str = "clustergate";
/// The key that signs (listed first) and the key tokens without a `kid` name.
const SIGNING: (&str, &str) = ("2026-11", "fedcba9876543210fedcba9876543210");
const DEFAULT: (&str, &str) = (SigningKey::DEFAULT_KID, "0123456789abcdef0123456789abcdef");
/// A secret the gateway does not have.
const STRANGER: &str = "00000000000000000000000000000000";

fn key((kid, secret): (&str, &str)) -> SigningKey {
    SigningKey {
        kid: kid.into(),
        secret: Secret::new(secret.as_bytes().to_vec()),
    }
}

/// The gateway under test: it signs with the new key and still verifies the default one.
fn service() -> TokenService {
    TokenService::new(
        &[key(SIGNING), key(DEFAULT)],
        ISSUER.into(),
        Duration::from_secs(3600),
    )
}

const USERNAMES: &[&str] = &["admin", "viewer", "jürgen", "ops team", "a\"b\\c", "日本語"];

/// Tokens as gateways issue them: by this one, by one with only the default key, and
/// one from before keys had ids (no `kid`).
fn issued_tokens() -> Vec<String> {
    let ours = service();
    let older = TokenService::new(&[key(DEFAULT)], ISSUER.into(), Duration::from_secs(3600));
    let long_name = "x".repeat(64);
    let mut tokens: Vec<String> = USERNAMES
        .iter()
        .copied()
        .chain([long_name.as_str()])
        .map(|name| ours.issue(name, NOW).expect("issued").token)
        .collect();
    tokens.push(older.issue("admin", NOW).expect("issued").token);
    let claims = json!({"iss": ISSUER, "sub": "admin", "username": "admin", "jti": "j", "iat": NOW, "exp": NOW + 100});
    tokens.push(sign(
        &json!({"alg": "HS256", "typ": "JWT"}),
        &claims,
        DEFAULT.1,
    ));
    tokens
}

const DICTIONARY: &[&str] = &[
    ".",
    "=",
    "-",
    "_",
    "+",
    "/",
    " ",
    "eyJ",
    "A",
    "AA",
    "e30",
    "bnVsbA",
    // {"alg":"none"} and {"alg":"HS384"}
    "eyJhbGciOiJub25lIn0",
    "eyJhbGciOiJIUzM4NCJ9",
    "\u{0}",
    "é",
];

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// `header.claims.signature`, signed with HS256 under `secret`.
fn sign(header: &Value, claims: &Value, secret: &str) -> String {
    let message = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let signature = jsonwebtoken::crypto::sign(
        message.as_bytes(),
        &EncodingKey::from_secret(secret.as_bytes()),
        Algorithm::HS256,
    )
    .expect("HS256 signs");
    format!("{message}.{signature}")
}

/// How a forged token names its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kid {
    Absent,
    Null,
    Signing,
    Default,
    Unknown,
    Number,
}

/// Who signed a forged token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signer {
    Signing,
    Default,
    Stranger,
    /// No signature at all (`alg: none` style).
    Nobody,
    /// Not a signature.
    Garbage,
}

/// A claim's value: ours, another of the right type, or one that does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    Ours,
    Other,
    WrongType,
    Null,
    Missing,
}

#[derive(Debug, Clone)]
struct Forgery {
    alg: Option<&'static str>,
    kid: Kid,
    typ: Option<&'static str>,
    /// As [`claim_values`] lists them.
    claims: [Claim; 6],
    /// A claim we never issue (`role`), which changes nothing.
    extra: bool,
    signer: Signer,
}

/// Each claim we issue: its name, our value, another value of the right type (for `exp`,
/// a past one: ours, but expired), and a value of a wrong type.
fn claim_values() -> [(&'static str, Value, Value, Value); 6] {
    [
        ("iss", json!(ISSUER), json!("ceph-dashboard"), json!(1)),
        ("sub", json!("admin"), json!("root"), json!(["admin"])),
        ("username", json!("admin"), json!("root"), json!(["admin"])),
        (
            "jti",
            json!("0b0e6b3c-5d1f-4f1e-9d7e-3c1a2b4d5e6f"),
            json!(""),
            json!(7),
        ),
        ("iat", json!(NOW), json!(0), json!(1.8e9)),
        ("exp", json!(NOW + 100), json!(NOW - 1), json!("soon")),
    ]
}

impl Forgery {
    fn token(&self) -> String {
        let mut header = Map::new();
        if let Some(alg) = self.alg {
            header.insert("alg".into(), json!(alg));
        }
        if let Some(typ) = self.typ {
            header.insert("typ".into(), json!(typ));
        }
        let kid = match self.kid {
            Kid::Absent => None,
            Kid::Null => Some(Value::Null),
            Kid::Signing => Some(json!(SIGNING.0)),
            Kid::Default => Some(json!(DEFAULT.0)),
            Kid::Unknown => Some(json!("2025-01")),
            Kid::Number => Some(json!(7)),
        };
        if let Some(kid) = kid {
            header.insert("kid".into(), kid);
        }
        let mut claims = Map::new();
        for ((name, ours, other, wrong), claim) in claim_values().into_iter().zip(self.claims) {
            let value = match claim {
                Claim::Ours => ours,
                Claim::Other => other,
                Claim::WrongType => wrong,
                Claim::Null => Value::Null,
                Claim::Missing => continue,
            };
            claims.insert(name.into(), value);
        }
        if self.extra {
            claims.insert("role".into(), json!("administrator"));
        }
        let (header, claims) = (Value::Object(header), Value::Object(claims));
        let secret = match self.signer {
            Signer::Signing => SIGNING.1,
            Signer::Default => DEFAULT.1,
            Signer::Stranger | Signer::Nobody | Signer::Garbage => STRANGER,
        };
        let signed = sign(&header, &claims, secret);
        let unsigned = signed.rsplit_once('.').map_or("", |(m, _)| m);
        match self.signer {
            Signer::Nobody => format!("{unsigned}."),
            Signer::Garbage => format!("{unsigned}.AAAA"),
            _ => signed,
        }
    }

    /// The model: HS256, a key we have and that signed it, our issuer, every claim of
    /// the right type, and `sub` equal to `username`.
    fn is_ours(&self) -> bool {
        let signed_by_named_key = match self.kid {
            Kid::Absent | Kid::Null | Kid::Default => self.signer == Signer::Default,
            Kid::Signing => self.signer == Signer::Signing,
            Kid::Unknown | Kid::Number => false,
        };
        let [iss, sub, username, rest @ ..] = self.claims;
        self.alg == Some("HS256")
            && signed_by_named_key
            && iss == Claim::Ours
            && matches!(sub, Claim::Ours | Claim::Other)
            && sub == username
            && rest.iter().all(|c| matches!(c, Claim::Ours | Claim::Other))
    }

    fn expired(&self) -> bool {
        self.claims[5] == Claim::Other
    }
}

fn forgery() -> impl Strategy<Value = Forgery> {
    use prop::sample::select;
    // Mostly ours, so that single wrong parts are reached.
    let claim = prop_oneof![
        6 => Just(Claim::Ours),
        2 => Just(Claim::Other),
        1 => select(&[Claim::WrongType, Claim::Null, Claim::Missing][..]),
    ];
    (
        prop_oneof![3 => Just(Some("HS256")), 1 => select(&[Some("HS384"), Some("HS512"), Some("none"), Some("RS256"), Some("hs256"), None][..])],
        select(&[Kid::Absent, Kid::Null, Kid::Signing, Kid::Default, Kid::Unknown, Kid::Number][..]),
        select(&[None, Some("JWT"), Some("jwt")][..]),
        [claim.clone(), claim.clone(), claim.clone(), claim.clone(), claim.clone(), claim],
        any::<bool>(),
        prop_oneof![4 => select(&[Signer::Signing, Signer::Default][..]), 1 => select(&[Signer::Stranger, Signer::Nobody, Signer::Garbage][..])],
    )
        .prop_map(|(alg, kid, typ, claims, extra, signer)| Forgery { alg, kid, typ, claims, extra, signer })
}

proptest! {
    #![proptest_config(cases(2000))]

    /// A token we issued, changed in any byte (or several), never verifies, even while
    /// the unchanged token is remembered as verified.
    #[test]
    fn a_changed_token_never_verifies(m in Corpus::new(issued_tokens(), DICTIONARY).mutants()) {
        let service = service();
        let original = String::from_utf8_lossy(&m.original).into_owned();
        prop_assert!(service.verify(&original, NOW).is_ok(), "the seed verifies");
        let token = m.text();
        let verified = service.verify(&token, NOW);
        if token == original {
            prop_assert!(verified.is_ok());
        } else {
            prop_assert!(verified.is_err(), "{:?} verified", token);
            prop_assert!(service.verify_issued(&token).is_err());
        }
    }

    /// Arbitrary text, and text shaped like a JWT, never verifies.
    #[test]
    fn arbitrary_text_never_verifies(
        token in ".{0,300}|[A-Za-z0-9_-]{0,60}\\.[A-Za-z0-9_-]{0,120}\\.[A-Za-z0-9_-]{0,43}"
    ) {
        let service = service();
        prop_assert!(service.verify(&token, NOW).is_err());
        prop_assert!(service.verify_issued(&token).is_err());
    }

    /// A token forged part by part verifies exactly when every part is ours, with the
    /// claims it carries; an expired one is recognised but refused as expired.
    #[test]
    fn a_forged_token_verifies_only_when_every_part_is_ours(forgery in forgery()) {
        let service = service();
        let token = forgery.token();
        let issued = service.verify_issued(&token);
        prop_assert_eq!(issued.is_ok(), forgery.is_ours(), "{:?}: {:?}", token, issued);
        if let Ok(claims) = issued {
            prop_assert_eq!(&claims.sub, &claims.username);
            prop_assert_eq!(claims.iss, ISSUER);
            let verified = service.verify(&token, NOW);
            if forgery.expired() {
                prop_assert_eq!(verified, Err(TokenError::Expired));
            } else {
                prop_assert!(verified.is_ok());
            }
        }
    }
}
