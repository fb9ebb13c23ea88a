//! No dashboard token reaches a client. Since 20.2 the dashboard keeps, in its
//! multi-cluster configuration, the token of whoever logged in first after the manager
//! started: behind the gateway, its service account. Every operation of two families
//! answers with that configuration, or may: the multi-cluster operations (`get_config`,
//! and the writes `set_config`, `edit_cluster`, `delete_cluster/{cluster_name}/{cluster_user}`
//! return the whole configuration; `auth` and `reconnect_cluster` proxy to other
//! dashboards), and the settings (`MULTICLUSTER_CONFIG` among them, read or written through
//! `/api/settings` and `/api/settings/{name}`), to anyone with config-opt. Their answers,
//! whatever the method, are read whole (bounded) and every JWT in them is emptied, wherever
//! it sits (the settings carry the configuration as a JSON string within JSON). The rest of
//! each answer is the dashboard's, so the web UI's pages work on.
//!
//! The rule goes by path, not by the operation a table matched: a manager newer than the
//! gateway's tables (an operation forwarded with `access.unknown_operations = "forward"`)
//! is covered too.

use bytes::{Bytes, BytesMut};
use http::Method;

/// The path families whose answers may carry a dashboard token: the path itself, or any
/// path below it. Taken from 20.2's OpenAPI document (`/docs/api-all.json`) and its
/// `controllers/multi_cluster.py` and `settings.py`: no other operation answers with the
/// stored configuration or a dashboard token (`POST /api/auth` is the gateway's own).
const CARRIERS: [&str; 3] = [
    "/api/multi-cluster",
    "/ui-api/multi-cluster",
    "/api/settings",
];

/// A settings answer is a few kilobytes; one that holds many clusters' configurations a few
/// more.
pub const MAX_REDACTED_ANSWER: usize = 4 * 1024 * 1024;

