//! Configurations generated section by section, from the keys of every section and
//! values of every type: each problem is named by file and key, and an unknown key is
//! reported as it would be alone in its section, whatever else the document holds.

use proptest::prelude::*;

use super::{check_report, with_fixture, Fixture};
use crate::config::ConfigErrors;
use crate::fuzz_properties::cases;

/// One `key = value` line.
#[derive(Debug, Clone)]
struct Entry {
    key: &'static str,
    value: &'static str,
}

/// A document of sections, each a table of entries.
#[derive(Debug, Clone)]
struct Document(Vec<(&'static str, Vec<Entry>)>);

impl Document {
    fn render(&self) -> String {
        let mut text = String::new();
        for (section, entries) in &self.0 {
            text.push_str(&format!("[{section}]\n"));
            for Entry { key, value } in entries {
                text.push_str(&format!("{key} = {value}\n"));
            }
        }
        text
    }

    /// Each entry alone in its section, and each empty section alone.
    fn singles(&self) -> impl Iterator<Item = Document> + '_ {
        self.0.iter().flat_map(|(section, entries)| {
            let alone = |entries: Vec<Entry>| Document(vec![(*section, entries)]);
            let empty = entries.is_empty().then(|| alone(Vec::new()));
            entries
                .iter()
                .map(move |entry| alone(vec![entry.clone()]))
                .chain(empty)
        })
    }
}

/// Keys of every section (a key in the wrong section is a realistic mistake), near
/// misses, and keys TOML allows but no configuration has.
const KEYS: &[&str] = &[
    "listen",
    "tls",
    "cert_file",
    "key_file",
    "state_dir",
    "threads",
    "shutdown_grace_seconds",
    "drain_seconds",
    "public_url",
    "vendor",
    "users_file",
    "token_ttl_seconds",
    "lockout_attempts",
    "lockout_seconds",
    "issuer",
    "secret_file",
    "signing_keys",
    "max_concurrent_hashes",
    "max_queued_logins",
    "servers",
    "health_path",
    "health_interval_ms",
    "username",
    "password_file",
    "ca_file",
    "insecure_skip_verify",
    "docs_path",
    "docs_refresh_seconds",
    "connect_timeout_ms",
    "read_timeout_ms",
    "max_body_bytes",
    "scopes_file",
    "open_operations",
    "closed_operations",
    "backend",
    "url",
    "key_prefix",
    "command_timeout_ms",
    "listen_port",
    "timeout",
    "Listen",
    "\"\"",
    "\"a b\"",
    "\"a\\nb\"",
    "'tab\tkey'",
];

pub(super) const VALUES: &[&str] = &[
    "\"\"",
    "\"x\"",
    "\"127.0.0.1:8443\"",
    "\"0.0.0.0:9464\"",
    "\"http://127.0.0.1:18080\"",
    "\"redis://127.0.0.1:6379\"",
    "\"redis://u:p@x\"",
    "\"users.toml\"",
    "\"scopes.toml\"",
    "\"upstream.pass\"",
    "\"jwt.key\"",
    "\"short.key\"",
    "\"garbage.pem\"",
    "\"tls/ca.pem\"",
    "\"/\"",
    "\"ceph\"",
    "\"memory\"",
    "\"redis\"",
    "\"GET /ui-api/langs\"",
    "0",
    "1",
    "-1",
    "300",
    "28800",
    "9223372036854775807",
    "0.5",
    "-1.0",
    "nan",
    "inf",
    "1e300",
    "true",
    "false",
    "[]",
    "[\"http://127.0.0.1:18080\"]",
    "[1]",
    "[\"x\", \"x\"]",
    "{}",
    "1979-05-27T07:32:00Z",
];

/// Values of `auth.signing_keys`, with a key of `[auth]` (`users_file`) in an entry.
pub(super) const SIGNING_KEYS: &[&str] = &[
    "[{ kid = \"a\", secret_file = \"jwt.key\" }]",
    "[{ kid = \"a\", secret_file = \"jwt.key\", users_file = \"x\" }]",
    "[{ kid = \"a b\", secret_file = \"jwt.key\" }, { kid = \"a\" }]",
];

/// Sections, and the keys most likely written in each: its own, and those of the
/// section it nests in or holds (a realistic mistake). Only a bias of the generator:
/// any key may land in any section.
const SECTIONS: &[(&str, &[&str])] = &[
    (
        "server",
        &[
            "listen",
            "tls",
            "cert_file",
            "key_file",
            "state_dir",
            "threads",
            "shutdown_grace_seconds",
            "drain_seconds",
            "public_url",
        ],
    ),
    ("metrics", &["listen"]),
    ("api", &["vendor"]),
    (
        "auth",
        &[
            "users_file",
            "token_ttl_seconds",
            "lockout_attempts",
            "lockout_seconds",
            "issuer",
            "secret_file",
            "signing_keys",
            "max_concurrent_hashes",
            "max_queued_logins",
        ],
    ),
    (
        "upstream",
        &[
            "servers",
            "health_path",
            "health_interval_ms",
            "username",
            "password_file",
            "ca_file",
            "insecure_skip_verify",
            "docs_path",
            "docs_refresh_seconds",
            "connect_timeout_ms",
            "read_timeout_ms",
            "max_body_bytes",
            "accounts_key_file",
        ],
    ),
    (
        "access",
        &["scopes_file", "open_operations", "closed_operations"],
    ),
    ("state", &["backend", "url"]),
    (
        "state.redis",
        &[
            "url",
            "username",
            "password_file",
            "ca_file",
            "key_prefix",
            "connect_timeout_ms",
            "command_timeout_ms",
            "backend",
        ],
    ),
    ("servers", &[]),
    ("logging", &[]),
];

fn entry(likely: &'static [&'static str]) -> impl Strategy<Value = Entry> {
    use prop::sample::select;
    let key = if likely.is_empty() {
        select(KEYS).boxed()
    } else {
        prop_oneof![3 => select(likely), 1 => select(KEYS)].boxed()
    };
    key.prop_flat_map(|key| {
        let value = if key == "signing_keys" {
            prop_oneof![select(SIGNING_KEYS), select(VALUES)].boxed()
        } else {
            select(VALUES).boxed()
        };
        value.prop_map(move |value| Entry { key, value })
    })
}

