//! Authorization at the edge: what each dashboard operation needs (no token, a token, or
//! a permission on a scope), from a release's table (`conf/scopes/<release>.toml`, derived
//! from the dashboard's own routing), compiled once into a matcher over path segments.

use std::collections::HashMap;

use http::Method;

use crate::config::OperationRule;
use crate::users::{Permission, RoleEdition, Scope, User};
use crate::versioning::ApiVersion;

/// What a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    /// Nothing: the dashboard serves it without a token and the gateway opened it
    /// (the web UI's files, what its login page needs).
    Open,
    /// A valid token is enough (the dashboard's controller has no scope).
    Token,
    /// A valid token whose roles grant this permission on this scope.
    Scoped(Scope, Permission),
}

/// Why a request may not go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    /// No operation of the backend has this path: nothing to forward it to.
    #[error("no dashboard operation has this path")]
    UnknownPath,
    /// The dashboard serves it without a token, but the gateway does not offer it.
    #[error("the gateway does not offer this operation")]
    Closed,
    /// An operation the gateway refuses whoever asks (`access.closed_operations`).
    #[error("the gateway refuses this operation")]
    NotOffered,
    #[error("the user's roles do not grant {1:?} on {0:?}")]
    Forbidden(Scope, Permission),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Param,
    /// `{name:.*}` at the end: any number of segments, none included.
    Tail,
}

#[derive(Debug)]
struct Operation {
    method: Method,
    /// The path as the table writes it, e.g. `/api/pool/{pool_name}`.
    template: String,
    segments: Vec<Segment>,
    /// Literal segments count: the most specific template wins.
    literals: usize,
    /// `None`: public on the dashboard but closed at the gateway.
    requirement: Option<Requirement>,
    not_offered: bool,
    version: Option<ApiVersion>,
}

/// Which operation of which release's table a request matched (what the logs name it by).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperationId {
    pub(super) table: usize,
    index: usize,
}

/// What a lookup found: the operation the path matched, if any, what the request needs,
/// and the API version the operation serves (`None`: not known at the edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lookup {
    pub operation: Option<OperationId>,
    pub requirement: Result<Requirement, AccessError>,
    pub version: Option<ApiVersion>,
}

/// The compiled table. Nearly every operation starts with `/api`, so operations are
/// indexed by all their leading literal segments: a lookup reads only the operations
/// whose literal prefix the path starts with.
#[derive(Debug, Default)]
pub struct AccessTable {
    operations: Vec<Operation>,
    by_prefix: PrefixNode,
    /// Its place among the releases' tables (`OperationId::table`).
    position: usize,
}

/// A node of the literal-prefix index: the operations whose template's literal segments
/// end here (the next segment is a parameter, a tail, or nothing).
#[derive(Debug, Default)]
struct PrefixNode {
    operations: Vec<usize>,
    children: HashMap<String, PrefixNode, foldhash::fast::RandomState>,
}

impl PrefixNode {
    fn insert(&mut self, segments: &[Segment], index: usize) {
        match segments.first() {
            Some(Segment::Literal(literal)) => self
                .children
                .entry(literal.clone())
                .or_default()
                .insert(&segments[1..], index),
            _ => self.operations.push(index),
        }
    }
}

impl AccessTable {
    pub fn new(rules: &[OperationRule]) -> AccessTable {
        let operations = rules
            .iter()
            .map(|rule| {
                let segments: Vec<Segment> = split(&rule.path).map(segment).collect();
                Operation {
                    method: rule.method.clone(),
                    template: rule.path.clone(),
                    literals: segments
                        .iter()
                        .filter(|s| matches!(s, Segment::Literal(_)))
                        .count(),
                    segments,
                    not_offered: rule.closed,
                    version: rule.version,
                    requirement: match (rule.public, rule.open, rule.scope) {
                        (true, true, _) => Some(Requirement::Open),
                        (true, false, _) => None,
                        (false, _, Some((scope, permission))) => {
                            Some(Requirement::Scoped(scope, permission))
                        }
                        (false, _, None) => Some(Requirement::Token),
                    },
                }
            })
            .collect::<Vec<Operation>>();
        let mut by_prefix = PrefixNode::default();
        for (index, op) in operations.iter().enumerate() {
            by_prefix.insert(&op.segments, index);
        }
        AccessTable {
            operations,
            by_prefix,
            position: 0,
        }
    }

