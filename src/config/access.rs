//! `[access]` and the scope table it names: which dashboard operations need which scope
//! and permission, which the gateway opens without a token, and which it refuses.

use std::path::{Path, PathBuf};

use super::file::{AccessSection, OperationEntry, ScopesFile};
use super::parse::Source;
use super::ConfigErrors;
use crate::users::{Permission, Scope};

/// The scope tables the binary carries, by Ceph release, each derived from that release's
/// dashboard (`deploy/tools/derive_scopes.py` in its Debian root) and probed against it
/// (tests/scope_table.rs). The first, 16.2's, is the default: a configuration file alone
/// starts the gateway.
const BUILT_IN_TABLES: [(&str, &str); 3] = [
    ("16.2", include_str!("../../conf/scopes.toml")),
    ("18.2", include_str!("../../conf/scopes-18.2.toml")),
    ("20.2", include_str!("../../conf/scopes-20.2.toml")),
];
const BUILT_IN_TABLE: &str = BUILT_IN_TABLES[0].1;

/// The built-in scope table (TOML text, the `access.scopes_file` format) of Ceph `release`
/// (`"16.2"`, `"18.2"`, `"20.2"`), `None` for a release the binary has no table for.
pub fn built_in_table(release: &str) -> Option<&'static str> {
    BUILT_IN_TABLES
        .iter()
        .find(|(r, _)| *r == release)
        .map(|(_, table)| *table)
}
/// How problems of the built-in table are reported (it is tested, so only a broken build).
const BUILT_IN_NAME: &str = "built-in scope table";

/// Which dashboard operations need which scope and permission.
#[derive(Debug, Clone, Default)]
pub struct AccessConfig {
    /// `None`: the built-in table.
    pub scopes_file: Option<PathBuf>,
    pub ceph_version: Option<String>,
    pub operations: Vec<OperationRule>,
}

/// One dashboard operation: `method path` needs `permission` on `scope`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationRule {
    pub method: http::Method,
    /// The OpenAPI path template, e.g. `/api/pool/{pool_name}`.
    pub path: String,
    /// `None`: a valid token is enough.
    pub scope: Option<(Scope, Permission)>,
    /// The dashboard serves it without any token.
    pub public: bool,
    /// The gateway serves it without a token too (`access.open_operations`); public
    /// operations not opened stay closed.
    pub open: bool,
    /// The gateway refuses it whoever asks (`access.closed_operations`).
    pub closed: bool,
}

