//! Responses the gateway writes itself, and the headers every response carries
//! (the dashboard's security headers and our request id).

use bytes::Bytes;
use http::header::AsHeaderName;
use http::header::{
    CACHE_CONTROL, CONTENT_LENGTH, CONTENT_SECURITY_POLICY, CONTENT_TYPE,
    STRICT_TRANSPORT_SECURITY, X_CONTENT_TYPE_OPTIONS,
};
use http::{HeaderName, HeaderValue, StatusCode};
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use pingora::{InvalidHTTPHeader, OrErr};
use serde_json::Value;

use crate::errors::GatewayError;

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

    pub fn from_error(error: &GatewayError, request_id: &str) -> Self {
        let mut response =
            LocalResponse::json(error.status(), "application/json", &error.body(request_id));
        response.headers = error.headers();
        response
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

/// Adds the common headers to a forwarded answer. The dashboard sends the same security
/// headers itself: those already right are left as they are.
pub fn add_common_headers(
    resp: &mut ResponseHeader,
    tls: bool,
    request_id: &str,
) -> pingora::Result<()> {
    for (name, value) in common_headers(tls, request_id)? {
        if !carries_only(&resp.headers, &name, value.as_bytes()) {
            resp.insert_header(name, value)?;
        }
    }
    Ok(())
}

/// Whether `headers` has exactly one `name`, and it is `value`. A lookup is much cheaper
/// than pingora's `insert_header` (a name parse and two map updates).
pub fn carries_only(headers: &http::HeaderMap, name: impl AsHeaderName, value: &[u8]) -> bool {
    let mut values = headers.get_all(name).iter();
    values.next().is_some_and(|v| v.as_bytes() == value) && values.next().is_none()
}

/// Writes `response` to the client. Local answers are never cached: they carry tokens.
pub async fn send(
    session: &mut Session,
    response: LocalResponse,
    tls: bool,
    request_id: &str,
) -> pingora::Result<()> {
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
    session
        .write_response_header(Box::new(ResponseHeader::from(parts)), false)
        .await?;
    session.write_response_body(Some(body), true).await?;
    Ok(())
}

/// The body length a request declares in Content-Length, when it is a number.
pub fn declared_length(headers: &http::HeaderMap) -> Option<usize> {
    headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok())
}

fn expects_continue(session: &Session) -> bool {
    session
        .req_header()
        .headers
        .get(http::header::EXPECT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("100-continue"))
}

/// Every value of a header, joined as RFC 9110 §5.3 says repeated lines combine.
pub fn joined_header<'h>(
    headers: &'h http::HeaderMap,
    name: http::header::HeaderName,
) -> Option<std::borrow::Cow<'h, str>> {
    let mut values = headers.get_all(name).iter().filter_map(|v| v.to_str().ok());
    let first = values.next()?;
    match values.next() {
        None => Some(std::borrow::Cow::Borrowed(first)),
        Some(second) => {
            let mut joined = format!("{first}, {second}");
            for v in values {
                joined.push_str(", ");
                joined.push_str(v);
            }
            Some(std::borrow::Cow::Owned(joined))
        }
    }
}

/// Reads the whole request body, refusing more than `limit` bytes. It reads up to the
/// limit before refusing, because an HTTP/2 client whose body is refused unread sees a
/// stream reset instead of our 413.
pub async fn read_body(session: &mut Session, limit: usize) -> Result<Bytes, GatewayError> {
    if expects_continue(session) {
        // RFC 9110 §10.1.1: answer before the client sends the body: 413 now, or 100.
        if declared_length(&session.req_header().headers).is_some_and(|n| n > limit) {
            session.set_keepalive(None);
            return Err(GatewayError::PayloadTooLarge { limit });
        }
        session.write_continue_response().await.map_err(|e| {
            GatewayError::bad_request(format!("Could not answer Expect: {}", e.etype().as_str()))
        })?;
    }
    let mut body = bytes::BytesMut::new();
    loop {
        let chunk = session.read_request_body().await.map_err(|e| {
            GatewayError::bad_request(format!(
                "Could not read the request body: {}",
                e.etype().as_str()
            ))
        })?;
        let Some(chunk) = chunk else {
            return Ok(body.freeze());
        };
        if body.len() + chunk.len() > limit {
            // The rest of the body stays unread: this connection cannot be reused.
            session.set_keepalive(None);
            return Err(GatewayError::PayloadTooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
}
