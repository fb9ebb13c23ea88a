//! Ceph 18.2 (Reef), 18.2.7: 16.2's roles and answers, its own table.

use super::{Answers, Release};
use crate::users::{RoleEdition, Scope};

pub const RELEASE: Release = Release {
    version: "18.2",
    table: include_str!("../../conf/scopes/18.2.toml"),
    edition: RoleEdition::Pacific,
    answers: Answers {
        logout_names_protocol: false,
        unknown_scopes: &[Scope::NvmeOf, Scope::Smb],
    },
};
