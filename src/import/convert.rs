//! From the dashboard's users and roles to the gateway's users and roles files: what is
//! kept, what cannot be, and a note for each difference (never a hash).

use std::collections::BTreeMap;

use super::ceph::{DashboardRole, DashboardUser};
use crate::config::{RoleRecord, UserRecord};
use crate::users::{Grants, PasswordHash, Role, RoleEdition};

/// What the files will hold, and what the operator should know about it.
pub struct Accounts {
    /// Sorted by name, so the same cluster gives the same files.
    pub users: Vec<UserRecord>,
    /// The custom roles, sorted by name.
    pub roles: Vec<RoleRecord>,
    pub notes: Vec<String>,
}

/// `roles` are the dashboard's roles other than the gateway's system roles; `now` is in
/// Unix seconds (password expiry).
pub fn accounts(users: Vec<DashboardUser>, roles: Vec<DashboardRole>, now: i64) -> Accounts {
    let mut notes = Vec::new();
    let mut roles: Vec<RoleRecord> = roles.into_iter().map(|r| role(r, &mut notes)).collect();
    roles.sort_by(|a, b| a.name.cmp(&b.name));
    let mut users: Vec<UserRecord> = users
        .into_iter()
        .filter_map(|u| user(u, &roles, now, &mut notes))
        .collect();
    users.sort_by(|a, b| a.username.cmp(&b.username));
    notes.sort();
    Accounts {
        users,
        roles,
        notes,
    }
}

/// The role with what the gateway can express; the rest is noted and left out, so the
/// gateway grants less than the dashboard there, never more.
fn role(role: DashboardRole, notes: &mut Vec<String>) -> RoleRecord {
    let DashboardRole {
        name,
        description,
        scopes_permissions,
    } = role;
    let (grants, unknown) = Grants::from_permissions(
        scopes_permissions
            .iter()
            .map(|(scope, perms)| (scope.as_str(), perms.as_slice())),
    );
    if !unknown.0.is_empty() {
        notes.push(format!(
            "role {name:?}: {} unknown to the gateway, left out (the gateway refuses what only they grant)",
            unknown.0.join(", ")
        ));
    }
    // Named permissions grant the same whatever the edition.
    let scopes_permissions: BTreeMap<String, Vec<String>> = grants
        .to_map(RoleEdition::Tentacle)
        .into_iter()
        .map(|(scope, perms)| {
            let perms = perms.into_iter().map(String::from).collect();
            (scope.to_string(), perms)
        })
        .collect();
    RoleRecord {
        name,
        description: description.unwrap_or_default(),
        scopes_permissions,
    }
}

/// The user as the gateway will hold it, or `None` (noted) when it cannot log in there.
fn user(
    user: DashboardUser,
    roles: &[RoleRecord],
    now: i64,
    notes: &mut Vec<String>,
) -> Option<UserRecord> {
    let DashboardUser {
        username,
        password,
        roles: held,
        enabled,
        pwd_expiration_date,
        pwd_update_required,
    } = user;
    if username.is_empty() || username.chars().any(char::is_control) {
        notes.push(format!(
            "user {username:?}: the users file cannot hold this name; not imported"
        ));
        return None;
    }
    let Some(password_hash) = password.filter(|h| PasswordHash::parse(h).is_ok()) else {
        notes.push(format!("user {username:?}: no usable password hash on the dashboard (none, or not bcrypt); not imported"));
        return None;
    };
    let held = held
        .into_iter()
        .filter(|name| {
            let known = Role::from_name(name).is_some() || roles.iter().any(|r| &r.name == name);
            if !known {
                notes.push(format!(
                    "user {username:?}: role {name:?} is not on the dashboard; left out"
                ));
            }
            known
        })
        .collect();
    let enabled = enabled_here(
        &username,
        enabled,
        pwd_expiration_date,
        pwd_update_required,
        now,
        notes,
    );
    Some(UserRecord {
        username,
        password_hash,
        roles: held,
        enabled,
    })
}

