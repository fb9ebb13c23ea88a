//! The dashboard's security scopes, permissions and system roles (Ceph 16.2.15
//! `security.py` and `services/access_control.py`), and what a set of roles grants.
//! Ceph 20.2 adds two scopes, `nvme-of` and `smb`: custom roles may grant them; the system
//! roles grant them nothing, as on 16.2 and 18.2, which do not have them.

use std::collections::BTreeMap;
use std::sync::Arc;

/// How many scopes the dashboards have together (20.2's 19).
const SCOPES: usize = 19;

/// A security scope, as the dashboard names it. Declared in the dashboard's sorted order,
/// which is also the order `permissions` maps are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Cephfs,
    ConfigOpt,
    DashboardSettings,
    Grafana,
    Hosts,
    Iscsi,
    Log,
    Manager,
    Monitor,
    NfsGanesha,
    NvmeOf,
    Osd,
    Pool,
    Prometheus,
    RbdImage,
    RbdMirroring,
    Rgw,
    Smb,
    User,
}

impl Scope {
    pub const ALL: [Scope; SCOPES] = [
        Scope::Cephfs,
        Scope::ConfigOpt,
        Scope::DashboardSettings,
        Scope::Grafana,
        Scope::Hosts,
        Scope::Iscsi,
        Scope::Log,
        Scope::Manager,
        Scope::Monitor,
        Scope::NfsGanesha,
        Scope::NvmeOf,
        Scope::Osd,
        Scope::Pool,
        Scope::Prometheus,
        Scope::RbdImage,
        Scope::RbdMirroring,
        Scope::Rgw,
        Scope::Smb,
        Scope::User,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scope::Cephfs => "cephfs",
            Scope::ConfigOpt => "config-opt",
            Scope::DashboardSettings => "dashboard-settings",
            Scope::Grafana => "grafana",
            Scope::Hosts => "hosts",
            Scope::Iscsi => "iscsi",
            Scope::Log => "log",
            Scope::Manager => "manager",
            Scope::Monitor => "monitor",
            Scope::NfsGanesha => "nfs-ganesha",
            Scope::NvmeOf => "nvme-of",
            Scope::Osd => "osd",
            Scope::Pool => "pool",
            Scope::Prometheus => "prometheus",
            Scope::RbdImage => "rbd-image",
            Scope::RbdMirroring => "rbd-mirroring",
            Scope::Rgw => "rgw",
            Scope::Smb => "smb",
            Scope::User => "user",
        }
    }

    pub fn from_name(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// One permission on a scope. The dashboard derives it from the HTTP method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Permission {
    Read,
    Create,
    Update,
    Delete,
}

impl Permission {
    /// Alphabetical, the order the dashboard lists them in.
    pub const SORTED: [Permission; 4] = [
        Permission::Create,
        Permission::Delete,
        Permission::Read,
        Permission::Update,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Permission::Read => "read",
            Permission::Create => "create",
            Permission::Update => "update",
            Permission::Delete => "delete",
        }
    }

    pub fn from_name(name: &str) -> Option<Permission> {
        Permission::SORTED.into_iter().find(|p| p.name() == name)
    }

    /// The permission the dashboard derives from an HTTP method by default.
    pub fn for_method(method: &http::Method) -> Permission {
        match *method {
            http::Method::POST => Permission::Create,
            http::Method::PUT | http::Method::PATCH => Permission::Update,
            http::Method::DELETE => Permission::Delete,
            _ => Permission::Read,
        }
    }

    fn bit(self) -> u8 {
        match self {
            Permission::Read => 1,
            Permission::Create => 2,
            Permission::Update => 4,
            Permission::Delete => 8,
        }
    }
}

const READ: u8 = 1;
const FULL: u8 = 15;

/// The dashboard's system roles; they cannot be changed on the dashboard either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Administrator,
    ReadOnly,
    BlockManager,
    RgwManager,
    ClusterManager,
    PoolManager,
    CephfsManager,
    GaneshaManager,
}

