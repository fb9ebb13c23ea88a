//! The gateway's users: who they are, whether they may log in, what their roles grant.
//! Built once at start-up from the validated users file.

pub mod bootstrap;
pub mod password;
pub mod roles;

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use sha2::{Digest, Sha256};

use crate::api_keys::KeyLabel;
use crate::state::UnixTime;

pub use password::{PasswordChecker, PasswordHash};
pub use roles::{Grants, Permission, Role, RoleEdition, Scope, UnknownNames};

/// Starts the name of a single sign-on user shown apart from the users file's users (a
/// provider user named like one of them); no users-file name starts with it.
pub const PROVIDER_NAME_PREFIX: &str = "oidc:";

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
    /// The roles file's roles the user holds (a users file's or a role map's), beside
    /// `roles`; their grants are in `grants` too.
    pub custom_roles: Vec<CustomRole>,
    pub grants: Grants,
    pub enabled: bool,
    /// `Some`: a single sign-on user, the identity provider's `sub` for them (the audit
    /// names it beside the username).
    pub provider_subject: Option<String>,
    /// `Some`: this user is an API key's owner acting with the key's roles.
    pub api_key: Option<Arc<KeyLabel>>,
}

impl User {
    /// How the user authenticated, as the audit names it.
    pub fn auth_method(&self) -> &'static str {
        match (&self.provider_subject, &self.password_hash) {
            _ if self.api_key.is_some() => "api_key",
            (Some(_), _) => "oidc",
            (None, Some(_)) => "local",
            (None, None) => "dashboard",
        }
    }

    /// A user the dashboard logged in, granted what the dashboard's answer named.
    pub fn from_dashboard(username: String, grants: Grants) -> User {
        User {
            username,
            password_hash: None,
            roles: Vec::new(),
            custom_roles: Vec::new(),
            grants,
            enabled: true,
            provider_subject: None,
            api_key: None,
        }
    }
}

/// What a user's tokens were issued for: a token whose claim differs was issued for a
/// password hash or roles the user no longer has. Loaded with the users, so a reload that
/// changes them refuses the tokens issued before.
#[derive(Debug)]
pub struct Credential {
    /// [`Credential::fingerprint`] of the user's password hash and roles.
    pub fingerprint: String,
    /// When a reload last removed, disabled or changed this user (on any gateway of the
    /// deployment): tokens issued before are refused even if the same credential is back.
    /// Read from the state store on the first token check after the users were loaded,
    /// then kept: the token check costs no round trip.
    pub reset_at: tokio::sync::OnceCell<Option<UnixTime>>,
}

impl Credential {
    /// A digest of the password hash and the roles, in the users file's order: the hash
    /// carries its own random salt, so the fingerprint (readable in the token) tells nothing
    /// about the password.
    fn fingerprint(spec: &UserSpec) -> String {
        let hash = match &spec.password_hash {
            PasswordHash::Argon2(text) | PasswordHash::Bcrypt(text) => text,
        };
        let mut digest = Sha256::new();
        digest.update(hash.as_bytes());
        for role in spec.roles.iter().map(|r| r.name()) {
            digest.update([0]);
            digest.update(role.as_bytes());
        }
        digest.update([0, 0]);
        for custom in &spec.custom_roles {
            digest.update([0]);
            digest.update(custom.name.as_bytes());
        }
        // 128 bits: no one can make another credential with the same fingerprint.
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest.finalize()[..16])
    }
}

/// A configured user and the credential their tokens must carry.
#[derive(Debug)]
struct Account {
    user: Arc<User>,
    credential: Arc<Credential>,
}

