//! From TOML text to the file structs, section by section, so that one section's problem
//! (an unknown key, a wrong type) does not hide the others'; and the place the text came
//! from, against which problems are reported and relative paths resolved.

use std::path::{Path, PathBuf};

use super::file::FileConfig;
use super::ConfigErrors;
use crate::secrets::Secret;

/// The file being validated: where its problems are reported, and the folder its relative
/// paths resolve against.
pub(super) struct Source<'a> {
    pub file: &'a Path,
    pub dir: &'a Path,
}

impl Source<'_> {
    /// A section's settings when the file names none of them: its validation of the
    /// section's defaults (which are valid: a test of each section holds them so).
    pub fn defaults<S: Default, C>(validate: fn(&mut ConfigErrors, &Source<'_>, S) -> C) -> C {
        let nowhere = Source {
            file: Path::new(""),
            dir: Path::new(""),
        };
        validate(&mut ConfigErrors::default(), &nowhere, S::default())
    }

    pub fn resolve(&self, path: &str) -> PathBuf {
        let path = Path::new(path);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.dir.join(path)
        }
    }

    /// Refuses a file holding a secret (`key` names the setting) that group or others may
    /// read or write: anyone else on the host could read the secret, or replace it (the one
    /// allowance, root's file readable by the gateway's own group, is
    /// [`crate::secrets::kept_from_others`]'s). Every setting naming a secret file calls
    /// this; a file that cannot be looked at is left to the caller's read to report.
    pub fn owner_only_file(&self, errors: &mut ConfigErrors, key: &str, path: &Path) {
        use std::os::unix::fs::PermissionsExt;
        let Ok(metadata) = std::fs::metadata(path) else {
            return;
        };
        let mode = metadata.permissions().mode() & 0o777;
        if !crate::secrets::kept_from_others(&metadata) {
            let path = path.display();
            let message = format!("{path} holds a secret but group or others have access (mode {mode:04o}); make it the owner's only: chmod 600 {path}");
            errors.push(self.file, key, message);
        }
    }

    /// A password kept in a file (`key` names the setting), without its line end, that
    /// only its owner may access. `hint` ends the message when the file cannot be read.
    pub fn password_file(
        &self,
        errors: &mut ConfigErrors,
        key: &str,
        file: &str,
        hint: &str,
    ) -> Option<Secret> {
        let path = self.resolve(file);
        self.owner_only_file(errors, key, &path);
        match std::fs::read_to_string(&path) {
            Ok(text) if !text.trim_end_matches(['\n', '\r']).is_empty() => Some(Secret::new(
                text.trim_end_matches(['\n', '\r']).as_bytes().to_vec(),
            )),
            Ok(_) => {
                errors.push(self.file, key, format!("{} is empty", path.display()));
                None
            }
            Err(e) => {
                let message = format!("cannot read {}: {e}{hint}", path.display());
                errors.push(self.file, key, message);
                None
            }
        }
    }
}

/// Unknown keys are reported and skipped; a section of the wrong type falls back to its
/// defaults after its problem is reported. `None`: the text is not TOML.
pub(super) fn sections(text: &str, source: &Path, errors: &mut ConfigErrors) -> Option<FileConfig> {
    let mut table: toml::Table = match text.parse() {
        Ok(table) => table,
        Err(e) => {
            errors.push_toml(source, text, &e);
            return None;
        }
    };
    let mut section = |name: &str| table.remove(name);
    let file = FileConfig {
        server: typed_section(errors, source, "server", section("server")).unwrap_or_default(),
        metrics: typed_section(errors, source, "metrics", section("metrics")).unwrap_or_default(),
        api: typed_section(errors, source, "api", section("api")).unwrap_or_default(),
        auth: typed_section(errors, source, "auth", section("auth")).unwrap_or_default(),
        upstream: typed_section(errors, source, "upstream", section("upstream")),
        oidc: typed_section(errors, source, "oidc", section("oidc")),
        access: typed_section(errors, source, "access", section("access")).unwrap_or_default(),
        state: typed_section(errors, source, "state", section("state")).unwrap_or_default(),
        log: typed_section(errors, source, "log", section("log")).unwrap_or_default(),
        answer_cache: typed_section(errors, source, "answer_cache", section("answer_cache"))
            .unwrap_or_default(),
        api_keys: typed_section(errors, source, "api_keys", section("api_keys"))
            .unwrap_or_default(),
    };
    for key in table.keys() {
        errors.push(
            source,
            key_name(key),
            "unknown section or key (sections: server, metrics, api, auth, upstream, oidc, access, state, log, answer_cache, api_keys)",
        );
    }
    Some(file)
}

