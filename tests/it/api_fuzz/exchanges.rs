//! The requests a Schemathesis run sent and the answers it got, read from its HAR report,
//! each labelled with who answered: the gateway itself, or the dashboard behind it. And
//! the rules the answers must keep.
//!
//! Who answered: the dashboard's answers come through with its `Server: Ceph-Dashboard`
//! header (and, for errors, a `request_id` of its own in the body); the gateway's own
//! answers carry no `Server` header, and their error bodies are in the dashboard's shapes
//! with `request_id` equal to the `X-Request-Id` header.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

/// The `Server` header of the dashboard's own answers (CherryPy's, as the dashboard sets it).
pub const DASHBOARD_SERVER: &str = "Ceph-Dashboard";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Origin {
    Gateway,
    Dashboard,
    /// A connection error or a timeout: nobody answered.
    NoAnswer,
}

/// One request and its answer.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    /// Whether the request carried an `Authorization` header (Schemathesis sends the
    /// token given to it, or a broken one in negative cases).
    pub with_credentials: bool,
    pub status: u16,
    pub origin: Origin,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Exchange {
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    fn label(&self) -> String {
        let target: String = self.target.chars().take(160).collect();
        format!("{} {target} -> {}", self.method, self.status)
    }

    fn is_read(&self) -> bool {
        matches!(self.method.as_str(), "GET" | "HEAD")
    }
}

/// Who answered, from the status and the answer's headers (names in lower case).
pub fn origin(status: u16, headers: &BTreeMap<String, String>) -> Origin {
    match (status, headers.get("server").map(String::as_str)) {
        (0, _) => Origin::NoAnswer,
        (_, Some(DASHBOARD_SERVER)) => Origin::Dashboard,
        _ => Origin::Gateway,
    }
}

#[derive(Deserialize)]
struct Har {
    log: HarLog,
}

#[derive(Deserialize)]
struct HarLog {
    entries: Vec<HarEntry>,
}

#[derive(Deserialize)]
struct HarEntry {
    request: HarRequest,
    response: HarResponse,
}

#[derive(Deserialize)]
struct HarRequest {
    method: String,
    url: String,
    headers: Vec<HarHeader>,
}

#[derive(Deserialize)]
struct HarResponse {
    status: u16,
    headers: Vec<HarHeader>,
    content: HarContent,
}

#[derive(Deserialize)]
struct HarHeader {
    name: String,
    value: String,
}

#[derive(Deserialize)]
struct HarContent {
    text: Option<String>,
}

/// The exchanges of a HAR report; `origin_url` (`http://host:port`) is cut from the URLs.
pub fn read_har(path: &Path, origin_url: &str) -> Vec<Exchange> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read the HAR report {}: {e}", path.display()));
    parse_har(&text, origin_url)
}

pub fn parse_har(text: &str, origin_url: &str) -> Vec<Exchange> {
    let har: Har = serde_json::from_str(text).expect("a HAR report");
    har.log
        .entries
        .into_iter()
        .map(|entry| {
            let headers: BTreeMap<String, String> = entry
                .response
                .headers
                .into_iter()
                .map(|h| (h.name.to_ascii_lowercase(), h.value))
                .collect();
            let status = entry.response.status;
            Exchange {
                with_credentials: entry
                    .request
                    .headers
                    .iter()
                    .any(|h| h.name.eq_ignore_ascii_case("authorization")),
                method: entry.request.method,
                target: entry
                    .request
                    .url
                    .strip_prefix(origin_url)
                    .unwrap_or(&entry.request.url)
                    .to_string(),
                origin: origin(status, &headers),
                status,
                headers,
                body: entry.response.content.text.unwrap_or_default(),
            }
        })
        .collect()
}

/// Every exchange got an answer.
pub fn answered(exchanges: &[Exchange]) -> Vec<String> {
    exchanges
        .iter()
        .filter(|e| e.origin == Origin::NoAnswer)
        .map(|e| format!("no answer (connection closed or timed out): {}", e.label()))
        .collect()
}

