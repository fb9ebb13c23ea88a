//! What the gateway reads from a client's request: its body (always bounded in size and
//! time, and held within the shared `body_budget`), the length it declares, and header
//! lines joined as RFC 9110 combines them. A forwarded body is read whole before a
//! connection to the dashboard is taken, and sent with its length.

use std::time::Duration;

use bytes::Bytes;
use pingora::proxy::Session;
use tokio::time::Instant;

use super::body_budget::{BodyBudget, Reservation};

/// Why a request's body was refused (each answered in `error_answers`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// A GET or HEAD with a body (400).
    #[error("a {method} request has a body")]
    UnexpectedBody { method: &'static str },
    /// More than the limit, declared or read (413).
    #[error("the body is larger than {limit} bytes")]
    TooLarge { limit: usize },
    /// No room in the body budget within `server.body_timeout_ms` (503).
    #[error("request bodies hold the whole budget of {total} bytes")]
    BudgetExhausted { total: usize },
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
    /// `upstream.max_body_bytes` for forwarded bodies of token holders,
    /// `upstream.max_open_body_bytes` for open operations, 64 KiB for the auth endpoints'.
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

/// A body read whole, and its bytes in the budget (given back when it is dropped).
pub struct HeldBody {
    pub bytes: Bytes,
    _reservation: Reservation,
}

/// Reads a forwarded request's body whole, before a connection to the dashboard is taken:
/// the dashboard serves with a few threads, and a body that reached it slowly would hold
/// one for as long as its client likes. `None`: the request has no body.
pub async fn read_forwarded_body(
    session: &mut Session,
    limits: BodyLimits,
    budget: &BodyBudget,
) -> Result<Option<HeldBody>, BodyError> {
    if session.as_mut().is_body_empty() {
        return Ok(None);
    }
    read_body(session, limits, budget).await.map(Some)
}

/// Hands the body read whole in `request_filter` to pingora as a try of the request
/// starts: pingora then has nothing left to read from the client and calls
/// `request_body_filter` once, with the end of the body (vendor/pingora-proxy, change 2).
/// Every try, a retry on another manager's included, sends it.
pub fn hand_over_body(chunk: &mut Option<Bytes>, end_of_body: bool, whole: Option<&HeldBody>) {
    if let (true, Some(whole)) = (end_of_body, whole) {
        *chunk = Some(whole.bytes.clone());
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
/// rest of the body stays unread), refusing more than `limits.bytes` bytes (413). A
/// declared length over the limit is refused before anything is read. The body's bytes
/// (its declared length, else the limit) are reserved in `budget` first, waiting within
/// the same time (503 when they do not come free).
pub async fn read_body(
    session: &mut Session,
    limits: BodyLimits,
    budget: &BodyBudget,
) -> Result<HeldBody, BodyError> {
    let deadline = Instant::now() + limits.time;
    let declared = declared_length(&session.req_header().headers);
    if declared.is_some_and(|length| length > limits.bytes) {
        return Err(refuse_declared_excess(session, limits.bytes, deadline).await);
    }
    let expected = declared.unwrap_or(limits.bytes);
    let reservation = budget.reserve(expected, deadline).await.map_err(|e| {
        // The body stays unread: this connection cannot be reused.
        session.set_keepalive(None);
        BodyError::BudgetExhausted { total: e.total }
    })?;
    let read = read_bounded_body(session, limits.bytes, declared.unwrap_or_default());
    match tokio::time::timeout_at(deadline, read).await {
        Ok(read) => read.map(|bytes| HeldBody {
            bytes,
            _reservation: reservation,
        }),
        Err(_) => {
            session.set_keepalive(None);
            Err(BodyError::Timeout {
                millis: limits.time.as_millis(),
            })
        }
    }
}

/// A declared length over `limit`: 413 before any of the body is read. Over HTTP/1 the
/// connection is closed after the answer (the body is never read). An HTTP/2 client whose
/// body is refused unread sees a stream reset instead of the 413: up to `limit` bytes of
/// it are read and dropped (nothing kept) until `deadline`; flow control bounds the rest.
async fn refuse_declared_excess(
    session: &mut Session,
    limit: usize,
    deadline: Instant,
) -> BodyError {
    session.set_keepalive(None);
    if session.as_ref().is_http2() {
        let _ = tokio::time::timeout_at(deadline, drain(session, limit)).await;
    }
    BodyError::TooLarge { limit }
}

/// Reads and drops up to `limit` bytes of the body, or until it ends or fails.
async fn drain(session: &mut Session, limit: usize) {
    let mut read = 0;
    while read <= limit {
        match session.read_request_body().await {
            Ok(Some(chunk)) => read += chunk.len(),
            Ok(None) | Err(_) => return,
        }
    }
}

/// Reads the whole request body, `declared` bytes expected, refusing more than `limit`
/// bytes (a chunked body, or one longer than it said). It reads up to the limit before
/// refusing, because an HTTP/2 client whose body is refused unread sees a stream reset
/// instead of our 413.
async fn read_bounded_body(
    session: &mut Session,
    limit: usize,
    declared: usize,
) -> Result<Bytes, BodyError> {
    if expects_continue(session) {
        // RFC 9110 §10.1.1: answer before the client sends the body (a length over the
        // limit was answered 413 already).
        session
            .write_continue_response()
            .await
            .map_err(|e| BodyError::Continue(e.etype().as_str()))?;
    }
    // Room for what it declared at once: growing by doubling would take up to twice
    // the bytes reserved.
    let mut body = bytes::BytesMut::with_capacity(declared);
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
