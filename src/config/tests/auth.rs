//! `[api]` and `[auth]`: the vendor name, tokens, signing keys, lockout, the per-client
//! login limit and the source of the users.

use super::*;

#[test]
fn vendor_must_be_a_media_type_token() {
    assert!(errors_of("[api]\nvendor = \"Ceph Dash\"").mentions("api.vendor"));
}

#[test]
fn token_ttl_must_be_positive() {
    assert!(errors_of("[auth]\ntoken_ttl_seconds = 0").mentions("auth.token_ttl_seconds"));
}

#[test]
fn secret_file_must_exist_and_be_long_enough() {
    let d = dir();
    crate::secrets::write_private(&d.path().join("short"), "abc".as_bytes()).unwrap();
    let e = parse("[auth]\nsecret_file = \"short\"", d.path()).unwrap_err();
    assert!(e.mentions("auth.secret_file"), "{e}");
    let e = parse("[auth]\nsecret_file = \"missing\"", d.path()).unwrap_err();
    assert!(e.mentions("auth.secret_file"), "{e}");
}

#[test]
fn signing_keys_are_read_in_order_and_checked() {
    let d = dir();
    let secret = "0123456789abcdef0123456789abcdef";
    crate::secrets::write_private(&d.path().join("new.key"), secret.as_bytes()).unwrap();
    crate::secrets::write_private(&d.path().join("old.key"), secret.as_bytes()).unwrap();
    let keys = "[auth]\nsigning_keys = [{ kid = \"2026-11\", secret_file = \"new.key\" }, { kid = \"2026-10\", secret_file = \"old.key\" }]";
    let c = parse(keys, d.path()).unwrap();
    let kids: Vec<&str> = c.auth.signing_keys.iter().map(|k| k.kid.as_str()).collect();
    assert_eq!(kids, ["2026-11", "2026-10"], "the first signs");

    let twice = "[auth]\nsigning_keys = [{ kid = \"a\", secret_file = \"new.key\" }, { kid = \"a\", secret_file = \"old.key\" }]";
    assert!(parse(twice, d.path())
        .unwrap_err()
        .mentions("auth.signing_keys[1].kid"));
    let bad_kid = "[auth]\nsigning_keys = [{ kid = \"a b\", secret_file = \"new.key\" }]";
    assert!(parse(bad_kid, d.path())
        .unwrap_err()
        .mentions("auth.signing_keys[0].kid"));
    let missing = "[auth]\nsigning_keys = [{ kid = \"a\", secret_file = \"gone.key\" }]";
    assert!(parse(missing, d.path())
        .unwrap_err()
        .mentions("auth.signing_keys[0].secret_file"));
    let both = "[auth]\nsecret_file = \"new.key\"\nsigning_keys = [{ kid = \"a\", secret_file = \"old.key\" }]";
    assert!(parse(both, d.path())
        .unwrap_err()
        .mentions("auth.signing_keys"));
}

#[test]
fn a_single_secret_file_is_the_default_key() {
    let d = dir();
    crate::secrets::write_private(
        &d.path().join("jwt.key"),
        "0123456789abcdef0123456789abcdef".as_bytes(),
    )
    .unwrap();
    let c = parse("[auth]\nsecret_file = \"jwt.key\"", d.path()).unwrap();
    assert_eq!(c.auth.signing_keys.len(), 1);
    assert_eq!(c.auth.signing_keys[0].kid, "default");
}

#[test]
fn lockout_seconds_must_be_positive_when_lockout_is_on() {
    assert!(
        errors_of("[auth]\nlockout_attempts = 3\nlockout_seconds = 0")
            .mentions("auth.lockout_seconds")
    );
}

#[test]
fn lockout_attempts_zero_disables_lockout() {
    let d = dir();
    let c = parse(
        "[auth]\nlockout_attempts = 0\nlockout_seconds = 0",
        d.path(),
    )
    .unwrap();
    assert_eq!(c.auth.lockout, None);
}