/// The gateway answered no 5xx of its own, and every error of its own is in one of the
/// dashboard's shapes; every answer, passed through or not, carries `X-Request-Id`.
pub fn gateway_answers_well(exchanges: &[Exchange]) -> Vec<String> {
    let mut findings = Vec::new();
    for e in exchanges.iter().filter(|e| e.origin != Origin::NoAnswer) {
        let request_id = e.header("x-request-id").unwrap_or_default();
        if request_id.is_empty() {
            findings.push(format!("no X-Request-Id: {}", e.label()));
        }
        if e.origin != Origin::Gateway {
            continue;
        }
        if e.status >= 500 {
            findings.push(format!("the gateway's own 5xx: {}: {}", e.label(), e.body));
        }
        if e.status >= 400 && !error_shape_ok(&e.body, request_id) {
            findings.push(format!(
                "not the dashboard's error shape: {}: {}",
                e.label(),
                e.body
            ));
        }
    }
    findings
}

/// `{status, detail, request_id}` with the request's id, or `{detail, code, component}`.
fn error_shape_ok(body: &str, request_id: &str) -> bool {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(body) else {
        return false;
    };
    let mut keys: Vec<&str> = map.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let text = |k: &str| map.get(k).and_then(Value::as_str).unwrap_or_default();
    match keys.as_slice() {
        ["detail", "request_id", "status"] => {
            text("request_id") == request_id && !text("detail").is_empty()
        }
        ["code", "component", "detail"] => !text("detail").is_empty() && !text("code").is_empty(),
        _ => false,
    }
}

/// A request with credentials that could change something (any method but GET and HEAD)
/// was refused (4xx), by the gateway or, for operations the gateway hands on, by the
/// dashboard.
pub fn writes_refused(exchanges: &[Exchange]) -> Vec<String> {
    exchanges
        .iter()
        .filter(|e| e.with_credentials && !e.is_read() && e.origin != Origin::NoAnswer)
        .filter(|e| !(400..500).contains(&e.status))
        .map(|e| {
            format!(
                "a write by the read-only user was not refused: {}",
                e.label()
            )
        })
        .collect()
}

/// The auth endpoints are the gateway's own: nothing reaches the dashboard, no invalid
/// login body logs anyone in, and no token cookie is handed out.
pub fn auth_answers_local(exchanges: &[Exchange]) -> Vec<String> {
    let mut findings = Vec::new();
    for e in exchanges.iter().filter(|e| e.origin != Origin::NoAnswer) {
        if e.origin == Origin::Dashboard {
            findings.push(format!(
                "an auth request reached the dashboard: {}",
                e.label()
            ));
        }
        if e.path() == "/api/auth" && e.status == 201 {
            findings.push(format!("an invalid login body logged in: {}", e.label()));
        }
        let cookie = e.header("set-cookie").unwrap_or_default();
        if cookie.starts_with("token=") && !cookie.starts_with("token=;") {
            findings.push(format!("a token cookie was handed out: {}", e.label()));
        }
    }
    findings
}

/// How many answers of each status each side gave, e.g. `gateway 401: 120`.
pub fn tally(exchanges: &[Exchange]) -> BTreeMap<(Origin, u16), usize> {
    let mut counts = BTreeMap::new();
    for e in exchanges {
        *counts.entry((e.origin, e.status)).or_insert(0) += 1;
    }
    counts
}

/// Every status the gateway answered on an operation of `doc` (the gateway's own auth
/// operations, in the auth run) is one the document lists for it. Methods the document
/// does not list for the path (Schemathesis tries them all) are left out.
pub fn statuses_documented(exchanges: &[Exchange], doc: &Value) -> Vec<String> {
    exchanges
        .iter()
        .filter(|e| e.origin == Origin::Gateway)
        .filter_map(|e| {
            let operation = &doc["paths"][e.path()][e.method.to_ascii_lowercase()];
            let responses = operation.get("responses")?.as_object()?;
            let listed =
                responses.contains_key(&e.status.to_string()) || responses.contains_key("default");
            (!listed).then(|| format!("a status its document does not list: {}", e.label()))
        })
        .collect()
}

/// The document's path templates, to name operations by.
pub fn templates(doc: &Value) -> Vec<String> {
    doc["paths"]
        .as_object()
        .map(|paths| paths.keys().cloned().collect())
        .unwrap_or_default()
}

