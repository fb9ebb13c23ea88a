//! The configuration loader (`config`): the shipped `conf/clustergate.toml` and a
//! configuration with every key set, mutated; documents generated section by section;
//! arbitrary text; and the files it names (users, scope table), mutated. It never panics,
//! and a refusal lists at least one problem, each naming a file and a key on one line.
//! Unknown keys are reported the same wherever they stand in a document.

mod changes;
mod documents;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::cases;
use super::mutate::{Corpus, Mutant};
use crate::config::{Config, ConfigErrors};

const SHIPPED: &str = include_str!("../../../conf/clustergate.toml");
const SHIPPED_SCOPES: &str = include_str!("../../../conf/scopes/16.2.toml");
const SHIPPED_USERS: &str = include_str!("../../../conf/users.example.toml");

const ARGON: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$QUVFUVRhR0hVZ3NHbkpxc2xHUjBNeTVZcFJOc1RzM2E";

/// A configuration with every key set, each to a value that loads.
const EVERY_KEY: &str = r#"
[server]
listen = "127.0.0.1:8443"
tls = true
cert_file = "tls/cert.pem"
key_file = "tls/key.pem"
state_dir = "state"
threads = 2
shutdown_grace_seconds = 1
drain_seconds = 0.5
public_url = "https://ceph.example.com:8443"

[metrics]
listen = "127.0.0.1:9464"

[api]
vendor = "ceph"

[auth]
users_file = "users.toml"
token_ttl_seconds = 28800
issuer = "clustergate"
lockout_attempts = 10
lockout_seconds = 300
signing_keys = [{ kid = "2026-11", secret_file = "jwt.key" }, { kid = "default", secret_file = "old.key" }]
max_concurrent_hashes = 1
max_queued_logins = 64

[upstream]
servers = ["https://127.0.0.1:18443", "https://[::1]:18444"]
health_path = "/"
health_interval_ms = 1000
username = "clustergate"
password_file = "upstream.pass"
ca_file = "tls/ca.pem"
docs_path = "/docs/openapi.json"
docs_refresh_seconds = 300
connect_timeout_ms = 2000
read_timeout_ms = 450000
max_body_bytes = 10485760
accounts_key_file = "accounts.key"

[access]
scopes_file = "scopes.toml"
open_operations = ["GET /{path:.*}", "GET /ui-api/langs"]
closed_operations = ["POST /api/user/{username}/change_password"]

[state]
backend = "redis"

[state.redis]
url = "rediss://127.0.0.1:6380"
username = "clustergate"
password_file = "redis.pass"
ca_file = "tls/ca.pem"
key_prefix = "clustergate:"
connect_timeout_ms = 1000
command_timeout_ms = 500
encryption_keys = [{ kid = "2", secret_file = "redis.key" }, { kid = "1", secret_file = "old.key" }]
"#;

/// A small scope table with the operations the default `[access]` names: what most
/// configurations read, so that the cases stay cheap (the shipped table is a seed of
/// its own).
const SMALL_SCOPES: &str = r#"ceph_version = "16.2.15"

[[operation]]
method = "GET"
path = "/{path:.*}"
public = true

[[operation]]
method = "GET"
path = "/ui-api/langs"
public = true

[[operation]]
method = "GET"
path = "/ui-api/login/custom_banner"
public = true

[[operation]]
method = "POST"
path = "/ui-api/logging/js-error"
public = true

[[operation]]
method = "POST"
path = "/api/user/{username}/change_password"
scope = "user"
permission = "update"

[[operation]]
method = "GET"
path = "/api/pool/{pool_name}"
scope = "pool"
permission = "read"

[[operation]]
method = "GET"
path = "/api/summary"
"#;

/// A folder with every file the seeds name, and the configuration file's path in it.
struct Fixture {
    dir: tempfile::TempDir,
    source: PathBuf,
}

fn users_file() -> String {
    format!(
        "[[users]]\nusername = \"admin\"\npassword_hash = \"{ARGON}\"\nroles = [\"administrator\"]\n\n\
         [[users]]\nusername = \"viewer\"\npassword_hash = \"{ARGON}\"\nroles = [\"read-only\", \"pool-manager\"]\nenabled = false\n"
    )
}

/// Runs `check` with the fixture of this test's thread: made on first use, removed when
/// the test ends.
fn with_fixture<R>(check: impl FnOnce(&Fixture) -> R) -> R {
    thread_local! {
        static FIXTURE: Fixture = Fixture::new();
    }
    FIXTURE.with(check)
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("a temporary folder");
        // Owner-only, as the secret files among them must be.
        let write = |name: &str, text: &str| {
            crate::secrets::write_private(&dir.path().join(name), text.as_bytes())
                .expect("a fixture file");
        };
        write("upstream.pass", "stand-in\n");
        write("redis.pass", "stand-in\n");
        write("jwt.key", "fedcba9876543210fedcba9876543210");
        write("old.key", "0123456789abcdef0123456789abcdef");
        write("short.key", "abc");
        write("redis.key", "0123456789abcdef0123456789abcdef");
        write("accounts.key", "0123456789abcdef0123456789abcdef");
        // Checked like a secret: owner-only.
        let private = std::fs::Permissions::from_mode(0o600);
        for name in ["redis.key", "old.key", "accounts.key"] {
            std::fs::set_permissions(dir.path().join(name), private.clone())
                .expect("an owner-only fixture file");
        }
        write("garbage.pem", "not a certificate\n");
        write("users.toml", &users_file());
        write("scopes.toml", SMALL_SCOPES);
        write("shipped-scopes.toml", SHIPPED_SCOPES);
        crate::tls::ensure_generated(dir.path()).expect("a certificate in tls/");
        let source = dir.path().join("clustergate.toml");
        let fixture = Fixture { dir, source };
        for seed in valid_seeds() {
            if let Err(e) = fixture.load(&seed) {
                panic!("a seed must load, to reach past validation:\n{seed}\n{e}");
            }
        }
        fixture
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn load(&self, text: &str) -> Result<Config, ConfigErrors> {
        Config::from_toml_str(text, &self.source, self.dir())
    }
}

