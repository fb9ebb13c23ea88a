//! What a read-only user must not be able to change, read straight from the dashboard as
//! its own administrator (not through the gateway), and from the cluster's configuration
//! database: the same before and after the fuzz runs.

use std::collections::BTreeMap;

use reqwest::Method;
use serde_json::Value;

use crate::common::{Dashboard, V1};

/// The dashboard's reads of what its write operations change: pools, users and roles,
/// its settings, OSD flags, manager modules and their options, feature toggles, erasure
/// code profiles, CRUSH rules, file systems and hosts. Each reads the same twice in a row
/// on an idle cluster.
const READS: [&str; 11] = [
    "/api/pool",
    "/api/user",
    "/api/role",
    "/api/settings",
    "/api/osd/flags",
    "/api/mgr/module",
    "/api/feature_toggles",
    "/api/erasure_code_profile",
    "/api/crush_rule",
    "/api/cephfs",
    "/api/host",
];

/// The configuration database, where `PUT /api/cluster_conf` and module options write.
const CONFIG_DUMP: &str = "ceph config dump";

pub struct ClusterState(BTreeMap<&'static str, Value>);

impl ClusterState {
    pub async fn read(dashboard: &Dashboard) -> ClusterState {
        let token = dashboard.login("admin").await;
        let mut state = BTreeMap::new();
        for path in READS {
            let r = dashboard
                .send(Method::GET, path, Some(&token), V1, None)
                .await;
            assert_eq!(r.status, 200, "GET {path} on the dashboard: {}", r.text());
            state.insert(path, r.json());
        }
        let dump = dashboard.ceph_ok(&["config", "dump", "--format", "json"]);
        state.insert(
            CONFIG_DUMP,
            serde_json::from_str(&dump).expect("ceph config dump: JSON"),
        );
        ClusterState(state)
    }

    /// What differs from `before`, one line per read.
    pub fn changes_since(&self, before: &ClusterState) -> Vec<String> {
        self.0
            .iter()
            .filter(|(what, now)| before.0.get(*what) != Some(*now))
            .map(|(what, now)| {
                let was = before.0.get(what).map(Value::to_string).unwrap_or_default();
                format!(
                    "{what} changed:\n  before: {}\n  after:  {}",
                    cut(&was),
                    cut(&now.to_string())
                )
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

fn cut(text: &str) -> String {
    text.chars().take(600).collect()
}