fn document() -> impl Strategy<Value = Document> {
    let section = prop::sample::select(SECTIONS).prop_flat_map(|(name, likely)| {
        prop::collection::vec(entry(likely), 0..6).prop_map(move |mut entries| {
            // A key twice in a table is a syntax error; one is enough here.
            let mut seen = std::collections::HashSet::new();
            entries.retain(|e| seen.insert(e.key));
            (name, entries)
        })
    });
    prop::collection::vec(section, 0..6).prop_map(|mut sections| {
        let mut seen = std::collections::HashSet::new();
        sections.retain(|(name, _)| seen.insert(*name));
        Document(sections)
    })
}

/// The configuration file's problems reported as unknown keys (not those of the files
/// it names), as `file: key: message` lines.
fn unknown_keys(fixture: &Fixture, errors: &ConfigErrors) -> Vec<String> {
    errors
        .0
        .iter()
        .filter(|e| e.file == fixture.source && e.message.contains("unknown"))
        .map(ToString::to_string)
        .collect()
}

proptest! {
    #![proptest_config(cases(1000))]

    /// Documents generated section by section: each problem named by file and key, and
    /// unknown keys reported where they stand: never one the key alone would not get (a
    /// key of a nested table blamed on its section), and every one it gets, unless its
    /// section had a problem that stops its reading (a wrong type: the section falls back
    /// to its defaults, as `config::parse` says).
    #[test]
    fn generated_configurations_report_unknown_keys_where_they_stand(doc in document()) {
        with_fixture(|f| {
            let Some(errors) = check_report(f, &doc.render())? else {
                return Ok(());
            };
            let together = unknown_keys(f, &errors);
            let mut all_alone: Vec<String> = Vec::new();
            for single in doc.singles() {
                let Some(alone) = check_report(f, &single.render())? else {
                    continue;
                };
                let alone = unknown_keys(f, &alone);
                let section = single.0[0].0.split('.').next().unwrap_or_default();
                // A wrong type stops the section's reading: it is reported under the
                // section or under the key that has it.
                let nested = format!("{section}.");
                let stopped = errors.0.iter().any(|e| {
                    e.file == f.source
                        && (e.key == section || e.key.starts_with(&nested))
                        && !e.message.contains("unknown")
                });
                if !stopped {
                    for unknown in &alone {
                        prop_assert!(together.contains(unknown), "{} missing from:\n{}", unknown, doc.render());
                    }
                }
                all_alone.extend(alone);
            }
            for unknown in &together {
                prop_assert!(all_alone.contains(unknown), "{} only in:\n{}", unknown, doc.render());
            }
            Ok(())
        })?;
    }
}
