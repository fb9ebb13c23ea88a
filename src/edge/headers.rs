//! Editing the heads pingora hands the gateway: a request on its way to a dashboard and an
//! answer on its way back.
//!
//! pingora keeps an HTTP/1 head's header names twice, in an `http::HeaderMap` and in a map
//! of their original case, and its `insert_header` parses the name and updates both (about
//! 1,600 instructions a header, an eighth of a forwarded request's own cost). The gateway
//! drops the case map of the heads it rewrites and edits their `HeaderMap` directly: names
//! then go out in lower case (pingora writes the commonest ones Title-Cased), which HTTP/1.1
//! allows (RFC 9110 5.1), HTTP/2 requires, and HAProxy does too.
//! pingora gives no mutable access to a head's `HeaderMap` (the two maps must agree), so
//! these functions take the head apart, edit its map and put it back together.

use http::header::AsHeaderName;
use http::HeaderMap;
use pingora::http::{RequestHeader, ResponseHeader};

/// Room for the headers a forwarded request gets (up to 8: credentials, X-Forwarded-*,
/// Accept, Host, Cookie), made at once: pingora sizes a head's map for the headers it read,
/// and growing it an insert at a time rehashes it and moves its entries more than once.
/// (An answer gets four or fewer, which its map usually has room for: reserving there
/// measured dearer.)
const ROOM: usize = 8;

/// Runs `edit` on `req`'s headers, taken out of the head without its header-case map.
pub fn edit_request<T>(req: &mut RequestHeader, edit: impl FnOnce(&mut HeaderMap) -> T) -> T {
    let empty = RequestHeader::from(http::Request::new(()).into_parts().0);
    let mut parts = http::request::Parts::from(std::mem::replace(req, empty));
    parts.headers.reserve(ROOM);
    let result = edit(&mut parts.headers);
    // Only the case map is left behind: the target is in the URI for the origin-form paths
    // the gateway forwards.
    *req = RequestHeader::from(parts);
    result
}

/// Runs `edit` on `resp`'s headers, taken out of the head without its header-case map (and
/// the dashboard's reason phrase, which is the standard one for its status).
pub fn edit_response<T>(resp: &mut ResponseHeader, edit: impl FnOnce(&mut HeaderMap) -> T) -> T {
    let empty = ResponseHeader::from(http::Response::new(()).into_parts().0);
    let mut parts = http::response::Parts::from(std::mem::replace(resp, empty));
    let result = edit(&mut parts.headers);
    *resp = ResponseHeader::from(parts);
    result
}

/// Whether `headers` has exactly one `name`, and it is `value`: then there is nothing to set.
pub fn carries_only(headers: &HeaderMap, name: impl AsHeaderName, value: &[u8]) -> bool {
    let mut values = headers.get_all(name).iter();
    values.next().is_some_and(|v| v.as_bytes() == value) && values.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_edited_in_place_keeps_its_head_and_writes_consistently() {
        let mut req = RequestHeader::build("POST", b"/api/pool?x=1", None).unwrap();
        req.insert_header("X-Trace", "abc").unwrap();
        req.insert_header("Content-Type", "application/json")
            .unwrap();
        assert!(req.has_case());
        edit_request(&mut req, |headers| {
            headers.insert("x-forwarded-proto", http::HeaderValue::from_static("https"));
            headers.remove("x-trace");
        });
        assert!(!req.has_case());
        assert_eq!(req.method, http::Method::POST);
        assert_eq!(req.raw_path(), b"/api/pool?x=1");
        // pingora's own API keeps working on it, and writing it out does not panic.
        req.insert_header("accept", "application/json").unwrap();
        let mut wire = Vec::new();
        req.header_to_h1_wire(&mut wire);
        let mut lines: Vec<_> = std::str::from_utf8(&wire).unwrap().split("\r\n").collect();
        lines.sort_unstable();
        assert_eq!(
            lines,
            [
                "",
                "Content-Type: application/json",
                "accept: application/json",
                "x-forwarded-proto: https"
            ]
        );
    }

    #[test]
    fn a_response_edited_in_place_keeps_its_status_and_headers() {
        let mut resp = ResponseHeader::build(303, None).unwrap();
        resp.insert_header("Location", "/#/login").unwrap();
        edit_response(&mut resp, |headers| {
            headers.insert("x-request-id", http::HeaderValue::from_static("r1"));
        });
        assert_eq!(resp.status.as_u16(), 303);
        assert_eq!(resp.headers["location"], "/#/login");
        let mut wire = Vec::new();
        resp.header_to_h1_wire(&mut wire);
        assert_eq!(wire, b"location: /#/login\r\nx-request-id: r1\r\n");
    }

    #[test]
    fn carries_only_wants_exactly_one_value() {
        let mut headers = HeaderMap::new();
        assert!(!carries_only(&headers, "accept", b"a"));
        headers.append("accept", http::HeaderValue::from_static("a"));
        assert!(carries_only(&headers, "accept", b"a"));
        assert!(!carries_only(&headers, "accept", b"b"));
        headers.append("accept", http::HeaderValue::from_static("a"));
        assert!(!carries_only(&headers, "accept", b"a"));
    }
}
