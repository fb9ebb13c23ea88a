//! Configuration problems: each names the file, the key and what to do about it.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem found while loading the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    pub key: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = escape_controls(self.file.display().to_string());
        write!(f, "{file}: {}: {}", self.key, self.message)
    }
}

/// Every problem found, reported together so an operator fixes them in one pass.
#[derive(Debug, Default, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl ConfigErrors {
    /// Control characters (from keys and file names in the file) are escaped, here and in
    /// the file's name when displayed, so that each problem stays on its own line.
    pub fn push(&mut self, file: &Path, key: impl Into<String>, message: impl Into<String>) {
        self.0.push(ConfigError {
            file: file.to_path_buf(),
            key: escape_controls(key.into()),
            message: escape_controls(message.into()),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether some problem names `key` (used by tests, one per rule).
    pub fn mentions(&self, key: &str) -> bool {
        self.0.iter().any(|e| e.key == key)
    }

    /// A TOML syntax or type error, located by line (never quoting the file: it may hold secrets).
    pub fn push_toml(&mut self, file: &Path, text: &str, err: &toml::de::Error) {
        let key = match err.span() {
            Some(span) => format!("line {}", line_of(text, span.start)),
            None => "toml".to_string(),
        };
        self.push(file, key, err.message().trim().to_string());
    }
}

/// `text` with its control characters written as escapes (`\n`, `\u{1b}`).
fn escape_controls(text: String) -> String {
    if !text.chars().any(char::is_control) {
        return text;
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The 1-based line holding byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    text.as_bytes()[..at]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}
