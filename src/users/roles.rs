//! The dashboard's security scopes, permissions and system roles (`security.py` and
//! `services/access_control.py` of Ceph 16.2.15, 18.2.7 and 20.2.4), and what a set of
//! roles grants. The system roles come in two editions: 16.2's, which 18.2 keeps, and
//! 20.2's, which adds the `nvme-of` and `smb` scopes (read-only reads them, block-manager
//! manages NVMe-oF, ganesha-manager reads SMB), a role `smb-manager`, and `prometheus` read
//! to every manager role. A user's grants hold both; each answer and check uses that of
//! the release of the manager the request is about.

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
    /// 20.2's: grants nothing in front of older releases.
    SmbManager,
}

/// Which release's definitions of the system roles apply (each release says which its
/// dashboard has: `releases`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RoleEdition {
    /// Ceph 16.2 to 19.x.
    Pacific = 0,
    /// Ceph 20.2 (Tentacle) and later.
    Tentacle = 1,
}

const EDITIONS: usize = 2;

impl RoleEdition {
    pub const ALL: [RoleEdition; EDITIONS] = [RoleEdition::Pacific, RoleEdition::Tentacle];
}

impl Role {
    pub const ALL: [Role; 9] = [
        Role::Administrator,
        Role::ReadOnly,
        Role::BlockManager,
        Role::RgwManager,
        Role::ClusterManager,
        Role::PoolManager,
        Role::CephfsManager,
        Role::GaneshaManager,
        Role::SmbManager,
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
            Role::SmbManager => "smb-manager",
        }
    }

    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The permission bits this role grants on `scope` in `edition`.
    fn grants(self, scope: Scope, edition: RoleEdition) -> u8 {
        match edition {
            RoleEdition::Pacific => self.pacific_grants(scope),
            RoleEdition::Tentacle => self.tentacle_grants(scope),
        }
    }

    /// 16.2's (and 18.2's) definitions, which know neither `nvme-of` nor `smb`.
    fn pacific_grants(self, scope: Scope) -> u8 {
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
            Role::SmbManager => 0,
        }
    }

    /// 20.2's definitions: 16.2's, and what 20.2 added.
    fn tentacle_grants(self, scope: Scope) -> u8 {
        use Scope::*;
        let added = match (self, scope) {
            (Role::Administrator, NvmeOf | Smb) => FULL,
            (Role::ReadOnly, NvmeOf | Smb) => READ,
            (Role::BlockManager, NvmeOf) => FULL,
            (Role::GaneshaManager, Smb) => READ,
            (Role::SmbManager, Smb | Cephfs | Rgw) => FULL,
            (Role::SmbManager, Grafana | NfsGanesha) => READ,
            (Role::Administrator | Role::ReadOnly, _) => 0,
            (_, Prometheus) => READ,
            _ => 0,
        };
        self.pacific_grants(scope) | added
    }
}

/// What a user's roles grant, computed once when the users are loaded, with the
/// `permissions` object rendered then too: every token check answers with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants {
    /// By `RoleEdition`.
    bits: [[u8; SCOPES]; EDITIONS],
    json: [Arc<str>; EDITIONS],
}

/// Names in a dashboard's `permissions` object that this gateway does not know (a newer
/// dashboard's scopes): they grant nothing here, and the caller says so where it matters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnknownNames(pub Vec<String>);

