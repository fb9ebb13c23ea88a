//! The gateway's users: who they are, whether they may log in, what their roles grant.
//! Built once at start-up from the validated users file.

pub mod bootstrap;
pub mod password;
pub mod roles;

use std::collections::HashMap;
use std::sync::Arc;

pub use password::{PasswordChecker, PasswordHash};
pub use roles::{Grants, Permission, Role, Scope, UnknownNames};

/// A role defined in the roles file (`auth.roles_file`), as the dashboard's custom roles
/// are: a name and what it grants on each scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomRole {
    pub name: String,
    pub grants: Grants,
}

/// A user as the configuration describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSpec {
    pub username: String,
    pub password_hash: PasswordHash,
    pub roles: Vec<Role>,
    /// The roles file's roles this user holds, beside its system roles.
    pub custom_roles: Vec<CustomRole>,
    pub enabled: bool,
}

/// A user the gateway knows, with its grants computed once.
#[derive(Debug)]
pub struct User {
    pub username: String,
    /// `None`: the dashboard checked this user's password (`auth.source = "dashboard"`).
    pub password_hash: Option<Arc<PasswordHash>>,
    pub roles: Vec<Role>,
    pub grants: Grants,
    pub enabled: bool,
}

impl User {
    /// A user the dashboard logged in, granted what the dashboard's answer named.
    pub fn from_dashboard(username: String, grants: Grants) -> User {
        User {
            username,
            password_hash: None,
            roles: Vec::new(),
            grants,
            enabled: true,
        }
    }
}

/// Every configured user, by name.
#[derive(Debug)]
pub struct UserDb {
    users: HashMap<String, Arc<User>>,
    /// What a login of a user that is not here (or is locked) is checked against: it
    /// costs what these users' hashes cost ([`PasswordHash::stand_in`]).
    pub stand_in: Arc<PasswordHash>,
}

impl UserDb {
    /// Slow: hashes the stand-in (up to the users' highest bcrypt cost).
    pub fn new(specs: Vec<UserSpec>) -> Result<UserDb, password::HashError> {
        let stand_in = Arc::new(PasswordHash::stand_in(
            specs.iter().map(|spec| &spec.password_hash),
        )?);
        let users = specs
            .into_iter()
            .map(|spec| {
                let UserSpec {
                    username,
                    password_hash,
                    roles,
                    custom_roles,
                    enabled,
                } = spec;
                // The dashboard's `User.permissions_dict`: the union over every role held.
                let grants = custom_roles
                    .iter()
                    .fold(Grants::of(&roles), |all, custom| all.union(&custom.grants));
                let user = User {
                    grants,
                    username: username.clone(),
                    password_hash: Some(Arc::new(password_hash)),
                    roles,
                    enabled,
                };
                (username, Arc::new(user))
            })
            .collect();
        Ok(UserDb { users, stand_in })
    }

    /// The user, if it exists and is enabled: the only users that may log in or hold a
    /// valid token.
    pub fn active(&self, username: &str) -> Option<&Arc<User>> {
        self.users.get(username).filter(|u| u.enabled)
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, enabled: bool) -> UserSpec {
        UserSpec {
            username: name.into(),
            password_hash: PasswordHash::Bcrypt(bcrypt::hash("pw", 4).unwrap()),
            roles: vec![Role::ReadOnly],
            custom_roles: Vec::new(),
            enabled,
        }
    }

    #[test]
    fn active_finds_enabled_users_only() {
        let db = UserDb::new(vec![spec("alice", true), spec("bob", false)]).unwrap();
        assert!(db.active("alice").is_some());
        assert!(db.active("bob").is_none());
        assert!(db.active("carol").is_none());
        assert_eq!(db.len(), 2);
    }

    #[test]
    fn a_users_grants_are_the_union_of_its_system_and_custom_roles() {
        let perms = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let osd = perms(&["read", "update"]);
        let (grants, _) = Grants::from_permissions([("osd", osd.as_slice())]);
        let mut alice = spec("alice", true);
        alice.custom_roles = vec![CustomRole {
            name: "osd-tuner".into(),
            grants,
        }];
        let db = UserDb::new(vec![alice]).unwrap();
        let user = db.active("alice").unwrap();
        assert!(user.grants.allows(Scope::Osd, Permission::Update));
        assert!(user.grants.allows(Scope::Pool, Permission::Read));
        assert!(!user.grants.allows(Scope::Osd, Permission::Delete));
        assert!(!user.grants.allows(Scope::ConfigOpt, Permission::Read));
    }
}
