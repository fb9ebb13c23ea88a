//! The roles file (`auth.roles_file`, optional): custom roles shaped after the dashboard's
//! role JSON (`ceph dashboard ac-role-show NAME`), which users in the users file hold beside
//! the system roles and which the gateway enforces the same way.

use std::path::{Path, PathBuf};

use super::file::{RoleEntry, RolesFile};
use super::parse::{key_name, toml_file};
use super::ConfigErrors;
use crate::users::{CustomRole, Grants, Permission, Role, Scope};

/// The roles file and its roles; no file, no custom roles.
#[derive(Debug, Clone, Default)]
pub struct RolesConfig {
    pub file: Option<PathBuf>,
    pub roles: Vec<CustomRole>,
}

/// Ends the problem of a roles file that cannot be read.
const MISSING_HINT: &str =
    " (write it, e.g. with `clustergate users import`, or remove auth.roles_file)";

pub(super) fn load(errors: &mut ConfigErrors, path: Option<PathBuf>) -> RolesConfig {
    let Some(path) = path else {
        return RolesConfig::default();
    };
    let file: RolesFile = toml_file(errors, &path, Some(MISSING_HINT));
    let mut roles: Vec<CustomRole> = Vec::with_capacity(file.roles.len());
    for (i, entry) in file.roles.into_iter().enumerate() {
        let key = format!("roles[{i}] ({:?})", entry.name);
        let named = name(errors, &path, &key, &entry.name, &roles);
        let grants = grants(errors, &path, &key, &entry);
        if named {
            roles.push(CustomRole {
                name: entry.name,
                grants,
            });
        }
    }
    RolesConfig {
        file: Some(path),
        roles,
    }
}

/// Whether the role's name is usable: non-empty, not a system role's, not defined before.
fn name(
    errors: &mut ConfigErrors,
    path: &Path,
    key: &str,
    name: &str,
    before: &[CustomRole],
) -> bool {
    let key = format!("{key}.name");
    let problem = if name.trim().is_empty() || name.chars().any(char::is_control) {
        "must be non-empty, without control characters".to_string()
    } else if Role::from_name(name).is_some() {
        format!("{name:?} is a system role, which cannot be redefined (on the dashboard either); give the custom role another name")
    } else if before.iter().any(|r| r.name == name) {
        format!("{name:?} is defined twice; keep one [[roles]] entry per role")
    } else {
        return true;
    };
    errors.push(path, key, problem);
    false
}