#[test]
fn max_failed_logins_per_ip_per_minute_zero_disables_the_limit() {
    let d = dir();
    let c = parse("[auth]\nmax_failed_logins_per_ip_per_minute = 0", d.path()).unwrap();
    assert_eq!(c.auth.failed_logins_per_client, None);
}

#[test]
fn max_failed_logins_per_ip_per_minute_refills_evenly_rounding_the_refill_up() {
    let d = dir();
    let c = parse("[auth]\nmax_failed_logins_per_ip_per_minute = 7", d.path()).unwrap();
    assert_eq!(
        c.auth.failed_logins_per_client,
        Some(crate::state::BucketRate {
            burst: 7,
            refill_ms: 8572
        })
    );
}

#[test]
fn max_failed_logins_per_ip_per_minute_over_60000_is_refused() {
    let e = errors_of("[auth]\nmax_failed_logins_per_ip_per_minute = 60001");
    assert!(
        e.mentions("auth.max_failed_logins_per_ip_per_minute"),
        "{e}"
    );
    assert!(
        errors_of("[auth]\nmax_failed_logins_per_ip_per_minute = -1")
            .mentions("auth.max_failed_logins_per_ip_per_minute")
    );
}

#[test]
fn auth_source_is_local_or_dashboard() {
    let d = dir();
    let c = parse("", d.path()).unwrap();
    assert_eq!(c.auth.source, AuthSource::Local);
    let e = errors_of("[auth]\nsource = \"ldap\"");
    assert!(e.mentions("auth.source"), "{e}");
}

#[test]
fn the_dashboard_source_needs_an_upstream() {
    let e = errors_of("[auth]\nsource = \"dashboard\"");
    assert!(e.mentions("auth.source"), "{e}");
    assert!(e.to_string().contains("[upstream]"), "{e}");
}

#[test]
fn with_the_dashboard_source_the_lockout_defaults_below_the_dashboards_own() {
    let d = dir();
    let text = format!(
        "[auth]\nsource = \"dashboard\"\n{}",
        with_upstream(d.path(), "")
    );
    let c = parse(&text, d.path()).unwrap();
    assert_eq!(c.auth.lockout.map(|l| l.attempts), Some(5));
}

#[test]
fn with_the_dashboard_source_lockout_attempts_must_be_1_to_8() {
    for attempts in [0, 9, 10, 50] {
        let d = dir();
        let text = format!(
            "[auth]\nsource = \"dashboard\"\nlockout_attempts = {attempts}\n{}",
            with_upstream(d.path(), "")
        );
        let e = parse(&text, d.path()).unwrap_err();
        assert!(e.mentions("auth.lockout_attempts"), "{attempts}: {e}");
        assert!(e.to_string().contains("disables the account"), "{e}");
    }
    let d = dir();
    let text = format!(
        "[auth]\nsource = \"dashboard\"\nlockout_attempts = 8\n{}",
        with_upstream(d.path(), "")
    );
    assert_eq!(
        parse(&text, d.path())
            .unwrap()
            .auth
            .lockout
            .map(|l| l.attempts),
        Some(8)
    );
}

#[test]
fn the_dashboard_source_implies_each_users_own_identity() {
    let d = dir();
    let text = format!(
        "[auth]\nsource = \"dashboard\"\n{}",
        with_upstream(d.path(), "identity = \"service\"")
    );
    assert_eq!(
        parse(&text, d.path()).unwrap().identity(),
        UpstreamIdentity::User
    );
}

#[test]
fn with_the_dashboard_source_no_users_file_is_read() {
    let d = dir();
    std::fs::write(d.path().join("users.toml"), "this is not toml [").unwrap();
    let text = format!(
        "[auth]\nsource = \"dashboard\"\n{}",
        with_upstream(d.path(), "")
    );
    let c = parse(&text, d.path()).unwrap();
    assert!(c.users.users.is_empty());
    // The same file is read (and refused) with the users file as the source.
    let local = with_upstream(d.path(), "");
    let e = parse(&local, d.path()).unwrap_err();
    assert!(e.0[0].file.ends_with("users.toml"), "{e}");
}