impl Role {
    pub const ALL: [Role; 8] = [
        Role::Administrator,
        Role::ReadOnly,
        Role::BlockManager,
        Role::RgwManager,
        Role::ClusterManager,
        Role::PoolManager,
        Role::CephfsManager,
        Role::GaneshaManager,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Role::Administrator => "administrator",
            Role::ReadOnly => "read-only",
            Role::BlockManager => "block-manager",
            Role::RgwManager => "rgw-manager",
            Role::ClusterManager => "cluster-manager",
            Role::PoolManager => "pool-manager",
            Role::CephfsManager => "cephfs-manager",
            Role::GaneshaManager => "ganesha-manager",
        }
    }

    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The permission bits this role grants on `scope` (on 16.2's scopes only).
    fn grants(self, scope: Scope) -> u8 {
        use Scope::*;
        if matches!(scope, NvmeOf | Smb) {
            return 0;
        }
        match self {
            Role::Administrator => FULL,
            Role::ReadOnly => match scope {
                DashboardSettings | ConfigOpt => 0,
                _ => READ,
            },
            Role::BlockManager => match scope {
                RbdImage | Iscsi | RbdMirroring => FULL,
                Pool | Grafana => READ,
                _ => 0,
            },
            Role::RgwManager => match scope {
                Rgw => FULL,
                Grafana => READ,
                _ => 0,
            },
            Role::ClusterManager => match scope {
                Hosts | Osd | Monitor | Manager | ConfigOpt | Log => FULL,
                Grafana => READ,
                _ => 0,
            },
            Role::PoolManager => match scope {
                Pool => FULL,
                Grafana => READ,
                _ => 0,
            },
            Role::CephfsManager => match scope {
                Cephfs => FULL,
                Grafana => READ,
                _ => 0,
            },
            Role::GaneshaManager => match scope {
                NfsGanesha | Cephfs | Rgw => FULL,
                Grafana => READ,
                _ => 0,
            },
        }
    }
}

/// What a user's roles grant, computed once when the users are loaded, with the
/// `permissions` object rendered then too: every token check answers with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants {
    bits: [u8; SCOPES],
    json: Arc<str>,
}

/// Names in a dashboard's `permissions` object that this gateway does not know (a newer
/// dashboard's scopes): they grant nothing here, and the caller says so where it matters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnknownNames(pub Vec<String>);

impl Grants {
    pub fn of(roles: &[Role]) -> Grants {
        let mut bits = [0u8; SCOPES];
        for (i, scope) in Scope::ALL.into_iter().enumerate() {
            bits[i] = roles.iter().fold(0, |acc, r| acc | r.grants(scope));
        }
        Grants::from_bits(bits)
    }

    /// What a dashboard's `permissions` object grants (a login's answer, a custom role's
    /// `scopes_permissions`), with the scope and permission names it does not know.
    pub fn from_permissions<'a, P>(permissions: P) -> (Grants, UnknownNames)
    where
        P: IntoIterator<Item = (&'a str, &'a [String])>,
    {
        let mut bits = [0u8; SCOPES];
        let mut unknown = UnknownNames::default();
        for (scope_name, names) in permissions {
            let Some(scope) = Scope::from_name(scope_name) else {
                unknown.0.push(scope_name.to_string());
                continue;
            };
            for name in names {
                match Permission::from_name(name) {
                    Some(p) => bits[scope as usize] |= p.bit(),
                    None => unknown.0.push(format!("{scope_name}: {name}")),
                }
            }
        }
        (Grants::from_bits(bits), unknown)
    }

    /// Everything either grants (a user's system roles and custom roles together).
    pub fn union(&self, other: &Grants) -> Grants {
        let mut bits = self.bits;
        for (mine, theirs) in bits.iter_mut().zip(other.bits) {
            *mine |= theirs;
        }
        Grants::from_bits(bits)
    }

    fn from_bits(bits: [u8; SCOPES]) -> Grants {
        // A map of strings to lists of strings always serializes.
        let json = serde_json::to_string(&permissions_map(&bits))
            .unwrap_or_default()
            .into();
        Grants { bits, json }
    }

    /// `to_map` as JSON text.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// Whether some role grants `permission` on `scope` (the dashboard's `User.authorize`).
    pub fn allows(&self, scope: Scope, permission: Permission) -> bool {
        allows(&self.bits, scope, permission)
    }

    /// The dashboard's `permissions` object: each granted scope with its sorted permissions.
    pub fn to_map(&self) -> BTreeMap<&'static str, Vec<&'static str>> {
        permissions_map(&self.bits)
    }
}

fn allows(bits: &[u8; SCOPES], scope: Scope, permission: Permission) -> bool {
    bits[scope as usize] & permission.bit() != 0
}

