//! The users file (`auth.users_file`): each user's password hash, roles and whether it is
//! enabled. A missing file means no users: the first start then creates an admin.

use std::path::{Path, PathBuf};

use super::file::UsersFile;
use super::ConfigErrors;
use crate::users::{PasswordHash, Role, UserSpec};

#[derive(Debug, Clone)]
pub struct UsersConfig {
    pub file: PathBuf,
    /// Empty when the file does not exist: the first start then creates an admin.
    pub users: Vec<UserSpec>,
}

pub(super) fn load(errors: &mut ConfigErrors, path: PathBuf) -> UsersConfig {
    let users = read(errors, &path);
    UsersConfig { file: path, users }
}

fn read(errors: &mut ConfigErrors, path: &Path) -> Vec<UserSpec> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            errors.push(path, "file", format!("cannot read: {e}"));
            return Vec::new();
        }
    };
    let file: UsersFile = match toml::from_str(&text) {
        Ok(file) => file,
        Err(e) => {
            errors.push_toml(path, &text, &e);
            return Vec::new();
        }
    };
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
        let roles = roles(errors, path, &key, &entry.roles);
        if let Some(password_hash) = password_hash {
            users.push(UserSpec {
                username: entry.username,
                password_hash,
                roles,
                enabled: entry.enabled,
            });
        }
    }
    users
}

fn roles(errors: &mut ConfigErrors, path: &Path, key: &str, names: &[String]) -> Vec<Role> {
    let mut roles = Vec::with_capacity(names.len());
    for name in names {
        match Role::from_name(name) {
            Some(role) => roles.push(role),
            None => errors.push(
                path,
                format!("{key}.roles"),
                format!(
                    "unknown role {name:?}; the dashboard's system roles are {}",
                    Role::ALL.map(Role::name).join(", ")
                ),
            ),
        }
    }
    roles
}
