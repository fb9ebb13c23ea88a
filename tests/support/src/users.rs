//! Users for the users file: plaintext passwords in tests, hashed when the file is written.

use std::collections::HashMap;
use std::sync::Mutex;

use super::{ADMIN, ADMIN_PW, POOLMGR, POOLMGR_PW, VIEWER, VIEWER_PW};

/// A user for the users file; the password is hashed when the file is written.
#[derive(Clone, Debug)]
pub struct User {
    pub name: String,
    pub password: String,
    pub roles: Vec<String>,
    pub enabled: bool,
    pub bcrypt: bool,
}

impl User {
    pub fn new(name: &str, password: &str, roles: &[&str]) -> Self {
        let roles = roles.iter().map(|r| r.to_string()).collect();
        Self {
            name: name.into(),
            password: password.into(),
            roles,
            enabled: true,
            bcrypt: false,
        }
    }
    pub fn admin() -> Self {
        Self::new(ADMIN, ADMIN_PW, &["administrator"])
    }
    pub fn viewer() -> Self {
        Self::new(VIEWER, VIEWER_PW, &["read-only"])
    }
    pub fn poolmgr() -> Self {
        Self::new(POOLMGR, POOLMGR_PW, &["pool-manager"])
    }
    pub fn disabled(mut self) -> Self {
        self.enabled = false;
        self
    }
    pub fn bcrypt(mut self) -> Self {
        self.bcrypt = true;
        self
    }
    /// The same hash each time for the same user and password, as a users file keeps it:
    /// the gateway refuses the tokens of a user whose hash changed at a reload.
    fn hash(&self) -> String {
        type Hashes = HashMap<(String, String, bool), String>;
        static HASHES: Mutex<Option<Hashes>> = Mutex::new(None);
        let key = (self.name.clone(), self.password.clone(), self.bcrypt);
        let mut hashes = HASHES.lock().unwrap();
        let hashes = hashes.get_or_insert_with(HashMap::new);
        hashes
            .entry(key)
            .or_insert_with(|| match self.bcrypt {
                true => bcrypt_hash(&self.password),
                false => argon2_hash(&self.password),
            })
            .clone()
    }

    pub(super) fn to_toml(&self) -> String {
        let hash = self.hash();
        let roles: Vec<String> = self.roles.iter().map(|r| format!("{r:?}")).collect();
        format!(
            "[[users]]\nusername = {:?}\npassword_hash = {:?}\nroles = [{}]\nenabled = {}\n\n",
            self.name,
            hash,
            roles.join(", "),
            self.enabled
        )
    }
}

/// An argon2id PHC string with small parameters, so debug builds hash quickly.
pub fn argon2_hash(password: &str) -> String {
    use argon2::password_hash::{rand_core::OsRng, PasswordHasher, SaltString};
    let params = argon2::Params::new(4096, 1, 1, None).unwrap();
    let argon = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
    let salt = SaltString::generate(&mut OsRng);
    argon
        .hash_password(password.as_bytes(), &salt)
        .unwrap()
        .to_string()
}

/// A `$2b$` bcrypt hash at the lowest cost.
pub fn bcrypt_hash(password: &str) -> String {
    bcrypt::hash(password, 4).unwrap()
}

/// What to put at `auth.users_file`.
#[derive(Clone, Debug)]
pub(super) enum UsersFile {
    Users,
    Absent,
    Raw(String),
}
