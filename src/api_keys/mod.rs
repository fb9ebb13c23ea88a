//! API keys: long-lived, scoped, revocable credentials for scripts, exporters and CI jobs,
//! sent as `Authorization: Bearer cgk_...` instead of logging in with a stored password.
//!
//! A key is `cgk_<id>_<secret>`: the prefix lets secret scanners find leaked keys, the id
//! (16 hex digits, not secret) names the key in lists, logs and the audit, and the secret
//! (32 random bytes, base64url) is shown once, at creation. The gateway keeps only the
//! SHA-256 digest of the whole key: a key is random, so a password hash (slow on purpose)
//! would add cost to every request and no protection. This module is the format and the
//! record; the stores keep records (`state::ApiKeys`), `auth::source::api_keys` checks a
//! presented key per request, and `auth::api_keys` serves their management.

use std::net::IpAddr;

use base64::Engine;
use ipnet::IpNet;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What every key starts with.
pub const PREFIX: &str = "cgk_";
/// Hex digits of a key's id.
const ID_LEN: usize = 16;
/// Characters of a key's secret: 32 bytes in unpadded base64url.
const SECRET_LEN: usize = 43;
/// A whole key's length: prefix, id, `_`, secret.
pub const KEY_LEN: usize = PREFIX.len() + ID_LEN + 1 + SECRET_LEN;

/// Why a text is not a key of this gateway's format.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyFormatError {
    #[error("an API key starts with `{PREFIX}`")]
    Prefix,
    #[error("an API key is {KEY_LEN} characters long")]
    Length,
    #[error("an API key's id is 16 lowercase hex digits")]
    Id,
    #[error("an API key's secret is 43 base64url characters")]
    Secret,
}

/// A key as a client presented it, its form checked (not yet its secret).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PresentedKey<'a> {
    /// The key's id: what the stores find it by.
    pub id: &'a str,
    /// The whole key, as its digest is taken.
    pub text: &'a str,
}

impl<'a> PresentedKey<'a> {
    /// Checks the form of `text` (a bearer token starting with [`PREFIX`]).
    pub fn parse(text: &'a str) -> Result<PresentedKey<'a>, KeyFormatError> {
        let rest = text.strip_prefix(PREFIX).ok_or(KeyFormatError::Prefix)?;
        if text.len() != KEY_LEN {
            return Err(KeyFormatError::Length);
        }
        // (the length is that of ASCII text only if every byte is; checked per part)
        let (id, secret) = rest.split_at_checked(ID_LEN).ok_or(KeyFormatError::Id)?;
        let lower_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
        if !id.bytes().all(lower_hex) {
            return Err(KeyFormatError::Id);
        }
        let secret = secret.strip_prefix('_').ok_or(KeyFormatError::Secret)?;
        let base64url = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
        if secret.len() != SECRET_LEN || !secret.bytes().all(base64url) {
            return Err(KeyFormatError::Secret);
        }
        Ok(PresentedKey { id, text })
    }

    /// Whether this is the key whose digest `record` keeps. Per request: the digest is
    /// taken with ring's SHA-256 and compared as bytes, not written as hex (formatting the
    /// 32 bytes cost 16,000 instructions, two thirds of a key's check; bench section 8).
    /// Tested against the plain hex digest.
    pub fn matches(&self, record: &RecordDigest) -> bool {
        let presented = ring::digest::digest(&ring::digest::SHA256, self.text.as_bytes());
        let stored = &record.0;
        // (every byte compared whatever the first difference)
        let differing = presented
            .as_ref()
            .iter()
            .zip(stored)
            .fold(0, |acc, (a, b)| acc | (a ^ b));
        presented.as_ref().len() == stored.len() && differing == 0
    }
}

/// A record's digest as bytes, decoded once from its hex (`KeyRecord::digest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordDigest([u8; 32]);

impl RecordDigest {
    /// `None` for text that is not 64 hex digits (a record no key matches).
    pub fn of(record: &KeyRecord) -> Option<RecordDigest> {
        let hex = record.digest.as_bytes();
        let mut bytes = [0u8; 32];
        if hex.len() != 64 {
            return None;
        }
        for (byte, pair) in bytes.iter_mut().zip(hex.chunks_exact(2)) {
            let text = std::str::from_utf8(pair).ok()?;
            *byte = u8::from_str_radix(text, 16).ok()?;
        }
        Some(RecordDigest(bytes))
    }
}

/// A new key: its text (shown once) and id.
pub struct NewKey {
    pub id: String,
    pub text: String,
}

impl NewKey {
    /// A fresh key from the operating system's random source (through `rand`'s thread
    /// generator, a CSPRNG seeded from it).
    pub fn generate() -> NewKey {
        let mut rng = rand::thread_rng();
        let mut id = [0u8; ID_LEN / 2];
        let mut secret = [0u8; 32];
        rng.fill_bytes(&mut id);
        rng.fill_bytes(&mut secret);
        let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret);
        let text = format!("{PREFIX}{id}_{secret}");
        NewKey { id, text }
    }

    pub fn digest(&self) -> String {
        digest_of(&self.text)
    }
}

/// SHA-256 of a whole key, in hex.
fn digest_of(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A key as the stores keep it: never its secret, only its digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    pub id: String,
    /// What its owner calls it (`prometheus-exporter`): 1 to 64 of `A-Za-z0-9._-`.
    pub name: String,
    /// The user whose key it is (it acts with `roles`, never more than theirs).
    pub owner: String,
    /// Who created it: the owner, or an administrator for them.
    pub created_by: String,
    /// The roles it acts with, by the names the users file gives them.
    pub roles: Vec<String>,
    pub created_at: u64,
    /// Refused from this second on (Unix time); every key has one.
    pub expires_at: u64,
    /// The client addresses it is accepted from; empty: any.
    pub networks: Vec<IpNet>,
    /// SHA-256 of the whole key, in hex ([`NewKey::digest`]).
    pub digest: String,
}

impl KeyRecord {
    /// Whether `client` may use this key (a key limited to networks refuses a client
    /// whose address is not known).
    pub fn admits(&self, client: Option<IpAddr>) -> bool {
        self.networks.is_empty()
            || client.is_some_and(|ip| self.networks.iter().any(|net| net.contains(&ip)))
    }

    /// The id a revocation of this key is recorded under, beside the tokens' ids.
    pub fn revocation_id(&self) -> String {
        revocation_id(&self.id)
    }
}

/// The id a revocation of key `id` is recorded under (`state::Revocations`).
pub fn revocation_id(id: &str) -> String {
    format!("apikey:{id}")
}

/// What names a key in the logs and the audit (never its secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLabel {
    pub id: String,
    pub name: String,
}

/// A stored key with when it was last used (`None`: never).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKey {
    pub record: KeyRecord,
    pub last_used: Option<u64>,
}

#[cfg(test)]
mod tests;
