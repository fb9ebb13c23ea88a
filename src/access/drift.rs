//! Operations the gateway's table does not know, forwarded for the dashboard to decide
//! (`access.unknown_operations = "forward"`): a newer release's drift. Each is logged once
//! per manager, so that an operator sees what the table lacks without a line per request.

use std::collections::HashSet;
use std::sync::Mutex;

use http::Method;

/// The operations remembered as logged (a client could name endless paths); past it,
/// no more lines until a reload (the metric still counts each request).
pub const MAX_REMEMBERED: usize = 1000;

/// A path segment longer than this is a name, not a word of the API.
const MAX_WORD: usize = 32;

/// An operation logged: the manager, the method, the path folded.
type Logged = (Box<str>, Method, Box<str>);

/// Which unknown operations were logged, per manager.
#[derive(Debug, Default)]
pub struct DriftLog {
    logged: Mutex<HashSet<Logged>>,
}

impl DriftLog {
    /// `method path` on `manager` as the log names it (its variable segments folded),
    /// when it was not logged yet and there is room to remember it; else `None`.
    pub fn first_time(&self, manager: &str, method: &Method, path: &str) -> Option<String> {
        let operation = fold(path);
        let key = (manager.into(), method.clone(), operation.as_str().into());
        let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        if logged.len() >= MAX_REMEMBERED || logged.contains(&key) {
            return None;
        }
        logged.insert(key);
        Some(operation)
    }
}

/// `path` with each segment that names an object (a pool, a user, an id) as `{}`: the
/// first two (`/api/<controller>`) are kept, and later ones made only of lowercase
/// letters and `_` (the API's own words, e.g. `status`, `_info`).
pub fn fold(path: &str) -> String {
    let folded: Vec<&str> = path
        .split('/')
        .enumerate()
        .map(|(i, segment)| {
            let word = segment.len() <= MAX_WORD
                && segment.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
            if i <= 2 || word {
                segment
            } else {
                "{}"
            }
        })
        .collect();
    folded.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids_are_folded() {
        assert_eq!(fold("/api/rgw/user/cg-user"), "/api/rgw/user/{}");
        assert_eq!(
            fold("/api/pool/cg-data/configuration"),
            "/api/pool/{}/configuration"
        );
        assert_eq!(fold("/api/osd/0/devices"), "/api/osd/{}/devices");
        assert_eq!(fold("/api/nvmeof/gateway"), "/api/nvmeof/gateway");
        assert_eq!(fold("/api/smb/cluster/My%20Cluster"), "/api/smb/cluster/{}");
    }

    #[test]
    fn each_operation_is_logged_once_per_manager_and_the_set_is_bounded() {
        let log = DriftLog::default();
        let first = log.first_time("http://a", &Method::GET, "/api/rgw/user/u-1");
        assert_eq!(first.as_deref(), Some("/api/rgw/user/{}"));
        assert_eq!(
            log.first_time("http://a", &Method::GET, "/api/rgw/user/u-2"),
            None
        );
        assert!(log
            .first_time("http://b", &Method::GET, "/api/rgw/user/u-2")
            .is_some());
        assert!(log
            .first_time("http://a", &Method::PUT, "/api/rgw/user/u-2")
            .is_some());
        for i in 0..2 * MAX_REMEMBERED {
            log.first_time("http://a", &Method::GET, &format!("/api/x{i}"));
        }
        assert_eq!(log.logged.lock().unwrap().len(), MAX_REMEMBERED);
        assert_eq!(log.first_time("http://c", &Method::GET, "/api/new"), None);
    }
}