    /// This table at `position` among the releases' tables.
    pub fn placed(self, position: usize) -> AccessTable {
        AccessTable { position, ..self }
    }

    /// The operations that may match `path`, with their index: those stored along its
    /// literal prefix.
    fn candidates<'a>(
        &'a self,
        path: &'a [&'a str],
    ) -> impl Iterator<Item = (usize, &'a Operation)> + 'a {
        let mut segments = path.iter();
        std::iter::successors(Some(&self.by_prefix), move |node| {
            segments.next().and_then(|s| node.children.get(*s))
        })
        .flat_map(|node| &node.operations)
        .filter_map(|i| self.operations.get(*i).map(|op| (*i, op)))
    }

    pub fn len(&self) -> usize {
        self.operations.len()
    }

    /// The template of an operation a lookup found.
    pub fn template(&self, id: OperationId) -> &str {
        self.operations
            .get(id.index)
            .map_or("", |op| op.template.as_str())
    }

    /// What `method path` (a normalized path) needs, and the operation it matched. An
    /// operation of the same path but another method needs that path's scope with the
    /// permission the method implies; an open operation stays open only for HEAD next to
    /// its GET.
    pub fn lookup(&self, method: &Method, path: &str) -> Lookup {
        let segments: Vec<&str> = split(path).collect();
        let best = |any_method: bool| {
            self.candidates(&segments)
                .filter(|(_, op)| any_method || op.method == *method)
                .filter(|(_, op)| matches(&op.segments, &segments))
                .max_by_key(|(_, op)| (op.literals, op.segments.len(), op.method == *method))
        };
        let (index, op, exact) = match best(false) {
            Some((index, op)) => (index, op, true),
            None => match best(true) {
                Some((index, op)) => (index, op, false),
                None => {
                    return Lookup {
                        operation: None,
                        requirement: Err(AccessError::UnknownPath),
                        version: None,
                    }
                }
            },
        };
        Lookup {
            operation: Some(OperationId {
                table: self.position,
                index,
            }),
            requirement: requirement_of(op, method, exact),
            // Another method's operation on the path: its version says nothing.
            version: op.version.filter(|_| exact),
        }
    }

    /// Decides whether `user`, by the system roles of `edition`, may do what `requirement`
    /// asks.
    pub fn authorize(
        user: &User,
        requirement: Requirement,
        edition: RoleEdition,
    ) -> Result<(), AccessError> {
        match requirement {
            Requirement::Scoped(scope, permission)
                if !user.grants.allows(edition, scope, permission) =>
            {
                Err(AccessError::Forbidden(scope, permission))
            }
            _ => Ok(()),
        }
    }
}

/// What `method` needs on `op`'s path: `exact` when `op` is the operation of that method.
fn requirement_of(
    op: &Operation,
    method: &Method,
    exact: bool,
) -> Result<Requirement, AccessError> {
    if op.not_offered {
        return Err(AccessError::NotOffered);
    }
    if exact {
        return op.requirement.ok_or(AccessError::Closed);
    }
    match op.requirement {
        Some(Requirement::Scoped(scope, _)) => {
            Ok(Requirement::Scoped(scope, Permission::for_method(method)))
        }
        Some(Requirement::Token) => Ok(Requirement::Token),
        Some(Requirement::Open) if *method == Method::HEAD && op.method == Method::GET => {
            Ok(Requirement::Open)
        }
        Some(Requirement::Open) | None => Err(AccessError::Closed),
    }
}

