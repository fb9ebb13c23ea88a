//! The web UI's files at the edge: kept like the polled answers (no user, so one copy for
//! every client of a language), compressed once with gzip for the clients that accept it
//! (the dashboard compresses its HTML only: its 3.5 MB main script goes out whole), and
//! answered `304` when the client already holds them (`ETag`, `If-None-Match`). Names with
//! a content hash (`main.35ec9db61bcbaf2e5786.js`) never change: the browser may keep them
//! (`immutable`); `index.html` and other plain names are revalidated on every load.
//!
//! A file is kept under what selects it at the dashboard (`controllers/home.py`): its path
//! (the dashboard takes no query: a query never costs a fetch) and the language list the
//! dashboard picks its directory by, the `cd-lang` cookie, else `Accept-Language` read as
//! it reads it. What is left to vary (made-up language lists) is bounded: at most
//! `MAX_MISSES_PER_MINUTE` files are fetched to be kept each minute; past that a request
//! is passed on as it came, unkept and not gzipped, and waits for a place on the dashboard
//! as any request does (so that the UI keeps loading for everyone: a 503 would let those
//! lists shut out every new visitor).

use std::io::Write;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{ACCEPT_ENCODING, CONTENT_TYPE, IF_MODIFIED_SINCE, IF_NONE_MATCH};
use http::{HeaderMap, HeaderValue};

/// Below this, gzip saves less than a packet.
const MIN_COMPRESSED_BYTES: usize = 1024;

pub const IMMUTABLE: HeaderValue = HeaderValue::from_static("public, max-age=31536000, immutable");
pub const REVALIDATE: HeaderValue = HeaderValue::from_static("no-cache");
pub const GZIP: HeaderValue = HeaderValue::from_static("gzip");

/// UI files fetched to be kept per minute, at most. A first load of the web UI in one
/// language asks for about 40 files, the hashed ones kept an hour: this lets a few
/// languages load at once, and bounds what made-up language lists cost (each such fetch
/// is up to 3.5 MB kept and a gzip of 50 ms on the blocking pool).
pub const MAX_MISSES_PER_MINUTE: u32 = 60;

const MISS_WINDOW: Duration = Duration::from_secs(60);

/// The fetches of UI files to be kept, counted per minute.
#[derive(Debug)]
pub struct MissBudget {
    /// When the current minute started, and the fetches in it.
    window: Mutex<(Instant, u32)>,
}

impl MissBudget {
    pub fn new(now: Instant) -> MissBudget {
        MissBudget {
            window: Mutex::new((now, 0)),
        }
    }

    /// Takes one fetch at `now`: `false` when this minute's are spent.
    pub fn take(&self, now: Instant) -> bool {
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        if now.saturating_duration_since(window.0) >= MISS_WINDOW {
            *window = (now, 0);
        }
        if window.1 >= MAX_MISSES_PER_MINUTE {
            return false;
        }
        window.1 += 1;
        true
    }
}

/// Language tags the dashboard reads from `Accept-Language`, at most (`MAX_ACCEPTED_LANGS`):
/// it ignores the rest.
const MAX_ACCEPTED_LANGUAGES: usize = 10;

