//! The users file: its entries and the problems named by file and user.

use super::*;
use crate::users::Role;

fn users_errors(users: &str) -> ConfigErrors {
    let d = dir();
    std::fs::write(d.path().join("users.toml"), users).unwrap();
    parse("", d.path()).unwrap_err()
}

const ARGON: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$QUVFUVRhR0hVZ3NHbkpxc2xHUjBNeTVZcFJOc1RzM2E";

#[test]
fn users_file_entries_are_loaded() {
    let d = dir();
    let text = format!("[[users]]\nusername = \"a\"\npassword_hash = \"{ARGON}\"\nroles = [\"read-only\", \"pool-manager\"]\n\n[[users]]\nusername = \"b\"\npassword_hash = \"{ARGON}\"\nenabled = false\n");
    std::fs::write(d.path().join("users.toml"), text).unwrap();
    let c = parse("", d.path()).unwrap();
    assert_eq!(c.users.users.len(), 2);
    assert_eq!(
        c.users.users[0].roles,
        vec![Role::ReadOnly, Role::PoolManager]
    );
    assert!(c.users.users[0].enabled);
    assert!(!c.users.users[1].enabled);
}

#[test]
fn unknown_role_names_the_file_and_user() {
    let e = users_errors(&format!(
        "[[users]]\nusername = \"bob\"\npassword_hash = \"{ARGON}\"\nroles = [\"root\"]\n"
    ));
    let text = e.to_string();
    assert!(
        text.contains("users.toml") && text.contains("\"bob\"") && text.contains("root"),
        "{text}"
    );
}

#[test]
fn usernames_starting_with_the_single_sign_on_prefix_are_refused() {
    let e = users_errors(&format!(
        "[[users]]\nusername = \"oidc:admin\"\npassword_hash = \"{ARGON}\"\n"
    ));
    let text = e.to_string();
    assert!(
        text.contains("\"oidc:admin\"") && text.contains("kept for single sign-on users"),
        "{text}"
    );
}

#[test]
fn duplicate_username_is_refused() {
    let entry = format!("[[users]]\nusername = \"bob\"\npassword_hash = \"{ARGON}\"\n");
    let e = users_errors(&format!("{entry}{entry}"));
    assert!(e.to_string().contains("duplicate username"), "{e}");
}

#[test]
fn bad_hash_is_refused() {
    let e = users_errors("[[users]]\nusername = \"bob\"\npassword_hash = \"plain\"\n");
    assert!(e.mentions("users[0] (\"bob\").password_hash"), "{e}");
}

#[test]
fn bad_users_toml_names_the_users_file() {
    let e = users_errors("[[users]\n");
    assert!(e.0[0].file.ends_with("users.toml"), "{e}");
}