fn permissions_map(bits: &[u8; SCOPES]) -> BTreeMap<&'static str, Vec<&'static str>> {
    Scope::ALL
        .into_iter()
        .filter(|s| bits[*s as usize] != 0)
        .map(|s| {
            let perms = Permission::SORTED
                .into_iter()
                .filter(|p| allows(bits, s, *p))
                .map(Permission::name)
                .collect();
            (s.name(), perms)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn administrator_has_every_permission_on_all_17_scopes_of_16_2() {
        let map = Grants::of(&[Role::Administrator]).to_map();
        assert_eq!(map.len(), 17);
        assert!(!map.contains_key("nvme-of") && !map.contains_key("smb"));
        assert!(map
            .values()
            .all(|p| p == &["create", "delete", "read", "update"]));
    }

    #[test]
    fn read_only_matches_the_dashboard_16_2_15_answer() {
        let map = Grants::of(&[Role::ReadOnly]).to_map();
        let expected = [
            "cephfs",
            "grafana",
            "hosts",
            "iscsi",
            "log",
            "manager",
            "monitor",
            "nfs-ganesha",
            "osd",
            "pool",
            "prometheus",
            "rbd-image",
            "rbd-mirroring",
            "rgw",
            "user",
        ];
        assert_eq!(map.keys().copied().collect::<Vec<_>>(), expected);
        assert!(map.values().all(|p| p == &["read"]));
    }

    #[test]
    fn a_custom_roles_permissions_grant_the_scopes_ceph_20_2_added() {
        let read = vec!["read".to_string()];
        let full: Vec<String> = ["create", "delete", "read", "update"]
            .map(String::from)
            .into();
        let (grants, unknown) =
            Grants::from_permissions([("nvme-of", read.as_slice()), ("smb", full.as_slice())]);
        assert!(unknown.0.is_empty(), "{:?}", unknown.0);
        assert!(grants.allows(Scope::NvmeOf, Permission::Read));
        assert!(!grants.allows(Scope::NvmeOf, Permission::Update));
        assert!(grants.allows(Scope::Smb, Permission::Delete));
        assert_eq!(
            grants.json(),
            r#"{"nvme-of":["read"],"smb":["create","delete","read","update"]}"#
        );
    }

    #[test]
    fn roles_union_their_grants() {
        let g = Grants::of(&[Role::PoolManager, Role::RgwManager]);
        assert!(g.allows(Scope::Pool, Permission::Delete));
        assert!(g.allows(Scope::Rgw, Permission::Create));
        assert!(g.allows(Scope::Grafana, Permission::Read));
        assert!(!g.allows(Scope::Grafana, Permission::Update));
        assert!(!g.allows(Scope::Osd, Permission::Read));
    }

    #[test]
    fn a_dashboard_permissions_object_grants_what_it_names_and_reports_the_rest() {
        let perms = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let pool = perms(&["read", "update"]);
        let nvmeof = perms(&["read"]);
        let rgw = perms(&["read", "fly"]);
        let (grants, unknown) = Grants::from_permissions([
            ("pool", pool.as_slice()),
            ("nvmeof", nvmeof.as_slice()),
            ("rgw", rgw.as_slice()),
        ]);
        assert!(grants.allows(Scope::Pool, Permission::Update));
        assert!(!grants.allows(Scope::Pool, Permission::Delete));
        assert!(grants.allows(Scope::Rgw, Permission::Read));
        assert_eq!(unknown.0, ["nvmeof", "rgw: fly"]);
        assert_eq!(
            grants.json(),
            r#"{"pool":["read","update"],"rgw":["read"]}"#
        );
    }

    #[test]
    fn the_read_only_roles_permissions_object_grants_what_the_role_does() {
        let read_only = Grants::of(&[Role::ReadOnly]);
        let map: Vec<(&str, Vec<String>)> = read_only
            .to_map()
            .into_iter()
            .map(|(s, p)| (s, p.into_iter().map(String::from).collect()))
            .collect();
        let (again, unknown) =
            Grants::from_permissions(map.iter().map(|(s, p)| (*s, p.as_slice())));
        assert_eq!(again, read_only);
        assert!(unknown.0.is_empty());
    }

    #[test]
    fn a_union_grants_what_either_does() {
        let pools = Grants::of(&[Role::PoolManager]);
        let rgw = Grants::of(&[Role::RgwManager]);
        assert_eq!(
            pools.union(&rgw),
            Grants::of(&[Role::PoolManager, Role::RgwManager])
        );
    }

    #[test]
    fn no_roles_grant_nothing() {
        assert!(Grants::of(&[]).to_map().is_empty());
    }

    #[test]
    fn scope_and_role_names_round_trip() {
        for s in Scope::ALL {
            assert_eq!(Scope::from_name(s.name()), Some(s));
        }
        for r in Role::ALL {
            assert_eq!(Role::from_name(r.name()), Some(r));
        }
        assert_eq!(Role::from_name("root"), None);
    }
}
