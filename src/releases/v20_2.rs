//! Ceph 20.2 (Tentacle), 20.2.4: the `nvme-of` and `smb` scopes and roles of 20.2
//! (`RoleEdition::Tentacle`), and a logout answer that names the login mode.

use super::{Answers, Release};
use crate::users::RoleEdition;

pub const RELEASE: Release = Release {
    version: "20.2",
    table: include_str!("../../conf/scopes/20.2.toml"),
    edition: RoleEdition::Tentacle,
    answers: Answers {
        logout_names_protocol: true,
        unknown_scopes: &[],
    },
};
