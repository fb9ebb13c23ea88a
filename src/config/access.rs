//! `[access]` and the scope table it names: which dashboard operations need which scope
//! and permission, which the gateway opens without a token, and which it refuses.

use std::path::{Path, PathBuf};

use super::file::{AccessSection, OperationEntry, ScopesFile};
use super::parse::Source;
use super::ConfigErrors;
use crate::ceph_release::CephRelease;
use crate::releases::{self, REGISTRY};
use crate::users::{Permission, Scope};
use crate::versioning::ApiVersion;

/// How problems of the built-in tables are reported (they are tested, so only a broken build).
const BUILT_IN_NAME: &str = "built-in scope table";

/// Which dashboard operations need which scope and permission, per Ceph release.
#[derive(Debug, Clone, Default)]
pub struct AccessConfig {
    /// `None`: the built-in tables.
    pub scopes_file: Option<PathBuf>,
    /// Oldest release first. Several: each manager gets its release's table (the nearest
    /// lower one for a release without its own); one (`access.release` or
    /// `access.scopes_file`): every manager gets it.
    pub tables: Vec<ReleaseRules>,
    /// What becomes of a request no operation of the table matches (the default depends
    /// on whom the dashboard sees: set by `Config::validate`).
    pub unknown_operations: UnknownOperations,
}

/// One release's table.
#[derive(Debug, Clone, Default)]
pub struct ReleaseRules {
    /// The table's `ceph_version`, e.g. `18.2.7`.
    pub ceph_version: Option<String>,
    /// Its release; `None` for an operator's table that names none.
    pub release: Option<CephRelease>,
    pub operations: Vec<OperationRule>,
}

/// `access.unknown_operations`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UnknownOperations {
    /// The gateway's 404: it cannot check what it does not know.
    #[default]
    Refuse,
    /// Forwarded for any valid token, the dashboard deciding (only where the dashboard
    /// sees the real user or their roles).
    Forward,
}

impl UnknownOperations {
    /// The setting when the file leaves it out: where the dashboard sees the user or their
    /// roles, its own RBAC decides what the table does not know (an operation of a release
    /// newer than the table works as directly); with the service account it would decide
    /// as an administrator, so the gateway refuses.
    pub fn default_for(dashboard_sees_user: bool) -> UnknownOperations {
        if dashboard_sees_user {
            UnknownOperations::Forward
        } else {
            UnknownOperations::Refuse
        }
    }
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
    /// The API version it serves; `None` when it checks none or the table does not say.
    pub version: Option<ApiVersion>,
}

