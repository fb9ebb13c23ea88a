//! The book's configuration reference (`docs/configuration/*.md`) against the code: every
//! key the file structs accept has a row, every row names a key they accept, and every
//! default a row gives is the code's. The keys come from the structs themselves (serde's
//! list of a struct's fields, which its `deny_unknown_fields` error names), the defaults
//! from their `Default`, so a setting added, renamed or given another default here fails
//! this test until its page says so.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::config::file::*;

/// What the code says of one key: its default as TOML, `None` when it has none (unset).
type CodeKeys = BTreeMap<String, Option<toml::Value>>;

/// Every field of `T`, from the error serde gives for a key it does not know (its list of
/// expected fields is the struct's, in order; a struct of one field says "expected `x`").
fn fields<T: DeserializeOwned>() -> Vec<String> {
    let probe = toml::Value::Table(toml::toml! { cg_reference_probe = 0 });
    let Err(error) = T::deserialize(probe) else {
        panic!("a section accepted an unknown key: is deny_unknown_fields gone?")
    };
    let message = error.to_string();
    let (_, expected) = message
        .split_once("expected")
        .unwrap_or_else(|| panic!("no list of fields in: {message}"));
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// `T`'s keys under `prefix`, each with its default when `defaults` is given.
fn keys<T: DeserializeOwned + Serialize>(prefix: &str, defaults: Option<T>, out: &mut CodeKeys) {
    let defaults = defaults.map(|d| match toml::Value::try_from(d) {
        Ok(toml::Value::Table(table)) => table,
        other => panic!("{prefix}: its default is not a table: {other:?}"),
    });
    for field in fields::<T>() {
        let default = defaults.as_ref().and_then(|d| d.get(&field)).cloned();
        out.insert(format!("{prefix}.{field}"), default);
    }
}

/// Every key the configuration file, the users file and the roles file accept.
fn code_keys() -> CodeKeys {
    let mut out = CodeKeys::new();
    keys("server", Some(ServerSection::default()), &mut out);
    keys("metrics", Some(MetricsSection::default()), &mut out);
    keys("api", Some(ApiSection::default()), &mut out);
    keys("auth", Some(AuthSection::default()), &mut out);
    keys::<SigningKeyEntry>("auth.signing_keys[]", None, &mut out);
    keys("upstream", Some(UpstreamSection::default()), &mut out);
    keys("oidc", Some(OidcSection::default()), &mut out);
    keys("access", Some(AccessSection::default()), &mut out);
    keys("state", Some(StateSection::default()), &mut out);
    keys("state.redis", Some(RedisSection::default()), &mut out);
    keys::<EncryptionKeyEntry>("state.redis.encryption_keys[]", None, &mut out);
    keys("log", Some(LogSection::default()), &mut out);
    keys(
        "answer_cache",
        Some(AnswerCacheSection::default()),
        &mut out,
    );
    keys("api_keys", Some(ApiKeysSection::default()), &mut out);
    keys::<UserEntry>("users[]", None, &mut out);
    keys::<RoleEntry>("roles[]", None, &mut out);
    // A section's own table (`state.redis`) is documented by its keys' rows.
    out.remove("state.redis");
    out
}

/// One row of a page's table: its keys and, per key, what its default cell says.
struct Row {
    page: String,
    keys: Vec<String>,
    defaults: Vec<String>,
}

/// The rows of every `| key | default | meaning |` table under `docs/configuration/`.
fn book_rows() -> Vec<Row> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration");
    let mut rows = Vec::new();
    let mut pages: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    pages.sort_by_key(|e| e.file_name());
    for entry in pages {
        let page = format!("docs/configuration/{}", entry.file_name().to_string_lossy());
        let text = std::fs::read_to_string(entry.path()).unwrap();
        for line in text.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = line.split(" | ").collect();
            let keys = cells[0]
                .trim_start_matches("| ")
                .split(", ")
                .map(|k| k.trim_matches('`').to_string())
                .collect();
            let defaults = cells
                .get(1)
                .map_or(Vec::new(), |d| d.split(", ").map(str::to_string).collect());
            rows.push(Row {
                page: page.clone(),
                keys,
                defaults,
            });
        }
    }
    rows
}