fn segment(text: &str) -> Segment {
    if text.starts_with('{') && text.ends_with(":.*}") {
        Segment::Tail
    } else if text.starts_with('{') && text.ends_with('}') {
        Segment::Param
    } else {
        Segment::Literal(text.to_string())
    }
}

/// First segments of the API paths. The dashboard's catch-all (`/{path:.*}`) serves the
/// web UI's files; an API path that only it matches is an unknown operation.
const API_PREFIXES: [&str; 2] = ["api", "ui-api"];

fn split(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|s| !s.is_empty())
}

fn matches(template: &[Segment], path: &[&str]) -> bool {
    let (fixed, tail) = match template.split_last() {
        Some((Segment::Tail, fixed)) => (fixed, true),
        _ => (template, false),
    };
    let lengths_fit = if tail {
        path.len() >= fixed.len()
    } else {
        path.len() == fixed.len()
    };
    let catch_all_on_api = fixed.is_empty()
        && tail
        && path
            .first()
            .is_some_and(|first| API_PREFIXES.contains(first));
    lengths_fit
        && !catch_all_on_api
        && fixed.iter().zip(path).all(|(t, p)| match t {
            Segment::Literal(l) => l == p,
            Segment::Param => true,
            Segment::Tail => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::users::{Grants, Role};
    use std::sync::Arc;

    fn rule(method: &str, path: &str, scope: Option<(Scope, Permission)>) -> OperationRule {
        OperationRule {
            method: Method::from_bytes(method.as_bytes()).unwrap(),
            path: path.into(),
            scope,
            public: false,
            open: false,
            closed: false,
            version: None,
        }
    }

    fn public(method: &str, path: &str, open: bool) -> OperationRule {
        OperationRule {
            public: true,
            open,
            ..rule(method, path, None)
        }
    }

    fn table() -> AccessTable {
        use Permission::*;
        AccessTable::new(&[
            rule("GET", "/api/pool", Some((Scope::Pool, Read))),
            rule("POST", "/api/pool", Some((Scope::Pool, Create))),
            rule("GET", "/api/pool/{pool_name}", Some((Scope::Pool, Read))),
            rule("GET", "/api/pool/_info", Some((Scope::Pool, Read))),
            rule(
                "POST",
                "/api/pool/{pool_name}/configuration",
                Some((Scope::Pool, Read)),
            ),
            rule("GET", "/api/summary", None),
            rule(
                "GET",
                "/api/settings/{name}",
                Some((Scope::DashboardSettings, Read)),
            ),
            public("GET", "/{path:.*}", true),
            public("GET", "/ui-api/langs", true),
            public("POST", "/api/prometheus_receiver", false),
            public("GET", "/auth/saml2/login", false),
            OperationRule {
                closed: true,
                ..rule("POST", "/api/user/{username}/change_password", None)
            },
        ])
    }

    fn user(role: Role) -> Arc<User> {
        Arc::new(User {
            username: "u".into(),
            password_hash: None,
            roles: vec![role],
            custom_roles: Vec::new(),
            grants: Grants::of(&[role]),
            enabled: true,
            provider_subject: None,
            api_key: None,
        })
    }

    impl AccessTable {
        fn requirement(&self, method: &Method, path: &str) -> Result<Requirement, AccessError> {
            self.lookup(method, path).requirement
        }
    }

    #[test]
    fn a_lookup_names_the_template_the_path_matched() {
        let t = table();
        let name = |m: Method, p: &str| {
            t.lookup(&m, p)
                .operation
                .map(|id| t.template(id).to_string())
        };
        assert_eq!(
            name(Method::GET, "/api/pool/rbd").as_deref(),
            Some("/api/pool/{pool_name}")
        );
        assert_eq!(
            name(Method::GET, "/api/pool/_info").as_deref(),
            Some("/api/pool/_info")
        );
        assert_eq!(
            name(Method::DELETE, "/api/pool/rbd").as_deref(),
            Some("/api/pool/{pool_name}")
        );
        assert_eq!(
            name(Method::GET, "/index.html").as_deref(),
            Some("/{path:.*}")
        );
        assert_eq!(name(Method::GET, "/api/nonexistent"), None);
    }

    fn scoped(scope: Scope, permission: Permission) -> Result<Requirement, AccessError> {
        Ok(Requirement::Scoped(scope, permission))
    }

    #[test]
    fn exact_operations_give_their_requirement() {
        let t = table();
        let pool = Scope::Pool;
        assert_eq!(
            t.requirement(&Method::POST, "/api/pool"),
            scoped(pool, Permission::Create)
        );
        assert_eq!(
            t.requirement(&Method::GET, "/api/pool/rbd"),
            scoped(pool, Permission::Read)
        );
        assert_eq!(
            t.requirement(&Method::GET, "/api/summary"),
            Ok(Requirement::Token)
        );
    }

    #[test]
    fn a_decorated_permission_overrides_the_method() {
        let t = table();
        let path = "/api/pool/rbd/configuration";
        assert_eq!(
            t.requirement(&Method::POST, path),
            scoped(Scope::Pool, Permission::Read)
        );
    }

    #[test]
    fn another_method_on_a_known_path_takes_its_scope_and_the_method_permission() {
        let t = table();
        let path = "/api/pool/rbd";
        assert_eq!(
            t.requirement(&Method::DELETE, path),
            scoped(Scope::Pool, Permission::Delete)
        );
        assert_eq!(
            t.requirement(&Method::HEAD, "/api/summary"),
            Ok(Requirement::Token)
        );
    }

    #[test]
    fn unknown_paths_are_refused() {
        let t = AccessTable::new(&[rule("GET", "/api/pool", None)]);
        for path in ["/api/nonexistent", "/api/pool/a", "/api", "/"] {
            assert_eq!(
                t.requirement(&Method::GET, path),
                Err(AccessError::UnknownPath),
                "{path}"
            );
        }
    }

    #[test]
    fn the_ui_files_are_open_through_the_catch_all() {
        let t = table();
        for path in ["/", "/index.html", "/assets/img/logo.svg", "/main.1234.js"] {
            assert_eq!(
                t.requirement(&Method::GET, path),
                Ok(Requirement::Open),
                "{path}"
            );
        }
        assert_eq!(
            t.requirement(&Method::HEAD, "/index.html"),
            Ok(Requirement::Open)
        );
        assert_eq!(
            t.requirement(&Method::POST, "/index.html"),
            Err(AccessError::Closed)
        );
        assert_eq!(
            t.requirement(&Method::GET, "/ui-api/langs"),
            Ok(Requirement::Open)
        );
    }

    #[test]
    fn the_catch_all_does_not_open_unknown_api_paths() {
        let t = table();
        for path in ["/api/nonexistent", "/ui-api/x", "/api"] {
            assert_eq!(
                t.requirement(&Method::GET, path),
                Err(AccessError::UnknownPath),
                "{path}"
            );
        }
    }

    #[test]
    fn public_operations_the_gateway_does_not_offer_stay_closed() {
        let t = table();
        let receiver = "/api/prometheus_receiver";
        assert_eq!(
            t.requirement(&Method::POST, receiver),
            Err(AccessError::Closed)
        );
        assert_eq!(
            t.requirement(&Method::GET, "/auth/saml2/login"),
            Err(AccessError::Closed)
        );
    }

    #[test]
    fn closed_operations_are_refused_whoever_asks() {
        let t = table();
        let path = "/api/user/clustergate/change_password";
        assert_eq!(
            t.requirement(&Method::POST, path),
            Err(AccessError::NotOffered)
        );
        assert_eq!(
            t.requirement(&Method::PUT, path),
            Err(AccessError::NotOffered)
        );
    }

    #[test]
    fn read_only_users_may_read_but_not_create() {
        let t = table();
        let decide = |u: &User, m: Method, p: &str| {
            AccessTable::authorize(
                u,
                t.requirement(&m, p).unwrap(),
                crate::users::RoleEdition::Pacific,
            )
        };
        let viewer = user(Role::ReadOnly);
        assert!(decide(&viewer, Method::GET, "/api/pool").is_ok());
        assert_eq!(
            decide(&viewer, Method::POST, "/api/pool"),
            Err(AccessError::Forbidden(Scope::Pool, Permission::Create))
        );
        assert!(decide(&viewer, Method::GET, "/api/settings/x").is_err());
        assert!(decide(&user(Role::PoolManager), Method::POST, "/api/pool").is_ok());
    }

    #[test]
    fn the_shipped_table_answers_like_the_dashboard() {
        let dir = tempfile::tempdir().unwrap();
        let shipped = crate::config::shipped_for_tests(dir.path());
        let table = AccessTable::new(&shipped.access.tables[0].operations);
        let scoped = |s, p| Ok(Requirement::Scoped(s, p));
        let cases = [
            ("POST", "/api/pool", scoped(Scope::Pool, Permission::Create)),
            (
                "GET",
                "/api/pool/rbd",
                scoped(Scope::Pool, Permission::Read),
            ),
            (
                "POST",
                "/api/block/image/rbd%2Fimg/flatten",
                scoped(Scope::RbdImage, Permission::Update),
            ),
            (
                "POST",
                "/api/osd/3/scrub",
                scoped(Scope::Osd, Permission::Update),
            ),
            (
                "GET",
                "/api/settings",
                scoped(Scope::ConfigOpt, Permission::Read),
            ),
            (
                "DELETE",
                "/api/user/x",
                scoped(Scope::User, Permission::Delete),
            ),
            ("GET", "/api/summary", Ok(Requirement::Token)),
            ("GET", "/", Ok(Requirement::Open)),
            ("GET", "/ui-api/langs", Ok(Requirement::Open)),
            ("POST", "/api/prometheus_receiver", Err(AccessError::Closed)),
            ("GET", "/auth/saml2/login", Err(AccessError::Closed)),
            ("GET", "/api/nonexistent", Err(AccessError::UnknownPath)),
        ];
        for (method, path, expected) in cases {
            let method = http::Method::from_bytes(method.as_bytes()).unwrap();
            assert_eq!(
                table.lookup(&method, path).requirement,
                expected,
                "{method} {path}"
            );
        }
    }

    /// Each release's table carries the versions its dashboard checks (they moved).
    #[test]
    fn the_shipped_tables_carry_each_operations_version() {
        let dir = tempfile::tempdir().unwrap();
        let shipped = crate::config::shipped_for_tests(dir.path());
        let version = |table: usize, method: &str, path: &str| {
            let method = Method::from_bytes(method.as_bytes()).unwrap();
            let table = AccessTable::new(&shipped.access.tables[table].operations);
            table.lookup(&method, path).version.map(|v| v.to_string())
        };
        let v = |s: &str| Some(s.to_string());
        assert_eq!(version(2, "GET", "/api/crush_rule"), v("2.0"));
        assert_eq!(version(2, "GET", "/api/host"), v("1.3"));
        assert_eq!(version(2, "GET", "/api/host/node1"), v("1.2"));
        assert_eq!(version(2, "GET", "/api/osd"), v("1.1"));
        assert_eq!(version(2, "GET", "/api/health/minimal"), v("1.0"));
        assert_eq!(version(1, "GET", "/api/osd"), v("1.1"));
        assert_eq!(version(0, "GET", "/api/health/minimal"), v("1.0"));
        // Another method's operation on the path: the dashboard decides.
        assert_eq!(version(2, "PATCH", "/api/health/minimal"), None);
        assert_eq!(version(2, "GET", "/docs/api.json"), None);
    }
}
