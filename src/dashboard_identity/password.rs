//! The passwords of the accounts the gateway manages: derived from the deployment's key
//! and the account's name, so that every gateway of a deployment sets and uses the same
//! one without storing or exchanging it. Shaped to pass every check of the dashboard's
//! password policy whatever it turns on: 32 characters cycling through an upper-case
//! letter, a digit, a special character and a lower-case letter, so no two letters (no
//! word of the exclusion list, not the username), no repetition and no run of three
//! consecutive characters can occur, and the complexity is 56 (the policy asks 10).

use ring::hmac;

use crate::secrets::Secret;

const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const DIGITS: &[u8] = b"0123456789";
/// ASCII punctuation the dashboard counts as special; none that JSON or a shell escapes.
const SPECIAL: &[u8] = b"!#%+,-.=@_";
const LOWER: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
const CLASSES: [&[u8]; 4] = [UPPER, DIGITS, SPECIAL, LOWER];

/// Separates this use of the key from any other.
const CONTEXT: &[u8] = b"clustergate dashboard account password\0";

/// HMAC-SHA256 under the deployment's `key` of `context` then each of `parts`, each part
/// followed by a 0 byte (so that no two lists of parts give the same input).
pub(super) fn keyed_digest<'a>(
    key: &Secret,
    context: &[u8],
    parts: impl IntoIterator<Item = &'a str>,
) -> hmac::Tag {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key.expose());
    let mut digest = hmac::Context::with_key(&key);
    digest.update(context);
    for part in parts {
        digest.update(part.as_bytes());
        digest.update(&[0]);
    }
    digest.sign()
}

/// The password of the account `account`.
pub(super) fn derive(key: &Secret, account: &str) -> Secret {
    let tag = keyed_digest(key, CONTEXT, [account]);
    let password = tag
        .as_ref()
        .iter()
        .enumerate()
        .map(|(i, byte)| {
            let class = CLASSES[i % CLASSES.len()];
            class[usize::from(*byte) % class.len()]
        })
        .collect();
    Secret::new(password)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class_of(c: u8) -> usize {
        CLASSES.iter().position(|class| class.contains(&c)).unwrap()
    }

    /// The checks of the dashboard's `PasswordPolicy` (16.2 to 20.2), all turned on.
    #[test]
    fn derived_passwords_pass_every_check_of_the_dashboards_policy() {
        let forbidden = [
            "osd",
            "host",
            "dashboard",
            "pool",
            "block",
            "nfs",
            "ceph",
            "monitors",
            "gateway",
            "logs",
            "crush",
            "maps",
        ];
        for n in 0..200 {
            let account = format!("cg-{n:016x}");
            let password = derive(&Secret::new(vec![n as u8; 32]), &account);
            let text = std::str::from_utf8(password.expose()).unwrap();
            assert_eq!(text.len(), 32);
            let lower = text.to_lowercase();
            assert!(!lower.contains(&account), "{account}");
            assert!(forbidden.iter().all(|w| !lower.contains(w)));
            let b = text.as_bytes();
            for w in b.windows(2) {
                assert_ne!(class_of(w[0]), class_of(w[1]), "two of a class in a row");
            }
            for w in b.windows(3) {
                assert!(!(w[0] == w[1] && w[1] == w[2]));
                assert!(!(w[0] + 1 == w[1] && w[1] + 1 == w[2]), "sequential");
            }
            let complexity: usize = b
                .iter()
                .map(|c| match class_of(*c) {
                    0 => 2,
                    2 => 3,
                    _ => 1,
                })
                .sum();
            assert!(complexity >= 10);
        }
    }

    #[test]
    fn each_account_has_its_own_password_and_every_gateway_the_same() {
        let key = Secret::new(b"deployment key of 32 bytes......".to_vec());
        assert_eq!(derive(&key, "cg-a"), derive(&key, "cg-a"));
        assert_ne!(derive(&key, "cg-a"), derive(&key, "cg-b"));
        let other = Secret::new(b"another deployment's key........".to_vec());
        assert_ne!(derive(&key, "cg-a"), derive(&other, "cg-a"));
    }
}
