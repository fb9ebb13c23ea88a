use super::*;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::state::{RedisTarget, StateConfig};
use crate::users::Role;

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn parse(text: &str, dir: &Path) -> Result<Config, ConfigErrors> {
    Config::from_toml_str(text, &dir.join("clustergate.toml"), dir)
}

fn errors_of(text: &str) -> ConfigErrors {
    let d = dir();
    parse(text, d.path()).unwrap_err()
}

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
fn bad_listen_address_names_the_key() {
    assert!(errors_of("[server]\nlisten = \"8443\"").mentions("server.listen"));
}

#[test]
fn metrics_listen_must_differ_from_server_listen() {
    let e =
        errors_of("[server]\nlisten = \"0.0.0.0:9000\"\n[metrics]\nlisten = \"127.0.0.1:9000\"");
    assert!(e.mentions("metrics.listen"), "{e}");
}

#[test]
fn both_listeners_may_ask_for_port_0() {
    let d = dir();
    let text = "[server]\nlisten = \"127.0.0.1:0\"\n[metrics]\nlisten = \"127.0.0.1:0\"";
    let c = parse(text, d.path()).unwrap();
    assert_eq!(c.server.listen.port(), 0);
    assert_eq!(c.metrics.listen.port(), 0);
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
fn token_ttl_must_be_positive() {
    assert!(errors_of("[auth]\ntoken_ttl_seconds = 0").mentions("auth.token_ttl_seconds"));
}

#[test]
fn vendor_must_be_a_media_type_token() {
    assert!(errors_of("[api]\nvendor = \"Ceph Dash\"").mentions("api.vendor"));
}

#[test]
fn cert_without_key_is_refused() {
    assert!(errors_of("[server]\ncert_file = \"c.pem\"").mentions("server.key_file"));
}

#[test]
fn unreadable_certificate_files_are_refused() {
    let e = errors_of("[server]\ncert_file = \"c.pem\"\nkey_file = \"k.pem\"");
    assert!(e.mentions("server.cert_file"), "{e}");
}

#[test]
fn tls_off_ignores_certificate_settings() {
    let d = dir();
    let c = parse("[server]\ntls = false", d.path()).unwrap();
    assert!(matches!(c.server.tls, TlsMode::Off));
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
fn every_problem_is_reported_at_once() {
    let e = errors_of("[server]\nlisten = \"x\"\n[auth]\ntoken_ttl_seconds = 0\nissuer = \"\"");
    assert!(e.mentions("server.listen"));
    assert!(e.mentions("auth.token_ttl_seconds"));
    assert!(e.mentions("auth.issuer"));
    assert_eq!(e.0.len(), 3);
}

fn users_errors(users: &str) -> ConfigErrors {
    let d = dir();
    std::fs::write(d.path().join("users.toml"), users).unwrap();
    parse("", d.path()).unwrap_err()
}

const ARGON: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$QUVFUVRhR0hVZ3NHbkpxc2xHUjBNeTVZcFJOc1RzM2E";

#[test]
fn users_file_entries_are_loaded() {
    let d = dir();
    let text = format!("[[users]]\nusername = \"a\"\npassword_hash = \"{ARGON}\"\nroles = [\"read-only\", \"pool-manager\"]\n\n[[users]]\nusername = \"b\"\npassword_hash = \"{ARGON}\"\nenabled = false\n");
    std::fs::write(d.path().join("users.toml"), text).unwrap();
    let c = parse("", d.path()).unwrap();
    assert_eq!(c.users.users.len(), 2);
    assert_eq!(
        c.users.users[0].roles,
        vec![Role::ReadOnly, Role::PoolManager]
    );
    assert!(c.users.users[0].enabled);
    assert!(!c.users.users[1].enabled);
}

#[test]
fn unknown_role_names_the_file_and_user() {
    let e = users_errors(&format!(
        "[[users]]\nusername = \"bob\"\npassword_hash = \"{ARGON}\"\nroles = [\"root\"]\n"
    ));
    let text = e.to_string();
    assert!(
        text.contains("users.toml") && text.contains("\"bob\"") && text.contains("root"),
        "{text}"
    );
}

#[test]
fn usernames_starting_with_the_single_sign_on_prefix_are_refused() {
    let e = users_errors(&format!(
        "[[users]]\nusername = \"oidc:admin\"\npassword_hash = \"{ARGON}\"\n"
    ));
    let text = e.to_string();
    assert!(
        text.contains("\"oidc:admin\"") && text.contains("kept for single sign-on users"),
        "{text}"
    );
}

#[test]
fn duplicate_username_is_refused() {
    let entry = format!("[[users]]\nusername = \"bob\"\npassword_hash = \"{ARGON}\"\n");
    let e = users_errors(&format!("{entry}{entry}"));
    assert!(e.to_string().contains("duplicate username"), "{e}");
}

#[test]
fn bad_hash_is_refused() {
    let e = users_errors("[[users]]\nusername = \"bob\"\npassword_hash = \"plain\"\n");
    assert!(e.mentions("users[0] (\"bob\").password_hash"), "{e}");
}

#[test]
fn bad_users_toml_names_the_users_file() {
    let e = users_errors("[[users]\n");
    assert!(e.0[0].file.ends_with("users.toml"), "{e}");
}

/// The shipped configuration, with a stand-in service password.
fn shipped() -> Config {
    super::shipped_for_tests(dir().path())
}

#[test]
fn the_shipped_configuration_loads_every_built_in_table() {
    let c = shipped();
    assert_eq!(c.access.scopes_file, None);
    let versions: Vec<_> = c
        .access
        .tables
        .iter()
        .map(|t| t.ceph_version.as_deref())
        .collect();
    assert_eq!(versions, [Some("16.2.15"), Some("18.2.7"), Some("20.2.4")]);
    let sizes: Vec<_> = c.access.tables.iter().map(|t| t.operations.len()).collect();
    assert_eq!(sizes, [274, 384, 539]);
    for table in &c.access.tables {
        assert_eq!(table.operations.iter().filter(|o| o.open).count(), 4);
    }
}

/// With the upstream and access sections given, a stand-in service password in `d`.
fn with_access(d: &tempfile::TempDir, access: &str, extra: &str) -> Result<Config, ConfigErrors> {
    crate::secrets::write_private(&d.path().join("upstream.pass"), "stand-in".as_bytes()).unwrap();
    let text = format!("{extra}[upstream]\nservers = [\"http://127.0.0.1:1\"]\n[access]\n{access}");
    parse(&text, d.path())
}

#[test]
fn a_release_pins_its_built_in_table() {
    let d = dir();
    let c = with_access(&d, "release = \"18.2\"\n", "").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.access.tables.len(), 1);
    assert_eq!(c.access.tables[0].ceph_version.as_deref(), Some("18.2.7"));
    let e = with_access(&d, "release = \"19.2\"\n", "").unwrap_err();
    assert!(e.mentions("access.release"), "{e}");
    assert!(e.0[0].message.contains("16.2, 18.2, 20.2"), "{e}");
    let e = with_access(&d, "release = \"18.2\"\nscopes_file = \"x.toml\"\n", "").unwrap_err();
    assert!(e.mentions("access.release"), "{e}");
}

/// `with_access` with `upstream.identity = identity`.
fn with_identity(
    d: &tempfile::TempDir,
    identity: &str,
    access: &str,
) -> Result<Config, ConfigErrors> {
    crate::secrets::write_private(&d.path().join("upstream.pass"), "stand-in".as_bytes()).unwrap();
    let text = format!("[upstream]\nservers = [\"http://127.0.0.1:1\"]\nidentity = \"{identity}\"\n[access]\n{access}");
    parse(&text, d.path())
}

#[test]
fn forwarding_unknown_operations_needs_the_dashboard_to_see_the_user() {
    let d = dir();
    let e = with_access(&d, "unknown_operations = \"maybe\"\n", "").unwrap_err();
    assert!(e.mentions("access.unknown_operations"), "{e}");
    let e = with_identity(&d, "service", "unknown_operations = \"forward\"\n").unwrap_err();
    assert!(e.mentions("access.unknown_operations"), "{e}");
    let c = with_access(
        &d,
        "unknown_operations = \"forward\"\n",
        "[auth]\nsource = \"dashboard\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        c.access.unknown_operations,
        super::UnknownOperations::Forward
    );
}

/// Issue 32, item 3: where the dashboard sees the user or their roles, operations the
/// tables do not know are the dashboard's to decide unless the file says otherwise; with
/// the service account the gateway refuses them.
#[test]
fn unknown_operations_are_forwarded_by_default_where_the_dashboard_sees_the_user() {
    use super::UnknownOperations::{Forward, Refuse};
    let d = dir();
    let unknown = |identity: &str, access: &str| {
        with_identity(&d, identity, access)
            .unwrap_or_else(|e| panic!("{e}"))
            .access
            .unknown_operations
    };
    assert_eq!(unknown("roles", ""), Forward);
    assert_eq!(unknown("user", ""), Forward);
    assert_eq!(unknown("service", ""), Refuse);
    assert_eq!(
        unknown("roles", "unknown_operations = \"refuse\"\n"),
        Refuse
    );
    let dashboard =
        with_access(&d, "", "[auth]\nsource = \"dashboard\"\n").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(dashboard.access.unknown_operations, Forward);
}

#[test]
fn a_bad_operation_version_is_named() {
    let d = dir();
    std::fs::write(
        d.path().join("other.toml"),
        "[[operation]]\nmethod = \"GET\"\npath = \"/api/osd\"\nversion = \"1\"\n",
    )
    .unwrap();
    let e = with_access(
        &d,
        "scopes_file = \"other.toml\"\nopen_operations = []\nclosed_operations = []\n",
        "",
    )
    .unwrap_err();
    assert!(e.0[0].message.contains("X.Y"), "{e}");
}

#[test]
fn a_scopes_file_replaces_the_built_in_table() {
    let d = dir();
    crate::secrets::write_private(&d.path().join("upstream.pass"), "stand-in".as_bytes()).unwrap();
    std::fs::write(
        d.path().join("other.toml"),
        "ceph_version = \"99.0.0\"\n[[operation]]\nmethod = \"GET\"\npath = \"/api/health/minimal\"\n",
    )
    .unwrap();
    let text = "[upstream]\nservers = [\"http://127.0.0.1:1\"]\n[access]\nscopes_file = \"other.toml\"\nopen_operations = []\nclosed_operations = []\n";
    let c = parse(text, d.path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.access.scopes_file, Some(d.path().join("other.toml")));
    assert_eq!(c.access.tables.len(), 1);
    assert_eq!(c.access.tables[0].ceph_version.as_deref(), Some("99.0.0"));
    assert_eq!(c.access.tables[0].operations.len(), 1);
    let missing = text.replace("other.toml", "missing.toml");
    let e = parse(&missing, d.path()).unwrap_err();
    assert!(e.0.iter().any(|e| e.message.contains("built-in")), "{e}");
}

#[test]
fn open_operations_must_be_public_in_the_table() {
    let d = dir();
    crate::secrets::write_private(&d.path().join("upstream.pass"), "stand-in".as_bytes()).unwrap();
    let scopes = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/scopes/16.2.toml");
    let text = format!(
        "[upstream]\nservers = [\"http://127.0.0.1:1\"]\n[access]\nscopes_file = {scopes:?}\nopen_operations = [\"GET /api/pool\"]\n"
    );
    assert!(parse(&text, d.path())
        .unwrap_err()
        .mentions("access.open_operations[0]"));
}

#[test]
fn every_upstream_timeout_is_derived_once_from_the_two_settings() {
    let t = Timeouts::derive(Duration::from_millis(2000), Duration::from_secs(450));
    assert_eq!(t.connect, Duration::from_secs(2));
    assert_eq!(t.read, Duration::from_secs(450));
    assert_eq!(t.write, Duration::from_secs(10));
    assert_eq!(t.health_probe, Duration::from_secs(4));
    assert_eq!(t.standby_probe, Duration::from_secs(2));
    assert_eq!(t.login_answer, Duration::from_secs(10));
    assert_eq!(t.login, Duration::from_secs(10));
    assert_eq!(t.docs_fetch, Duration::from_secs(20));
    // Short connect timeouts keep their floors.
    let short = Timeouts::derive(Duration::from_millis(100), Duration::from_secs(1));
    assert_eq!(short.health_probe, Duration::from_secs(1));
    assert_eq!(short.standby_probe, Duration::from_secs(1));
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

#[test]
fn client_limits_have_documented_defaults() {
    let d = dir();
    let c = parse("", d.path()).unwrap();
    assert_eq!(
        c.server.clients,
        ClientLimits {
            max_header_bytes: 32 * 1024,
            max_header_count: 100,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(10),
            min_send_rate: Some(16 * 1024),
            keepalive_timeout: Duration::from_secs(60),
            max_connections_per_ip: Some(64),
        }
    );
    let c = parse("[server]\nmin_send_bytes_per_second = 0\n", d.path()).unwrap();
    assert_eq!(c.server.clients.min_send_rate, None);
    let c = parse("[server]\nmax_connections_per_ip = 50\n", d.path()).unwrap();
    assert_eq!(c.server.clients.max_connections_per_ip, Some(50));
    let c = parse("[server]\nmax_connections_per_ip = 0\n", d.path()).unwrap();
    assert_eq!(c.server.clients.max_connections_per_ip, None, "0: no cap");
}

#[test]
fn bodies_without_a_token_are_small_and_the_budget_is_derived_unless_set() {
    let d = dir();
    let c = parse(&with_upstream(d.path(), ""), d.path()).unwrap();
    let upstream = c.upstream.unwrap();
    assert_eq!(upstream.max_body_bytes, 10 * 1024 * 1024);
    assert_eq!(upstream.max_open_body_bytes, 16 * 1024);
    assert_eq!(c.server.body_budget, None, "derived at start");
    let text = format!(
        "[server]\nbody_budget_bytes = 33554432\n{}",
        with_upstream(d.path(), "max_open_body_bytes = 4096\n")
    );
    let c = parse(&text, d.path()).unwrap();
    assert_eq!(c.server.body_budget, Some(32 * 1024 * 1024));
    assert_eq!(c.upstream.unwrap().max_open_body_bytes, 4096);
    // Never more than a token holder may send.
    let text = with_upstream(d.path(), "max_body_bytes = 1000\n");
    let c = parse(&text, d.path()).unwrap();
    assert_eq!(c.upstream.unwrap().max_open_body_bytes, 1000);
}

#[test]
fn body_limits_and_the_budget_are_checked_against_each_other() {
    let d = dir();
    for (server, upstream, key) in [
        ("body_budget_bytes = 1000", "", "server.body_budget_bytes"),
        (
            "body_budget_bytes = 1048576",
            "",
            "server.body_budget_bytes",
        ),
        (
            "",
            "max_open_body_bytes = 0",
            "upstream.max_open_body_bytes",
        ),
    ] {
        let text = format!(
            "[server]\n{server}\n{}",
            with_upstream(d.path(), &format!("{upstream}\n"))
        );
        let e = parse(&text, d.path()).unwrap_err();
        assert!(e.mentions(key), "{server} {upstream}: {e}");
    }
    // Without [upstream], only the auth endpoints' bodies need room.
    assert!(parse("[server]\nbody_budget_bytes = 65536\n", d.path()).is_ok());
}

#[test]
fn work_stealing_is_off_unless_set_and_must_be_a_boolean() {
    let d = dir();
    assert!(!parse("", d.path()).unwrap().server.work_stealing);
    let c = parse("[server]\nwork_stealing = true\n", d.path()).unwrap();
    assert!(c.server.work_stealing);
    assert!(errors_of("[server]\nwork_stealing = \"yes\"").mentions("server.work_stealing"));
}

#[test]
fn client_limits_are_bounded_by_what_pingora_parses() {
    for (line, key) in [
        ("max_header_bytes = 100", "server.max_header_bytes"),
        ("max_header_bytes = 2000000", "server.max_header_bytes"),
        ("max_header_count = 0", "server.max_header_count"),
        ("max_header_count = 257", "server.max_header_count"),
        ("header_timeout_ms = 10", "server.header_timeout_ms"),
        ("body_timeout_ms = 10", "server.body_timeout_ms"),
        ("body_timeout_ms = 600001", "server.body_timeout_ms"),
        ("keepalive_timeout_s = 0", "server.keepalive_timeout_s"),
        ("write_timeout_ms = 10", "server.write_timeout_ms"),
        ("write_timeout_ms = 600001", "server.write_timeout_ms"),
        (
            "min_send_bytes_per_second = 2000000000",
            "server.min_send_bytes_per_second",
        ),
    ] {
        assert!(
            errors_of(&format!("[server]\n{line}\n")).mentions(key),
            "{line}"
        );
    }
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
fn trusted_proxies_take_cidrs_and_addresses() {
    let d = dir();
    let c = parse(
        "[server]\ntrusted_proxies = [\"10.0.0.0/8\", \"192.0.2.5\", \"2001:db8::/32\"]",
        d.path(),
    )
    .unwrap();
    let nets = ["10.0.0.0/8", "192.0.2.5/32", "2001:db8::/32"];
    assert_eq!(
        c.server.trusted_proxies,
        crate::client_addr::TrustedProxies::new(nets.iter().map(|n| n.parse().unwrap()).collect())
    );
}

#[test]
fn an_invalid_trusted_proxy_is_named_by_its_index() {
    let e =
        errors_of("[server]\ntrusted_proxies = [\"10.0.0.0/8\", \"10.0.0.0/33\", \"proxy.local\"]");
    assert!(e.mentions("server.trusted_proxies[1]"), "{e}");
    assert!(e.mentions("server.trusted_proxies[2]"), "{e}");
    assert!(!e.mentions("server.trusted_proxies[0]"), "{e}");
}

#[test]
fn a_trusted_proxy_with_bits_after_its_prefix_is_refused_with_the_fix() {
    let e = errors_of("[server]\ntrusted_proxies = [\"10.1.2.3/8\"]");
    assert!(e.mentions("server.trusted_proxies[0]"), "{e}");
    assert!(e.to_string().contains("\"10.0.0.0/8\""), "{e}");
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

// Found by fuzz_properties::config: an unreadable key file was reported as
// server.cert_file, with pingora's "Certificate in pem file could not be read".
#[test]
fn an_unreadable_key_file_is_named_by_its_key() {
    let d = dir();
    crate::tls::ensure_generated(d.path()).unwrap();
    for key_file in ["missing.pem", "", "tls"] {
        let text = format!("[server]\ncert_file = \"tls/cert.pem\"\nkey_file = {key_file:?}");
        let e = parse(&text, d.path()).unwrap_err();
        assert!(
            e.mentions("server.key_file") && !e.mentions("server.cert_file"),
            "{e}"
        );
    }
}

#[test]
fn the_log_section_has_documented_defaults() {
    let d = dir();
    let c = parse("", d.path()).unwrap();
    assert_eq!(
        c.log,
        LogConfig {
            format: LogFormat::Text,
            level: "info".into(),
            audit_file: None,
        }
    );
    let c = parse(
        "[log]\nformat = \"json\"\nlevel = \"warn,clustergate::access=info\"\naudit_file = \"audit.log\"",
        d.path(),
    )
    .unwrap();
    assert_eq!(c.log.format, LogFormat::Json);
    assert_eq!(c.log.level, "warn,clustergate::access=info");
    assert_eq!(c.log.audit_file, Some(d.path().join("audit.log")));
}

#[test]
fn log_format_is_text_or_json() {
    assert!(errors_of("[log]\nformat = \"logfmt\"").mentions("log.format"));
}

#[test]
fn log_level_must_parse_as_a_filter() {
    for level in ["loud", "inf", "info,clustergate=[", "clustergate=loud", ""] {
        assert!(
            errors_of(&format!("[log]\nlevel = {level:?}")).mentions("log.level"),
            "{level:?}"
        );
    }
    let d = dir();
    for level in [
        "WARN",
        "off",
        "warn,clustergate::access=info",
        "info,pingora_core=warn",
    ] {
        assert!(
            parse(&format!("[log]\nlevel = {level:?}"), d.path()).is_ok(),
            "{level:?}"
        );
    }
}

#[test]
fn the_audit_file_must_be_a_file_in_a_folder_that_exists() {
    assert!(
        errors_of("[log]\naudit_file = \"no-such-folder/audit.log\"").mentions("log.audit_file")
    );
    assert!(errors_of("[log]\naudit_file = \".\"").mentions("log.audit_file"));
}

#[test]
fn in_flight_limits_default_below_the_dashboards_threads_and_are_bounded() {
    let d = dir();
    let c = parse(&with_upstream(d.path(), ""), d.path()).unwrap();
    assert_eq!(
        c.upstream.unwrap().in_flight,
        InFlightLimits {
            max: 8,
            queued: 64,
            wait: Duration::from_secs(5),
        }
    );
    for (line, key) in [
        ("max_in_flight = 0", "upstream.max_in_flight"),
        ("max_queued = 100001", "upstream.max_queued"),
        ("queue_timeout_ms = 0", "upstream.queue_timeout_ms"),
    ] {
        let e = parse(&with_upstream(d.path(), line), d.path()).unwrap_err();
        assert!(e.mentions(key), "{line}: {e}");
    }
}

#[test]
fn refused_service_logins_back_off_doubling_to_a_bound() {
    let d = dir();
    let c = parse(&with_upstream(d.path(), ""), d.path()).unwrap();
    let backoff = c.upstream.unwrap().login_backoff;
    let waits: Vec<u64> = [1, 2, 3, 7, 8, 100]
        .map(|refusals| backoff.after(refusals).as_secs())
        .to_vec();
    assert_eq!(waits, [10, 20, 40, 600, 600, 600]);
    for (line, key) in [
        ("login_backoff_min_ms = 0", "upstream.login_backoff_min_ms"),
        (
            "login_backoff_min_ms = 5000\nlogin_backoff_max_ms = 4000",
            "upstream.login_backoff_max_ms",
        ),
    ] {
        let e = parse(&with_upstream(d.path(), line), d.path()).unwrap_err();
        assert!(e.mentions(key), "{line}: {e}");
    }
}

#[test]
fn answer_buffers_default_above_the_largest_answer_and_are_bounded() {
    let d = dir();
    let c = parse(&with_upstream(d.path(), ""), d.path()).unwrap();
    assert_eq!(
        c.upstream.unwrap().answer_buffers,
        AnswerBufferLimits {
            per_answer: 8 * 1024 * 1024,
            total: 64 * 1024 * 1024,
        }
    );
    let c = parse(
        &with_upstream(
            d.path(),
            "answer_buffer_bytes = 0\nanswer_buffers_total_bytes = 0",
        ),
        d.path(),
    )
    .unwrap();
    assert_eq!(c.upstream.unwrap().answer_buffers.total, 0);
    for (line, key) in [
        (
            "answer_buffer_bytes = 100000000",
            "upstream.answer_buffer_bytes",
        ),
        (
            "answer_buffers_total_bytes = 10000000000",
            "upstream.answer_buffers_total_bytes",
        ),
    ] {
        let e = parse(&with_upstream(d.path(), line), d.path()).unwrap_err();
        assert!(e.mentions(key), "{line}: {e}");
    }
}

/// `[upstream]` with one dashboard and its password file written into `d`.
fn with_upstream(d: &Path, extra: &str) -> String {
    crate::secrets::write_private(&d.join("upstream.pass"), "service-password\n".as_bytes())
        .unwrap();
    format!("[upstream]\nservers = [\"http://127.0.0.1:8080\"]\n{extra}")
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
fn upstream_identity_is_roles_by_default_or_service_or_user() {
    let d = dir();
    let c = parse(&with_upstream(d.path(), ""), d.path()).unwrap();
    assert_eq!(c.identity(), UpstreamIdentity::Roles);
    let c = parse(&with_upstream(d.path(), "identity = \"service\""), d.path()).unwrap();
    assert_eq!(c.identity(), UpstreamIdentity::Service);
    let c = parse(&with_upstream(d.path(), "identity = \"user\""), d.path()).unwrap();
    assert_eq!(c.identity(), UpstreamIdentity::User);
    let e = parse(&with_upstream(d.path(), "identity = \"admin\""), d.path()).unwrap_err();
    assert!(e.mentions("upstream.identity"), "{e}");
}

#[test]
fn gateways_sharing_redis_with_role_accounts_need_one_accounts_key() {
    let d = dir();
    crate::secrets::write_private(&d.path().join("redis.key"), &[7u8; 32]).unwrap();
    crate::secrets::write_private(&d.path().join("accounts.key"), &[9u8; 32]).unwrap();
    let redis = "[state]\nbackend = \"redis\"\n[state.redis]\nurl = \"redis://127.0.0.1:6379\"\nencryption_keys = [{ kid = \"1\", secret_file = \"redis.key\" }]\n";
    let text = |upstream: &str| format!("{}\n{redis}", with_upstream(d.path(), upstream));
    let e = parse(&text(""), d.path()).unwrap_err();
    assert!(e.mentions("upstream.accounts_key_file"), "{e}");
    assert!(e.to_string().contains("head -c 32 /dev/urandom"), "{e}");
    parse(&text("accounts_key_file = \"accounts.key\""), d.path())
        .unwrap_or_else(|e| panic!("{e}"));
    parse(&text("identity = \"service\""), d.path()).unwrap_or_else(|e| panic!("{e}"));
    parse(&with_upstream(d.path(), ""), d.path()).unwrap_or_else(|e| panic!("{e}"));
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
