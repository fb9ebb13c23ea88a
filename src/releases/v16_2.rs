//! Ceph 16.2 (Pacific), 16.2.15: the host's own packages in development.

use super::{Answers, Release};
use crate::users::{RoleEdition, Scope};

pub const RELEASE: Release = Release {
    version: "16.2",
    table: include_str!("../../conf/scopes/16.2.toml"),
    edition: RoleEdition::Pacific,
    answers: Answers {
        logout_names_protocol: false,
        unknown_scopes: &[Scope::NvmeOf, Scope::Smb],
    },
};
