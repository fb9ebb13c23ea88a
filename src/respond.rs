//! Responses the gateway writes itself, and the headers every response carries
//! (the dashboard's security headers and our request id).

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use serde_json::Value;

use crate::errors::GatewayError;

/// The dashboard's HSTS value (`Strict-Transport-Security`), sent when we terminate TLS.
const HSTS: &str = "max-age=63072000; includeSubDomains; preload";
const CSP: &str = "frame-ancestors 'self';";

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

/// Adds the headers every response carries, proxied or local. The dashboard sends the
/// same security headers itself: those already right are left as they are.
pub fn add_common_headers(
    resp: &mut ResponseHeader,
    tls: bool,
    request_id: &str,
) -> pingora::Result<()> {
    let hsts = tls.then_some(("strict-transport-security", HSTS));
    let security = [
        ("x-content-type-options", "nosniff"),
        ("content-security-policy", CSP),
    ];
    for (name, value) in hsts.into_iter().chain(security) {
        if !carries_only(&resp.headers, name, value) {
            resp.insert_header(name, value)?;
        }
    }
    resp.insert_header("x-request-id", request_id)?;
    Ok(())
}

/// Whether `headers` has exactly one `name`, and it is `value`. A lookup is much cheaper
/// than pingora's `insert_header` (a name parse and two map updates).
pub fn carries_only(headers: &http::HeaderMap, name: &str, value: &str) -> bool {
    let mut values = headers.get_all(name).iter();
    values.next().is_some_and(|v| v == value) && values.next().is_none()
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
    let mut header = ResponseHeader::build(status, Some(8 + headers.len()))?;
    header.insert_header("content-type", content_type)?;
    header.insert_header("content-length", body.len().to_string())?;
    header.insert_header("cache-control", "no-store")?;
    for (name, value) in headers {
        header.append_header(name, value)?;
    }
    add_common_headers(&mut header, tls, request_id)?;
    session
        .write_response_header(Box::new(header), false)
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