/// Every configured user, by name.
#[derive(Debug)]
pub struct UserDb {
    users: HashMap<String, Account>,
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
                let credential = Arc::new(Credential {
                    fingerprint: Credential::fingerprint(&spec),
                    reset_at: tokio::sync::OnceCell::new(),
                });
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
                    custom_roles,
                    enabled,
                    provider_subject: None,
                    api_key: None,
                };
                let account = Account {
                    user: Arc::new(user),
                    credential,
                };
                (username, account)
            })
            .collect();
        Ok(UserDb { users, stand_in })
    }

    /// Whether the users file names `username`, enabled or not.
    pub fn contains(&self, username: &str) -> bool {
        self.users.contains_key(username)
    }

    /// The user, if it exists and is enabled: the only users that may log in or hold a
    /// valid token.
    pub fn active(&self, username: &str) -> Option<&Arc<User>> {
        self.active_with_credential(username).map(|(user, _)| user)
    }

    /// [`UserDb::active`], with the credential its tokens must carry.
    pub fn active_with_credential(&self, username: &str) -> Option<(&Arc<User>, &Arc<Credential>)> {
        self.users
            .get(username)
            .filter(|a| a.user.enabled)
            .map(|a| (&a.user, &a.credential))
    }

    /// The users active in `self` whose tokens `new` must refuse however they come back:
    /// removed or disabled there (`Gone`), or with another password hash or roles
    /// (`Changed`), by name.
    pub fn resets_in(&self, new: &UserDb) -> Vec<(&str, Reset)> {
        let mut resets: Vec<(&str, Reset)> = self
            .users
            .iter()
            .filter(|(_, a)| a.user.enabled)
            .filter_map(|(name, old)| match new.active_with_credential(name) {
                None => Some((name.as_str(), Reset::Gone)),
                Some((_, credential)) if credential.fingerprint != old.credential.fingerprint => {
                    Some((name.as_str(), Reset::Changed))
                }
                Some(_) => None,
            })
            .collect();
        resets.sort_unstable();
        resets
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

/// How a reload changed a user whose earlier tokens it refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reset {
    /// Removed or disabled: no token of theirs is good until they are back.
    Gone,
    /// Another password hash or other roles: tokens carry the old fingerprint.
    Changed,
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

    /// An unknown user's login is checked against the stand-in: it must cost what the
    /// costliest user's does (timed in `bench/refusal_timing.py`).
    #[test]
    fn the_stand_in_costs_what_the_costliest_users_hash_does() {
        let mut costly = spec("costly", true);
        costly.password_hash = PasswordHash::Bcrypt(bcrypt::hash("pw", 5).unwrap());
        let db = UserDb::new(vec![spec("cheap", true), costly]).unwrap();
        let PasswordHash::Bcrypt(text) = db.stand_in.as_ref() else {
            panic!("not bcrypt: {:?}", db.stand_in)
        };
        assert!(text.starts_with("$2b$05$"), "{text}");
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
    fn a_reload_resets_users_removed_disabled_or_with_another_hash_or_roles() {
        let same = spec("same", true);
        let mut rehashed = spec("rehashed", true);
        let mut reroled = spec("reroled", true);
        let old = UserDb::new(vec![
            same.clone(),
            rehashed.clone(),
            reroled.clone(),
            spec("removed", true),
            spec("disabled", true),
            spec("was-disabled", false),
        ])
        .unwrap();
        rehashed.password_hash = PasswordHash::Bcrypt(bcrypt::hash("pw", 4).unwrap());
        reroled.roles.push(Role::PoolManager);
        let new = UserDb::new(vec![
            same,
            rehashed,
            reroled,
            spec("disabled", false),
            spec("was-disabled", true),
            spec("added", true),
        ])
        .unwrap();
        assert_eq!(
            old.resets_in(&new),
            [
                ("disabled", Reset::Gone),
                ("rehashed", Reset::Changed),
                ("removed", Reset::Gone),
                ("reroled", Reset::Changed),
            ]
        );
        let fingerprint = |db: &UserDb, name| {
            db.active_with_credential(name)
                .unwrap()
                .1
                .fingerprint
                .clone()
        };
        assert_eq!(fingerprint(&old, "same"), fingerprint(&new, "same"));
        assert_eq!(fingerprint(&old, "same").len(), 22);
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
        assert!(user.grants.allows(
            crate::users::RoleEdition::Pacific,
            Scope::Osd,
            Permission::Update
        ));
        assert!(user.grants.allows(
            crate::users::RoleEdition::Pacific,
            Scope::Pool,
            Permission::Read
        ));
        assert!(!user.grants.allows(
            crate::users::RoleEdition::Pacific,
            Scope::Osd,
            Permission::Delete
        ));
        assert!(!user.grants.allows(
            crate::users::RoleEdition::Pacific,
            Scope::ConfigOpt,
            Permission::Read
        ));
    }
}
