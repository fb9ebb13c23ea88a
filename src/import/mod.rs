//! `clustergate users import`: the dashboard's accounts, read with the `ceph` CLI, written
//! as a users file and a roles file the gateway accepts (bcrypt hashes, roles and disabled
//! users kept). The same cluster gives the same bytes; nothing printed holds a hash.
//!
//! Only the `ceph` CLI is read: the dashboard's REST API (`/api/user`) does not return
//! password hashes, so users imported from it could not log in with `auth.source = "local"`.

mod ceph;
mod convert;

use std::path::{Path, PathBuf};

pub use ceph::{CephCli, CephError};

use crate::config::{roles_file_text, users_file_text, ExportError};
use crate::secrets::{self, SecretError};
use crate::users::Role;

/// The most users or roles read from one dashboard (each is one `ceph` call).
const MAX_ACCOUNTS: usize = 10_000;

const USERS_HEADER: &str =
    "# Written by `clustergate users import` from the dashboard's accounts.\n\
# The password hashes are the dashboard's bcrypt hashes: keep this file private.";
const ROLES_HEADER: &str =
    "# Written by `clustergate users import` from the dashboard's custom roles.";

/// Where to write, and whether existing files may be replaced.
#[derive(Debug, Clone)]
pub struct Destination {
    pub users_file: PathBuf,
    pub roles_file: PathBuf,
    pub force: bool,
}

/// What was written, and what the operator should know (no hashes).
#[derive(Debug)]
pub struct Imported {
    pub users: usize,
    pub disabled: usize,
    pub roles: usize,
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{0} exists; pass --force to replace it")]
    Exists(PathBuf),
    #[error("the dashboard has more than {MAX_ACCOUNTS} {0}")]
    TooMany(&'static str),
    #[error(transparent)]
    Ceph(#[from] CephError),
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error("cannot write {0}")]
    Write(#[from] SecretError),
}

/// Reads the accounts through `ceph` and writes both files; nothing is written when either
/// file exists without `force`, or when reading fails. `now` is Unix seconds.
pub fn import(ceph: &CephCli, to: &Destination, now: i64) -> Result<Imported, ImportError> {
    for path in [&to.users_file, &to.roles_file] {
        if !to.force && path.exists() {
            return Err(ImportError::Exists(path.clone()));
        }
    }
    let users = bounded(ceph.user_names()?, "users")?
        .iter()
        .map(|name| ceph.user(name))
        .collect::<Result<Vec<_>, _>>()?;
    let roles = bounded(ceph.role_names()?, "roles")?
        .iter()
        .filter(|name| Role::from_name(name).is_none())
        .map(|name| ceph.role(name))
        .collect::<Result<Vec<_>, _>>()?;
    let accounts = convert::accounts(users, roles, now);
    let imported = Imported {
        users: accounts.users.len(),
        disabled: accounts.users.iter().filter(|u| !u.enabled).count(),
        roles: accounts.roles.len(),
        notes: accounts.notes,
    };
    let users_text = users_file_text(USERS_HEADER, accounts.users)?;
    let roles_text = roles_file_text(ROLES_HEADER, accounts.roles)?;
    // The roles first: the users file never names a role that is not written yet.
    write(&to.roles_file, &roles_text)?;
    write(&to.users_file, &users_text)?;
    Ok(imported)
}

fn bounded(names: Vec<String>, what: &'static str) -> Result<Vec<String>, ImportError> {
    match names.len() > MAX_ACCOUNTS {
        true => Err(ImportError::TooMany(what)),
        false => Ok(names),
    }
}

/// Replaced atomically, readable by the owner only (the users file holds hashes).
fn write(path: &Path, text: &str) -> Result<(), ImportError> {
    Ok(secrets::write_private(path, text.as_bytes())?)
}
