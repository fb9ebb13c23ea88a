//! The users and roles files as `clustergate users import` writes them: the loader's own
//! file structs, serialized, so that what is written is what the gateway reads.

use std::collections::BTreeMap;

use super::file::{RoleEntry, RolesFile, UserEntry, UsersFile};

/// One user of the users file. No `Debug`: it holds a password hash.
pub struct UserRecord {
    pub username: String,
    /// A bcrypt or argon2 hash, as the users file holds it.
    pub password_hash: String,
    /// System and custom role names.
    pub roles: Vec<String>,
    pub enabled: bool,
}

/// One role of the roles file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleRecord {
    pub name: String,
    pub description: String,
    pub scopes_permissions: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot write the file as TOML: {0}")]
pub struct ExportError(#[from] toml::ser::Error);

/// The users file's text: `header` (comment lines), then the users in the order given.
pub fn users_file_text(header: &str, users: Vec<UserRecord>) -> Result<String, ExportError> {
    let users = users
        .into_iter()
        .map(|u| {
            let UserRecord {
                username,
                password_hash,
                roles,
                enabled,
            } = u;
            UserEntry {
                username,
                password_hash,
                roles,
                enabled,
            }
        })
        .collect();
    Ok(format!(
        "{header}\n\n{}",
        toml::to_string(&UsersFile { users })?
    ))
}

/// The roles file's text: `header` (comment lines), then the roles in the order given.
pub fn roles_file_text(header: &str, roles: Vec<RoleRecord>) -> Result<String, ExportError> {
    let roles = roles
        .into_iter()
        .map(|r| {
            let RoleRecord {
                name,
                description,
                scopes_permissions,
            } = r;
            RoleEntry {
                name,
                description,
                scopes_permissions,
            }
        })
        .collect();
    Ok(format!(
        "{header}\n\n{}",
        toml::to_string(&RolesFile { roles })?
    ))
}
