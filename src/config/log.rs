//! `[log]`: how log lines look (`format`), which are written (`level`, unless `RUST_LOG`
//! says otherwise), and where the audit log goes (`audit_file`).

use std::path::PathBuf;

use super::file::LogSection;
use super::parse::Source;
use super::ConfigErrors;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    pub format: LogFormat,
    /// `tracing` filter directives (`info`, `warn,clustergate::access=info`); `RUST_LOG`,
    /// when set, replaces them.
    pub level: String,
    /// `None`: audit lines go to standard error with the other logs.
    pub audit_file: Option<PathBuf>,
}

/// How every log line is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// `tracing`'s human-readable lines.
    Text,
    /// One JSON object per line, for a log shipper.
    Json,
}

pub(super) fn validate(errors: &mut ConfigErrors, at: &Source<'_>, log: LogSection) -> LogConfig {
    let f = at.file;
    let format = match log.format.as_str() {
        "text" => LogFormat::Text,
        "json" => LogFormat::Json,
        other => {
            errors.push(
                f,
                "log.format",
                format!("{other:?} is not a log format: \"text\" or \"json\""),
            );
            LogFormat::Text
        }
    };
    if let Err(problem) = check_level(&log.level) {
        errors.push(
            f,
            "log.level",
            format!(
                "{:?}: {problem}; write a level (\"info\", \"warn\") or directives like \"warn,clustergate::access=info\"",
                log.level
            ),
        );
    }
    let audit_file = log.audit_file.map(|file| at.resolve(&file));
    if let Some(path) = &audit_file {
        if path.as_os_str().is_empty() || path.is_dir() {
            errors.push(
                f,
                "log.audit_file",
                "must name a file (leave it out for standard error)",
            );
        } else if path.parent().is_some_and(|dir| !dir.is_dir()) {
            errors.push(
                f,
                "log.audit_file",
                format!(
                    "the folder of {} does not exist: create it first",
                    path.display()
                ),
            );
        }
    }
    LogConfig {
        format,
        level: log.level,
        audit_file,
    }
}

/// `tracing`'s filter syntax, less one trap: a bare word is a target with every level on
/// (and everything else off), so a misspelt level (`inf`) would silence the gateway.
/// Each directive is a level, or names one (`target=level`).
fn check_level(directives: &str) -> Result<(), String> {
    for directive in directives.split(',').map(str::trim) {
        if directive.is_empty() {
            return Err("an empty directive (\"off\" turns logs off)".into());
        }
        let names_a_level = directive.contains('=') || directive.contains('[');
        if !names_a_level
            && directive
                .parse::<tracing::level_filters::LevelFilter>()
                .is_err()
        {
            return Err(format!(
                "{directive:?} is not a level (trace, debug, info, warn, error, off)"
            ));
        }
    }
    tracing_subscriber::EnvFilter::builder()
        .parse(directives)
        .map(drop)
        .map_err(|e| e.to_string())
}