/// A TOML file a setting names (the users file, the roles file), as its struct. A missing
/// file is empty when `missing_hint` is `None`, else a problem ending with the hint; a file
/// that cannot be read or parsed is reported and read as empty.
pub(super) fn toml_file<T: serde::de::DeserializeOwned + Default>(
    errors: &mut ConfigErrors,
    path: &Path,
    missing_hint: Option<&str>,
) -> T {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && missing_hint.is_none() => {
            return T::default()
        }
        Err(e) => {
            let hint = missing_hint.unwrap_or_default();
            errors.push(path, "file", format!("cannot read: {e}{hint}"));
            return T::default();
        }
    };
    toml::from_str(&text).unwrap_or_else(|e| {
        errors.push_toml(path, &text, &e);
        T::default()
    })
}

/// A key as a dotted key path writes it: bare, or quoted when it is empty or holds
/// other characters (so `"a.b"` is not read as a path).
pub(super) fn key_name(key: &str) -> String {
    let bare = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    if !key.is_empty() && key.bytes().all(bare) {
        key.to_string()
    } else {
        format!("{key:?}")
    }
}

/// One section as its struct; `None` when absent or unusable (its problems are reported).
fn typed_section<T: serde::de::DeserializeOwned>(
    errors: &mut ConfigErrors,
    source: &Path,
    name: &str,
    value: Option<toml::Value>,
) -> Option<T> {
    let mut value = value?;
    // Each pass removes one unknown key; a section has only so many keys.
    for _ in 0..=64 {
        match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(parsed) => return Some(parsed),
            Err(e) => {
                // Where the value that failed is, e.g. `token_ttl_seconds`, `redis.url` or
                // `signing_keys[0].kid` (empty when the section itself has the wrong type).
                let at = key_path(e.path());
                let key = if at.is_empty() {
                    name.to_string()
                } else {
                    format!("{name}.{at}")
                };
                let message = e.inner().message().trim().to_string();
                // An unknown key, at any depth, is reported and removed, and the section
                // read again; any other problem stops the section's reading.
                if message.starts_with("unknown field `") && remove_at(&mut value, e.path()) {
                    errors.push(source, key, format!("unknown key; {message}"));
                    continue;
                }
                errors.push(source, key, message);
                return None;
            }
        }
    }
    None
}

/// A path in a section as a dotted key path writes it: `redis.url`, `signing_keys[0].kid`.
fn key_path(path: &serde_path_to_error::Path) -> String {
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            serde_path_to_error::Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            serde_path_to_error::Segment::Map { key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&key_name(key));
            }
            serde_path_to_error::Segment::Enum { variant } => out.push_str(&key_name(variant)),
            serde_path_to_error::Segment::Unknown => {}
        }
    }
    out
}

/// Removes the key `path` ends with from its table; `false` when the path leads nowhere.
fn remove_at(value: &mut toml::Value, path: &serde_path_to_error::Path) -> bool {
    let segments: Vec<_> = path.iter().collect();
    let Some((serde_path_to_error::Segment::Map { key }, parents)) = segments.split_last() else {
        return false;
    };
    let mut table = value;
    for segment in parents {
        let next = match segment {
            serde_path_to_error::Segment::Map { key } => table.get_mut(key.as_str()),
            serde_path_to_error::Segment::Seq { index } => table.get_mut(*index),
            _ => None,
        };
        let Some(next) = next else {
            return false;
        };
        table = next;
    }
    table
        .as_table_mut()
        .is_some_and(|t| t.remove(key.as_str()).is_some())
}
