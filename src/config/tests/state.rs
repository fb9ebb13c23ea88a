//! `[state]`: the memory or Redis backend, Redis by url or sentinels, and its encryption
//! keys.

use super::*;
use crate::state::{RedisTarget, StateConfig};
use std::os::unix::fs::PermissionsExt;

#[test]
fn the_state_section_is_checked() {
    let d = dir();
    let c = parse("", d.path()).unwrap();
    assert!(matches!(c.state, StateConfig::Memory));
    let key = d.path().join("redis.key");
    std::fs::write(&key, "0123456789abcdef0123456789abcdef").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let redis = parse(
        "[state]\nbackend = \"redis\"\n[state.redis]\nurl = \"redis://127.0.0.1:6379\"\nencryption_keys = [{ kid = \"2\", secret_file = \"redis.key\" }, { kid = \"1\", secret_file = \"redis.key\" }]",
        d.path(),
    )
    .unwrap();
    let StateConfig::Redis(settings) = redis.state else {
        panic!("not redis")
    };
    let kids: Vec<&str> = settings
        .encryption_keys
        .iter()
        .map(|k| k.kid.as_str())
        .collect();
    assert_eq!(kids, ["2", "1"], "in the listed order: the first seals");
    let cases = [
        ("[state]\nbackend = \"etcd\"", "state.backend"),
        ("[state]\nbackend = \"redis\"", "state.redis"),
        ("[state]\nbackend = \"redis\"\n[state.redis]\nurl = \"http://x\"", "state.redis.url"),
        ("[state]\nbackend = \"redis\"\n[state.redis]\nurl = \"redis://u:p@x:6379\"", "state.redis.url"),
        ("[state]\nbackend = \"redis\"\n[state.redis]\nurl = \"redis://x\"\nusername = \"gw\"", "state.redis.password_file"),
        ("[state]\nbackend = \"redis\"\n[state.redis]\nurl = \"redis://x\"\ncommand_timeout_ms = 0", "state.redis.command_timeout_ms"),
        ("[state]\nbackend = \"redis\"\n[state.redis]\nurl = \"redis://x\"\nca_file = \"ca.pem\"", "state.redis.ca_file"),
    ];
    for (text, key) in cases {
        assert!(parse(text, d.path()).unwrap_err().mentions(key), "{text}");
    }
}