/// The languages the dashboard tries, in its order, for a request with this `cd-lang`
/// cookie (as forwarded: a plain tag) or else this `Accept-Language`: what selects the
/// directory a UI file is served from. Weights and spelling only order the list, so
/// `fr;q=0.5, de;q=0.9` and `DE, fr;q=0.1` are the same list (`de,fr`). `None`: a header
/// the dashboard refuses (400), or one read differently than here: not kept.
pub fn language_preference(
    cookie: Option<&[u8]>,
    accept_language: Option<&[u8]>,
) -> Option<String> {
    if let Some(tag) = cookie {
        return Some(std::str::from_utf8(tag).ok()?.to_ascii_lowercase());
    }
    let Some(header) = accept_language else {
        return Some(String::new());
    };
    let header = std::str::from_utf8(header).ok()?;
    let mut preferences: Vec<(u32, String)> = Vec::new();
    for item in header.split(',').filter(|item| !item.is_empty()) {
        if preferences.len() == MAX_ACCEPTED_LANGUAGES {
            break;
        }
        let (tag, weight) = match item.trim_start().split_once(";q=") {
            Some((tag, weight)) => (tag, weight_in_thousandths(weight)?),
            None => (item.trim_start(), 1000),
        };
        if !is_language_tag(tag) {
            return None;
        }
        preferences.push((weight, tag.to_ascii_lowercase()));
    }
    // The dashboard sorts by tag, then by weight, highest first (a stable sort).
    preferences.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut order: Vec<String> = Vec::with_capacity(preferences.len());
    for (_, tag) in preferences {
        // (`*` names no directory; a repeated tag was tried already)
        if tag != "*" && !order.contains(&tag) {
            order.push(tag);
        }
    }
    Some(order.join(","))
}

/// `[a-zA-Z]{1,8}(-[a-zA-Z0-9]{1,8})*` or `*`, as the dashboard's `LANG_TAG_RE`.
fn is_language_tag(tag: &str) -> bool {
    if tag == "*" {
        return true;
    }
    let mut parts = tag.split('-');
    let primary = parts.next().unwrap_or_default();
    let fits = |part: &str, allowed: fn(&u8) -> bool| {
        (1..=8).contains(&part.len()) && part.bytes().all(|b| allowed(&b))
    };
    fits(primary, u8::is_ascii_alphabetic)
        && parts.all(|part| fits(part, u8::is_ascii_alphanumeric))
}

/// `[01]\.\d{0,3}` in thousandths (`0.5`: 500; `1.`: 1000).
fn weight_in_thousandths(weight: &str) -> Option<u32> {
    let (units, decimals) = weight.split_once('.')?;
    let units = match units {
        "0" => 0,
        "1" => 1000,
        _ => return None,
    };
    if decimals.len() > 3 || !decimals.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let padded = format!("{decimals:0<3}");
    Some(units + padded.parse::<u32>().ok()?)
}

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
    fn the_language_list_is_read_as_the_dashboard_reads_it() {
        let list = |header: &str| language_preference(None, Some(header.as_bytes()));
        assert_eq!(list("fr;q=0.5, de;q=0.9").as_deref(), Some("de,fr"));
        assert_eq!(list("DE,fr;q=0.1").as_deref(), Some("de,fr"));
        assert_eq!(list("de;q=1.,fr;q=0.100,de").as_deref(), Some("de,fr"));
        // The same weight: by tag.
        assert_eq!(list("fr, de, *;q=0.1").as_deref(), Some("de,fr"));
        assert_eq!(list("en-US,en;q=0.9").as_deref(), Some("en-us,en"));
        assert_eq!(list("").as_deref(), Some(""));
        // Past ten tags the dashboard reads no further (not even a malformed one).
        let many = format!("{}, b@d", ["aa"; 10].join(","));
        assert_eq!(list(&many).as_deref(), Some("aa"));
        // What the dashboard refuses (400) is not kept.
        for malformed in [
            "en; q=0.5",
            "en;q=2.0",
            "en;q=1",
            "en;q=0.1234",
            "en ,fr",
            "toolonglang",
            "e_n",
        ] {
            assert_eq!(list(malformed), None, "{malformed}");
        }
        // The cookie is the one preference; without either, the default.
        assert_eq!(
            language_preference(Some(b"De-DE"), Some(b"fr")).as_deref(),
            Some("de-de")
        );
        assert_eq!(language_preference(None, None).as_deref(), Some(""));
    }

    #[test]
    fn the_misses_of_a_minute_are_bounded() {
        let start = Instant::now();
        let budget = MissBudget::new(start);
        for _ in 0..MAX_MISSES_PER_MINUTE {
            assert!(budget.take(start));
        }
        assert!(!budget.take(start + Duration::from_secs(59)));
        assert!(budget.take(start + MISS_WINDOW));
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
