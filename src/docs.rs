//! The API description: the backend's OpenAPI document, fetched from the active
//! dashboard, cached, and rewritten so that it describes the gateway (its `servers`, its
//! own auth operations) and names no backend address; and a page to browse it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{json, Map, Value};
use tokio::sync::{Mutex, RwLock};

use crate::dashboards::Upstreams;
use crate::edge::respond::LocalResponse;

/// Why no document or page was answered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DocsError {
    #[error("no active dashboard backend")]
    NoActiveBackend,
    /// Fetching the document failed; says how.
    #[error("{0}")]
    Fetch(String),
    #[error("only GET and HEAD")]
    MethodNotAllowed,
    #[error("no page at {0}")]
    NotFound(String),
}

/// The 16.2 document is about 240 KB; later versions are larger.
const MAX_DOC_BYTES: usize = 16 * 1024 * 1024;

struct Cached {
    body: Bytes,
    fetched: Instant,
}

pub struct Docs {
    upstreams: Arc<Upstreams>,
    docs_path: String,
    refresh: Duration,
    /// The `servers` URL: the configured public URL, or "/" (never the Host header).
    server_url: String,
    cache: RwLock<Option<Cached>>,
    fetching: Mutex<()>,
}

impl Docs {
    pub fn new(
        upstreams: Arc<Upstreams>,
        docs_path: String,
        refresh: Duration,
        public_url: Option<String>,
    ) -> Self {
        Docs {
            upstreams,
            docs_path,
            refresh,
            server_url: public_url.map_or_else(
                || "/".to_string(),
                |u| format!("{}/", u.trim_end_matches('/')),
            ),
            cache: RwLock::new(None),
            fetching: Mutex::new(()),
        }
    }

    /// The rewritten document: cached, refreshed after `refresh`; a stale copy is served
    /// while no backend can give a fresh one.
    pub async fn document(&self) -> Result<LocalResponse, DocsError> {
        if let Some(body) = self.fresh().await {
            return Ok(json_response(body));
        }
        let _one_fetch = self.fetching.lock().await;
        if let Some(body) = self.fresh().await {
            return Ok(json_response(body));
        }
        match self.fetch().await {
            Ok(body) => {
                *self.cache.write().await = Some(Cached {
                    body: body.clone(),
                    fetched: Instant::now(),
                });
                Ok(json_response(body))
            }
            Err(error) => match self.cache.read().await.as_ref() {
                Some(stale) => {
                    tracing::warn!(%error, "serving a stale API document");
                    Ok(json_response(stale.body.clone()))
                }
                None => Err(error),
            },
        }
    }

    async fn fresh(&self) -> Option<Bytes> {
        self.cache
            .read()
            .await
            .as_ref()
            .filter(|c| c.fetched.elapsed() < self.refresh)
            .map(|c| c.body.clone())
    }

    async fn fetch(&self) -> Result<Bytes, DocsError> {
        let backend = self.upstreams.active().ok_or(DocsError::NoActiveBackend)?;
        let bad_gateway = DocsError::Fetch;
        let mut req = self
            .upstreams
            .request(&backend, "GET", &self.docs_path)
            .map_err(|e| bad_gateway(e.to_string()))?;
        req.insert_header("accept", "application/json")
            .map_err(|e| bad_gateway(e.to_string()))?;
        let timeout = self.upstreams.timeouts.docs_fetch;
        let peer = self.upstreams.peer(&backend, timeout);
        let reply = self
            .upstreams
            .client
            .send(&peer, req, None, MAX_DOC_BYTES, timeout)
            .await
            .map_err(|e| bad_gateway(format!("cannot fetch the API document: {e}")))?;
        if reply.status() != 200 {
            return Err(bad_gateway(format!(
                "the backend answered {} for the API document",
                reply.status()
            )));
        }
        let mut doc: Value = serde_json::from_slice(&reply.body)
            .map_err(|e| bad_gateway(format!("the backend's API document is not JSON: {e}")))?;
        let backends: Vec<String> = self
            .upstreams
            .backends()
            .iter()
            .flat_map(|b| [b.base.clone(), b.host_header().to_string()])
            .collect();
        rewrite(&mut doc, &self.server_url, &backends);
        Ok(Bytes::from(doc.to_string()))
    }
}

