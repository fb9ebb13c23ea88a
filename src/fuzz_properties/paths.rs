//! The path normalizer (`paths`): the dashboard's own paths (the scope table's templates,
//! filled in) and the spellings the normalizer's tests know, mutated; paths built from
//! the segments that matter; arbitrary text; and equivalent spellings of real paths.
//!
//! What `paths` promises of a path it accepts: it is canonical (absolute, no empty or dot
//! segment, no trailing '/', escapes only for what is not unreserved, in upper-case hex,
//! no encoded separator, backslash or control), a fixed point, no longer than its raw
//! form, and it means what the raw path meant (the same decoded segments once dot
//! segments are resolved). An encoded separator or a backslash is always refused.

use percent_encoding::percent_decode_str;
use proptest::prelude::*;
use proptest::sample::Index;

use super::cases;
use super::mutate::{Corpus, Mutant};
use crate::edge::paths::{normalize, PathError, MAX_PATH_BYTES};

const SCOPE_TABLE: &str = include_str!("../../conf/scopes/16.2.toml");

/// Values for the templates' parameters, as the dashboard's web UI sends them.
const PARAMETER_VALUES: &[&str] = &[
    "rbd",
    "1",
    "my%20pool",
    "iqn.2003-01.com.redhat.iscsi-gw:ceph-igw",
    "ceph-node-01.example.com",
    "c6f8d3e8-1b8c-4d2e-9a7d-5f3b2a1c0e9d",
    "caf%C3%A9",
    "a.b",
    "~x_y-z",
];

/// The scope table's path templates, each parameter filled with one of the values.
fn dashboard_paths() -> Vec<String> {
    let table: toml::Table = SCOPE_TABLE.parse().expect("conf/scopes/16.2.toml parses");
    let mut paths: Vec<String> = table["operation"]
        .as_array()
        .expect("operations")
        .iter()
        .map(|op| op["path"].as_str().expect("a path").to_string())
        .collect();
    paths.sort();
    paths.dedup();
    paths
        .iter()
        .enumerate()
        .map(|(i, template)| fill(template, i))
        .collect()
}

/// `template` with its `{parameters}` replaced by values (varied by `n`).
fn fill(template: &str, n: usize) -> String {
    let mut out = String::new();
    let mut rest = template;
    let mut k = n;
    while let Some((before, after)) = rest.split_once('{') {
        out.push_str(before);
        out.push_str(PARAMETER_VALUES[k % PARAMETER_VALUES.len()]);
        k += 1;
        rest = after.split_once('}').map_or("", |(_, after)| after);
    }
    out.push_str(rest);
    out
}

/// Spellings from the normalizer's own tests, accepted and refused.
const SPELLINGS: &[&str] = &[
    "/api/%73ettings",
    "/api//settings/",
    "/api/x/%2E%2E/settings",
    "/api/settings/%2e",
    "/api/pool/a%3ab",
    "/api/rgw/user/%C3%A9",
    "/api%2Fsettings",
    "/api\\settings",
    "/api/settings%00",
    "/api/settings%zz",
    "/api/pool/%C3%28",
    "/api/../../etc",
    "/",
    "//",
];

const DICTIONARY: &[&str] = &[
    "/", ".", "..", "/./", "/../", "//", "%", "%2e", "%2E", "%2e%2e", "%2f", "%2F", "%5c", "%5C",
    "%25", "%00", "%1f", "%7f", "%7e", "%41", "%20", "%C3%A9", "%C3", "%FF", "%e2%80", "\\", "~",
    "?", "#", ";", ":", "@", "é", "\u{85}", "\u{0}",
];

fn corpus() -> Corpus {
    let seeds = dashboard_paths()
        .into_iter()
        .chain(SPELLINGS.iter().map(|s| s.to_string()));
    Corpus::new(seeds, DICTIONARY)
}

/// Paths of segments chosen from those the normalizer treats specially.
fn segment_paths() -> impl Strategy<Value = String> {
    let segment = prop::sample::select(
        &[
            "", ".", "..", "%2e", "%2E%2e", ".%2e", "...", "api", "API", "%61pi", "%7E", "~",
            "%20", "%C3%A9", "%c3%a9", "%FF", "a%2fb", "%5c", "a\\b", "%00", "%zz", "%4", "%",
            "%%", "%252e", "a.", ".a",
        ][..],
    );
    prop::collection::vec(segment, 0..12).prop_map(|segments| format!("/{}", segments.join("/")))
}

/// `%XX` with hex digits as stated.
fn is_upper_escape(hex: &[u8]) -> bool {
    hex.len() == 2
        && hex
            .iter()
            .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(b))
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// The segments a backend that decodes and resolves dot segments (RFC 3986 §5.2.4) sees;
/// `None` when '..' climbs above the root.
fn resolved(path: &str) -> Option<Vec<Vec<u8>>> {
    let mut segments: Vec<Vec<u8>> = Vec::new();
    for segment in path.split('/') {
        let decoded: Vec<u8> = percent_decode_str(segment).collect();
        match decoded.as_slice() {
            b"" | b"." => {}
            b".." => {
                segments.pop()?;
            }
            _ => segments.push(decoded),
        }
    }
    Some(segments)
}