/// What the role grants; each unknown scope or permission is reported under its scope.
fn grants(errors: &mut ConfigErrors, path: &Path, key: &str, entry: &RoleEntry) -> Grants {
    let mut all = Grants::of(&[]);
    for (scope, permissions) in &entry.scopes_permissions {
        let at = format!("{key}.scopes_permissions.{}", key_name(scope));
        let (grants, _) = Grants::from_permissions([(scope.as_str(), permissions.as_slice())]);
        let unknown: Vec<&String> = permissions
            .iter()
            .filter(|p| Permission::from_name(p).is_none())
            .collect();
        if Scope::from_name(scope).is_none() {
            let scopes: Vec<&str> = Scope::ALL.iter().map(|s| s.name()).collect();
            let message = format!(
                "unknown scope {scope:?}; the scopes are {}",
                scopes.join(", ")
            );
            errors.push(path, at, message);
        } else if !unknown.is_empty() {
            let message = format!(
                "unknown permission {unknown:?}; the permissions are {}",
                Permission::SORTED.map(Permission::name).join(", ")
            );
            errors.push(path, at, message);
        }
        all = all.union(&grants);
    }
    all
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, ConfigErrors};
    use crate::users::{Permission, Role, Scope};

    const BCRYPT: &str = "$2b$04$aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    /// The config with `auth.roles_file = "roles.toml"` holding `roles`, and a users file
    /// whose one user "bob" holds `held`.
    fn load(roles: &str, held: &str) -> (tempfile::TempDir, Result<Config, ConfigErrors>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("roles.toml"), roles).unwrap();
        let users = format!(
            "[[users]]\nusername = \"bob\"\npassword_hash = \"{BCRYPT}\"\nroles = [{held}]\n"
        );
        std::fs::write(dir.path().join("users.toml"), users).unwrap();
        let config = "[auth]\nroles_file = \"roles.toml\"\n";
        let result = Config::from_toml_str(config, &dir.path().join("c.toml"), dir.path());
        (dir, result)
    }

    fn errors(roles: &str, held: &str) -> ConfigErrors {
        load(roles, held).1.unwrap_err()
    }

    const AUDITOR: &str = "[[roles]]\nname = \"pool-auditor\"\ndescription = \"reads pools\"\n\
        [roles.scopes_permissions]\npool = [\"read\"]\nosd = [\"read\", \"update\"]\n";

    #[test]
    fn a_user_holds_custom_roles_beside_system_roles_and_gets_their_union() {
        let (dir, config) = load(AUDITOR, "\"pool-auditor\", \"rgw-manager\"");
        let config = config.unwrap();
        assert_eq!(config.users.roles.file, Some(dir.path().join("roles.toml")));
        assert_eq!(config.users.roles.roles.len(), 1);
        let bob = &config.users.users[0];
        assert_eq!(bob.roles, [Role::RgwManager]);
        assert_eq!(bob.custom_roles[0].name, "pool-auditor");
        let grants = &bob.custom_roles[0].grants;
        assert!(grants.allows(
            crate::users::RoleEdition::Pacific,
            Scope::Pool,
            Permission::Read
        ));
        assert!(grants.allows(
            crate::users::RoleEdition::Pacific,
            Scope::Osd,
            Permission::Update
        ));
        assert!(!grants.allows(
            crate::users::RoleEdition::Pacific,
            Scope::Pool,
            Permission::Update
        ));
        assert!(!grants.allows(
            crate::users::RoleEdition::Pacific,
            Scope::Rgw,
            Permission::Read
        ));
    }

    #[test]
    fn a_custom_role_grants_the_scopes_ceph_20_2_added() {
        let roles = "[[roles]]\nname = \"nvme-and-smb\"\n[roles.scopes_permissions]\n\
            nvme-of = [\"read\"]\nsmb = [\"read\", \"delete\"]\n";
        let (_dir, config) = load(roles, "\"nvme-and-smb\"");
        let grants = config.unwrap().users.users[0].custom_roles[0]
            .grants
            .clone();
        assert!(grants.allows(
            crate::users::RoleEdition::Pacific,
            Scope::NvmeOf,
            Permission::Read
        ));
        assert!(!grants.allows(
            crate::users::RoleEdition::Pacific,
            Scope::NvmeOf,
            Permission::Create
        ));
        assert!(grants.allows(
            crate::users::RoleEdition::Pacific,
            Scope::Smb,
            Permission::Delete
        ));
    }

    #[test]
    fn the_shipped_example_loads() {
        let example =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/roles.example.toml");
        let (_dir, config) = load(
            &std::fs::read_to_string(example).unwrap(),
            "\"pool-auditor\"",
        );
        let grants = config.unwrap().users.users[0].custom_roles[0]
            .grants
            .clone();
        assert_eq!(
            grants.json(crate::users::RoleEdition::Pacific),
            r#"{"osd":["read","update"],"pool":["read"]}"#
        );
    }

    #[test]
    fn an_unknown_scope_is_named_by_its_key() {
        let e = errors(
            "[[roles]]\nname = \"r\"\n[roles.scopes_permissions]\npools = [\"read\"]\n",
            "\"r\"",
        );
        assert!(
            e.mentions("roles[0] (\"r\").scopes_permissions.pools"),
            "{e}"
        );
        assert!(
            e.to_string().contains("the scopes are cephfs, config-opt"),
            "{e}"
        );
    }

    #[test]
    fn an_unknown_permission_is_named_by_its_scopes_key() {
        let e = errors(
            "[[roles]]\nname = \"r\"\n[roles.scopes_permissions]\npool = [\"read\", \"write\"]\n",
            "\"r\"",
        );
        assert!(
            e.mentions("roles[0] (\"r\").scopes_permissions.pool"),
            "{e}"
        );
        assert!(e.to_string().contains("\"write\""), "{e}");
    }

    #[test]
    fn a_system_roles_name_cannot_be_redefined() {
        let e = errors("[[roles]]\nname = \"read-only\"\n", "\"read-only\"");
        assert!(e.mentions("roles[0] (\"read-only\").name"), "{e}");
        assert!(e.to_string().contains("system role"), "{e}");
    }

    #[test]
    fn a_role_defined_twice_is_refused() {
        let e = errors(&format!("{AUDITOR}{AUDITOR}"), "\"pool-auditor\"");
        assert!(e.mentions("roles[1] (\"pool-auditor\").name"), "{e}");
        assert!(!e.mentions("roles[0] (\"pool-auditor\").name"), "{e}");
    }

    #[test]
    fn a_role_needs_a_name() {
        let e = errors("[[roles]]\nname = \" \"\n", "");
        assert!(e.mentions("roles[0] (\" \").name"), "{e}");
    }

    #[test]
    fn a_user_holding_a_role_defined_nowhere_is_refused_with_the_fix() {
        let e = errors(AUDITOR, "\"pool-admin\"");
        assert!(e.mentions("users[0] (\"bob\").roles"), "{e}");
        let text = e.to_string();
        assert!(
            text.contains("\"pool-admin\"") && text.contains("pool-auditor"),
            "{text}"
        );
    }

    #[test]
    fn without_a_roles_file_the_fix_names_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let users = format!(
            "[[users]]\nusername = \"bob\"\npassword_hash = \"{BCRYPT}\"\nroles = [\"pool-auditor\"]\n"
        );
        std::fs::write(dir.path().join("users.toml"), users).unwrap();
        let e = Config::from_toml_str("", &dir.path().join("c.toml"), dir.path()).unwrap_err();
        assert!(e.mentions("users[0] (\"bob\").roles"), "{e}");
        assert!(
            e.to_string().contains("define it in auth.roles_file"),
            "{e}"
        );
    }

    #[test]
    fn a_roles_file_that_is_named_but_missing_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let config = "[auth]\nroles_file = \"nowhere.toml\"\n";
        let e = Config::from_toml_str(config, &dir.path().join("c.toml"), dir.path()).unwrap_err();
        assert!(
            e.mentions("file") && e.0[0].file.ends_with("nowhere.toml"),
            "{e}"
        );
        assert!(e.to_string().contains("users import"), "{e}");
    }

    #[test]
    fn an_unknown_key_in_a_role_names_the_roles_file() {
        let e = errors("[[roles]]\nname = \"r\"\nscopes = {}\n", "\"r\"");
        assert!(e.0[0].file.ends_with("roles.toml"), "{e}");
        assert!(e.to_string().contains("scopes"), "{e}");
    }
}