impl Grants {
    pub fn of(roles: &[Role]) -> Grants {
        let mut bits = [[0u8; SCOPES]; EDITIONS];
        for edition in RoleEdition::ALL {
            for (i, scope) in Scope::ALL.into_iter().enumerate() {
                bits[edition as usize][i] = roles
                    .iter()
                    .fold(0, |acc, r| acc | r.grants(scope, edition));
            }
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
        // Named permissions grant the same in front of every release.
        (Grants::from_bits([bits; EDITIONS]), unknown)
    }

    /// Everything either grants (a user's system roles and custom roles together).
    pub fn union(&self, other: &Grants) -> Grants {
        let mut bits = self.bits;
        for (mine, theirs) in bits.iter_mut().flatten().zip(other.bits.iter().flatten()) {
            *mine |= theirs;
        }
        Grants::from_bits(bits)
    }

    /// Whether `other` grants everything this grants, in front of every release (an API
    /// key's roles within its owner's and its creator's).
    pub fn within(&self, other: &Grants) -> bool {
        let pairs = self.bits.iter().flatten().zip(other.bits.iter().flatten());
        pairs.into_iter().all(|(mine, theirs)| mine & !theirs == 0)
    }

    fn from_bits(bits: [[u8; SCOPES]; EDITIONS]) -> Grants {
        // A map of strings to lists of strings always serializes.
        let json = bits.map(|b| {
            serde_json::to_string(&permissions_map(&b))
                .unwrap_or_default()
                .into()
        });
        Grants { bits, json }
    }

    /// `to_map` as JSON text.
    pub fn json(&self, edition: RoleEdition) -> &str {
        &self.json[edition as usize]
    }

    /// Whether some role grants `permission` on `scope` (the dashboard's `User.authorize`).
    pub fn allows(&self, edition: RoleEdition, scope: Scope, permission: Permission) -> bool {
        allows(&self.bits[edition as usize], scope, permission)
    }

    /// The dashboard's `permissions` object: each granted scope with its sorted permissions.
    pub fn to_map(&self, edition: RoleEdition) -> BTreeMap<&'static str, Vec<&'static str>> {
        permissions_map(&self.bits[edition as usize])
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
    fn grants_are_within_what_grants_as_much_or_more() {
        let admin = Grants::of(&[Role::Administrator]);
        let read_only = Grants::of(&[Role::ReadOnly]);
        let pools = Grants::of(&[Role::PoolManager]);
        assert!(read_only.within(&admin) && pools.within(&admin));
        assert!(read_only.within(&read_only));
        assert!(!admin.within(&read_only) && !pools.within(&read_only));
        assert!(read_only.union(&pools).within(&admin));
        assert!(!read_only.union(&pools).within(&pools));
    }

    #[test]
    fn administrator_has_every_permission_on_all_17_scopes_of_16_2() {
        let map = Grants::of(&[Role::Administrator]).to_map(RoleEdition::Pacific);
        assert_eq!(map.len(), 17);
        assert!(!map.contains_key("nvme-of") && !map.contains_key("smb"));
        assert!(map
            .values()
            .all(|p| p == &["create", "delete", "read", "update"]));
    }

    #[test]
    fn read_only_matches_the_dashboard_16_2_15_answer() {
        let map = Grants::of(&[Role::ReadOnly]).to_map(RoleEdition::Pacific);
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
        assert!(grants.allows(RoleEdition::Pacific, Scope::NvmeOf, Permission::Read));
        assert!(!grants.allows(RoleEdition::Pacific, Scope::NvmeOf, Permission::Update));
        assert!(grants.allows(RoleEdition::Pacific, Scope::Smb, Permission::Delete));
        assert_eq!(
            grants.json(RoleEdition::Pacific),
            r#"{"nvme-of":["read"],"smb":["create","delete","read","update"]}"#
        );
    }

    #[test]
    fn roles_union_their_grants() {
        let g = Grants::of(&[Role::PoolManager, Role::RgwManager]);
        assert!(g.allows(RoleEdition::Pacific, Scope::Pool, Permission::Delete));
        assert!(g.allows(RoleEdition::Pacific, Scope::Rgw, Permission::Create));
        assert!(g.allows(RoleEdition::Pacific, Scope::Grafana, Permission::Read));
        assert!(!g.allows(RoleEdition::Pacific, Scope::Grafana, Permission::Update));
        assert!(!g.allows(RoleEdition::Pacific, Scope::Osd, Permission::Read));
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
        assert!(grants.allows(RoleEdition::Pacific, Scope::Pool, Permission::Update));
        assert!(!grants.allows(RoleEdition::Pacific, Scope::Pool, Permission::Delete));
        assert!(grants.allows(RoleEdition::Pacific, Scope::Rgw, Permission::Read));
        assert_eq!(unknown.0, ["nvmeof", "rgw: fly"]);
        assert_eq!(
            grants.json(RoleEdition::Pacific),
            r#"{"pool":["read","update"],"rgw":["read"]}"#
        );
    }

    #[test]
    fn the_read_only_roles_permissions_object_grants_what_the_role_does() {
        let read_only = Grants::of(&[Role::ReadOnly]);
        let map: Vec<(&str, Vec<String>)> = read_only
            .to_map(RoleEdition::Pacific)
            .into_iter()
            .map(|(s, p)| (s, p.into_iter().map(String::from).collect()))
            .collect();
        let (again, unknown) =
            Grants::from_permissions(map.iter().map(|(s, p)| (*s, p.as_slice())));
        let pacific = RoleEdition::Pacific;
        assert_eq!(again.json(pacific), read_only.json(pacific));
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
        assert!(Grants::of(&[]).to_map(RoleEdition::Pacific).is_empty());
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

    /// 20.2's definitions (its `services/access_control.py`): the two new scopes, the
    /// smb-manager role, and prometheus read for every manager role.
    #[test]
    fn the_tentacle_edition_grants_what_ceph_20_2_added() {
        use RoleEdition::{Pacific, Tentacle};
        let admin = Grants::of(&[Role::Administrator]);
        assert_eq!(admin.to_map(Tentacle).len(), 19);
        let viewer = Grants::of(&[Role::ReadOnly]);
        assert!(viewer.allows(Tentacle, Scope::NvmeOf, Permission::Read));
        assert!(viewer.allows(Tentacle, Scope::Smb, Permission::Read));
        assert!(!viewer.allows(Pacific, Scope::Smb, Permission::Read));
        assert!(!viewer.allows(Tentacle, Scope::ConfigOpt, Permission::Read));
        let block = Grants::of(&[Role::BlockManager]);
        assert!(block.allows(Tentacle, Scope::NvmeOf, Permission::Delete));
        assert!(block.allows(Tentacle, Scope::Prometheus, Permission::Read));
        assert!(!block.allows(Pacific, Scope::Prometheus, Permission::Read));
        let smb = Grants::of(&[Role::SmbManager]);
        assert_eq!(
            smb.json(Tentacle),
            r#"{"cephfs":["create","delete","read","update"],"grafana":["read"],"nfs-ganesha":["read"],"prometheus":["read"],"rgw":["create","delete","read","update"],"smb":["create","delete","read","update"]}"#
        );
        assert_eq!(smb.json(Pacific), "{}");
        let ganesha = Grants::of(&[Role::GaneshaManager]);
        assert!(ganesha.allows(Tentacle, Scope::Smb, Permission::Read));
        assert!(!ganesha.allows(Tentacle, Scope::Smb, Permission::Create));
    }
}
