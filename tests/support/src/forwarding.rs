//! Requests a forwarding gateway gets (any method, any Accept, raw request targets), its
//! readiness and upstream metrics, and the assertions forwarding tests share.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;

use super::{
    assert_status_shape, metric_sum, parse_http1, try_raw_http, Dashboard, Reply, RunningGateway,
    V1,
};

/// How long the gateway may take to see a backend change (health checks run every 500 ms).
pub const BACKEND_CHANGE_DEADLINE: Duration = Duration::from_secs(30);

pub const FORBIDDEN_DETAIL: &str = "You don't have permissions to access that resource";
pub const NO_ACTIVE_BACKEND: &str = "no active dashboard backend";

impl RunningGateway {
    /// A request with an optional Bearer token and Accept (None: no Accept header at all).
    pub fn request(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        accept: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let mut req = self.client().request(method, self.url(path));
        if let Some(accept) = accept {
            req = req.header("Accept", accept);
        }
        if let Some(token) = token {
            req = req.header("Authorization", format!("Bearer {token}"));
        }
        req
    }

    /// An API request with Accept v1.0, an optional token and an optional JSON body.
    pub async fn api(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> Reply {
        let mut req = self.request(method, path, token, Some(V1));
        if let Some(body) = body {
            req = req.json(body);
        }
        self.send(req).await
    }

    /// The path of the web UI's largest file (its main script), from its index page.
    pub async fn main_script(&self) -> String {
        let index = self.send(self.client().get(self.url("/"))).await;
        assert_eq!(index.status, 200);
        let text = index.text();
        let start = text.find("main.").expect("index.html names main.*.js");
        let end = start + text[start..].find(".js").unwrap() + 3;
        format!("/{}", &text[start..end])
    }

    /// A raw HTTP/1.1 request (see `raw_request_bytes`), read until the server closes.
    pub fn raw_request(
        &self,
        method: &str,
        target: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        let host = self.addr.to_string();
        self.raw_until_close(&raw_request_bytes(
            method, target, &host, token, headers, body,
        ))
    }

    /// Like `raw`, but a connection reset after a complete response still gives that
    /// response: a server that answers before reading the whole request (413) may close
    /// with unread input, which resets the connection after its answer.
    pub fn raw_until_close(&self, request: &[u8]) -> Reply {
        assert!(!self.spec.tls, "raw requests need tls = false");
        raw_exchange(self.addr, request)
            .unwrap_or_else(|e| panic!("raw request: {e}\n{}", self.logs()))
    }

    /// The status of `GET /readyz` on the metrics listener (0: no answer).
    pub fn readyz(&self) -> u16 {
        try_raw_http(
            self.metrics_addr,
            b"GET /readyz HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n",
        )
        .map_or(0, |r| r.status)
    }

    /// Wait until `/readyz` answers `status`, at most `BACKEND_CHANGE_DEADLINE`.
    pub fn wait_readyz(&self, status: u16) {
        let deadline = Instant::now() + BACKEND_CHANGE_DEADLINE;
        loop {
            let got = self.readyz();
            if got == status {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "/readyz still {got}, not {status}, after {BACKEND_CHANGE_DEADLINE:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The sum of the samples of metric `name` with the given labels.
    pub async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        metric_sum(&self.metrics().await, name, labels)
    }

    /// Requests the gateway has sent to any backend (`clustergate_upstream_requests_total`).
    pub async fn upstream_requests(&self) -> f64 {
        self.metric("clustergate_upstream_requests_total", &[])
            .await
    }
}

/// A raw HTTP/1.1 request: method and `target` exactly as given (no normalization),
/// `Connection: close`, Accept v1.0, an optional Bearer token, extra headers, and a
/// Content-Length for any body (and for an empty POST, PUT or PATCH).
pub fn raw_request_bytes(
    method: &str,
    target: &str,
    host: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Vec<u8> {
    let mut req = format!(
        "{method} {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nAccept: {V1}\r\n"
    );
    if let Some(token) = token {
        req.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    let has_body = matches!(
        method.to_ascii_uppercase().as_str(),
        "POST" | "PUT" | "PATCH"
    );
    if !body.is_empty() || has_body {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Send `request`, read until EOF or a reset, and parse what came back. Write errors are
/// ignored (the server may have answered and closed early).
pub fn raw_exchange(addr: SocketAddr, request: &[u8]) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let written = stream.write_all(request);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let read_error = loop {
        match stream.read(&mut chunk) {
            Ok(0) => break None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => break Some(e),
        }
    };
    match parse_http1(&buf) {
        Some(reply) if complete(&reply, &buf) => Ok(reply),
        _ => Err(std::io::Error::other(format!(
            "no complete response (write: {written:?}, read error: {read_error:?}): {:?}",
            String::from_utf8_lossy(&buf)
        ))),
    }
}

/// A response is complete when its declared length arrived (chunked ones parse only whole).
fn complete(reply: &Reply, raw: &[u8]) -> bool {
    match reply
        .header("content-length")
        .and_then(|l| l.parse::<usize>().ok())
    {
        Some(len) => reply.body.len() == len,
        None => !raw.is_empty(),
    }
}

/// The shape of a JSON value: objects as their sorted keys, arrays by their first element.
pub fn json_shape(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::from(keys.into_iter().map(|k| k.as_str()).collect::<Vec<_>>())
        }
        Value::Array(items) => Value::Array(items.first().map(json_shape).into_iter().collect()),
        Value::Null => Value::from("null"),
        Value::Bool(_) => Value::from("bool"),
        Value::Number(_) => Value::from("number"),
        Value::String(_) => Value::from("string"),
    }
}

/// 403 from the gateway in the dashboard's status shape.
pub fn assert_forbidden(r: &Reply) {
    assert_status_shape(r, 403, "403 Forbidden", Some(FORBIDDEN_DETAIL));
}

/// 503 `{"status": "503 Service Unavailable", "detail": "no active dashboard backend", ...}`.
pub fn assert_no_active_backend(r: &Reply) {
    assert_status_shape(r, 503, "503 Service Unavailable", Some(NO_ACTIVE_BACKEND));
}

/// No `Location` header names one of the dashboard's own addresses.
pub fn assert_no_backend_location(r: &Reply, dashboard: &Dashboard, what: &str) {
    for location in r.header_all("location") {
        for host in dashboard.host_ports() {
            assert!(
                !location.contains(&host),
                "{what}: Location {location:?} names the backend {host}"
            );
        }
    }
}

/// Whether `r` is the gateway's own 503 for "no active backend" (not a backend's 503).
pub fn is_no_active_backend(r: &Reply) -> bool {
    r.status == 503
        && serde_json::from_slice::<Value>(&r.body).is_ok_and(|b| {
            b["status"] == "503 Service Unavailable" && b["detail"] == NO_ACTIVE_BACKEND
        })
}