fn json_response(body: Bytes) -> LocalResponse {
    LocalResponse {
        status: 200,
        content_type: "application/json".into(),
        headers: Vec::new(),
        body,
    }
}

/// Points the document at the gateway, drops every mention of a backend address, and
/// describes the auth operations as the gateway serves them.
pub fn rewrite(doc: &mut Value, server_url: &str, backend_addresses: &[String]) {
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("servers".into(), json!([{"url": server_url}]));
        obj.remove("host");
    }
    scrub(doc, server_url, backend_addresses, 0);
    if let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) {
        for (path, item) in auth_paths() {
            paths.insert(path, item);
        }
    }
}

/// Replaces backend addresses in every string (bounded depth: documents are shallow).
fn scrub(value: &mut Value, server_url: &str, addresses: &[String], depth: usize) {
    if depth > 64 {
        return;
    }
    match value {
        Value::String(s) => {
            for address in addresses {
                if s.contains(address.as_str()) {
                    *s = s.replace(address.as_str(), server_url.trim_end_matches('/'));
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| scrub(v, server_url, addresses, depth + 1)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|v| scrub(v, server_url, addresses, depth + 1)),
        _ => {}
    }
}

/// The gateway's own `/api/auth*` operations, as it serves them.
fn auth_paths() -> Map<String, Value> {
    let v1 = "application/vnd.ceph.api.v1.0+json";
    let error = json!({"description": "Error in the dashboard's shape",
        "content": {"application/json": {"schema": {"type": "object", "properties": {
            "status": {"type": "string"}, "detail": {"type": "string"}, "request_id": {"type": "string"}}}}}});
    let bad_request = json!({"description": "Invalid credentials, or a malformed request",
        "content": {"application/json": {"schema": {"type": "object", "properties": {
            "detail": {"type": "string"}, "code": {"type": "string"}, "component": {"type": "string"}}}}}});
    let permissions = json!({"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}});
    let mut paths = Map::new();
    paths.insert("/api/auth".into(), json!({"post": {
        "tags": ["Auth"], "summary": "Log in: get a gateway token",
        "requestBody": {"required": true, "content": {"application/json": {"schema": {
            "type": "object", "required": ["username", "password"],
            "properties": {"username": {"type": "string"}, "password": {"type": "string"}}}}}},
        "responses": {
            "201": {"description": "Logged in; the token is also set as the `token` cookie",
                "content": {v1: {"schema": {"type": "object", "properties": {
                    "token": {"type": "string"}, "username": {"type": "string"}, "permissions": permissions,
                    "pwdExpirationDate": {"type": "integer", "nullable": true},
                    "sso": {"type": "boolean"}, "pwdUpdateRequired": {"type": "boolean"}}}}}},
            "400": bad_request, "413": error, "415": error, "429": error}}}));
    paths.insert("/api/auth/check".into(), json!({"post": {
        "tags": ["Auth"], "summary": "Check a token (load balancers' health check)",
        "parameters": [{"name": "token", "in": "query", "required": false, "schema": {"type": "string"}}],
        // A null token is read as none (the login URL), as on the dashboard.
        "requestBody": {"required": false, "content": {"application/json": {"schema": {
            "type": "object", "properties": {"token": {"type": "string", "nullable": true}}}}}},
        "responses": {
            "200": {"description": "The token's user, or where to log in",
                "content": {v1: {"schema": {"type": "object", "properties": {
                    "username": {"type": "string"}, "permissions": permissions, "sso": {"type": "boolean"},
                    "pwdUpdateRequired": {"type": "boolean"}, "login_url": {"type": "string"},
                    "cluster_status": {"type": "string"}}}}}},
            "400": bad_request, "413": error, "415": error,
            "503": {"description": "No active dashboard backend: the same bodies, cluster_status UNAVAILABLE"}}}}));
    paths.insert(
        "/api/auth/logout".into(),
        json!({"post": {
        "tags": ["Auth"], "summary": "Log out: revoke the token",
        "security": [{"jwt": []}],
        "responses": {
            "200": {"description": "Logged out", "content": {v1: {"schema": {"type": "object",
                "properties": {"redirect_url": {"type": "string"}}}}}},
            "401": error, "413": error, "415": error}}}),
    );
    paths
}

/// What the gateway does with one operation of the manager's document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Its table knows the operation and forwards it to someone.
    Checked,
    /// Its table does not know the operation (a release newer than the table):
    /// `forwarded` for the dashboard to decide (`access.unknown_operations = "forward"`),
    /// else refused.
    Unknown { forwarded: bool },
    /// Closed, or not opened.
    Refused,
}

/// The top-level list of the operations of the manager's document the gateway's table
/// does not know (`METHOD /template`), forwarded or not: a newer release's drift.
pub const UNKNOWN_LIST: &str = "x-clustergate-unknown-operations";
/// Marks each such operation the gateway forwards, for the dashboard to decide.
pub const UNKNOWN_MARK: &str = "x-clustergate-unknown";

type Offered<'a> = &'a (dyn Fn(&http::Method, &str) -> Offer + Sync);

/// The page at `/docs`: a self-contained browser for the document (no CDN).
/// Answers `/docs...`: the page, or the document. `docs` is `None` without backends.
/// `offered(method, path template)`: what the gateway does with the operation; the
/// document lists those it forwards (and the gateway's own).
pub async fn answer(
    docs: Option<&Docs>,
    method: &http::Method,
    path: &str,
    offered: Offered<'_>,
) -> Result<LocalResponse, DocsError> {
    if method != http::Method::GET && method != http::Method::HEAD {
        return Err(DocsError::MethodNotAllowed);
    }
    match (path, docs) {
        ("/docs", Some(_)) => Ok(page()),
        // Boxed: a rare answer with a large future, which would otherwise make the
        // caller's future (moved into a box on every request by `async_trait`) as large.
        ("/docs/api.json" | "/docs/openapi.json", Some(docs)) => {
            let document = Box::pin(docs.document()).await?;
            Ok(json_response(only_offered(&document.body, offered)))
        }
        _ => Err(DocsError::NotFound(path.to_string())),
    }
}

/// The method an OpenAPI path item's key names, if it names one.
fn operation_method(key: &str) -> Option<http::Method> {
    const OPERATIONS: [&str; 8] = [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];
    OPERATIONS
        .contains(&key)
        .then(|| http::Method::from_bytes(key.to_ascii_uppercase().as_bytes()).ok())
        .flatten()
}

/// The document without the operations the gateway refuses (closed, not opened, unknown
/// to the manager's table and not forwarded); a path left without operations goes too.
/// The gateway's own auth operations are offered. The operations the table does not know
/// are listed under [`UNKNOWN_LIST`], and those forwarded marked [`UNKNOWN_MARK`].
fn only_offered(body: &Bytes, offered: Offered<'_>) -> Bytes {
    let Ok(mut doc) = serde_json::from_slice::<Value>(body) else {
        return body.clone();
    };
    let own = auth_paths();
    let mut unknown = Vec::new();
    if let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) {
        paths.retain(|path, item| {
            if own.contains_key(path) {
                return true;
            }
            let Some(item) = item.as_object_mut() else {
                return false;
            };
            item.retain(|key, operation| {
                let Some(method) = operation_method(key) else {
                    // (`parameters`, `summary`: not operations)
                    return true;
                };
                match offered(&method, path) {
                    Offer::Checked => true,
                    Offer::Refused => false,
                    Offer::Unknown { forwarded } => {
                        unknown.push(Value::String(format!("{method} {path}")));
                        if let (true, Some(operation)) = (forwarded, operation.as_object_mut()) {
                            operation.insert(UNKNOWN_MARK.into(), Value::Bool(true));
                        }
                        forwarded
                    }
                }
            });
            item.keys().any(|key| operation_method(key).is_some())
        });
    }
    if let Some(obj) = doc.as_object_mut() {
        obj.insert(UNKNOWN_LIST.into(), Value::Array(unknown));
    }
    Bytes::from(doc.to_string())
}

fn page() -> LocalResponse {
    LocalResponse {
        status: 200,
        content_type: "text/html; charset=utf-8".into(),
        headers: Vec::new(),
        body: Bytes::from_static(include_bytes!("docs.html")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrite_points_at_the_gateway_and_forgets_backends() {
        let mut doc = json!({
            "openapi": "3.0.0", "host": "127.0.0.1:18080",
            "servers": [{"url": "http://127.0.0.1:18080/"}],
            "info": {"description": "see http://127.0.0.1:18080/docs"},
            "paths": {"/api/pool": {"get": {}}, "/api/auth": {"post": {"summary": "backend's"}}}
        });
        let backends = vec![
            "http://127.0.0.1:18080".to_string(),
            "127.0.0.1:18080".to_string(),
        ];
        rewrite(&mut doc, "https://gw.example:8443/", &backends);
        assert_eq!(doc["servers"], json!([{"url": "https://gw.example:8443/"}]));
        assert!(doc.get("host").is_none());
        assert!(!doc.to_string().contains("127.0.0.1:18080"));
        assert!(doc["paths"]["/api/pool"].is_object());
        assert_eq!(
            doc["paths"]["/api/auth"]["post"]["summary"],
            "Log in: get a gateway token"
        );
        assert!(doc["paths"]["/api/auth/check"]["post"]["responses"]["200"].is_object());
        assert!(doc["paths"]["/api/auth/logout"].is_object());
    }

    /// Found by the API fuzzer (tests/it/api_fuzz.rs): every auth endpoint reads its body
    /// whole up to `auth::BODY_LIMIT` and answers 413 past it, and `check` takes a null
    /// token as none.
    #[test]
    fn auth_operations_document_413_and_a_nullable_check_token() {
        let paths = auth_paths();
        for path in ["/api/auth", "/api/auth/check", "/api/auth/logout"] {
            assert!(
                paths[path]["post"]["responses"]["413"].is_object(),
                "{path}: no 413"
            );
        }
        let body = &paths["/api/auth/check"]["post"]["requestBody"]["content"];
        let token = &body["application/json"]["schema"]["properties"]["token"];
        assert_eq!(token["nullable"], true);
    }

    #[test]
    fn only_what_the_gateway_offers_is_listed() {
        let doc = json!({"paths": {
            "/api/pool": {"get": {}, "post": {}, "parameters": []},
            "/api/user/{username}/change_password": {"post": {}, "parameters": []},
            "/api/auth": {"post": {}},
        }});
        let body = Bytes::from(doc.to_string());
        let offered = |method: &http::Method, path: &str| match path == "/api/pool"
            && *method == http::Method::GET
        {
            true => Offer::Checked,
            false => Offer::Refused,
        };
        let listed: Value = serde_json::from_slice(&only_offered(&body, &offered)).unwrap();
        assert_eq!(
            listed["paths"],
            json!({"/api/pool": {"get": {}, "parameters": []}, "/api/auth": {"post": {}}})
        );
        assert_eq!(listed[UNKNOWN_LIST], json!([]));
    }

    /// Issue 32, item 3: the operations of the manager's document the table does not know
    /// are listed; forwarded, they stay in `paths`, marked.
    #[test]
    fn operations_the_table_does_not_know_are_listed_and_marked() {
        let doc = json!({"paths": {
            "/api/pool": {"get": {}},
            "/api/nvmeof/gateway": {"get": {"tags": ["NVMe-oF"]}},
            "/api/smb/cluster": {"post": {}},
        }});
        let body = Bytes::from(doc.to_string());
        let offered = |forwarded: bool| {
            move |_: &http::Method, path: &str| match path {
                "/api/pool" => Offer::Checked,
                _ => Offer::Unknown { forwarded },
            }
        };
        let unknown = json!(["GET /api/nvmeof/gateway", "POST /api/smb/cluster"]);
        let forwarding: Value =
            serde_json::from_slice(&only_offered(&body, &offered(true))).unwrap();
        assert_eq!(forwarding[UNKNOWN_LIST], unknown);
        let gateway = &forwarding["paths"]["/api/nvmeof/gateway"]["get"];
        assert_eq!(gateway[UNKNOWN_MARK], true);
        assert_eq!(gateway["tags"], json!(["NVMe-oF"]));
        assert!(forwarding["paths"]["/api/pool"]["get"]
            .get(UNKNOWN_MARK)
            .is_none());
        let refusing: Value =
            serde_json::from_slice(&only_offered(&body, &offered(false))).unwrap();
        assert_eq!(refusing[UNKNOWN_LIST], unknown);
        assert_eq!(refusing["paths"], json!({"/api/pool": {"get": {}}}));
    }

    #[test]
    fn rewrite_uses_a_relative_server_without_a_public_url() {
        let mut doc = json!({"paths": {}});
        rewrite(&mut doc, "/", &[]);
        assert_eq!(doc["servers"], json!([{"url": "/"}]));
    }
}