impl OperationRule {
    /// `METHOD /path/{template}`, as `access.open_operations` names operations.
    fn name(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// `[access]`. Forwarding needs the scope table, so without `[upstream]` (`forwarding`
/// false) it is not read and the table is empty.
pub(super) fn validate(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    access: AccessSection,
    forwarding: bool,
) -> AccessConfig {
    let scopes_file = access.scopes_file.as_deref().map(|f| at.resolve(f));
    if !forwarding {
        return AccessConfig {
            scopes_file,
            ..AccessConfig::default()
        };
    }
    let mut config = AccessConfig {
        ceph_version: None,
        operations: Vec::new(),
        scopes_file,
    };
    let table_path = config
        .scopes_file
        .clone()
        .unwrap_or_else(|| PathBuf::from(BUILT_IN_NAME));
    let Some(file) = read_table(errors, config.scopes_file.as_deref()) else {
        return config;
    };
    config.ceph_version = file.ceph_version;
    for (i, op) in file.operation.into_iter().enumerate() {
        let key = format!("operation[{i}] ({} {})", op.method, op.path);
        if let Some(rule) = rule(errors, &table_path, &key, op, &access) {
            if config
                .operations
                .iter()
                .any(|r| r.method == rule.method && r.path == rule.path)
            {
                errors.push(&table_path, &key, "listed twice");
                continue;
            }
            config.operations.push(rule);
        }
    }
    check_named_operations(errors, at.file, &access, &config.operations);
    config
}

/// The operator's table at `path`, or the built-in one.
fn read_table(errors: &mut ConfigErrors, path: Option<&Path>) -> Option<ScopesFile> {
    let (text, path) = match path {
        None => (BUILT_IN_TABLE.to_string(), Path::new(BUILT_IN_NAME)),
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => (text, path),
            Err(e) => {
                errors.push(path, "file", format!("cannot read the scope table: {e} (access.scopes_file; leave it out for the built-in Ceph 16.2 table)"));
                return None;
            }
        },
    };
    match toml::from_str(&text) {
        Ok(file) => Some(file),
        Err(e) => {
            errors.push_toml(path, &text, &e);
            None
        }
    }
}

/// One table entry as a rule; `None` when it has a problem (reported).
fn rule(
    errors: &mut ConfigErrors,
    path: &Path,
    key: &str,
    op: OperationEntry,
    access: &AccessSection,
) -> Option<OperationRule> {
    let method = match op.method.as_str() {
        "GET" | "POST" | "PUT" | "DELETE" | "PATCH" => {
            http::Method::from_bytes(op.method.as_bytes()).ok()
        }
        _ => None,
    };
    let Some(method) = method else {
        errors.push(path, key, "method must be GET, POST, PUT, DELETE or PATCH");
        return None;
    };
    if !op.path.starts_with('/') {
        errors.push(path, key, "path must start with '/'");
        return None;
    }
    let scope = match (op.scope.as_str(), op.permission.as_str()) {
        ("", "") => None,
        (scope, permission) => match (Scope::from_name(scope), Permission::from_name(permission)) {
            (Some(s), Some(p)) => Some((s, p)),
            _ => {
                errors.push(
                    path,
                    key,
                    format!("unknown scope {scope:?} or permission {permission:?}"),
                );
                return None;
            }
        },
    };
    let operation = format!("{} {}", op.method, op.path);
    Some(OperationRule {
        method,
        path: op.path,
        scope,
        public: op.public,
        open: op.public && access.open_operations.contains(&operation),
        closed: access.closed_operations.contains(&operation),
    })
}

/// Every operation `access.open_operations` and `access.closed_operations` name must be
/// one of the table (and an opened one public).
fn check_named_operations(
    errors: &mut ConfigErrors,
    f: &Path,
    access: &AccessSection,
    operations: &[OperationRule],
) {
    for (i, entry) in access.open_operations.iter().enumerate() {
        if !operations.iter().any(|r| r.open && r.name() == *entry) {
            let public: Vec<String> = operations
                .iter()
                .filter(|r| r.public)
                .map(OperationRule::name)
                .collect();
            errors.push(
                f,
                format!("access.open_operations[{i}]"),
                format!(
                    "{entry:?} is not an operation the dashboard serves without a token; those are: {}",
                    public.join(", ")
                ),
            );
        }
    }
    for (i, entry) in access.closed_operations.iter().enumerate() {
        if !operations.iter().any(|r| r.closed && r.name() == *entry) {
            errors.push(f, format!("access.closed_operations[{i}]"), format!(
                "{entry:?} is not an operation of the scope table (write it as \"METHOD /path/{{template}}\")"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each built-in table reads as its release's and passes the checks an operator's
    /// table gets, the default `access.open_operations` included.
    #[test]
    fn every_built_in_table_is_a_valid_table_of_its_release() {
        for (release, text) in BUILT_IN_TABLES {
            let file: ScopesFile = toml::from_str(text).expect("a scope table");
            let version = file.ceph_version.clone().unwrap_or_default();
            assert!(
                version.starts_with(&format!("{release}.")),
                "{release}: {version}"
            );
            let mut errors = ConfigErrors::default();
            let access = AccessSection::default();
            let at = Path::new(release);
            let rules: Vec<OperationRule> = file
                .operation
                .into_iter()
                .filter_map(|op| rule(&mut errors, at, "operation", op, &access))
                .collect();
            check_named_operations(&mut errors, at, &access, &rules);
            assert!(errors.is_empty(), "{release}: {errors}");
            assert!(rules.len() > 250, "{release}: {} operations", rules.len());
            assert_eq!(built_in_table(release), Some(text));
        }
        assert_eq!(built_in_table("19.2"), None);
    }
}
