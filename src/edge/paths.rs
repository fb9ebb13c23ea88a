//! Request paths made canonical before anything looks at them. Routing, the role check
//! and the backend all see the same normalized path, so no spelling of a path reaches the
//! backend with weaker checks than its plain form.
//!
//! What the Ceph 16.2 dashboard's router treats as one resource (probed on 16.2.15):
//! `/api/%73ettings`, `/api//settings`, `/api/settings/` and `/api/settings//` all serve
//! `/api/settings`; it is case-sensitive, and it does not resolve `.` or `..` (it takes
//! them as a path parameter). We decode percent-encoded unreserved characters, resolve dot
//! segments (RFC 3986 §5.2.4), collapse repeated slashes and drop a trailing one, then
//! forward the result. What cannot be normalized safely is refused.
//!
//! An encoded `/` stays encoded, inside its segment: the dashboard's HTTP server (cheroot)
//! decodes every escape of a path but `%2F`, so `/api/block/image/rbd%2Fimg` is the image
//! operation with `image_spec` `rbd/img` there (its web UI spells RBD images so), and is
//! the same one segment here.

/// Longest path we accept; dashboard paths are far shorter.
pub const MAX_PATH_BYTES: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("the path must start with '/'")]
    NotAbsolute,
    #[error("the path is longer than {MAX_PATH_BYTES} bytes")]
    TooLong,
    #[error("the path contains an invalid percent-encoding")]
    BadEscape,
    #[error("the path contains an encoded '\\\\', which cannot be routed safely")]
    EncodedSeparator,
    #[error("the path contains a backslash")]
    Backslash,
    #[error("the path contains a NUL or control character")]
    Control,
    #[error("the path is not valid UTF-8")]
    NotUtf8,
    #[error("the path climbs above the root with '..'")]
    AboveRoot,
}

/// The canonical form of `raw` (a request target's path, without the query).
pub fn normalize(raw: &str) -> Result<String, PathError> {
    if raw.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong);
    }
    if !raw.starts_with('/') {
        return Err(PathError::NotAbsolute);
    }
    if is_canonical(raw) {
        return Ok(raw.to_string());
    }
    resolve(raw)
}

/// Whether `raw` (absolute) is its own normal form, as nearly every request's path is: no
/// escape, backslash or control to check, no empty or dot segment, no trailing '/'. One
/// pass over the bytes: this runs on every request.
fn is_canonical(raw: &str) -> bool {
    if raw == "/" {
        return true;
    }
    // The segment being read: its length, and how many of its bytes are dots.
    let (mut length, mut dots) = (0usize, 0usize);
    let closes_a_plain_segment =
        |length: usize, dots: usize| length > 0 && !(length <= 2 && dots == length);
    for &b in raw.as_bytes().iter().skip(1) {
        match b {
            b'%' | b'\\' | 0..=0x1f | 0x7f => return false,
            b'/' if !closes_a_plain_segment(length, dots) => return false,
            b'/' => (length, dots) = (0, 0),
            b'.' => (length, dots) = (length + 1, dots + 1),
            _ => length += 1,
        }
    }
    closes_a_plain_segment(length, dots)
}

/// The normal form of an absolute `raw` that is not already canonical.
fn resolve(raw: &str) -> Result<String, PathError> {
    let decoded = decode_unreserved(raw)?;
    let mut segments: Vec<&str> = Vec::new();
    for segment in decoded.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop().ok_or(PathError::AboveRoot)?;
            }
            s => segments.push(s),
        }
    }
    let mut out = String::with_capacity(decoded.len());
    for s in &segments {
        out.push('/');
        out.push_str(s);
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(out)
}

