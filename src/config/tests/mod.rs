//! The configuration's tests, one file per section (and `file` for the file as a whole);
//! the fixtures they share are here.

mod access;
mod api_keys;
mod auth;
mod file;
mod log;
mod reference;
mod server;
mod state;
mod upstream;
mod users;

use super::*;

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn parse(text: &str, dir: &Path) -> Result<Config, ConfigErrors> {
    Config::from_toml_str(text, &dir.join("clustergate.toml"), dir)
}

fn errors_of(text: &str) -> ConfigErrors {
    let d = dir();
    parse(text, d.path()).unwrap_err()
}

/// `[upstream]` with one dashboard and its password file written into `d`.
fn with_upstream(d: &Path, extra: &str) -> String {
    crate::secrets::write_private(&d.join("upstream.pass"), "service-password\n".as_bytes())
        .unwrap();
    format!("[upstream]\nservers = [\"http://127.0.0.1:8080\"]\n{extra}")
}