/// Whether the user may log in through the gateway: only if the dashboard would let it
/// log in and act. The gateway has no password expiry nor forced password change, so a
/// user the dashboard holds back for either is imported disabled.
fn enabled_here(
    username: &str,
    enabled: bool,
    expires: Option<i64>,
    update_required: bool,
    now: i64,
    notes: &mut Vec<String>,
) -> bool {
    let held_back = if !enabled {
        "disabled on the dashboard"
    } else if update_required {
        "must change its password on the dashboard first (pwdUpdateRequired: the dashboard refuses its requests)"
    } else if expires.is_some_and(|at| at < now) {
        "its password has expired on the dashboard (pwdExpirationDate)"
    } else {
        if let Some(at) = expires {
            notes.push(format!("user {username:?}: its password expires on the dashboard at {at} (Unix time); the gateway does not expire passwords: import again after it is changed"));
        }
        return true;
    };
    notes.push(format!("user {username:?}: {held_back}; imported disabled"));
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{roles_file_text, users_file_text, Config};

    const HASH: &str = "$2b$12$yfFkTlY/pGJEDWAXv.pVCel7IX1zyVY8TcOyG.68Osy0fwbNe2wWS";
    const NOW: i64 = 1_800_000_000;

    /// A user as Ceph 16.2's `ac-user-show NAME` prints it.
    fn user(name: &str, roles: &str, enabled: bool, expires: &str, update: bool) -> DashboardUser {
        serde_json::from_str(&format!(
            r#"{{"username": "{name}", "password": "{HASH}", "roles": {roles}, "name": null,
                "email": null, "lastUpdate": 1795526386, "enabled": {enabled},
                "pwdExpirationDate": {expires}, "pwdUpdateRequired": {update}}}"#
        ))
        .unwrap()
    }

    /// A role as `ac-role-show NAME` prints it.
    fn role(json: &str) -> DashboardRole {
        serde_json::from_str(json).unwrap()
    }

    fn auditor() -> DashboardRole {
        role(
            r#"{"name": "pool-auditor", "description": "reads pools",
                 "scopes_permissions": {"pool": ["read"], "osd": ["update", "read"]}}"#,
        )
    }

    #[test]
    fn users_come_out_sorted_with_their_hash_roles_and_enabled_flag() {
        let users = vec![
            user("zed", r#"["read-only"]"#, true, "null", false),
            user(
                "amy",
                r#"["pool-auditor", "rgw-manager"]"#,
                false,
                "null",
                false,
            ),
        ];
        let out = accounts(users, vec![auditor()], NOW);
        let names: Vec<&str> = out.users.iter().map(|u| u.username.as_str()).collect();
        assert_eq!(names, ["amy", "zed"]);
        assert_eq!(out.users[0].password_hash, HASH);
        assert_eq!(out.users[0].roles, ["pool-auditor", "rgw-manager"]);
        assert!(!out.users[0].enabled && out.users[1].enabled);
        assert_eq!(
            out.notes,
            ["user \"amy\": disabled on the dashboard; imported disabled"]
        );
    }

    #[test]
    fn users_the_dashboard_holds_back_are_imported_disabled_and_noted() {
        let users = vec![
            user("expired", "[]", true, &(NOW - 1).to_string(), false),
            user("must-change", "[]", true, "null", true),
            user("expiring", "[]", true, &(NOW + 60).to_string(), false),
        ];
        let out = accounts(users, vec![], NOW);
        let enabled: Vec<(&str, bool)> = out
            .users
            .iter()
            .map(|u| (u.username.as_str(), u.enabled))
            .collect();
        assert_eq!(
            enabled,
            [
                ("expired", false),
                ("expiring", true),
                ("must-change", false)
            ]
        );
        assert!(out.notes[0].contains("expired") && out.notes[0].contains("imported disabled"));
        assert!(out.notes[1].contains("does not expire passwords"));
        assert!(out.notes[2].contains("pwdUpdateRequired"));
    }

    #[test]
    fn a_user_without_a_hash_is_left_out_and_noted() {
        let mut nohash = user("sso", "[]", true, "null", false);
        nohash.password = None;
        let out = accounts(vec![nohash], vec![], NOW);
        assert!(out.users.is_empty());
        assert!(out.notes[0].contains("not imported"));
    }

    #[test]
    fn a_roles_unknown_scopes_and_permissions_are_left_out_and_noted() {
        let newer = role(
            r#"{"name": "nvme", "description": null,
            "scopes_permissions": {"nvmeof": ["read"], "pool": ["read", "fly"]}}"#,
        );
        let out = accounts(vec![], vec![newer], NOW);
        let pool = vec!["read".to_string()];
        assert_eq!(
            out.roles[0].scopes_permissions,
            BTreeMap::from([("pool".to_string(), pool)])
        );
        assert_eq!(out.roles[0].description, "");
        assert!(
            out.notes[0].contains("nvmeof") && out.notes[0].contains("pool: fly"),
            "{:?}",
            out.notes
        );
    }

    #[test]
    fn the_written_files_load_and_grant_what_the_dashboard_does() {
        let users = vec![user(
            "amy",
            r#"["pool-auditor", "read-only"]"#,
            true,
            "null",
            false,
        )];
        let out = accounts(users, vec![auditor()], NOW);
        let dir = tempfile::tempdir().unwrap();
        let users_text = users_file_text("# users", out.users).unwrap();
        let roles_text = roles_file_text("# roles", out.roles).unwrap();
        assert!(
            roles_text.contains("osd = [\"read\", \"update\"]"),
            "{roles_text}"
        );
        std::fs::write(dir.path().join("users.toml"), users_text).unwrap();
        std::fs::write(dir.path().join("roles.toml"), roles_text).unwrap();
        let config = "[auth]\nroles_file = \"roles.toml\"\n";
        let c = Config::from_toml_str(config, &dir.path().join("c.toml"), dir.path()).unwrap();
        let amy = &c.users.users[0];
        assert_eq!(amy.roles, [Role::ReadOnly]);
        assert_eq!(amy.custom_roles[0].name, "pool-auditor");
        assert_eq!(
            amy.custom_roles[0]
                .grants
                .json(crate::users::RoleEdition::Pacific),
            r#"{"osd":["read","update"],"pool":["read"]}"#
        );
    }
}
