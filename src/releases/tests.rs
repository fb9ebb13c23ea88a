//! The registry, the tables in `conf/scopes/`, the release files here and the scripts'
//! list (`deploy/ceph-releases`) name the same releases.

use std::collections::BTreeSet;

use super::*;

fn repo_file(path: &str) -> String {
    let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// The names in `dir` ending in `suffix`, the suffix taken off.
fn names_in(dir: &str, suffix: &str) -> BTreeSet<String> {
    let full = format!("{}/{dir}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_dir(&full)
        .unwrap_or_else(|e| panic!("{full}: {e}"))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|name| name.strip_suffix(suffix).map(String::from))
        .collect()
}

fn registered() -> BTreeSet<String> {
    REGISTRY.iter().map(|r| r.version.to_string()).collect()
}

#[test]
fn the_registry_lists_distinct_releases_oldest_first() {
    let versions: Vec<CephRelease> = REGISTRY
        .iter()
        .map(|r| CephRelease::parse(r.version).unwrap_or_else(|| panic!("{}", r.version)))
        .collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    for release in REGISTRY.iter().copied() {
        assert_eq!(
            built_in(release.version).map(|r| r.version),
            Some(release.version)
        );
    }
    assert!(built_in("19.2").is_none());
}

#[test]
fn every_table_in_conf_scopes_is_a_registered_release() {
    assert_eq!(names_in("conf/scopes", ".toml"), registered());
}

#[test]
fn every_release_file_is_registered() {
    let files: BTreeSet<String> = names_in("src/releases", ".rs")
        .into_iter()
        .filter(|name| name != "mod" && name != "tests")
        .collect();
    let expected: BTreeSet<String> = REGISTRY
        .iter()
        .map(|r| format!("v{}", r.version.replace('.', "_")))
        .collect();
    assert_eq!(files, expected);
}

#[test]
fn the_scripts_list_is_the_registry() {
    let listed: Vec<String> = repo_file("deploy/ceph-releases")
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.split_whitespace().next().map(String::from))
        .collect();
    let registry: Vec<String> = REGISTRY.iter().map(|r| r.version.to_string()).collect();
    assert_eq!(listed, registry, "deploy/ceph-releases");
}

#[test]
fn each_release_carries_its_table() {
    for release in REGISTRY.iter().copied() {
        let on_disk = repo_file(&format!("conf/scopes/{}.toml", release.version));
        assert_eq!(release.table, on_disk, "{}", release.version);
    }
}

#[test]
fn the_releases_of_one_edition_answer_alike() {
    for release in REGISTRY.iter().copied() {
        assert_eq!(
            &release.answers,
            answers(release.edition),
            "{}",
            release.version
        );
    }
}

#[test]
fn a_manager_belongs_to_the_nearest_lower_family() {
    let family_of = |text: &str| family(CephRelease::parse(text)).version;
    assert_eq!(family_of("16.2"), "16.2");
    assert_eq!(family_of("17.2"), "16.2");
    assert_eq!(family_of("18.2"), "18.2");
    assert_eq!(family_of("19.2"), "18.2");
    assert_eq!(family_of("20.1"), "20.2", "a family is its major");
    assert_eq!(family_of("21.2"), "20.2");
    assert_eq!(family_of("15.2"), "16.2");
    assert_eq!(family(None).version, "16.2");
    let edition = |text: &str| family(CephRelease::parse(text)).edition;
    assert_eq!(edition("18.2"), RoleEdition::Pacific);
    assert_eq!(edition("19.2"), RoleEdition::Pacific);
    assert_eq!(edition("20.2"), RoleEdition::Tentacle);
    assert_eq!(family(None).edition, RoleEdition::Pacific);
}

#[test]
fn the_majors_worked_out_while_compiling_are_the_parsed_ones() {
    for (release, major) in REGISTRY.iter().zip(MAJORS) {
        let parsed = CephRelease::parse(release.version).map(|v| v.major);
        assert_eq!(Some(major), parsed, "{}", release.version);
    }
}

/// [`family`] against the plain search it replaced (parsing each release per call).
#[test]
fn the_family_is_the_plain_search_over_parsed_versions() {
    let plain = |release: CephRelease| {
        REGISTRY
            .iter()
            .copied()
            .rfind(|known| CephRelease::parse(known.version).unwrap().major <= release.major)
            .unwrap_or(REGISTRY[0])
    };
    for major in 0..40 {
        let release = CephRelease { major, minor: 2 };
        assert_eq!(
            family(Some(release)).version,
            plain(release).version,
            "{major}"
        );
    }
}
