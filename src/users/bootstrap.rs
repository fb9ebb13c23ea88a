//! First start without users: an `admin` with a random password written to
//! `state_dir/initial-admin-password`, so a fresh install is usable and never open.

use std::path::{Path, PathBuf};

use super::{PasswordHash, Role, UserSpec};
use crate::secrets::{self, SecretError};

pub const INITIAL_ADMIN: &str = "admin";
pub const PASSWORD_FILE: &str = "initial-admin-password";

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error(transparent)]
    Secret(#[from] SecretError),
    #[error("{0}: holds no password")]
    Empty(PathBuf),
    #[error(transparent)]
    Hash(#[from] super::password::HashError),
}

/// Returns the users to serve: `specs` as they are when one is enabled; otherwise
/// `specs` with `admin` (administrator) added or replaced, its password read from, or
/// first written to, the password file, whose path is returned for the log.
pub fn ensure_admin(
    mut specs: Vec<UserSpec>,
    state_dir: &Path,
) -> Result<(Vec<UserSpec>, Option<PathBuf>), BootstrapError> {
    if specs.iter().any(|u| u.enabled) {
        return Ok((specs, None));
    }
    let path = state_dir.join(PASSWORD_FILE);
    if !path.exists() {
        secrets::write_private(&path, secrets::random_text().as_bytes())?;
    }
    let password = std::fs::read_to_string(&path).map_err(|source| SecretError::Io {
        path: path.clone(),
        source,
    })?;
    let password = password.trim();
    if password.is_empty() {
        return Err(BootstrapError::Empty(path));
    }
    specs.retain(|u| u.username != INITIAL_ADMIN);
    specs.push(UserSpec {
        username: INITIAL_ADMIN.into(),
        password_hash: PasswordHash::hash_new(password)?,
        roles: vec![Role::Administrator],
        custom_roles: Vec::new(),
        enabled: true,
    });
    Ok((specs, Some(path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_users_creates_an_admin_whose_password_is_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (users, path) = ensure_admin(vec![], dir.path()).unwrap();
        let path = path.unwrap();
        let password = std::fs::read_to_string(&path).unwrap();
        assert_eq!(users.len(), 1);
        assert_eq!(users[0].roles, vec![Role::Administrator]);
        assert!(users[0].password_hash.verify(password.trim()));
        // A restart reuses the same password.
        let (again, _) = ensure_admin(vec![], dir.path()).unwrap();
        assert!(again[0].password_hash.verify(password.trim()));
    }

    #[test]
    fn an_enabled_user_means_no_admin_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let alice = UserSpec {
            username: "alice".into(),
            password_hash: PasswordHash::hash_new("pw").unwrap(),
            roles: vec![],
            custom_roles: Vec::new(),
            enabled: true,
        };
        let (users, path) = ensure_admin(vec![alice], dir.path()).unwrap();
        assert_eq!(users.len(), 1);
        assert!(path.is_none());
        assert!(!dir.path().join(PASSWORD_FILE).exists());
    }
}
