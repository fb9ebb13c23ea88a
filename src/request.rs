//! What the gateway reads from a client's request: its body (always bounded), the length
//! it declares, and header lines joined as RFC 9110 combines them. A forwarded body is
//! checked before anything is sent, and one without a length is read whole so that it can
//! be sent with one.

use bytes::Bytes;
use pingora::proxy::Session;

use crate::errors::GatewayError;

/// What pingora keeps of a request body to send it again (its retry buffer).
const RETRY_BUFFER_BYTES: usize = 64 * 1024;

/// Checks a forwarded request's body against `limit` before anything is sent, and reads
/// one that came without a length (chunked, or HTTP/2 without Content-Length) into
/// pingora's retry buffer: the dashboard refuses bodies without a length (411), so it is
/// sent with one. Returns that length.
pub async fn prepare_forwarded_body(
    session: &mut Session,
    limit: usize,
) -> Result<Option<usize>, GatewayError> {
    match declared_length(&session.req_header().headers) {
        Some(length) if length > limit => {
            // Read up to the limit first: HTTP/2 clients refused unread see a reset.
            read_body(session, limit).await?;
            Err(GatewayError::PayloadTooLarge { limit })
        }
        _ => buffer_unsized_body(session, limit).await,
    }
}

async fn buffer_unsized_body(
    session: &mut Session,
    limit: usize,
) -> Result<Option<usize>, GatewayError> {
    let declared = session
        .req_header()
        .headers
        .contains_key(http::header::CONTENT_LENGTH);
    if declared || session.as_mut().is_body_empty() {
        return Ok(None);
    }
    session.as_mut().enable_retry_buffering();
    let body = read_body(session, limit).await?;
    if body.len() > RETRY_BUFFER_BYTES {
        return Err(GatewayError::LengthRequired {
            limit: RETRY_BUFFER_BYTES,
        });
    }
    Ok(Some(body.len()))
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