fn check_canonical(path: &str) -> Result<(), TestCaseError> {
    prop_assert!(path.starts_with('/'));
    prop_assert!(path == "/" || !path.ends_with('/'));
    for spelling in ["//", "/./", "/../"] {
        prop_assert!(!path.contains(spelling), "{spelling:?} in {path:?}");
    }
    prop_assert!(!path.ends_with("/.") && !path.ends_with("/.."));
    prop_assert!(!path.contains('\\') && !path.chars().any(|c| c.is_ascii_control()));
    let bytes = path.as_bytes();
    for (at, _) in path.match_indices('%') {
        let hex = bytes.get(at + 1..at + 3).unwrap_or_default();
        prop_assert!(is_upper_escape(hex), "escape at {at} of {path:?}");
        let value = u8::from_str_radix(std::str::from_utf8(hex).unwrap_or_default(), 16)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(
            !is_unreserved(value) && value != b'\\' && !value.is_ascii_control(),
            "%{value:02X} should not be encoded in {path:?}"
        );
    }
    prop_assert!(percent_decode_str(path).decode_utf8().is_ok());
    Ok(())
}

fn check_normalized(raw: &str) -> Result<(), TestCaseError> {
    let result = normalize(raw);
    let lower = raw.to_ascii_lowercase();
    if lower.contains("%5c") || raw.contains('\\') {
        prop_assert!(result.is_err(), "{raw:?} normalized to {result:?}");
    }
    match result {
        Ok(path) => {
            check_canonical(&path)?;
            prop_assert_eq!(normalize(&path), Ok(path.clone()), "not a fixed point");
            prop_assert!(path.len() <= raw.len().max(1) && path.len() <= MAX_PATH_BYTES);
            prop_assert_eq!(resolved(&path), resolved(raw), "{:?} changed meaning", raw);
        }
        Err(PathError::AboveRoot) => prop_assert_eq!(resolved(raw), None),
        Err(_) => {}
    }
    Ok(())
}

/// A canonical dashboard path, spelled differently: unreserved characters
/// percent-encoded, and empty, dot and `x/..` segments inserted.
#[derive(Debug, Clone)]
struct Respelling {
    path: Index,
    /// Characters to encode: which (among all of the path) and in which hex case.
    encode: Vec<(Index, bool)>,
    /// Segments to insert: where, and which.
    insert: Vec<(Index, &'static str)>,
    trailing: &'static str,
}

impl Respelling {
    fn apply(&self, path: &str) -> String {
        let mut segments: Vec<String> = path.split('/').skip(1).map(str::to_string).collect();
        segments.retain(|s| !s.is_empty());
        for (which, upper) in &self.encode {
            let bytes: usize = segments.iter().map(String::len).sum();
            if bytes == 0 {
                break;
            }
            let mut at = which.index(bytes);
            for segment in &mut segments {
                if at < segment.len() {
                    *segment = encode_at(segment, at, *upper);
                    break;
                }
                at -= segment.len();
            }
        }
        for (at, noise) in &self.insert {
            let at = at.index(segments.len() + 1);
            segments.insert(at, (*noise).to_string());
        }
        format!("/{}{}", segments.join("/"), self.trailing)
    }
}

/// `segment` with the byte at `at` percent-encoded, if it is an unreserved character
/// outside an escape.
fn encode_at(segment: &str, at: usize, upper: bool) -> String {
    let bytes = segment.as_bytes();
    let in_escape = (at.saturating_sub(2)..at).any(|i| bytes[i] == b'%');
    if !is_unreserved(bytes[at]) || in_escape {
        return segment.to_string();
    }
    let escape = if upper {
        format!("%{:02X}", bytes[at])
    } else {
        format!("%{:02x}", bytes[at])
    };
    format!("{}{escape}{}", &segment[..at], &segment[at + 1..])
}

fn respelling() -> impl Strategy<Value = Respelling> {
    let noise = prop::sample::select(&["", ".", "%2e", "%2E", "x/..", "x/%2e%2E", "%41/.."][..]);
    (
        any::<Index>(),
        prop::collection::vec((any::<Index>(), any::<bool>()), 0..6),
        prop::collection::vec((any::<Index>(), noise), 0..4),
        prop::sample::select(&["", "/", "/.", "//", "/%2e"][..]),
    )
        .prop_map(|(path, encode, insert, trailing)| Respelling {
            path,
            encode,
            insert,
            trailing,
        })
}

proptest! {
    #![proptest_config(cases(3000))]

    #[test]
    fn mutated_dashboard_paths_normalize_to_canonical_fixed_points(
        raw in corpus().mutants().prop_map(|m: Mutant| m.text())
    ) {
        check_normalized(&raw)?;
    }

    #[test]
    fn paths_of_special_segments_normalize_to_canonical_fixed_points(raw in segment_paths()) {
        check_normalized(&raw)?;
    }

    #[test]
    fn arbitrary_paths_normalize_to_canonical_fixed_points(raw in "/?[ -~]{0,80}|.{0,80}") {
        check_normalized(&raw)?;
    }
}

proptest! {
    #![proptest_config(cases(3000))]

    /// Every spelling of a dashboard path normalizes to the path's canonical form.
    #[test]
    fn respelled_dashboard_paths_normalize_to_their_canonical_form(spelling in respelling()) {
        let paths = canonical_dashboard_paths();
        let canonical = spelling.path.get(paths);
        let raw = spelling.apply(canonical);
        prop_assert_eq!(normalize(&raw), Ok(canonical.clone()), "{}", raw);
    }
}

/// The dashboard's paths, normalized (each must be accepted).
fn canonical_dashboard_paths() -> &'static [String] {
    static PATHS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    PATHS.get_or_init(|| {
        dashboard_paths()
            .iter()
            .map(|p| normalize(p).expect("a dashboard path normalizes"))
            .collect()
    })
}