impl OperationRule {
    /// `METHOD /path/{template}`, as `access.open_operations` names operations.
    fn name(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// `[access]`. Forwarding needs the scope tables, so without `[upstream]` (`forwarding`
/// false) they are not read.
pub(super) fn validate(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    access: AccessSection,
    forwarding: bool,
) -> AccessConfig {
    let scopes_file = access.scopes_file.as_deref().map(|f| at.resolve(f));
    let mut config = AccessConfig {
        scopes_file,
        tables: Vec::new(),
        unknown_operations: UnknownOperations::default(),
    };
    if !forwarding {
        return config;
    }
    let sources = table_sources(errors, at.file, &access, config.scopes_file.as_deref());
    for (name, text) in sources {
        if let Some(table) = release_rules(errors, &name, &text, &access) {
            config.tables.push(table);
        }
    }
    // (a table that could not be read is reported already: every name would be unknown)
    if !config.tables.is_empty() {
        let all: Vec<&OperationRule> = config.tables.iter().flat_map(|t| &t.operations).collect();
        check_named_operations(errors, at.file, &access, &all);
    }
    config
}

/// `(name for errors, TOML text)` of each table to read: the operator's file, the pinned
/// release's built-in table, or every built-in table (`releases::REGISTRY`: each derived
/// from that release's dashboard and probed against it, tests/it/scope_table.rs).
fn table_sources(
    errors: &mut ConfigErrors,
    f: &Path,
    access: &AccessSection,
    scopes_file: Option<&Path>,
) -> Vec<(PathBuf, String)> {
    let built_in = |release: &str, text: &str| {
        (
            PathBuf::from(format!("{BUILT_IN_NAME} {release}")),
            text.to_string(),
        )
    };
    match (scopes_file, access.release.as_deref()) {
        (Some(_), Some(r)) if r != "auto" => {
            errors.push(f, "access.release", "set either access.release or access.scopes_file (the operator's table applies to every manager)");
            Vec::new()
        }
        (Some(path), _) => match std::fs::read_to_string(path) {
            Ok(text) => vec![(path.to_path_buf(), text)],
            Err(e) => {
                errors.push(path, "file", format!("cannot read the scope table: {e} (access.scopes_file; leave it out for the built-in tables)"));
                Vec::new()
            }
        },
        (None, None | Some("auto")) => REGISTRY
            .iter()
            .map(|release| built_in(release.version, release.table))
            .collect(),
        (None, Some(release)) => match releases::built_in(release) {
            Some(known) => vec![built_in(release, known.table)],
            None => {
                let known: Vec<&str> = REGISTRY.iter().map(|r| r.version).collect();
                errors.push(f, "access.release", format!("no built-in table for {release:?}: use \"auto\" (each manager's own release) or one of {}", known.join(", ")));
                Vec::new()
            }
        },
    }
}

/// `access.unknown_operations` as written; `None` when left out (see
/// [`UnknownOperations::default_for`]).
pub(super) fn unknown_operations(
    errors: &mut ConfigErrors,
    f: &Path,
    written: Option<&str>,
) -> Option<UnknownOperations> {
    match written {
        None => None,
        Some("refuse") => Some(UnknownOperations::Refuse),
        Some("forward") => Some(UnknownOperations::Forward),
        Some(other) => {
            errors.push(
                f,
                "access.unknown_operations",
                format!("{other:?}: use \"refuse\" or \"forward\""),
            );
            None
        }
    }
}

/// One table's text as rules (problems reported against `path`).
fn release_rules(
    errors: &mut ConfigErrors,
    path: &Path,
    text: &str,
    access: &AccessSection,
) -> Option<ReleaseRules> {
    let file: ScopesFile = match toml::from_str(text) {
        Ok(file) => file,
        Err(e) => {
            errors.push_toml(path, text, &e);
            return None;
        }
    };
    let mut rules: Vec<OperationRule> = Vec::new();
    for (i, op) in file.operation.into_iter().enumerate() {
        let key = format!("operation[{i}] ({} {})", op.method, op.path);
        if let Some(rule) = rule(errors, path, &key, op, access) {
            if rules
                .iter()
                .any(|r| r.method == rule.method && r.path == rule.path)
            {
                errors.push(path, &key, "listed twice");
                continue;
            }
            rules.push(rule);
        }
    }
    let release = file.ceph_version.as_deref().and_then(CephRelease::parse);
    if file.ceph_version.is_some() && release.is_none() {
        errors.push(
            path,
            "ceph_version",
            "write it as X.Y.Z (the release the table was derived from)",
        );
    }
    Some(ReleaseRules {
        ceph_version: file.ceph_version,
        release,
        operations: rules,
    })
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
    let version = match op.version.as_str() {
        "" => None,
        text => {
            let Some(version) = ApiVersion::parse(text) else {
                errors.push(
                    path,
                    key,
                    format!("version {text:?}: write it as X.Y (e.g. \"1.0\"), or \"\" for none"),
                );
                return None;
            };
            Some(version)
        }
    };
    let operation = format!("{} {}", op.method, op.path);
    Some(OperationRule {
        version,
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
    operations: &[&OperationRule],
) {
    for (i, entry) in access.open_operations.iter().enumerate() {
        if !operations.iter().any(|r| r.open && r.name() == *entry) {
            let public: std::collections::BTreeSet<String> = operations
                .iter()
                .filter(|r| r.public)
                .map(|r| r.name())
                .collect();
            let public: Vec<String> = public.into_iter().collect();
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
        for release in REGISTRY.iter() {
            let (release, text) = (release.version, release.table);
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
            check_named_operations(&mut errors, at, &access, &rules.iter().collect::<Vec<_>>());
            assert!(errors.is_empty(), "{release}: {errors}");
            assert!(rules.len() > 250, "{release}: {} operations", rules.len());
        }
    }
}
