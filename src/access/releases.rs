//! One operation table per Ceph release, and which one a manager gets: its own release's,
//! else the nearest lower one (a release the binary has no table for: 19.2, a future 21.x).
//! During a rolling upgrade the managers run two releases; each request is checked against
//! the table of the manager it goes to.

use http::Method;

use super::table::{AccessTable, Lookup, OperationId};
use crate::ceph_release::CephRelease;
use crate::config::{AccessConfig, UnknownOperations};
use crate::releases;
use crate::users::RoleEdition;

/// The tables of one configuration, oldest release first.
#[derive(Debug, Default)]
pub struct ReleaseTables {
    tables: Vec<(Option<CephRelease>, AccessTable)>,
    unknown_operations: UnknownOperations,
}

/// The table a manager gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableChoice {
    position: usize,
    /// The release the table was derived from (`None`: an operator's table naming none).
    pub release: Option<CephRelease>,
    /// The manager runs exactly that release (or the table is the only one).
    pub exact: bool,
}

/// The rules for a request: the table and the system roles of its manager's release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    pub table: TableChoice,
    pub edition: RoleEdition,
}

impl ReleaseTables {
    pub fn new(config: &AccessConfig) -> ReleaseTables {
        let mut tables: Vec<_> = config
            .tables
            .iter()
            .map(|t| (t.release, AccessTable::new(&t.operations)))
            .collect();
        tables.sort_by_key(|(release, _)| *release);
        let tables = tables
            .into_iter()
            .enumerate()
            .map(|(position, (release, table))| (release, table.placed(position)))
            .collect();
        ReleaseTables {
            tables,
            unknown_operations: config.unknown_operations,
        }
    }

    /// The table for a manager running `manager` (`None`: not learned yet, or the manager
    /// would not say): the one table when there is one, else that release's, else the
    /// nearest lower one, else (older than every table, or unknown) the newest.
    pub fn choose(&self, manager: Option<CephRelease>) -> TableChoice {
        let choice = |position: usize, exact: bool| TableChoice {
            position,
            release: self.tables.get(position).and_then(|(r, _)| *r),
            exact,
        };
        let newest = self.tables.len().saturating_sub(1);
        if self.tables.len() <= 1 {
            return choice(0, true);
        }
        let Some(manager) = manager else {
            return choice(newest, false);
        };
        let at_or_below = self
            .tables
            .iter()
            .rposition(|(release, _)| release.is_some_and(|r| r <= manager));
        match at_or_below {
            Some(position) => choice(position, self.tables[position].0 == Some(manager)),
            None => choice(newest, false),
        }
    }

    /// The rules with the manager running `manager` (`None`: not known yet, or no
    /// manager): its table (see [`ReleaseTables::choose`]) and the roles of its release
    /// family (`releases::family`); until the release is known the chosen table's
    /// release's; without one (an operator's table naming none) the oldest release's.
    pub fn rules_for(&self, manager: Option<CephRelease>) -> Rules {
        let table = self.choose(manager);
        Rules {
            table,
            edition: releases::family(manager.or(table.release)).edition,
        }
    }

    /// What `method path` needs by the chosen table. An API path no operation matches is
    /// forwarded for any valid token with `access.unknown_operations = "forward"`.
    pub fn lookup(&self, choice: TableChoice, method: &Method, path: &str, api: bool) -> Lookup {
        let Some((_, table)) = self.tables.get(choice.position) else {
            return unknown();
        };
        let lookup = table.lookup(method, path);
        let forward_unknown = self.unknown_operations == UnknownOperations::Forward;
        match lookup.requirement {
            Err(super::AccessError::UnknownPath) if api && forward_unknown => Lookup {
                requirement: Ok(super::Requirement::Token),
                ..lookup
            },
            _ => lookup,
        }
    }

    pub fn template(&self, id: OperationId) -> &str {
        self.tables
            .get(id.table)
            .map_or("", |(_, table)| table.template(id))
    }

