//! The API key reader (`api_keys::PresentedKey::parse`): valid keys changed anywhere, text
//! shaped almost like a key, and arbitrary text. None may panic, and a text parses exactly
//! when it has the format (checked against a model written here, byte by byte), its id
//! then being the text's id part.

use proptest::prelude::*;

use super::cases;
use super::mutate::Corpus;
use crate::api_keys::{PresentedKey, KEY_LEN, PREFIX};

/// Keys of the format (fixed, so that a failing case repeats from its seed).
const KEYS: &[&str] = &[
    "cgk_0123456789abcdef_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    "cgk_ffffffffffffffff_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
    "cgk_a1b2c3d4e5f60718_Zx-_9aQ3bVw7-_kLmN0pQrStUvWxYz0123456789-_a",
    "cgk_0000000000000000_-----------------------------------------__",
];

const DICTIONARY: &[&str] = &[
    "cgk_", "cgk", "_", "-", "a", "f", "g", "A", "F", "0", "9", "=", "+", "/", " ", "\u{0}", "é",
    "Bearer ",
];

/// The id part of `text` if it has the format: the prefix, 16 lowercase hex digits, `_`,
/// 43 base64url characters, 64 bytes in all.
fn model(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let hex = |b: &u8| matches!(b, b'0'..=b'9' | b'a'..=b'f');
    let base64url = |b: &u8| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_';
    let shaped = bytes.len() == 64
        && bytes.starts_with(b"cgk_")
        && bytes[4..20].iter().all(hex)
        && bytes[20] == b'_'
        && bytes[21..].iter().all(base64url);
    shaped.then(|| &text[4..20])
}

/// `parse` answers as the model does, with the text kept whole.
fn parses_as_the_model(text: &str) -> Result<(), TestCaseError> {
    let parsed = PresentedKey::parse(text);
    prop_assert_eq!(
        parsed.as_ref().ok().map(|key| key.id),
        model(text),
        "{:?}: {:?}",
        text,
        parsed
    );
    if let Ok(key) = parsed {
        prop_assert_eq!(key.text, text);
    }
    Ok(())
}

#[test]
fn the_seeds_and_the_model_agree_with_the_format() {
    assert_eq!(KEY_LEN, 64);
    assert_eq!(PREFIX, "cgk_");
    for key in KEYS {
        assert_eq!(model(key), Some(&key[4..20]), "{key}");
        assert!(PresentedKey::parse(key).is_ok(), "{key}");
    }
}

proptest! {
    #![proptest_config(cases(2000))]

    /// A key changed in any byte (or several) parses only if it still has the format.
    #[test]
    fn a_changed_key_parses_only_with_the_format(m in Corpus::new(KEYS.iter().copied(), DICTIONARY).mutants()) {
        parses_as_the_model(&m.text())?;
    }

    /// Text almost shaped like a key (wrong case, lengths, separators, alphabets).
    #[test]
    fn text_near_the_format_parses_only_with_it(
        text in concat!(
            "(cgk_|CGK_|cgk)[0-9a-fA-Fg]{16}_[A-Za-z0-9_-]{43}",
            "|cgk_[0-9a-f]{14,18}[_-][A-Za-z0-9_=+/é-]{41,45}",
            "|cgk_[0-9a-f]{16}_[A-Za-z0-9_-]{43}.?",
        )
    ) {
        parses_as_the_model(&text)?;
    }

    /// Arbitrary text never panics, and parses only with the format.
    #[test]
    fn arbitrary_text_parses_only_with_the_format(text in ".{0,100}") {
        parses_as_the_model(&text)?;
    }
}