/// The TOML literal a default cell starts with (`` `"text"` (why) `` → `"text"`), if any.
fn literal(cell: &str) -> Option<toml::Value> {
    let rest = cell.trim().strip_prefix('`')?;
    let (literal, _) = rest.split_once('`')?;
    let table: toml::Table = toml::from_str(&format!("v = {literal}")).ok()?;
    table.get("v").cloned()
}

/// Whether two defaults are the same value (`5` and `5.0` are).
fn same(code: &toml::Value, book: &toml::Value) -> bool {
    match (code, book) {
        (toml::Value::Float(a), toml::Value::Integer(b)) => *a == *b as f64,
        _ => code == book,
    }
}

/// An empty string, list or table: the default of a key the file must set.
fn is_empty(value: &toml::Value) -> bool {
    match value {
        toml::Value::String(s) => s.is_empty(),
        toml::Value::Array(a) => a.is_empty(),
        toml::Value::Table(t) => t.is_empty(),
        _ => false,
    }
}

/// What is wrong between the book's rows and the code's keys, one line each.
fn disagreements(code: &CodeKeys, rows: &[Row]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut documented = BTreeSet::new();
    for row in rows {
        if row.defaults.len() != row.keys.len() && row.keys.len() > 1 {
            problems.push(format!(
                "{}: the row of {} gives {} defaults for {} keys: give one per key, separated by \", \"",
                row.page,
                row.keys.join(", "),
                row.defaults.len(),
                row.keys.len()
            ));
            continue;
        }
        for (i, key) in row.keys.iter().enumerate() {
            documented.insert(key.clone());
            let Some(default) = code.get(key) else {
                problems.push(format!(
                    "{}: `{key}` is not a key the gateway accepts: remove its row or fix its name",
                    row.page
                ));
                continue;
            };
            let cell = if row.keys.len() > 1 {
                &row.defaults[i]
            } else {
                &row.defaults.join(", ")
            };
            match (default, literal(cell)) {
                (Some(code), Some(book)) if !same(code, &book) => problems.push(format!(
                    "{}: `{key}`: the default is `{code}` in the code, `{book}` in the book: correct the row",
                    row.page
                )),
                // A key the file must set has an empty default in the code.
                (Some(code), None) if cell.starts_with("required") && is_empty(code) => {}
                (Some(code), None) => problems.push(format!(
                    "{}: `{key}`: the default cell ({cell:?}) does not start with the code's default `{code}` in backticks (or \"required\" for an empty one)",
                    row.page
                )),
                _ => {}
            }
        }
    }
    for key in code.keys().filter(|k| !documented.contains(*k)) {
        problems.push(format!(
            "`{key}` has no row in docs/configuration/: add `| \\`{key}\\` | default | meaning |` to its section's page"
        ));
    }
    problems
}

#[test]
fn every_setting_has_its_row_and_default_in_the_book() {
    let problems = disagreements(&code_keys(), &book_rows());
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// A row of one key on the server page, for the tests of the comparison itself.
fn server_row(key: &str, default: &str) -> Row {
    Row {
        page: "docs/configuration/server.md".into(),
        keys: vec![key.into()],
        defaults: vec![default.into()],
    }
}

#[test]
fn a_setting_without_a_row_or_a_row_without_a_setting_is_named() {
    let mut code = code_keys();
    code.insert("server.new_setting".into(), Some(toml::Value::Integer(1)));
    let mut rows = book_rows();
    rows.push(server_row("server.gone", "`1`"));
    let problems = disagreements(&code, &rows).join("\n");
    assert!(
        problems.contains("`server.new_setting` has no row"),
        "{problems}"
    );
    assert!(
        problems.contains("`server.gone` is not a key"),
        "{problems}"
    );
}

#[test]
fn a_default_the_book_gives_differently_is_named() {
    let code = CodeKeys::from([("server.tls".to_string(), Some(toml::Value::Boolean(true)))]);
    let rows = [server_row("server.tls", "`false`")];
    let problems = disagreements(&code, &rows).join("\n");
    assert!(
        problems.contains("the default is `true` in the code, `false` in the book"),
        "{problems}"
    );
}
