use super::*;

#[test]
fn a_generated_key_parses_to_its_id_and_digest() {
    let key = NewKey::generate();
    assert_eq!(key.text.len(), KEY_LEN);
    let presented = PresentedKey::parse(&key.text).unwrap();
    assert_eq!(presented.id, key.id);
    assert_eq!(key.digest().len(), 64);
    assert_ne!(NewKey::generate().text, key.text);
}

#[test]
fn malformed_keys_are_refused_with_the_part_that_is_wrong() {
    let good = NewKey::generate().text;
    let swap = |at: usize, with: &str| format!("{}{with}{}", &good[..at], &good[at + 1..]);
    let id_at = PREFIX.len();
    let secret_at = PREFIX.len() + ID_LEN + 1;
    let cases = [
        ("", KeyFormatError::Prefix),
        ("cgk", KeyFormatError::Prefix),
        ("Bearer", KeyFormatError::Prefix),
        ("cgk_", KeyFormatError::Length),
        (&good[..good.len() - 1], KeyFormatError::Length),
        (&format!("{good}a"), KeyFormatError::Length),
        (&swap(id_at, "G"), KeyFormatError::Id),
        (&swap(id_at, "A"), KeyFormatError::Id),
        (&swap(id_at + ID_LEN, "-"), KeyFormatError::Secret),
        (&swap(secret_at, "="), KeyFormatError::Secret),
        (&swap(secret_at + 3, "é")[..KEY_LEN], KeyFormatError::Secret),
    ];
    for (text, error) in cases {
        assert_eq!(PresentedKey::parse(text), Err(error), "{text}");
    }
}

#[test]
fn a_key_limited_to_networks_admits_only_their_addresses() {
    let mut record = KeyRecord {
        id: "0123456789abcdef".into(),
        name: "ci".into(),
        owner: "ops".into(),
        created_by: "ops".into(),
        roles: vec!["read-only".into()],
        created_at: 1,
        expires_at: 2,
        networks: Vec::new(),
        digest: String::new(),
    };
    let ip = |text: &str| Some(text.parse().unwrap());
    assert!(record.admits(None));
    assert!(record.admits(ip("192.0.2.7")));
    record.networks = vec!["10.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()];
    assert!(record.admits(ip("10.1.2.3")));
    assert!(record.admits(ip("::1")));
    assert!(!record.admits(ip("192.0.2.7")));
    assert!(!record.admits(None));
}

/// The per-request check against the plain one: the key's SHA-256 in hex, as stored.
#[test]
fn a_key_matches_exactly_the_record_of_its_digest() {
    let record = |digest: String| KeyRecord {
        id: String::new(),
        name: String::new(),
        owner: String::new(),
        created_by: String::new(),
        roles: Vec::new(),
        created_at: 0,
        expires_at: 0,
        networks: Vec::new(),
        digest,
    };
    for _ in 0..200 {
        let key = NewKey::generate();
        let other = NewKey::generate();
        let presented = PresentedKey::parse(&key.text).unwrap();
        let plain = |text: &str| {
            let bytes = Sha256::digest(text.as_bytes());
            bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        assert_eq!(key.digest(), plain(&key.text));
        let own = RecordDigest::of(&record(plain(&key.text))).unwrap();
        let others = RecordDigest::of(&record(plain(&other.text))).unwrap();
        assert!(presented.matches(&own));
        assert!(!presented.matches(&others));
    }
    for bad in ["", "00", &"g".repeat(64), &"0".repeat(63), &"0".repeat(65)] {
        assert_eq!(RecordDigest::of(&record(bad.to_string())), None, "{bad}");
    }
}
