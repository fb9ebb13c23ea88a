//! What the gateway reads from a client's request: its body (always bounded in size and
//! time), the length it declares, and header lines joined as RFC 9110 combines them. A
//! forwarded body is read whole before a connection to the dashboard is taken, and sent
//! with its length.

use std::time::Duration;

use bytes::Bytes;
use pingora::proxy::Session;

/// Why a request's body was refused (each answered in `error_answers`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// A GET or HEAD with a body (400).
    #[error("a {method} request has a body")]
    UnexpectedBody { method: &'static str },
    /// More than the limit, declared or read (413).
    #[error("the body is larger than {limit} bytes")]
    TooLarge { limit: usize },
    /// Not whole within `server.body_timeout_ms` (408).
    #[error("the body did not arrive within {millis} ms")]
    Timeout { millis: u128 },
    /// The client's `Expect: 100-continue` could not be answered, with pingora's error kind.
    #[error("could not answer Expect: {0}")]
    Continue(&'static str),
    /// The body could not be read, with pingora's error kind (400).
    #[error("could not read the request body: {0}")]
    Unreadable(&'static str),
}

/// What the gateway may read of a request body, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// `upstream.max_body_bytes` for forwarded bodies, less for the auth endpoints'.
    pub bytes: usize,
    /// `server.body_timeout_ms`: the whole body, from the first read to the last.
    pub time: Duration,
}

/// GET and HEAD take no body (400): an open route of the web UI would forward it to the
/// dashboard, and a body left unread would hold the connection.
pub fn refuse_bodies_of_get_and_head(session: &mut Session) -> Result<(), BodyError> {
    let method = match session.req_header().method {
        http::Method::GET => "GET",
        http::Method::HEAD => "HEAD",
        _ => return Ok(()),
    };
    if session.as_mut().is_body_empty() {
        return Ok(());
    }
    session.set_keepalive(None);
    Err(BodyError::UnexpectedBody { method })
}

/// Reads a forwarded request's body whole, before a connection to the dashboard is taken:
/// the dashboard serves with a few threads, and a body that reached it slowly would hold
/// one for as long as its client likes. Its length is checked first (413). `None`: the
/// request has no body.
pub async fn read_forwarded_body(
    session: &mut Session,
    limits: BodyLimits,
) -> Result<Option<Bytes>, BodyError> {
    if session.as_mut().is_body_empty() {
        return Ok(None);
    }
    match declared_length(&session.req_header().headers) {
        Some(length) if length > limits.bytes => {
            // Read up to the limit first: HTTP/2 clients refused unread see a reset.
            read_body(session, limits).await?;
            Err(BodyError::TooLarge {
                limit: limits.bytes,
            })
        }
        _ => read_body(session, limits).await.map(Some),
    }
}

/// Hands the body read whole in `request_filter` to pingora as a try of the request
/// starts: pingora then has nothing left to read from the client and calls
/// `request_body_filter` once, with the end of the body (vendor/pingora-proxy, change 2).
/// Every try, a retry on another manager's included, sends it.
pub fn hand_over_body(chunk: &mut Option<Bytes>, end_of_body: bool, whole: Option<&Bytes>) {
    if let (true, Some(whole)) = (end_of_body, whole) {
        *chunk = Some(whole.clone());
    }
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

/// Reads the whole request body within `limits.time` (408, the connection closed: the
/// rest of the body stays unread), refusing more than `limits.bytes` bytes (413).
pub async fn read_body(session: &mut Session, limits: BodyLimits) -> Result<Bytes, BodyError> {
    match tokio::time::timeout(limits.time, read_bounded_body(session, limits.bytes)).await {
        Ok(read) => read,
        Err(_) => {
            session.set_keepalive(None);
            Err(BodyError::Timeout {
                millis: limits.time.as_millis(),
            })
        }
    }
}

/// Reads the whole request body, refusing more than `limit` bytes. It reads up to the
/// limit before refusing, because an HTTP/2 client whose body is refused unread sees a
/// stream reset instead of our 413.
async fn read_bounded_body(session: &mut Session, limit: usize) -> Result<Bytes, BodyError> {
    if expects_continue(session) {
        // RFC 9110 §10.1.1: answer before the client sends the body: 413 now, or 100.
        if declared_length(&session.req_header().headers).is_some_and(|n| n > limit) {
            session.set_keepalive(None);
            return Err(BodyError::TooLarge { limit });
        }
        session
            .write_continue_response()
            .await
            .map_err(|e| BodyError::Continue(e.etype().as_str()))?;
    }
    let mut body = bytes::BytesMut::new();
    loop {
        let chunk = session
            .read_request_body()
            .await
            .map_err(|e| BodyError::Unreadable(e.etype().as_str()))?;
        let Some(chunk) = chunk else {
            return Ok(body.freeze());
        };
        if body.len() + chunk.len() > limit {
            // The rest of the body stays unread: this connection cannot be reused.
            session.set_keepalive(None);
            return Err(BodyError::TooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
}
