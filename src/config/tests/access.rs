//! `[access]`: the built-in tables, a release pinned, a scopes file, the open operations
//! and the unknown ones.

use super::*;

/// The shipped configuration, with a stand-in service password.
fn shipped() -> Config {
    super::shipped_for_tests(dir().path())
}

#[test]
fn the_shipped_configuration_loads_every_built_in_table() {
    let c = shipped();
    assert_eq!(c.access.scopes_file, None);
    let versions: Vec<_> = c
        .access
        .tables
        .iter()
        .map(|t| t.ceph_version.as_deref())
        .collect();
    assert_eq!(versions, [Some("16.2.15"), Some("18.2.7"), Some("20.2.4")]);
    let sizes: Vec<_> = c.access.tables.iter().map(|t| t.operations.len()).collect();
    assert_eq!(sizes, [274, 384, 539]);
    for table in &c.access.tables {
        assert_eq!(table.operations.iter().filter(|o| o.open).count(), 4);
    }
}

/// With the upstream and access sections given, a stand-in service password in `d`.
fn with_access(d: &tempfile::TempDir, access: &str, extra: &str) -> Result<Config, ConfigErrors> {
    crate::secrets::write_private(&d.path().join("upstream.pass"), "stand-in".as_bytes()).unwrap();
    let text = format!("{extra}[upstream]\nservers = [\"http://127.0.0.1:1\"]\n[access]\n{access}");
    parse(&text, d.path())
}

#[test]
fn a_release_pins_its_built_in_table() {
    let d = dir();
    let c = with_access(&d, "release = \"18.2\"\n", "").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.access.tables.len(), 1);
    assert_eq!(c.access.tables[0].ceph_version.as_deref(), Some("18.2.7"));
    let e = with_access(&d, "release = \"19.2\"\n", "").unwrap_err();
    assert!(e.mentions("access.release"), "{e}");
    assert!(e.0[0].message.contains("16.2, 18.2, 20.2"), "{e}");
    let e = with_access(&d, "release = \"18.2\"\nscopes_file = \"x.toml\"\n", "").unwrap_err();
    assert!(e.mentions("access.release"), "{e}");
}

/// `with_access` with `upstream.identity = identity`.
fn with_identity(
    d: &tempfile::TempDir,
    identity: &str,
    access: &str,
) -> Result<Config, ConfigErrors> {
    crate::secrets::write_private(&d.path().join("upstream.pass"), "stand-in".as_bytes()).unwrap();
    let text = format!("[upstream]\nservers = [\"http://127.0.0.1:1\"]\nidentity = \"{identity}\"\n[access]\n{access}");
    parse(&text, d.path())
}

#[test]
fn forwarding_unknown_operations_needs_the_dashboard_to_see_the_user() {
    let d = dir();
    let e = with_access(&d, "unknown_operations = \"maybe\"\n", "").unwrap_err();
    assert!(e.mentions("access.unknown_operations"), "{e}");
    let e = with_identity(&d, "service", "unknown_operations = \"forward\"\n").unwrap_err();
    assert!(e.mentions("access.unknown_operations"), "{e}");
    let c = with_access(
        &d,
        "unknown_operations = \"forward\"\n",
        "[auth]\nsource = \"dashboard\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        c.access.unknown_operations,
        super::UnknownOperations::Forward
    );
}

/// Issue 32, item 3: where the dashboard sees the user or their roles, operations the
/// tables do not know are the dashboard's to decide unless the file says otherwise; with
/// the service account the gateway refuses them.
#[test]
fn unknown_operations_are_forwarded_by_default_where_the_dashboard_sees_the_user() {
    use super::UnknownOperations::{Forward, Refuse};
    let d = dir();
    let unknown = |identity: &str, access: &str| {
        with_identity(&d, identity, access)
            .unwrap_or_else(|e| panic!("{e}"))
            .access
            .unknown_operations
    };
    assert_eq!(unknown("roles", ""), Forward);
    assert_eq!(unknown("user", ""), Forward);
    assert_eq!(unknown("service", ""), Refuse);
    assert_eq!(
        unknown("roles", "unknown_operations = \"refuse\"\n"),
        Refuse
    );
    let dashboard =
        with_access(&d, "", "[auth]\nsource = \"dashboard\"\n").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(dashboard.access.unknown_operations, Forward);
}

#[test]
fn a_bad_operation_version_is_named() {
    let d = dir();
    std::fs::write(
        d.path().join("other.toml"),
        "[[operation]]\nmethod = \"GET\"\npath = \"/api/osd\"\nversion = \"1\"\n",
    )
    .unwrap();
    let e = with_access(
        &d,
        "scopes_file = \"other.toml\"\nopen_operations = []\nclosed_operations = []\n",
        "",
    )
    .unwrap_err();
    assert!(e.0[0].message.contains("X.Y"), "{e}");
}

#[test]
fn a_scopes_file_replaces_the_built_in_table() {
    let d = dir();
    crate::secrets::write_private(&d.path().join("upstream.pass"), "stand-in".as_bytes()).unwrap();
    std::fs::write(
        d.path().join("other.toml"),
        "ceph_version = \"99.0.0\"\n[[operation]]\nmethod = \"GET\"\npath = \"/api/health/minimal\"\n",
    )
    .unwrap();
    let text = "[upstream]\nservers = [\"http://127.0.0.1:1\"]\n[access]\nscopes_file = \"other.toml\"\nopen_operations = []\nclosed_operations = []\n";
    let c = parse(text, d.path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.access.scopes_file, Some(d.path().join("other.toml")));
    assert_eq!(c.access.tables.len(), 1);
    assert_eq!(c.access.tables[0].ceph_version.as_deref(), Some("99.0.0"));
    assert_eq!(c.access.tables[0].operations.len(), 1);
    let missing = text.replace("other.toml", "missing.toml");
    let e = parse(&missing, d.path()).unwrap_err();
    assert!(e.0.iter().any(|e| e.message.contains("built-in")), "{e}");
}

#[test]
fn open_operations_must_be_public_in_the_table() {
    let d = dir();
    crate::secrets::write_private(&d.path().join("upstream.pass"), "stand-in".as_bytes()).unwrap();
    let scopes = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/scopes/16.2.toml");
    let text = format!(
        "[upstream]\nservers = [\"http://127.0.0.1:1\"]\n[access]\nscopes_file = {scopes:?}\nopen_operations = [\"GET /api/pool\"]\n"
    );
    assert!(parse(&text, d.path())
        .unwrap_err()
        .mentions("access.open_operations[0]"));
}