/// The template `path` matches (`/api/pool/{pool_name}` for `/api/pool/x`), the one with
/// the most literal segments; the path itself when none does.
pub fn template<'a>(path: &'a str, templates: &'a [String]) -> &'a str {
    let segments: Vec<&str> = path.split('/').collect();
    templates
        .iter()
        .filter_map(|t| {
            let parts: Vec<&str> = t.split('/').collect();
            let fits = parts.len() == segments.len()
                && parts.iter().zip(&segments).all(|(p, s)| {
                    (p.starts_with('{') && p.ends_with('}') && !s.is_empty()) || p == s
                });
            fits.then(|| (parts.iter().filter(|p| !p.starts_with('{')).count(), t))
        })
        .max_by_key(|(literals, _)| *literals)
        .map_or(path, |(_, t)| t.as_str())
}

/// How many exchanges `select` picks, per `METHOD template status`.
pub fn by_operation(
    exchanges: &[Exchange],
    templates: &[String],
    select: impl Fn(&Exchange) -> bool,
) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for e in exchanges.iter().filter(|e| select(e)) {
        let key = format!(
            "{} {} {}",
            e.method,
            template(e.path(), templates),
            e.status
        );
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

/// The dashboard's own 5xx, passed through.
pub fn from_dashboard_5xx(e: &Exchange) -> bool {
    e.origin == Origin::Dashboard && e.status >= 500
}

/// A method but GET and HEAD with credentials that the gateway handed on to the dashboard.
pub fn handed_on_write(e: &Exchange) -> bool {
    e.origin == Origin::Dashboard && e.with_credentials && !e.is_read()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(method: &str, status: u16, server: Option<&str>, body: &str) -> Exchange {
        let mut headers = BTreeMap::new();
        headers.insert("x-request-id".to_string(), "rid-1".to_string());
        if let Some(server) = server {
            headers.insert("server".to_string(), server.to_string());
        }
        Exchange {
            method: method.into(),
            target: "/api/pool?stats=true".into(),
            with_credentials: true,
            status,
            origin: origin(status, &headers),
            headers,
            body: body.into(),
        }
    }

    const GATEWAY_403: &str = r#"{"status":"403 Forbidden","detail":"No.","request_id":"rid-1"}"#;

    #[test]
    fn the_dashboard_server_header_marks_a_passed_through_answer() {
        assert_eq!(
            exchange("GET", 500, Some(DASHBOARD_SERVER), "").origin,
            Origin::Dashboard
        );
        assert_eq!(exchange("GET", 401, None, "").origin, Origin::Gateway);
        assert_eq!(exchange("GET", 0, None, "").origin, Origin::NoAnswer);
    }

    #[test]
    fn a_5xx_of_the_gateway_is_a_finding_and_one_of_the_dashboard_is_not() {
        let own = r#"{"status":"502 Bad Gateway","detail":"x","request_id":"rid-1"}"#;
        assert_eq!(
            gateway_answers_well(&[exchange("GET", 502, None, own)]).len(),
            1
        );
        let passed = exchange("GET", 500, Some(DASHBOARD_SERVER), "{}");
        assert!(gateway_answers_well(std::slice::from_ref(&passed)).is_empty());
        let counted = by_operation(&[passed], &[], from_dashboard_5xx);
        assert_eq!(counted.values().sum::<usize>(), 1);
    }

    #[test]
    fn gateway_errors_must_have_a_dashboard_shape_with_the_request_id() {
        assert!(gateway_answers_well(&[exchange("GET", 403, None, GATEWAY_403)]).is_empty());
        let coded =
            r#"{"detail":"Invalid credentials","code":"invalid_credentials","component":"auth"}"#;
        assert!(gateway_answers_well(&[exchange("POST", 400, None, coded)]).is_empty());
        let other_id = GATEWAY_403.replace("rid-1", "rid-2");
        for body in ["", "not json", "[]", r#"{"detail":"x"}"#, other_id.as_str()] {
            let findings = gateway_answers_well(&[exchange("GET", 403, None, body)]);
            assert_eq!(findings.len(), 1, "{body}: {findings:?}");
        }
    }

    #[test]
    fn a_missing_request_id_is_a_finding_on_either_side() {
        let mut e = exchange("GET", 200, Some(DASHBOARD_SERVER), "[]");
        e.headers.remove("x-request-id");
        assert_eq!(gateway_answers_well(&[e]).len(), 1);
    }

    #[test]
    fn a_write_with_credentials_must_be_refused() {
        assert!(writes_refused(&[exchange("POST", 403, None, GATEWAY_403)]).is_empty());
        assert!(writes_refused(&[exchange("GET", 200, Some(DASHBOARD_SERVER), "[]")]).is_empty());
        let dashboard_refusal = exchange("PUT", 415, Some(DASHBOARD_SERVER), "{}");
        assert!(writes_refused(&[dashboard_refusal]).is_empty());
        for (method, status) in [("DELETE", 204), ("POST", 201), ("PATCH", 200), ("PUT", 500)] {
            let e = exchange(method, status, Some(DASHBOARD_SERVER), "{}");
            assert_eq!(writes_refused(&[e]).len(), 1, "{method} {status}");
        }
        let mut anonymous = exchange("POST", 200, Some(DASHBOARD_SERVER), "{}");
        anonymous.with_credentials = false;
        assert!(writes_refused(&[anonymous]).is_empty());
    }

    #[test]
    fn auth_answers_must_stay_local_and_log_nobody_in() {
        let mut login = exchange("POST", 201, None, "{}");
        login.target = "/api/auth".into();
        login
            .headers
            .insert("set-cookie".into(), "token=abc; HttpOnly".into());
        assert_eq!(auth_answers_local(&[login]).len(), 2);
        let mut logout = exchange("POST", 200, None, "{}");
        logout.target = "/api/auth/logout".into();
        logout
            .headers
            .insert("set-cookie".into(), "token=; Max-Age=0".into());
        assert!(auth_answers_local(&[logout]).is_empty());
        let reached = exchange("POST", 400, Some(DASHBOARD_SERVER), "{}");
        assert_eq!(auth_answers_local(&[reached]).len(), 1);
    }

    #[test]
    fn a_status_the_document_does_not_list_is_a_finding() {
        let doc = serde_json::json!({"paths": {"/api/pool": {"get": {"responses": {"200": {}, "403": {}}}}}});
        let listed = exchange("GET", 403, None, GATEWAY_403);
        assert!(statuses_documented(&[listed], &doc).is_empty());
        let unlisted = exchange("GET", 413, None, "{}");
        assert_eq!(statuses_documented(&[unlisted], &doc).len(), 1);
        let other_method = exchange("TRACE", 405, None, "{}");
        assert!(statuses_documented(&[other_method], &doc).is_empty());
        let passed_through = exchange("GET", 500, Some(DASHBOARD_SERVER), "{}");
        assert!(statuses_documented(&[passed_through], &doc).is_empty());
    }

    #[test]
    fn paths_are_named_by_the_template_with_most_literals() {
        let templates: Vec<String> = [
            "/api/pool/{pool_name}",
            "/api/pool/{pool_name}/configuration",
            "/api/{x}/configuration",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            template("/api/pool/a%2Fb", &templates),
            "/api/pool/{pool_name}"
        );
        assert_eq!(
            template("/api/pool/p/configuration", &templates),
            "/api/pool/{pool_name}/configuration"
        );
        assert_eq!(template("/api/pool/", &templates), "/api/pool/");
        assert_eq!(template("/elsewhere", &templates), "/elsewhere");
    }

    #[test]
    fn an_exchange_without_an_answer_is_a_finding() {
        assert_eq!(answered(&[exchange("GET", 0, None, "")]).len(), 1);
        assert!(answered(&[exchange("GET", 404, None, "")]).is_empty());
    }

    #[test]
    fn har_entries_become_exchanges() {
        let har = r#"{"log": {"entries": [{
            "startedDateTime": "x", "time": 1.5,
            "request": {"method": "GET", "url": "http://127.0.0.1:9/api/summary?a=1",
                "headers": [{"name": "Authorization", "value": "[Filtered]"}]},
            "response": {"status": 200,
                "headers": [{"name": "Server", "value": "Ceph-Dashboard"},
                            {"name": "x-request-id", "value": "r"}],
                "content": {"size": 2, "mimeType": "application/json", "text": "{}"}}}]}}"#;
        let exchanges = parse_har(har, "http://127.0.0.1:9");
        assert_eq!(exchanges.len(), 1);
        let e = &exchanges[0];
        assert_eq!(
            (e.method.as_str(), e.target.as_str(), e.path()),
            ("GET", "/api/summary?a=1", "/api/summary")
        );
        assert!(e.with_credentials);
        assert_eq!((e.status, e.origin), (200, Origin::Dashboard));
        assert_eq!(e.header("x-request-id"), Some("r"));
        assert_eq!(e.body, "{}");
    }
}
