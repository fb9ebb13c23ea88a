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
    pub fn resolve(&self, path: &str) -> PathBuf {
        let path = Path::new(path);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.dir.join(path)
        }
    }

    /// A password kept in a file (`key` names the setting), without its line end. `hint`
    /// ends the message when the file cannot be read.
    pub fn password_file(
        &self,
        errors: &mut ConfigErrors,
        key: &str,
        file: &str,
        hint: &str,
    ) -> Option<Secret> {
        let path = self.resolve(file);
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
        access: typed_section(errors, source, "access", section("access")).unwrap_or_default(),
        state: typed_section(errors, source, "state", section("state")).unwrap_or_default(),
    };
    for key in table.keys() {
        errors.push(
            source,
            key_name(key),
            "unknown section or key (sections: server, metrics, api, auth, upstream, access, state)",
        );
    }
    Some(file)
}

/// A key as a dotted key path writes it: bare, or quoted when it is empty or holds
/// other characters (so `"a.b"` is not read as a path).
fn key_name(key: &str) -> String {
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
        match value.clone().try_into::<T>() {
            Ok(parsed) => return Some(parsed),
            Err(e) => {
                let message = e.message().trim().to_string();
                let unknown = message
                    .strip_prefix("unknown field `")
                    .and_then(|rest| rest.split_once('`'))
                    .map(|(key, _)| key.to_string());
                let removed = unknown
                    .as_deref()
                    .is_some_and(|key| remove_own_key::<T>(&mut value, key, &message));
                match unknown {
                    Some(key) if removed => {
                        errors.push(
                            source,
                            format!("{name}.{}", key_name(&key)),
                            format!("unknown key; {message}"),
                        );
                    }
                    _ => {
                        errors.push(source, name, message);
                        return None;
                    }
                }
            }
        }
    }
    None
}

/// Removes `key` from the section's table when it is the section's own unknown key: a
/// nested table (`[state.redis]`, `auth.signing_keys`) may hold an unknown key of the
/// same name as a key of the section, and the complaint (`message`, which lists the
/// fields its table expects) is then that table's: it stays the same without the key.
/// `false` (the table unchanged) when the key is not the section's.
fn remove_own_key<T: serde::de::DeserializeOwned>(
    value: &mut toml::Value,
    key: &str,
    message: &str,
) -> bool {
    let Some(removed) = value.as_table_mut().and_then(|table| table.remove(key)) else {
        return false;
    };
    let same_complaint = value
        .clone()
        .try_into::<T>()
        .is_err_and(|e| e.message().trim() == message);
    if same_complaint {
        if let Some(table) = value.as_table_mut() {
            table.insert(key.to_string(), removed);
        }
        return false;
    }
    true
}
