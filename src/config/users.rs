//! The users file (`auth.users_file`): each user's password hash, roles and whether it is
//! enabled. A missing file means no users: the first start then creates an admin. A user's
//! roles are the dashboard's system roles or the roles file's custom roles.

use std::path::{Path, PathBuf};

use super::file::UsersFile;
use super::parse::toml_file;
use super::roles::RolesConfig;
use super::ConfigErrors;
use crate::users::{CustomRole, PasswordHash, Role, UserSpec, PROVIDER_NAME_PREFIX};

#[derive(Debug, Clone)]
pub struct UsersConfig {
    pub file: PathBuf,
    /// Empty when the file does not exist: the first start then creates an admin.
    pub users: Vec<UserSpec>,
    /// The custom roles they may hold (`auth.roles_file`).
    pub roles: RolesConfig,
}

impl UsersConfig {
    /// No users (`auth.source = "dashboard"`): `file` is not read.
    pub(super) fn none(file: PathBuf) -> UsersConfig {
        UsersConfig {
            file,
            users: Vec::new(),
            roles: RolesConfig::default(),
        }
    }
}

pub(super) fn load(errors: &mut ConfigErrors, path: PathBuf, roles: RolesConfig) -> UsersConfig {
    let users = read(errors, &path, &roles.roles);
    UsersConfig {
        file: path,
        users,
        roles,
    }
}

fn read(errors: &mut ConfigErrors, path: &Path, custom: &[CustomRole]) -> Vec<UserSpec> {
    let file: UsersFile = toml_file(errors, path, None);
    let mut users: Vec<UserSpec> = Vec::with_capacity(file.users.len());
    for (i, entry) in file.users.into_iter().enumerate() {
        let key = format!("users[{i}] ({:?})", entry.username);
        if entry.username.is_empty() || entry.username.chars().any(char::is_control) {
            errors.push(
                path,
                &key,
                "username must be non-empty, without control characters",
            );
        }
        if entry.username.starts_with(PROVIDER_NAME_PREFIX) {
            errors.push(
                path,
                &key,
                format!("usernames starting with {PROVIDER_NAME_PREFIX:?} are kept for single sign-on users named like a user of this file; rename the user"),
            );
        }
        if users.iter().any(|u| u.username == entry.username) {
            errors.push(path, &key, "duplicate username: each user must appear once");
        }
        let password_hash = match PasswordHash::parse(&entry.password_hash) {
            Ok(hash) => Some(hash),
            Err(e) => {
                errors.push(path, format!("{key}.password_hash"), e.to_string());
                None
            }
        };
        let (roles, custom_roles) =
            roles(errors, path, &format!("{key}.roles"), &entry.roles, custom);
        if let Some(password_hash) = password_hash {
            users.push(UserSpec {
                username: entry.username,
                password_hash,
                roles,
                custom_roles,
                enabled: entry.enabled,
            });
        }
    }
    users
}

/// The system roles and custom roles `names` refers to; a name that is neither is reported
/// under `key` (the users file's users and `oidc.role_map` hold roles the same way).
pub(super) fn roles(
    errors: &mut ConfigErrors,
    path: &Path,
    key: &str,
    names: &[String],
    custom: &[CustomRole],
) -> (Vec<Role>, Vec<CustomRole>) {
    let mut system = Vec::with_capacity(names.len());
    let mut held = Vec::new();
    for name in names {
        if let Some(role) = Role::from_name(name) {
            system.push(role);
        } else if let Some(role) = custom.iter().find(|r| &r.name == name) {
            held.push(role.clone());
        } else {
            let customs: Vec<&str> = custom.iter().map(|r| r.name.as_str()).collect();
            let defined = match customs.is_empty() {
                true => "none; define it in auth.roles_file".to_string(),
                false => customs.join(", "),
            };
            errors.push(
                path,
                key,
                format!(
                    "unknown role {name:?}; the dashboard's system roles are {}; the roles file's custom roles are {defined}",
                    Role::ALL.map(Role::name).join(", ")
                ),
            );
        }
    }
    (system, held)
}