/// Issue 27: `[state.redis]` names its Redis by `url` or by `sentinels` + `master_name`,
/// exactly one; `min_replicas` defaults to 1 with sentinels, 0 with a url.
#[test]
fn redis_is_a_url_or_sentinels_with_a_master_name() {
    let d = dir();
    let key = d.path().join("redis.key");
    std::fs::write(&key, "0123456789abcdef0123456789abcdef").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(d.path().join("sentinel.pass"), "pw").unwrap();
    std::fs::set_permissions(
        d.path().join("sentinel.pass"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let redis = |lines: &str| {
        format!("[state]\nbackend = \"redis\"\n[state.redis]\nencryption_keys = [{{ kid = \"1\", secret_file = \"redis.key\" }}]\n{lines}")
    };
    let settings = |lines: &str| match parse(&redis(lines), d.path()).unwrap().state {
        StateConfig::Redis(settings) => settings,
        StateConfig::Memory => panic!("not redis"),
    };
    let sentinels = settings("sentinels = [\"10.0.0.1:26379\", \"[2001:db8::1]:26379\", \"redis-s3:26379\"]\nmaster_name = \"cg\"\nsentinel_username = \"s\"\nsentinel_password_file = \"sentinel.pass\"");
    let RedisTarget::Sentinels(found) = &sentinels.target else {
        panic!("not sentinels")
    };
    assert_eq!(
        found.addresses,
        [
            ("10.0.0.1".to_string(), 26379),
            ("2001:db8::1".to_string(), 26379),
            ("redis-s3".to_string(), 26379)
        ]
    );
    assert_eq!(found.master_name, "cg");
    assert!(found.password.is_some());
    assert_eq!(sentinels.min_replicas, 1);
    assert_eq!(sentinels.replication_timeout.as_millis(), 500);
    assert_eq!(settings("url = \"redis://x:6379\"").min_replicas, 0);
    let chosen =
        settings("url = \"redis://x:6379\"\nmin_replicas = 2\nreplication_timeout_ms = 900");
    assert_eq!(chosen.min_replicas, 2);
    assert_eq!(chosen.replication_timeout.as_millis(), 900);
    let cases = [
        (
            "url = \"redis://x:6379\"\nsentinels = [\"x:26379\"]\nmaster_name = \"cg\"",
            "state.redis.sentinels",
        ),
        ("", "state.redis.url"),
        ("sentinels = [\"x:26379\"]", "state.redis.master_name"),
        (
            "sentinels = [\"x:26379\"]\nmaster_name = \"\"",
            "state.redis.master_name",
        ),
        (
            "sentinels = [\"x\"]\nmaster_name = \"cg\"",
            "state.redis.sentinels[0]",
        ),
        (
            "sentinels = [\"x:26379\", \"x:0\"]\nmaster_name = \"cg\"",
            "state.redis.sentinels[1]",
        ),
        (
            "sentinels = [\"x:26379\", \"x:26379\"]\nmaster_name = \"cg\"",
            "state.redis.sentinels[1]",
        ),
        (
            "sentinels = [\"redis://x:26379\"]\nmaster_name = \"cg\"",
            "state.redis.sentinels[0]",
        ),
        (
            "url = \"redis://x:6379\"\nmaster_name = \"cg\"",
            "state.redis.master_name",
        ),
        ("url = \"redis://x:6379\"\ntls = true", "state.redis.tls"),
        (
            "sentinels = [\"x:26379\"]\nmaster_name = \"cg\"\nsentinel_username = \"s\"",
            "state.redis.sentinel_password_file",
        ),
        (
            "sentinels = [\"x:26379\"]\nmaster_name = \"cg\"\nca_file = \"ca.pem\"",
            "state.redis.ca_file",
        ),
        (
            "url = \"redis://x:6379\"\nreplication_timeout_ms = 0",
            "state.redis.replication_timeout_ms",
        ),
        (
            "url = \"redis://x:6379\"\nmin_replicas = 17",
            "state.redis.min_replicas",
        ),
    ];
    for (lines, key) in cases {
        let text = redis(lines);
        assert!(parse(&text, d.path()).unwrap_err().mentions(key), "{text}");
    }
}

/// Item 10: the key files that seal tokens in Redis are required with the redis backend
/// (every gateway must read the same ones) and checked like secrets.
#[test]
fn redis_encryption_keys_are_required_and_checked() {
    let d = dir();
    let write = |name: &str, text: &str, mode: u32| {
        let path = d.path().join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    write("good.key", "0123456789abcdef0123456789abcdef", 0o600);
    write("short.key", "0123456789", 0o600);
    write("shared.key", "0123456789abcdef0123456789abcdef", 0o640);
    let with = |keys: &str| {
        format!("[state]\nbackend = \"redis\"\n[state.redis]\nurl = \"redis://x\"\nencryption_keys = {keys}")
    };
    let key = "state.redis.encryption_keys";
    let cases = [
        ("[]".to_string(), key.to_string(), "at least one key"),
        (
            r#"[{ kid = "a b", secret_file = "good.key" }]"#.into(),
            format!("{key}[0].kid"),
            "letters",
        ),
        (
            r#"[{ kid = "a", secret_file = "good.key" }, { kid = "a", secret_file = "good.key" }]"#
                .into(),
            format!("{key}[1].kid"),
            "twice",
        ),
        (
            r#"[{ kid = "a", secret_file = "absent.key" }]"#.into(),
            format!("{key}[0].secret_file"),
            "absent.key",
        ),
        (
            r#"[{ kid = "a", secret_file = "short.key" }]"#.into(),
            format!("{key}[0].secret_file"),
            "at least 32",
        ),
        (
            r#"[{ kid = "a", secret_file = "shared.key" }]"#.into(),
            format!("{key}[0].secret_file"),
            "chmod 600",
        ),
    ];
    for (keys, key, says) in cases {
        let e = parse(&with(&keys), d.path()).unwrap_err();
        assert!(
            e.mentions(&key) && e.to_string().contains(says),
            "{keys}: {e}"
        );
    }
    // Without the list at all.
    let e = parse(
        "[state]\nbackend = \"redis\"\n[state.redis]\nurl = \"redis://x\"",
        d.path(),
    )
    .unwrap_err();
    assert!(e.mentions(key), "{e}");
    // The memory backend needs none.
    assert!(parse("[state]\nbackend = \"memory\"", d.path()).is_ok());
}