    /// Operations over every table (the log line at start-up and reload).
    pub fn describe(&self) -> String {
        let each: Vec<String> = self
            .tables
            .iter()
            .map(|(release, table)| {
                let release = release.map_or("custom".to_string(), |r| r.to_string());
                format!("{release}: {}", table.len())
            })
            .collect();
        each.join(", ")
    }
}

fn unknown() -> Lookup {
    Lookup {
        operation: None,
        requirement: Err(super::AccessError::UnknownPath),
        version: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{AccessError, Requirement};
    use crate::config::{OperationRule, ReleaseRules};

    fn release(text: &str) -> Option<CephRelease> {
        CephRelease::parse(text)
    }

    fn rules(release_name: &str, paths: &[&str]) -> ReleaseRules {
        ReleaseRules {
            ceph_version: Some(format!("{release_name}.0")),
            release: release(release_name),
            operations: paths
                .iter()
                .map(|path| OperationRule {
                    method: Method::GET,
                    path: (*path).into(),
                    scope: None,
                    public: false,
                    open: false,
                    closed: false,
                    version: None,
                })
                .collect(),
        }
    }

    fn tables(unknown_operations: UnknownOperations) -> ReleaseTables {
        ReleaseTables::new(&AccessConfig {
            scopes_file: None,
            // Out of order on purpose: the tables are sorted by release.
            tables: vec![
                rules("20.2", &["/api/summary", "/api/smb/cluster"]),
                rules("16.2", &["/api/summary"]),
                rules("18.2", &["/api/summary", "/api/rgw/realm"]),
            ],
            unknown_operations,
        })
    }

    #[test]
    fn a_manager_gets_its_release_else_the_nearest_lower_table() {
        let t = tables(UnknownOperations::Refuse);
        let chosen = |manager: &str| {
            let c = t.choose(release(manager));
            (c.release.map(|r| r.to_string()), c.exact)
        };
        let s = |r: &str| Some(r.to_string());
        assert_eq!(chosen("16.2"), (s("16.2"), true));
        assert_eq!(chosen("18.2"), (s("18.2"), true));
        assert_eq!(chosen("19.2"), (s("18.2"), false));
        assert_eq!(chosen("20.2"), (s("20.2"), true));
        assert_eq!(chosen("21.1"), (s("20.2"), false));
        assert_eq!(chosen("15.2"), (s("20.2"), false));
        let unknown = t.choose(None);
        assert_eq!((unknown.release, unknown.exact), (release("20.2"), false));
    }

    #[test]
    fn each_manager_is_checked_against_its_own_table() {
        let t = tables(UnknownOperations::Refuse);
        let needs = |manager: &str, path: &str| {
            let choice = t.choose(release(manager));
            t.lookup(choice, &Method::GET, path, true).requirement
        };
        assert_eq!(
            needs("16.2", "/api/rgw/realm"),
            Err(AccessError::UnknownPath)
        );
        assert_eq!(needs("18.2", "/api/rgw/realm"), Ok(Requirement::Token));
        assert_eq!(
            needs("18.2", "/api/smb/cluster"),
            Err(AccessError::UnknownPath)
        );
        assert_eq!(needs("20.2", "/api/smb/cluster"), Ok(Requirement::Token));
        let choice = t.choose(release("20.2"));
        let found = t.lookup(choice, &Method::GET, "/api/smb/cluster", true);
        assert_eq!(t.template(found.operation.unwrap()), "/api/smb/cluster");
    }

    #[test]
    fn unknown_api_operations_are_forwarded_only_when_configured() {
        let forwarding = tables(UnknownOperations::Forward);
        let choice = forwarding.choose(release("16.2"));
        let lookup = |api| forwarding.lookup(choice, &Method::GET, "/api/rgw/realm", api);
        assert_eq!(lookup(true).requirement, Ok(Requirement::Token));
        assert_eq!(lookup(true).operation, None);
        assert_eq!(lookup(false).requirement, Err(AccessError::UnknownPath));
    }
}
