//! Authorization at the edge: which scope and permission a dashboard operation needs,
//! from the shipped table (`conf/scopes.toml`, derived from the dashboard's controllers),
//! compiled once into a matcher over path segments.

use http::Method;

use crate::config::OperationRule;
use crate::users::{Permission, Scope, User};

/// What an API request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
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
    #[error("the user's roles do not grant {1:?} on {0:?}")]
    Forbidden(Scope, Permission),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Param,
}

#[derive(Debug)]
struct Operation {
    method: Method,
    segments: Vec<Segment>,
    /// Literal segments count: the most specific template wins.
    literals: usize,
    requirement: Requirement,
    public: bool,
}

/// The compiled table.
#[derive(Debug, Default)]
pub struct AccessTable {
    operations: Vec<Operation>,
}

impl AccessTable {
    pub fn new(rules: &[OperationRule]) -> AccessTable {
        let operations = rules
            .iter()
            .map(|rule| {
                let segments: Vec<Segment> = split(&rule.path)
                    .map(|s| {
                        if s.starts_with('{') && s.ends_with('}') {
                            Segment::Param
                        } else {
                            Segment::Literal(s.to_string())
                        }
                    })
                    .collect();
                Operation {
                    method: rule.method.clone(),
                    literals: segments
                        .iter()
                        .filter(|s| matches!(s, Segment::Literal(_)))
                        .count(),
                    segments,
                    requirement: match rule.scope {
                        Some((scope, permission)) => Requirement::Scoped(scope, permission),
                        None => Requirement::Token,
                    },
                    public: rule.public,
                }
            })
            .collect();
        AccessTable { operations }
    }

    pub fn len(&self) -> usize {
        self.operations.len()
    }

    pub fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }

    /// What `method path` (a normalized path) needs. An operation of the same path but
    /// another method (HEAD, OPTIONS, ...) needs that path's scope with the permission the
    /// method implies.
    pub fn requirement(&self, method: &Method, path: &str) -> Result<Requirement, AccessError> {
        let segments: Vec<&str> = split(path).collect();
        let best = |same_method: bool| {
            self.operations
                .iter()
                .filter(|op| !same_method || op.method == *method)
                .filter(|op| matches(&op.segments, &segments))
                .max_by_key(|op| (op.literals, op.method == *method))
        };
        if let Some(op) = best(true) {
            return Ok(op.requirement);
        }
        match best(false).map(|op| op.requirement) {
            Some(Requirement::Scoped(scope, _)) => {
                Ok(Requirement::Scoped(scope, Permission::for_method(method)))
            }
            Some(Requirement::Token) => Ok(Requirement::Token),
            None => Err(AccessError::UnknownPath),
        }
    }

    /// Whether `method path` is one the backend serves without any token.
    pub fn is_public(&self, method: &Method, path: &str) -> bool {
        let segments: Vec<&str> = split(path).collect();
        self.operations
            .iter()
            .filter(|op| op.method == *method && matches(&op.segments, &segments))
            .max_by_key(|op| op.literals)
            .is_some_and(|op| op.public)
    }

    /// Decides whether `user` may send `method path`.
    pub fn authorize(
        &self,
        user: &User,
        method: &Method,
        path: &str,
    ) -> Result<Requirement, AccessError> {
        let requirement = self.requirement(method, path)?;
        match requirement {
            Requirement::Scoped(scope, permission) if !user.grants.allows(scope, permission) => {
                Err(AccessError::Forbidden(scope, permission))
            }
            _ => Ok(requirement),
        }
    }
}

fn split(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|s| !s.is_empty())
}

fn matches(template: &[Segment], path: &[&str]) -> bool {
    template.len() == path.len()
        && template.iter().zip(path).all(|(t, p)| match t {
            Segment::Literal(l) => l == p,
            Segment::Param => true,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::users::{Grants, PasswordHash, Role};
    use std::sync::Arc;

    fn rule(method: &str, path: &str, scope: Option<(Scope, Permission)>) -> OperationRule {
        OperationRule {
            method: Method::from_bytes(method.as_bytes()).unwrap(),
            path: path.into(),
            scope,
            public: false,
        }
    }

    fn table() -> AccessTable {
        AccessTable::new(&[
            rule("GET", "/api/pool", Some((Scope::Pool, Permission::Read))),
            rule("POST", "/api/pool", Some((Scope::Pool, Permission::Create))),
            rule(
                "GET",
                "/api/pool/{pool_name}",
                Some((Scope::Pool, Permission::Read)),
            ),
            rule(
                "GET",
                "/api/pool/_info",
                Some((Scope::Pool, Permission::Read)),
            ),
            rule(
                "POST",
                "/api/pool/{pool_name}/configuration",
                Some((Scope::Pool, Permission::Read)),
            ),
            rule("GET", "/api/summary", None),
            rule(
                "GET",
                "/api/settings/{name}",
                Some((Scope::DashboardSettings, Permission::Read)),
            ),
        ])
    }

    fn user(role: Role) -> Arc<crate::users::User> {
        Arc::new(crate::users::User {
            username: "u".into(),
            password_hash: Arc::new(PasswordHash::Bcrypt(String::new())),
            roles: vec![role],
            grants: Grants::of(&[role]),
            enabled: true,
        })
    }

    #[test]
    fn exact_operations_give_their_requirement() {
        let t = table();
        assert_eq!(
            t.requirement(&Method::POST, "/api/pool"),
            Ok(Requirement::Scoped(Scope::Pool, Permission::Create))
        );
        assert_eq!(
            t.requirement(&Method::GET, "/api/pool/rbd"),
            Ok(Requirement::Scoped(Scope::Pool, Permission::Read))
        );
        assert_eq!(
            t.requirement(&Method::GET, "/api/summary"),
            Ok(Requirement::Token)
        );
    }

    #[test]
    fn a_decorated_permission_overrides_the_method() {
        let t = table();
        assert_eq!(
            t.requirement(&Method::POST, "/api/pool/rbd/configuration"),
            Ok(Requirement::Scoped(Scope::Pool, Permission::Read))
        );
    }

    #[test]
    fn another_method_on_a_known_path_takes_its_scope_and_the_method_permission() {
        let t = table();
        assert_eq!(
            t.requirement(&Method::DELETE, "/api/pool/rbd"),
            Ok(Requirement::Scoped(Scope::Pool, Permission::Delete))
        );
        assert_eq!(
            t.requirement(&Method::HEAD, "/api/summary"),
            Ok(Requirement::Token)
        );
    }

    #[test]
    fn unknown_paths_are_refused() {
        let t = table();
        assert_eq!(
            t.requirement(&Method::GET, "/api/nonexistent"),
            Err(AccessError::UnknownPath)
        );
        assert_eq!(
            t.requirement(&Method::GET, "/api/pool/a/b/c"),
            Err(AccessError::UnknownPath)
        );
        assert_eq!(
            t.requirement(&Method::GET, "/api"),
            Err(AccessError::UnknownPath)
        );
    }

    #[test]
    fn read_only_users_may_read_but_not_create() {
        let t = table();
        let viewer = user(Role::ReadOnly);
        assert!(t.authorize(&viewer, &Method::GET, "/api/pool").is_ok());
        assert_eq!(
            t.authorize(&viewer, &Method::POST, "/api/pool"),
            Err(AccessError::Forbidden(Scope::Pool, Permission::Create))
        );
        assert!(t
            .authorize(&viewer, &Method::GET, "/api/settings/x")
            .is_err());
        assert!(t
            .authorize(&user(Role::PoolManager), &Method::POST, "/api/pool")
            .is_ok());
    }
}
