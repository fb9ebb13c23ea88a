//! The file as a whole: the defaults of an empty file, unknown keys and wrong types named
//! by their path, every problem reported at once and each on one line, and the secret
//! files of every section checked alike.

use super::*;
use std::time::Duration;

#[test]
fn empty_file_gives_the_documented_defaults() {
    let d = dir();
    let c = parse("", d.path()).unwrap();
    assert_eq!(c.server.listen.to_string(), "0.0.0.0:8443");
    assert!(matches!(c.server.tls, TlsMode::Generated));
    assert_eq!(c.server.state_dir, d.path().join("state"));
    assert_eq!(c.metrics.listen.to_string(), "127.0.0.1:9464");
    assert_eq!(c.api.vendor, "ceph");
    assert_eq!(c.auth.token_ttl, Duration::from_secs(28800));
    assert_eq!(c.auth.issuer, "clustergate");
    assert_eq!(
        c.auth.lockout,
        Some(LockoutPolicy {
            attempts: 10,
            duration: Duration::from_secs(300)
        })
    );
    assert_eq!(c.users.file, d.path().join("users.toml"));
    assert!(c.users.users.is_empty());
    assert_eq!(
        c.auth.failed_logins_per_client,
        Some(crate::state::BucketRate {
            burst: 30,
            refill_ms: 2000
        })
    );
    assert_eq!(
        c.server.trusted_proxies,
        crate::client_addr::TrustedProxies::default()
    );
}

#[test]
fn unknown_keys_are_named_by_their_path() {
    let e = errors_of("[server]\nlisten = \"127.0.0.1:1\"\nlisten_port = 3\n[nope]\nx = 1\n");
    assert!(e.mentions("server.listen_port"), "{e}");
    assert!(e.mentions("nope"), "{e}");
}

#[test]
fn an_unknown_key_does_not_hide_the_other_problems() {
    let e = errors_of("[server]\nlisten = \"x\"\n[auth]\nlockout_attempts = 3\nlockout_seconds = 0\nbogus_key = 1\n");
    assert!(e.mentions("auth.bogus_key"), "{e}");
    assert!(e.mentions("auth.lockout_seconds"), "{e}");
    assert!(e.mentions("server.listen"), "{e}");
}

#[test]
fn a_wrong_type_names_its_section_and_the_syntax_error_its_line() {
    assert!(
        errors_of("[auth]\ntoken_ttl_seconds = \"eight hours\"").mentions("auth.token_ttl_seconds")
    );
    assert!(errors_of("[server]\ntls = \"yes\"").mentions("server.tls"));
    assert!(errors_of("server = 3").mentions("server"));
    assert!(errors_of("[auth\n").mentions("line 1"));
}

#[test]
fn every_problem_is_reported_at_once() {
    let e = errors_of("[server]\nlisten = \"x\"\n[auth]\ntoken_ttl_seconds = 0\nissuer = \"\"");
    assert!(e.mentions("server.listen"));
    assert!(e.mentions("auth.token_ttl_seconds"));
    assert!(e.mentions("auth.issuer"));
    assert_eq!(e.0.len(), 3);
}

// Found by fuzz_properties::config: a key of a nested table that is also a key of its
// section was blamed on the section's (valid) key.
#[test]
fn an_unknown_key_of_a_nested_table_is_not_blamed_on_its_section() {
    let e =
        errors_of("[state]\nbackend = \"redis\"\n[state.redis]\nbackend = 1\nurl = \"redis://x\"");
    assert!(
        !e.mentions("state.backend") && e.mentions("state.redis.backend"),
        "{e}"
    );
    let e = errors_of("[auth]\nusers_file = \"users.toml\"\nsigning_keys = [{ kid = \"a\", secret_file = \"k\", users_file = \"x\" }]");
    assert!(
        !e.mentions("auth.users_file") && e.mentions("auth.signing_keys[0].users_file"),
        "{e}"
    );
    // Unknown in both: the section's own is still named.
    let e = errors_of("[state]\nbogus = 1\n[state.redis]\nbogus = 2");
    assert!(
        e.mentions("state.bogus") && e.mentions("state.redis.bogus"),
        "{e}"
    );
}

// Found by fuzz_properties::config: an empty key was named "", and "a.b" as a path.
#[test]
fn unknown_keys_that_are_not_bare_are_named_quoted() {
    assert!(errors_of("\"\" = 1").mentions("\"\""));
    assert!(errors_of("[server]\n\"a.b\" = 1").mentions("server.\"a.b\""));
}

// Found by fuzz_properties::config: a newline in a key or a file name split a problem
// over two lines of the report.
#[test]
fn every_problem_is_reported_on_one_line() {
    for text in [
        "[server]\n\"a\\nb\" = 1",
        "\"a\\rb\" = 1",
        "[auth]\nsecret_file = \"a\\nb\"",
        "[upstream]\nservers = [\"http://127.0.0.1:1\"]\n[access]\nscopes_file = \"a\\nb\"",
    ] {
        let e = errors_of(text);
        assert_eq!(e.to_string().lines().count(), e.0.len(), "{e}");
    }
}

#[test]
fn secret_files_others_may_access_are_refused_with_the_fix() {
    use std::os::unix::fs::PermissionsExt;
    let d = dir();
    // The generated certificate, as an operator's: tls/cert.pem and tls/key.pem (0600).
    let generated = crate::tls::ensure_generated(d.path()).unwrap();
    let files = [
        ("upstream.pass", "stand-in"),
        ("redis.pass", "stand-in"),
        ("jwt.key", "0123456789abcdef0123456789abcdef"),
        ("redis.key", "0123456789abcdef0123456789abcdef"),
        ("accounts.key", "0123456789abcdef0123456789abcdef"),
    ];
    for (name, text) in files {
        crate::secrets::write_private(&d.path().join(name), text.as_bytes()).unwrap();
    }
    let text = "[server]\ntls = true\ncert_file = \"tls/cert.pem\"\nkey_file = \"tls/key.pem\"\n\
                [auth]\nsecret_file = \"jwt.key\"\n\
                [upstream]\nservers = [\"http://127.0.0.1:1\"]\naccounts_key_file = \"accounts.key\"\n\
                [state]\nbackend = \"redis\"\n\
                [state.redis]\nurl = \"redis://127.0.0.1:1\"\nusername = \"cg\"\npassword_file = \"redis.pass\"\n\
                encryption_keys = [{ kid = \"1\", secret_file = \"redis.key\" }]\n";
    parse(text, d.path()).unwrap_or_else(|e| panic!("owner-only files: {e}"));
    for (mode, name, key) in [
        (0o644, "upstream.pass", "upstream.password_file"),
        (0o640, "redis.pass", "state.redis.password_file"),
        (0o604, "jwt.key", "auth.secret_file"),
        (0o640, "accounts.key", "upstream.accounts_key_file"),
        (0o660, "tls/key.pem", "server.key_file"),
        (
            0o640,
            "redis.key",
            "state.redis.encryption_keys[0].secret_file",
        ),
    ] {
        let path = d.path().join(name);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let errors = parse(text, d.path()).unwrap_err();
        assert!(errors.mentions(key), "{key}: {errors}");
        assert_eq!(errors.0.len(), 1, "{errors}");
        let fix = format!("chmod 600 {}", path.display());
        assert!(errors.to_string().contains(&fix), "{errors}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    // The certificate is public.
    std::fs::set_permissions(&generated.cert, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(parse(text, d.path()).is_ok());
}