/// Decodes `%XX` escapes of unreserved characters (RFC 3986 §2.3), upper-cases the hex
/// of the others (an encoded `/` among them), and refuses an encoded `\`, controls and
/// malformed escapes.
fn decode_unreserved(raw: &str) -> Result<String, PathError> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).ok_or(PathError::BadEscape)?;
                let value = hex_value(hex[0])
                    .zip(hex_value(hex[1]))
                    .map(|(h, l)| h << 4 | l)
                    .ok_or(PathError::BadEscape)?;
                match value {
                    b'\\' => return Err(PathError::EncodedSeparator),
                    0..=0x1f | 0x7f => return Err(PathError::Control),
                    v if is_unreserved(v) => out.push(v),
                    v => out.extend_from_slice(format!("%{v:02X}").as_bytes()),
                }
                i += 3;
            }
            b'\\' => return Err(PathError::Backslash),
            0..=0x1f | 0x7f => return Err(PathError::Control),
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    // What the escapes spell must be UTF-8 too: the backend decodes them.
    if percent_encoding::percent_decode(&out)
        .decode_utf8()
        .is_err()
    {
        return Err(PathError::NotUtf8);
    }
    String::from_utf8(out).map_err(|_| PathError::NotUtf8)
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn hex_value(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_canonical_path_is_what_resolving_it_gives() {
        let canonical = [
            "/",
            "/api/settings",
            "/api/pool/my-pool_1.x~",
            "/caf\u{e9}/a.b",
        ];
        for raw in canonical {
            assert!(is_canonical(raw), "{raw}");
            assert_eq!(resolve(raw), Ok(raw.to_string()), "{raw}");
        }
        let not_canonical = [
            "/api/settings/",
            "//api",
            "/api/./x",
            "/api/../x",
            "/api/..",
            "/api/%73",
            "/a\\b",
            "/a\tb",
            "/a\u{7f}",
        ];
        for raw in not_canonical {
            assert!(!is_canonical(raw), "{raw}");
        }
    }

    /// The check as first written, with a scan for the bytes and a split for the segments:
    /// the one-pass check must agree with it on every input.
    fn is_canonical_by_splitting(raw: &str) -> bool {
        let plain = raw
            .bytes()
            .all(|b| !matches!(b, b'%' | b'\\' | 0..=0x1f | 0x7f));
        let segments_plain = || {
            raw.split('/')
                .skip(1)
                .all(|segment| !matches!(segment, "" | "." | ".."))
        };
        plain && (raw == "/" || segments_plain())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]
        #[test]
        fn the_one_pass_check_agrees_with_splitting(
            rest in proptest::collection::vec(
                proptest::sample::select(vec!["/", ".", "a", "%", "\\", "\t", "\u{e9}"]), 0..12),
        ) {
            let raw = format!("/{}", rest.concat());
            proptest::prop_assert_eq!(is_canonical(&raw), is_canonical_by_splitting(&raw), "{:?}", raw);
        }
    }

    #[test]
    fn spellings_the_dashboard_treats_as_one_resource_normalize_alike() {
        for raw in [
            "/api/settings",
            "/api/%73ettings",
            "/api/%73%65ttings",
            "/api//settings",
            "/api/settings/",
            "/api/settings//",
            "//api/settings",
            "/api/./settings",
            "/api/x/../settings",
            "/api/pool/../settings",
            "/api/settings/.",
            "/api/settings/%2e",
            "/api/%2e/settings",
            "/api/x/%2E%2E/settings",
        ] {
            assert_eq!(normalize(raw), Ok("/api/settings".to_string()), "{raw}");
        }
    }

    #[test]
    fn case_is_kept_as_the_dashboard_is_case_sensitive() {
        assert_eq!(normalize("/API/Settings"), Ok("/API/Settings".to_string()));
    }

    #[test]
    fn reserved_escapes_stay_encoded_with_uppercase_hex() {
        assert_eq!(
            normalize("/api/pool/my%20pool"),
            Ok("/api/pool/my%20pool".to_string())
        );
        assert_eq!(
            normalize("/api/pool/a%3ab"),
            Ok("/api/pool/a%3Ab".to_string())
        );
        assert_eq!(
            normalize("/api/rgw/user/%C3%A9"),
            Ok("/api/rgw/user/%C3%A9".to_string())
        );
    }

    #[test]
    fn an_encoded_slash_stays_encoded_within_its_segment() {
        for (raw, normal) in [
            ("/api/block/image/rbd%2Fimg", "/api/block/image/rbd%2Fimg"),
            (
                "/api/block/image/rbd%2fns%2Fimg/",
                "/api/block/image/rbd%2Fns%2Fimg",
            ),
            (
                "/api/block/image/..%2F..%2Fuser",
                "/api/block/image/..%2F..%2Fuser",
            ),
            ("/api%2Fsettings", "/api%2Fsettings"),
        ] {
            assert_eq!(normalize(raw), Ok(normal.to_string()), "{raw}");
        }
    }

    #[test]
    fn what_cannot_be_normalized_safely_is_refused() {
        let cases = [
            ("/api/settings%5C", PathError::EncodedSeparator),
            ("/api\\settings", PathError::Backslash),
            ("/api/settings%00", PathError::Control),
            ("/api/settings%0a", PathError::Control),
            ("/api/settings\u{1}", PathError::Control),
            ("/api/settings%zz", PathError::BadEscape),
            ("/api/settings%4", PathError::BadEscape),
            ("/api/pool/%FF", PathError::NotUtf8),
            ("/api/pool/%C3%28", PathError::NotUtf8),
            ("/api/../../etc", PathError::AboveRoot),
            ("/..", PathError::AboveRoot),
            ("api/settings", PathError::NotAbsolute),
            ("", PathError::NotAbsolute),
        ];
        for (raw, error) in cases {
            assert_eq!(normalize(raw), Err(error), "{raw:?}");
        }
        assert_eq!(
            normalize(&format!("/{}", "a".repeat(MAX_PATH_BYTES))),
            Err(PathError::TooLong)
        );
    }

    #[test]
    fn the_root_stays_the_root() {
        assert_eq!(normalize("/"), Ok("/".to_string()));
        assert_eq!(normalize("//"), Ok("/".to_string()));
        assert_eq!(normalize("/a/.."), Ok("/".to_string()));
    }
}