/// Whether the answers of `method path` (a normalized path) are redacted: every method but
/// HEAD (no body) on a carrier family.
pub fn carries_tokens(method: &Method, path: &str) -> bool {
    *method != Method::HEAD
        && CARRIERS.iter().any(|family| {
            path.strip_prefix(family)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RedactionError {
    #[error("the answer is larger than {MAX_REDACTED_ANSWER} bytes: it cannot be checked for dashboard tokens")]
    TooLarge,
}

/// One answer being read whole, to be sent redacted at its end.
#[derive(Debug, Default)]
pub struct Redaction {
    read: BytesMut,
}

impl Redaction {
    /// Takes `chunk` in; at the end of the answer, the whole answer redacted, else nothing
    /// (the client gets the answer in one piece).
    pub fn take(
        &mut self,
        chunk: Option<Bytes>,
        end: bool,
    ) -> Result<Option<Bytes>, RedactionError> {
        if let Some(chunk) = chunk {
            if self.read.len() + chunk.len() > MAX_REDACTED_ANSWER {
                return Err(RedactionError::TooLarge);
            }
            self.read.extend_from_slice(&chunk);
        }
        Ok(end.then(|| Bytes::from(without_jwts(&self.read))))
    }
}

/// `text` with every JWT (`eyJ` + base64url, `.`, base64url, `.`, base64url) removed.
pub fn without_jwts(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut at = 0;
    while let Some(offset) = memchr::memmem::find(&text[at..], b"eyJ") {
        let start = at + offset;
        // (a JWT starts a run: `xeyJ…` is some other text)
        let starts_run = start == 0 || !is_base64url(text[start - 1]);
        match jwt_length(&text[start..]) {
            Some(length) if starts_run => {
                out.extend_from_slice(&text[at..start]);
                at = start + length;
            }
            _ => {
                out.extend_from_slice(&text[at..start + 3]);
                at = start + 3;
            }
        }
    }
    out.extend_from_slice(&text[at..]);
    out
}

/// The length of the JWT `text` starts with: three base64url runs joined by dots, the
/// first two not empty (an unsigned token's signature is).
fn jwt_length(text: &[u8]) -> Option<usize> {
    let mut length = 0;
    for part in 0..3 {
        let run = text[length..]
            .iter()
            .take_while(|b| is_base64url(**b))
            .count();
        if run == 0 && part < 2 {
            return None;
        }
        length += run;
        if part < 2 {
            if text.get(length) != Some(&b'.') {
                return None;
            }
            length += 1;
        }
    }
    Some(length)
}

fn is_base64url(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    const JWT: &str =
        "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.eyJ1c2VybmFtZSI6ImNsdXN0ZXJnYXRlIn0.c2lnbmF0dXJl";

    #[test]
    fn every_jwt_is_emptied_wherever_it_sits() {
        let config = format!(
            r#"{{"current_user": "clustergate", "config": {{"fsid": [{{"user": "clustergate", "token": "{JWT}"}}, {{"token": "{JWT}"}}]}}}}"#
        );
        let redacted = String::from_utf8(without_jwts(config.as_bytes())).unwrap();
        assert!(!redacted.contains("eyJ"), "{redacted}");
        let value: serde_json::Value = serde_json::from_str(&redacted).unwrap();
        assert_eq!(value["config"]["fsid"][0]["token"], "");
        assert_eq!(value["config"]["fsid"][0]["user"], "clustergate");
        // The settings: the configuration as a JSON string inside JSON.
        let setting =
            serde_json::json!({"name": "MULTICLUSTER_CONFIG", "value": config}).to_string();
        let redacted = String::from_utf8(without_jwts(setting.as_bytes())).unwrap();
        assert!(!redacted.contains("eyJ"), "{redacted}");
        let value: serde_json::Value = serde_json::from_str(&redacted).unwrap();
        let inner: serde_json::Value =
            serde_json::from_str(value["value"].as_str().unwrap()).unwrap();
        assert_eq!(inner["config"]["fsid"][1]["token"], "");
        // An unsigned token too.
        let unsigned = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.";
        assert_eq!(
            without_jwts(format!("[\"{unsigned}\"]").as_bytes()),
            b"[\"\"]"
        );
    }

    #[test]
    fn text_that_only_looks_like_a_start_is_kept() {
        for text in [
            "eyJ",
            "eyJabc",
            "eyJabc.def",
            "keyJabc.def.ghi",
            "{\"eyJ\": 1}",
        ] {
            assert_eq!(without_jwts(text.as_bytes()), text.as_bytes(), "{text}");
        }
    }

    #[test]
    fn an_answer_is_given_whole_at_its_end_and_bounded() {
        let mut redaction = Redaction::default();
        let (head, tail) = JWT.split_at(20);
        assert_eq!(
            redaction.take(Some(Bytes::from(format!("[\"{head}"))), false),
            Ok(None)
        );
        let end = redaction.take(Some(Bytes::from(format!("{tail}\"]"))), true);
        assert_eq!(end, Ok(Some(Bytes::from_static(b"[\"\"]"))));
        let mut large = Redaction::default();
        let chunk = Bytes::from(vec![b' '; MAX_REDACTED_ANSWER]);
        assert_eq!(large.take(Some(chunk.clone()), false), Ok(None));
        assert_eq!(large.take(Some(chunk), true), Err(RedactionError::TooLarge));
    }

    #[test]
    fn every_answer_of_the_carriers_is_redacted_whatever_the_method() {
        for (method, path) in [
            (Method::GET, "/api/multi-cluster/get_config"),
            (Method::PUT, "/api/multi-cluster/set_config"),
            (Method::PUT, "/api/multi-cluster/edit_cluster"),
            (Method::PUT, "/api/multi-cluster/reconnect_cluster"),
            (Method::POST, "/api/multi-cluster/auth"),
            (
                Method::DELETE,
                "/api/multi-cluster/delete_cluster/fsid/admin",
            ),
            (
                Method::GET,
                "/ui-api/multi-cluster/get_prometheus_access_info",
            ),
            (Method::GET, "/api/settings"),
            (Method::PUT, "/api/settings"),
            (Method::GET, "/api/settings/MULTICLUSTER_CONFIG"),
            (Method::PUT, "/api/settings/MULTICLUSTER_CONFIG"),
            (Method::DELETE, "/api/settings/MULTICLUSTER_CONFIG"),
        ] {
            assert!(carries_tokens(&method, path), "{method} {path}");
        }
        for (method, path) in [
            (Method::HEAD, "/api/settings"),
            (Method::GET, "/api/summary"),
            (Method::GET, "/api/settingsx"),
            (Method::GET, "/api/osd/settings"),
            (Method::GET, "/api/multi-clusterx/get_config"),
        ] {
            assert!(!carries_tokens(&method, path), "{method} {path}");
        }
    }

    /// Every operation of the carrier families in 20.2's table is covered, and no other
    /// operation of that table answers with the configuration (checked by hand against the
    /// dashboard's source; this test holds the list to that).
    #[test]
    fn the_carriers_cover_the_releases_operations() {
        let table = include_str!("../conf/scopes/20.2.toml");
        let paths: Vec<&str> = table
            .lines()
            .filter_map(|line| line.strip_prefix("path = \""))
            .filter_map(|rest| rest.strip_suffix('"'))
            .collect();
        let covered: Vec<&str> = paths
            .iter()
            .copied()
            .filter(|path| carries_tokens(&Method::GET, path))
            .collect();
        for path in &paths {
            let named = path.contains("multi-cluster") || path.starts_with("/api/settings");
            assert_eq!(named, covered.contains(path), "{path}");
        }
        assert!(covered.len() >= 12, "{covered:?}");
    }
}
