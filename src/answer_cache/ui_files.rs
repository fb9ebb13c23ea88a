//! The web UI's files at the edge: kept like the polled answers (no user, so one copy for
//! every client of a language), compressed once with gzip for the clients that accept it
//! (the dashboard compresses its HTML only: its 3.5 MB main script goes out whole), and
//! answered `304` when the client already holds them (`ETag`, `If-None-Match`). Names with
//! a content hash (`main.35ec9db61bcbaf2e5786.js`) never change: the browser may keep them
//! (`immutable`); `index.html` and other plain names are revalidated on every load.

use std::io::Write;

use bytes::Bytes;
use http::header::{ACCEPT_ENCODING, CONTENT_TYPE, IF_MODIFIED_SINCE, IF_NONE_MATCH};
use http::{HeaderMap, HeaderValue};

/// Below this, gzip saves less than a packet.
const MIN_COMPRESSED_BYTES: usize = 1024;

pub const IMMUTABLE: HeaderValue = HeaderValue::from_static("public, max-age=31536000, immutable");
pub const REVALIDATE: HeaderValue = HeaderValue::from_static("no-cache");
pub const GZIP: HeaderValue = HeaderValue::from_static("gzip");

/// Whether the file name carries a content hash of 16 or more hex digits, as the UI's
/// build names its scripts, styles and fonts.
pub fn is_hashed(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or_default();
    name.split('.')
        .any(|part| part.len() >= 16 && part.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Whether a body of this type is worth compressing (text, scripts, styles, JSON, SVG).
pub fn compressible(headers: &HeaderMap) -> bool {
    let Some(kind) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let kind = kind.to_ascii_lowercase();
    kind.starts_with("text/")
        || ["javascript", "json", "svg", "xml"]
            .iter()
            .any(|k| kind.contains(k))
}

/// `body` gzipped, when that makes it smaller.
pub fn gzip(body: &[u8]) -> Option<Bytes> {
    if body.len() < MIN_COMPRESSED_BYTES {
        return None;
    }
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(body).ok()?;
    let compressed = encoder.finish().ok()?;
    (compressed.len() < body.len()).then(|| Bytes::from(compressed))
}

/// Whether the request's `Accept-Encoding` takes gzip (not with `q=0`).
pub fn accepts_gzip(request: &HeaderMap) -> bool {
    request
        .get_all(ACCEPT_ENCODING)
        .iter()
        .flat_map(|v| v.as_bytes().split(|b| *b == b','))
        .any(|item| {
            let mut parts = item.split(|b| *b == b';');
            let coding = parts.next().unwrap_or_default().trim_ascii();
            let refused = parts.any(|p| {
                let p: Vec<u8> = p
                    .iter()
                    .filter(|b| !b.is_ascii_whitespace())
                    .copied()
                    .collect();
                p.starts_with(b"q=0") && p[3..].iter().all(|b| *b == b'.' || *b == b'0')
            });
            (coding.eq_ignore_ascii_case(b"gzip") || coding == b"*") && !refused
        })
}

/// A strong validator of `body`: 64-bit FNV-1a of its bytes (stable across gateways and
/// restarts, so clients keep their copies through both).
pub fn etag(body: &[u8], suffix: &str) -> Option<HeaderValue> {
    let hash = body.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    });
    HeaderValue::from_str(&format!("\"{hash:016x}{suffix}\"")).ok()
}

/// Whether the client holds this body already: its `If-None-Match` names `etag` (or `*`),
/// or, without one, its `If-Modified-Since` is the kept `Last-Modified` (the date a
/// browser that got the file from the dashboard itself sends back).
pub fn not_modified(
    request: &HeaderMap,
    etag: Option<&HeaderValue>,
    last_modified: Option<&HeaderValue>,
) -> bool {
    if request.contains_key(IF_NONE_MATCH) {
        let Some(etag) = etag else {
            return false;
        };
        return request
            .get_all(IF_NONE_MATCH)
            .iter()
            .flat_map(|v| v.as_bytes().split(|b| *b == b','))
            .map(|tag| tag.trim_ascii())
            .any(|tag| tag == b"*" || tag.strip_prefix(b"W/").unwrap_or(tag) == etag.as_bytes());
    }
    last_modified.is_some_and(|date| request.get(IF_MODIFIED_SINCE) == Some(date))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(name: http::HeaderName, value: &'static str) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(name, HeaderValue::from_static(value));
        map
    }

    #[test]
    fn hashed_names_are_told_from_plain_ones() {
        assert!(is_hashed("/main.35ec9db61bcbaf2e5786.js"));
        assert!(is_hashed(
            "/assets/forkawesome-webfont.86541105409e56d17291.svg"
        ));
        assert!(!is_hashed("/index.html"));
        assert!(!is_hashed("/"));
        assert!(!is_hashed("/favicon.ico"));
    }

    #[test]
    fn gzip_is_taken_unless_refused() {
        for (value, takes) in [
            ("gzip, deflate, br", true),
            ("br;q=1.0, GZIP;q=0.5", true),
            ("*", true),
            ("gzip;q=0", false),
            ("gzip; q=0.000, br", false),
            ("br, deflate", false),
            ("", false),
        ] {
            assert_eq!(
                accepts_gzip(&headers(ACCEPT_ENCODING, value)),
                takes,
                "{value}"
            );
        }
    }

    #[test]
    fn a_matching_validator_is_not_modified() {
        let tag = etag(b"body", "").unwrap();
        let date = HeaderValue::from_static("Mon, 26 Feb 2024 19:25:10 GMT");
        let sent = |v: &str| {
            let mut map = HeaderMap::new();
            map.insert(IF_NONE_MATCH, HeaderValue::from_str(v).unwrap());
            map.insert(IF_MODIFIED_SINCE, date.clone());
            not_modified(&map, Some(&tag), Some(&date))
        };
        assert!(sent(tag.to_str().unwrap()));
        assert!(sent(&format!("\"x\", W/{}", tag.to_str().unwrap())));
        assert!(sent("*"));
        // If-None-Match decides when sent; else If-Modified-Since, the same date only.
        assert!(!sent("\"other\""));
        let since =
            |v: &'static str| not_modified(&headers(IF_MODIFIED_SINCE, v), Some(&tag), Some(&date));
        assert!(since("Mon, 26 Feb 2024 19:25:10 GMT"));
        assert!(!since("Mon, 26 Feb 2024 19:25:09 GMT"));
        assert_ne!(etag(b"body", "-gzip"), Some(tag.clone()));
        assert_ne!(etag(b"bodz", ""), Some(tag));
    }

    #[test]
    fn text_is_compressed_and_tiny_or_binary_bodies_are_not() {
        let script = "function f() { return 1; }\n".repeat(200);
        let compressed = gzip(script.as_bytes()).expect("compressed");
        assert!(compressed.len() < script.len() / 10);
        assert!(gzip(b"{}").is_none());
        assert!(compressible(&headers(
            CONTENT_TYPE,
            "text/javascript;charset=utf-8"
        )));
        assert!(compressible(&headers(CONTENT_TYPE, "image/svg+xml")));
        assert!(!compressible(&headers(CONTENT_TYPE, "font/woff2")));
    }
}
