//! The Ceph releases the gateway knows, one file per release family: its scope table
//! (`conf/scopes/<release>.toml`, derived from that release's dashboard), the edition of the
//! system roles its dashboard defines, and how its answers differ. [`REGISTRY`] is the only
//! list of releases in the code; `deploy/ceph-releases` is the scripts' list, and a test
//! holds the two and `conf/scopes/` together. Adding a release: its file here, its table,
//! its line there.

use crate::ceph_release::CephRelease;
use crate::users::RoleEdition;

mod v16_2;
mod v18_2;
mod v20_2;

/// One release family, as its dashboard is.
#[derive(Debug)]
pub struct Release {
    /// `major.minor`, as its table is named (`conf/scopes/<version>.toml`).
    pub version: &'static str,
    /// Its scope table (TOML text, the `access.scopes_file` format).
    pub table: &'static str,
    /// Whose definitions of the system roles its dashboard has.
    pub edition: RoleEdition,
    pub answers: Answers,
}

/// How a release's dashboard answers where releases differ.
#[derive(Debug, PartialEq, Eq)]
pub struct Answers {
    /// The logout answer names the login mode (`"protocol": "local"`), since 20.2.
    pub logout_names_protocol: bool,
    /// Scopes its dashboard does not know: a role's `scopes_permissions` naming them is
    /// refused there.
    pub unknown_scopes: &'static [crate::users::Scope],
}

/// Every release the binary carries, oldest first. The first's table is the one a
/// gateway without dashboards names, and its roles those answered before any is known.
pub const REGISTRY: &[&Release] = &[&v16_2::RELEASE, &v18_2::RELEASE, &v20_2::RELEASE];

/// The oldest release (an empty registry does not build).
const OLDEST: &Release = REGISTRY[0];

/// The release `version` (`"18.2"`) names, if the binary carries it.
pub fn built_in(version: &str) -> Option<&'static Release> {
    REGISTRY.iter().copied().find(|r| r.version == version)
}

/// The family a manager running `release` belongs to: the newest known release of its
/// major or an older one (19.2 answers as 18.2, 21.2 as 20.2 until it has a file); the
/// oldest for an older release, or one not known (`None`).
pub fn family(release: Option<CephRelease>) -> &'static Release {
    release
        .and_then(|release| {
            let newer = MAJORS.iter().position(|&major| major > release.major);
            REGISTRY[..newer.unwrap_or(REGISTRY.len())].last().copied()
        })
        .unwrap_or(OLDEST)
}

/// Each registered release's major, worked out while compiling: [`family`] runs for every
/// request, and parsing the versions there cost a token check 4% more instructions
/// (bench section 8). A test holds these to [`CephRelease::parse`].
const MAJORS: [u16; REGISTRY.len()] = {
    let mut majors = [0; REGISTRY.len()];
    let mut i = 0;
    while i < REGISTRY.len() {
        majors[i] = major_of(REGISTRY[i].version);
        i += 1;
    }
    majors
};

/// The leading number of `version` (`"18.2"`: 18).
const fn major_of(version: &str) -> u16 {
    let digits = version.as_bytes();
    let (mut major, mut i) = (0u16, 0);
    while i < digits.len() && digits[i].is_ascii_digit() {
        major = major * 10 + (digits[i] - b'0') as u16;
        i += 1;
    }
    major
}

/// How the dashboards of `edition` answer: those of its first release (the releases of
/// one edition answer alike, tested).
pub fn answers(edition: RoleEdition) -> &'static Answers {
    let first = REGISTRY.iter().copied().find(|r| r.edition == edition);
    &first.unwrap_or(OLDEST).answers
}

#[cfg(test)]
mod tests;