/// Seeds that load: the shipped configuration (with the shipped scope table), every key
/// set, and the defaults.
fn valid_seeds() -> Vec<String> {
    vec![
        SHIPPED.replace("\"scopes.toml\"", "\"shipped-scopes.toml\""),
        EVERY_KEY.to_string(),
        String::new(),
        "[server]\ntls = false\nlisten = \"[::]:8080\"\n[auth]\nsecret_file = \"jwt.key\"\nlockout_attempts = 0\nlockout_seconds = 0\n".into(),
        "[state]\nbackend = \"redis\"\n[state.redis]\nurl = \"redis://127.0.0.1:6379\"\nencryption_keys = [{ kid = \"1\", secret_file = \"redis.key\" }]\n".into(),
    ]
}

const TOML_DICTIONARY: &[&str] = &[
    "[",
    "]",
    "[[",
    "]]",
    "=",
    "\"",
    "'",
    "'''",
    "\"\"\"",
    "\n",
    "#",
    ",",
    "{",
    "}",
    ".",
    " ",
    "0",
    "-1",
    "1e400",
    "nan",
    "inf",
    "-inf",
    "true",
    "1979-05-27T07:32:00Z",
    "0x10",
    "9223372036854775807",
    "18446744073709551616",
    "\\u0000",
    "\\",
    "\r",
    "\t",
    "[server]",
    "[auth]",
    "[upstream]",
    "[access]",
    "[state]",
    "[state.redis]",
    "[metrics]",
    "listen",
    "tls",
    "backend",
    "url",
    "servers",
    "scopes_file",
    "users_file",
    "signing_keys",
    "open_operations",
    "kid",
    "secret_file",
    "encryption_keys",
    "jwt.key",
    "redis.key",
    "short.key",
    "garbage.pem",
    "tls/ca.pem",
    "redis://",
    "rediss://",
    "http://",
    "https://",
    "@",
    "[::1]",
    "\u{0}",
    "é",
];

/// The report of a refused configuration: at least one problem, each naming a file and
/// a key, on a line of its own (`file: key: message`).
fn check_report(fixture: &Fixture, text: &str) -> Result<Option<ConfigErrors>, TestCaseError> {
    let Err(errors) = fixture.load(text) else {
        return Ok(None);
    };
    prop_assert!(!errors.is_empty(), "refused without a problem");
    for e in &errors.0 {
        prop_assert!(!e.file.as_os_str().is_empty(), "no file: {:?}", e);
        prop_assert!(!e.key.trim().is_empty(), "no key: {:?}", e);
        prop_assert!(
            !e.key.chars().any(char::is_control),
            "a control in the key: {:?}",
            e
        );
        prop_assert!(!e.message.trim().is_empty(), "no message: {:?}", e);
    }
    let report = errors.to_string();
    prop_assert_eq!(
        report.lines().count(),
        errors.0.len(),
        "one line a problem:\n{}",
        report
    );
    Ok(Some(errors))
}

/// Users files and scope tables: the fixture's, the shipped example and table.
fn named_files() -> Corpus {
    Corpus::new(
        [
            users_file(),
            SHIPPED_USERS.to_string(),
            SMALL_SCOPES.to_string(),
            SHIPPED_SCOPES.to_string(),
        ],
        TOML_DICTIONARY,
    )
}

proptest! {
    #![proptest_config(cases(1000))]

    #[test]
    fn mutated_configurations_load_or_report_each_problem_by_file_and_key(
        text in Corpus::new(valid_seeds(), TOML_DICTIONARY).mutants().prop_map(|m: Mutant| m.text())
    ) {
        with_fixture(|f| check_report(f, &text))?;
    }

    #[test]
    fn arbitrary_text_loads_or_reports_each_problem_by_file_and_key(text in "(.|\n){0,200}") {
        with_fixture(|f| check_report(f, &text))?;
    }

}

proptest! {
    // Fewer: a quarter of the cases read the shipped scope table (2,000 lines).
    #![proptest_config(cases(500))]

    /// A users file or a scope table, mutated, named by a configuration that loads.
    #[test]
    fn mutated_named_files_load_or_report_each_problem_by_file_and_key(m in named_files().mutants()) {
        let (users, scopes) = if m.seed < 2 {
            (m.input.to_vec(), SMALL_SCOPES.as_bytes().to_vec())
        } else {
            (users_file().into_bytes(), m.input.to_vec())
        };
        with_fixture(|f| {
            std::fs::write(f.dir().join("fuzzed-users.toml"), users).expect("written");
            std::fs::write(f.dir().join("fuzzed-scopes.toml"), scopes).expect("written");
            let text = "[auth]\nusers_file = \"fuzzed-users.toml\"\n[upstream]\nservers = [\"http://127.0.0.1:1\"]\n[access]\nscopes_file = \"fuzzed-scopes.toml\"\n";
            check_report(f, text)
        })?;
    }
}
