//! Responses the gateway writes itself, the headers every response carries (the
//! dashboard's security headers and our request id), and how fast any answer must reach
//! its client.

use std::time::Duration;

use bytes::Bytes;
use http::header::{
    CACHE_CONTROL, CONTENT_LENGTH, CONTENT_SECURITY_POLICY, CONTENT_TYPE,
    STRICT_TRANSPORT_SECURITY, X_CONTENT_TYPE_OPTIONS,
};
use http::{HeaderName, HeaderValue, StatusCode};
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use pingora::{InvalidHTTPHeader, OrErr};
use serde_json::Value;

use crate::edge::headers::edit_response;

/// The dashboard's HSTS value (`Strict-Transport-Security`), sent when we terminate TLS.
const HSTS: HeaderValue = HeaderValue::from_static("max-age=63072000; includeSubDomains; preload");
const CSP: HeaderValue = HeaderValue::from_static("frame-ancestors 'self';");
const NOSNIFF: HeaderValue = HeaderValue::from_static("nosniff");
const NO_STORE: HeaderValue = HeaderValue::from_static("no-store");
const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// A complete response built by a local handler.
#[derive(Debug, Clone)]
pub struct LocalResponse {
    pub status: u16,
    pub content_type: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
}

impl LocalResponse {
    pub fn json(status: u16, content_type: impl Into<String>, body: &Value) -> Self {
        LocalResponse::json_text(status, content_type, body.to_string())
    }

    /// A JSON body already written out.
    pub fn json_text(status: u16, content_type: impl Into<String>, body: String) -> Self {
        LocalResponse {
            status,
            content_type: content_type.into(),
            headers: Vec::new(),
            body: Bytes::from(body),
        }
    }

    pub fn with_header(mut self, name: &'static str, value: String) -> Self {
        self.headers.push((name, value));
        self
    }
}

/// The headers every response carries, proxied or local: the dashboard's security headers
/// (HSTS only where we terminate TLS) and the request id.
fn common_headers(
    tls: bool,
    request_id: &str,
) -> pingora::Result<impl Iterator<Item = (HeaderName, HeaderValue)>> {
    let request_id = HeaderValue::from_str(request_id).or_err(InvalidHTTPHeader, "request id")?;
    let hsts = tls.then_some((STRICT_TRANSPORT_SECURITY, HSTS));
    Ok(hsts.into_iter().chain([
        (X_CONTENT_TYPE_OPTIONS, NOSNIFF),
        (CONTENT_SECURITY_POLICY, CSP),
        (X_REQUEST_ID, request_id),
    ]))
}

/// Sets the common headers on a forwarded answer, over the dashboard's own (it sends the
/// same security headers, and HSTS over plain HTTP too, where only a TLS listener may).
pub fn set_common_headers(
    resp: &mut ResponseHeader,
    tls: bool,
    request_id: &str,
) -> pingora::Result<()> {
    let common = common_headers(tls, request_id)?;
    edit_response(resp, |headers| {
        if !tls {
            headers.remove(STRICT_TRANSPORT_SECURITY);
        }
        for (name, value) in common {
            headers.insert(name, value);
        }
    });
    Ok(())
}

/// `response` as the parts of an HTTP answer, with the common headers. Local answers are
/// never cached: they carry tokens.
fn response_parts(
    response: LocalResponse,
    tls: bool,
    request_id: &str,
) -> pingora::Result<(http::response::Parts, Bytes)> {
    let LocalResponse {
        status,
        content_type,
        headers,
        body,
    } = response;
    // Built as plain `http` parts: every name is ours, in canonical case, so pingora needs
    // no second map of original cases, and each header is one map insert.
    let mut parts = http::Response::new(()).into_parts().0;
    parts.status = StatusCode::from_u16(status).or_err(InvalidHTTPHeader, "status")?;
    let map = &mut parts.headers;
    map.reserve(8 + headers.len());
    let content_type =
        HeaderValue::try_from(content_type).or_err(InvalidHTTPHeader, "content type")?;
    map.insert(CONTENT_TYPE, content_type);
    map.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    map.insert(CACHE_CONTROL, NO_STORE);
    for (name, value) in headers {
        let name = HeaderName::try_from(name).or_err(InvalidHTTPHeader, "header name")?;
        let value = HeaderValue::try_from(value).or_err(InvalidHTTPHeader, "header value")?;
        map.append(name, value);
    }
    for (name, value) in common_headers(tls, request_id)? {
        map.insert(name, value);
    }
    Ok((parts, body))
}

/// An answer the gateway kept (the answer cache): its own headers, its length and the
/// common headers; `body` `None`: none (`304`).
pub async fn send_kept(
    session: &mut Session,
    status: StatusCode,
    headers: &[(HeaderName, HeaderValue)],
    body: Option<Bytes>,
    tls: bool,
    request_id: &str,
) -> pingora::Result<()> {
    let mut parts = http::Response::new(()).into_parts().0;
    parts.status = status;
    let map = &mut parts.headers;
    map.reserve(8 + headers.len());
    for (name, value) in headers {
        map.append(name.clone(), value.clone());
    }
    if let Some(body) = &body {
        map.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    }
    for (name, value) in common_headers(tls, request_id)? {
        map.insert(name, value);
    }
    let end = body.is_none();
    session
        .write_response_header(Box::new(ResponseHeader::from(parts)), end)
        .await?;
    if let Some(body) = body {
        session.write_response_body(Some(body), true).await?;
    }
    Ok(())
}

/// `response` as HTTP/1.1 bytes that close the connection, for a client refused before
/// pingora has a session for it (its request head too large or too slow).
pub fn closing_http1(
    response: LocalResponse,
    tls: bool,
    request_id: &str,
) -> pingora::Result<Vec<u8>> {
    let (parts, body) = response_parts(response, tls, request_id)?;
    let mut out = Vec::with_capacity(512 + body.len());
    let reason = parts.status.canonical_reason().unwrap_or("Error");
    out.extend_from_slice(format!("HTTP/1.1 {} {reason}\r\n", parts.status.as_u16()).as_bytes());
    for (name, value) in &parts.headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"connection: close\r\n\r\n");
    out.extend_from_slice(&body);
    Ok(out)
}

/// How fast every answer must reach its client (`server.write_timeout_ms`,
/// `server.min_send_bytes_per_second`): a client that stops reading, or reads a trickle
/// (over HTTP/2: keeps its window closed), is cut off instead of holding its connection,
/// and the memory of its answer, for as long as it likes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteBounds {
    pub timeout: Duration,
    pub min_rate: Option<usize>,
}

impl WriteBounds {
    /// Applies to every write of `session`'s answer (HTTP/1 and HTTP/2).
    pub fn apply(self, session: &mut Session) {
        session.set_write_timeout(Some(self.timeout));
        session.set_min_send_rate(self.min_rate);
    }
}

/// Writes `response` to the client.
pub async fn send(
    session: &mut Session,
    response: LocalResponse,
    tls: bool,
    request_id: &str,
) -> pingora::Result<()> {
    let (parts, body) = response_parts(response, tls, request_id)?;
    session
        .write_response_header(Box::new(ResponseHeader::from(parts)), false)
        .await?;
    session.write_response_body(Some(body), true).await?;
    Ok(())
}
