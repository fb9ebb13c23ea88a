//! What the gateway keeps in Redis that is a credential, sealed with the deployment's keys
//! (`state.redis.encryption_keys`), and the revocation messages, signed with them.
//!
//! - A value is `<kid>:<base64url(nonce ‖ ciphertext ‖ tag)>`: ChaCha20-Poly1305 with a
//!   random nonce, the key id and the Redis key bound in as associated data, so a value
//!   copied to another key (another user's session) or relabelled opens nowhere.
//! - A message is `<kid>:<base64url(tag)> <message>`: HMAC-SHA256 over the channel and the
//!   message, so a `PUBLISH` by anyone without the key is told apart.
//!
//! Each key file's secret yields both keys through HKDF-SHA256 (two labels), so one file per
//! key id serves both. The first key seals and signs; every key opens and verifies (rotation:
//! a new key is put first, the old one stays until what it sealed has expired). What no key
//! opens is absent, never an error.
//!
//! The module needs nothing of the crate: the integration tests include it to read what a
//! gateway stored.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use ring::hkdf::{Salt, HKDF_SHA256};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

/// HKDF's salt: fixed, the key files are uniformly random already.
const SALT: &[u8] = b"clustergate redis";
const VALUE_LABEL: &[u8] = b"values";
const MESSAGE_LABEL: &[u8] = b"revocation messages";

/// The keys derived from one key file.
struct DerivedKey {
    kid: String,
    value: LessSafeKey,
    message: hmac::Key,
}

/// The deployment's keys, the sealing one first.
pub struct Sealer {
    keys: Vec<DerivedKey>,
    random: SystemRandom,
}

/// Nothing was sealed: the system gave no random nonce (or the value is over the AEAD's limit).
#[derive(Debug)]
pub struct CannotSeal;

impl Sealer {
    /// From `(kid, secret)` pairs, the first sealing; `None` without any.
    pub fn new<'a>(keys: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Option<Sealer> {
        let keys: Vec<DerivedKey> = keys
            .into_iter()
            .map(|(kid, secret)| {
                let prk = Salt::new(HKDF_SHA256, SALT).extract(secret);
                let value = prk
                    .expand(&[VALUE_LABEL], &CHACHA20_POLY1305)
                    .map(UnboundKey::from);
                let message = prk
                    .expand(&[MESSAGE_LABEL], hmac::HMAC_SHA256)
                    .map(hmac::Key::from);
                // Both lengths are the algorithms' own, which HKDF-SHA256 always gives.
                value.and_then(|value| {
                    Ok(DerivedKey {
                        kid: kid.to_string(),
                        value: LessSafeKey::new(value),
                        message: message?,
                    })
                })
            })
            .collect::<Result<_, _>>()
            .ok()?;
        (!keys.is_empty()).then(|| Sealer {
            keys,
            random: SystemRandom::new(),
        })
    }

    fn sealing(&self) -> &DerivedKey {
        &self.keys[0]
    }

    fn by_kid(&self, kid: &str) -> Option<&DerivedKey> {
        self.keys.iter().find(|k| k.kid == kid)
    }

    /// `plain` sealed for the Redis key `redis_key`.
    pub fn seal(&self, redis_key: &str, plain: &[u8]) -> Result<String, CannotSeal> {
        let key = self.sealing();
        let mut nonce = [0u8; NONCE_LEN];
        self.random.fill(&mut nonce).map_err(|_| CannotSeal)?;
        let mut in_out = plain.to_vec();
        key.value
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(value_context(&key.kid, redis_key)),
                &mut in_out,
            )
            .map_err(|_| CannotSeal)?;
        let sealed = [&nonce[..], &in_out].concat();
        Ok(format!("{}:{}", key.kid, URL_SAFE_NO_PAD.encode(sealed)))
    }

    /// What `seal` sealed for `redis_key`, or `None` (another key, another Redis key, a
    /// key id no longer listed, not sealed at all).
    pub fn open(&self, redis_key: &str, stored: &str) -> Option<Vec<u8>> {
        let (kid, data) = stored.split_once(':')?;
        let key = self.by_kid(kid)?;
        let mut data = URL_SAFE_NO_PAD.decode(data).ok()?;
        if data.len() < NONCE_LEN {
            return None;
        }
        let mut in_out = data.split_off(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(&data).ok()?;
        let plain = key
            .value
            .open_in_place(nonce, Aad::from(value_context(kid, redis_key)), &mut in_out)
            .ok()?;
        Some(plain.to_vec())
    }

    /// `message` signed for `channel`.
    pub fn sign(&self, channel: &str, message: &str) -> String {
        let key = self.sealing();
        let tag = hmac::sign(&key.message, &message_context(channel, message));
        format!(
            "{}:{} {message}",
            key.kid,
            URL_SAFE_NO_PAD.encode(tag.as_ref())
        )
    }

    /// The message of `signed` if a listed key signed it for `channel`.
    pub fn verify<'a>(&self, channel: &str, signed: &'a str) -> Option<&'a str> {
        let (signature, message) = signed.split_once(' ')?;
        let (kid, tag) = signature.split_once(':')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        let key = self.by_kid(kid)?;
        hmac::verify(&key.message, &message_context(channel, message), &tag).ok()?;
        Some(message)
    }
}

fn value_context(kid: &str, redis_key: &str) -> Vec<u8> {
    [kid.as_bytes(), b"\0", redis_key.as_bytes()].concat()
}

fn message_context(channel: &str, message: &str) -> Vec<u8> {
    [channel.as_bytes(), b"\0", message.as_bytes()].concat()
}

/// What a gateway sealed under `redis_key` with the key `(kid, secret)`, for the integration
/// tests' reads of Redis (`clustergate::testing`).
#[cfg(feature = "test-support")]
pub fn open_sealed(kid: &str, secret: &[u8], redis_key: &str, stored: &str) -> Option<Vec<u8>> {
    Sealer::new([(kid, secret)])?.open(redis_key, stored)
}
