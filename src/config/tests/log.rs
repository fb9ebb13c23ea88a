//! `[log]`: format, level filter and the audit file.

use super::*;

#[test]
fn the_log_section_has_documented_defaults() {
    let d = dir();
    let c = parse("", d.path()).unwrap();
    assert_eq!(
        c.log,
        LogConfig {
            format: LogFormat::Text,
            level: "info".into(),
            audit_file: None,
        }
    );
    let c = parse(
        "[log]\nformat = \"json\"\nlevel = \"warn,clustergate::access=info\"\naudit_file = \"audit.log\"",
        d.path(),
    )
    .unwrap();
    assert_eq!(c.log.format, LogFormat::Json);
    assert_eq!(c.log.level, "warn,clustergate::access=info");
    assert_eq!(c.log.audit_file, Some(d.path().join("audit.log")));
}

#[test]
fn log_format_is_text_or_json() {
    assert!(errors_of("[log]\nformat = \"logfmt\"").mentions("log.format"));
}

#[test]
fn log_level_must_parse_as_a_filter() {
    for level in ["loud", "inf", "info,clustergate=[", "clustergate=loud", ""] {
        assert!(
            errors_of(&format!("[log]\nlevel = {level:?}")).mentions("log.level"),
            "{level:?}"
        );
    }
    let d = dir();
    for level in [
        "WARN",
        "off",
        "warn,clustergate::access=info",
        "info,pingora_core=warn",
    ] {
        assert!(
            parse(&format!("[log]\nlevel = {level:?}"), d.path()).is_ok(),
            "{level:?}"
        );
    }
}

#[test]
fn the_audit_file_must_be_a_file_in_a_folder_that_exists() {
    assert!(
        errors_of("[log]\naudit_file = \"no-such-folder/audit.log\"").mentions("log.audit_file")
    );
    assert!(errors_of("[log]\naudit_file = \".\"").mentions("log.audit_file"));
}
