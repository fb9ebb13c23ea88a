//! The Accept header and version negotiation (`versioning`): real clients' headers,
//! mutated; headers generated from RFC 9110's grammar, negotiated as a model of the
//! rules says; and every version's media type read back.

use proptest::prelude::*;

use super::cases;
use super::mutate::{Corpus, Mutant};
use crate::versioning::{choose, negotiate, ApiVersion, Negotiated, VersionError};

const VENDOR: &str = "ceph";

/// Accept headers real clients send.
const SEEDS: &[&str] = &[
    // The dashboard's web UI, and its experimental endpoints (APIVersion.EXPERIMENTAL).
    "application/vnd.ceph.api.v1.0+json",
    "application/vnd.ceph.api.v0.1+json",
    // Scripts asking for a version among others (forward.rs's tests, the docs page).
    "application/vnd.ceph.api.v1.0+json;q=0.9, */*",
    "application/json;q=0.5, application/vnd.ceph.api.v1.0+json",
    "application/vnd.ceph.api.v2.0+json;q=1, application/vnd.ceph.api.v1.0+json;q=0.1",
    "Application/VND.Ceph.API.v1.0+JSON; charset=utf-8",
    // curl, Python requests, Go's net/http: no Accept preference.
    "*/*",
    // axios.
    "application/json, text/plain, */*",
    // Firefox and Chrome opening an API URL.
    "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7",
    r#"text/plain;x="a,b", application/vnd.ceph.api.v1.0+json"#,
    "",
];

const DICTIONARY: &[&str] = &[
    ",",
    ";",
    "=",
    "\"",
    "\\",
    " ",
    "\t",
    "q=",
    "Q=",
    "q=0",
    "q=1",
    "q=0.5",
    "q=1.000",
    "q=0.0001",
    "*/*",
    "application/",
    "vnd.",
    "ceph",
    ".api.v",
    "+json",
    "1.0",
    "0.1",
    "99999",
    ".",
    "/",
    "é",
    "\u{0}",
    "\u{feff}",
];

/// Endpoint versions the gateway and the dashboard use, and neighbours of them.
fn endpoint() -> impl Strategy<Value = ApiVersion> {
    (0u16..=2, 0u16..=2).prop_map(|(major, minor)| ApiVersion { major, minor })
}

/// What `negotiate` must answer, given what `choose` (the best offer of all) answered:
/// the best offer the endpoint serves, else the best offer as incompatible, else plain
/// JSON where allowed.
fn check_agreement(accept: &str, endpoint: ApiVersion) -> Result<(), TestCaseError> {
    let best = choose(Some(accept), VENDOR);
    for plain_ok in [false, true] {
        let negotiated = negotiate(Some(accept), VENDOR, endpoint, plain_ok);
        match negotiated {
            Ok(Negotiated::Vendor(v)) => {
                prop_assert!(endpoint.serves(v), "{v} is not served by {endpoint}");
                prop_assert!(best.is_ok());
            }
            Ok(Negotiated::Plain) => prop_assert!(plain_ok && best.is_err()),
            Err(VersionError::Missing) => prop_assert!(!plain_ok && best.is_err()),
            Err(VersionError::Incompatible {
                endpoint: e,
                requested,
            }) => {
                prop_assert_eq!(e, endpoint);
                prop_assert!(!endpoint.serves(requested));
                prop_assert_eq!(best, Ok(requested));
            }
        }
        // Media types, `q` and the vendor name are case-insensitive.
        let upper = accept.to_ascii_uppercase();
        prop_assert_eq!(
            negotiate(Some(&upper), VENDOR, endpoint, plain_ok),
            negotiated
        );
    }
    Ok(())
}

/// A q-value as a client may spell it (RFC 9110 §12.4.2), or not.
#[derive(Debug, Clone)]
enum Quality {
    Absent,
    /// Thousandths, how many decimals to write at least, and whether a bare integer
    /// keeps its dot (`1.`).
    Valid(u16, usize, bool),
    Invalid(&'static str),
}

impl Quality {
    fn thousandths(&self) -> Option<u16> {
        match self {
            Quality::Absent => Some(1000),
            Quality::Valid(t, ..) => Some(*t),
            Quality::Invalid(_) => None,
        }
    }

    fn render(&self) -> Option<String> {
        match self {
            Quality::Absent => None,
            Quality::Valid(t, decimals, dot) => {
                let (int, frac) = (t / 1000, format!("{:03}", t % 1000));
                // Fewer decimals only where the dropped ones are zeros.
                let keep = (*decimals).max(frac.trim_end_matches('0').len());
                Some(match (keep, dot) {
                    (0, false) => format!("{int}"),
                    (0, true) => format!("{int}."),
                    (k, _) => format!("{int}.{}", &frac[..k]),
                })
            }
            Quality::Invalid(text) => Some((*text).to_string()),
        }
    }
}

fn quality() -> impl Strategy<Value = Quality> {
    prop_oneof![
        Just(Quality::Absent),
        (0u16..=1000, 0usize..=3, any::<bool>()).prop_map(|(t, d, dot)| Quality::Valid(t, d, dot)),
        (
            prop::sample::select(&[0u16, 1, 500, 999, 1000][..]),
            0usize..=3,
            any::<bool>()
        )
            .prop_map(|(t, d, dot)| Quality::Valid(t, d, dot)),
        prop::sample::select(
            &["2", "1.001", "0.1234", "-0", ".5", "0x1", "", "one", "1.0.0", "01"][..]
        )
        .prop_map(Quality::Invalid),
    ]
}

/// One media range of a generated header.
#[derive(Debug, Clone)]
enum Range {
    Vendor {
        version: ApiVersion,
        /// Leading zeros on the major and minor numbers (at most four digits each).
        zeros: (usize, usize),
        quality: Quality,
        /// A parameter before the q-value (`charset=utf-8`).
        charset: bool,
        upper_case: bool,
    },
    /// A range that offers no version of our vendor's API.
    Other(&'static str),
}

impl Range {
    fn render(&self, ows: &str) -> String {
        match self {
            Range::Vendor {
                version,
                zeros,
                quality,
                charset,
                upper_case,
            } => {
                let pad = |n: u16, z: usize| format!("{}{n}", "0".repeat(z.min(4 - digits(n))));
                let mut text = format!(
                    "application/vnd.{VENDOR}.api.v{}.{}+json",
                    pad(version.major, zeros.0),
                    pad(version.minor, zeros.1)
                );
                if *charset {
                    text.push_str(&format!("{ows};{ows}charset=utf-8"));
                }
                if let Some(q) = quality.render() {
                    text.push_str(&format!("{ows};{ows}q={q}"));
                }
                if *upper_case {
                    text.make_ascii_uppercase();
                }
                text
            }
            Range::Other(text) => (*text).to_string(),
        }
    }

    /// The version and q this range offers, if it offers one.
    fn offer(&self) -> Option<(ApiVersion, u16)> {
        match self {
            Range::Vendor {
                version, quality, ..
            } => quality
                .thousandths()
                .filter(|q| *q > 0)
                .map(|q| (*version, q)),
            Range::Other(_) => None,
        }
    }
}

fn digits(n: u16) -> usize {
    n.to_string().len()
}

fn range() -> impl Strategy<Value = Range> {
    let version = prop_oneof![
        4 => (0u16..=3, 0u16..=3),
        1 => (0u16..=9999, 0u16..=9999),
    ]
    .prop_map(|(major, minor)| ApiVersion { major, minor });
    prop_oneof![
        3 => (version, (0usize..=3, 0usize..=3), quality(), any::<bool>(), any::<bool>())
            .prop_map(|(version, zeros, quality, charset, upper_case)| Range::Vendor {
                version, zeros, quality, charset, upper_case,
            }),
        2 => prop::sample::select(&[
            "text/html", "application/xhtml+xml", "application/xml;q=0.9", "*/*;q=0.8",
            "image/webp", "application/json", "text/plain; charset=utf-8",
            r#"text/plain;x="a,b""#, "application/signed-exchange;v=b3;q=0.7",
            // Near misses: no minor, three parts, five digits, another vendor, no version.
            "application/vnd.ceph.api.v1+json", "application/vnd.ceph.api.v1.0.0+json",
            "application/vnd.ceph.api.v12345.0+json", "application/vnd.other.api.v1.0+json",
            "application/vnd.ceph+json", "application/vnd.ceph.api.v1.0+xml",
        ][..]).prop_map(Range::Other),
    ]
}

/// The highest q, then the highest version.
fn best<'a>(offers: impl Iterator<Item = &'a (ApiVersion, u16)>) -> Option<ApiVersion> {
    offers.max_by_key(|(v, q)| (*q, *v)).map(|(v, _)| *v)
}

/// At most this many ranges are read (`versioning::MAX_RANGES`).
const RANGES_READ: usize = 32;

proptest! {
    #![proptest_config(cases(3000))]

    /// Real headers, mutated: no panic, and `negotiate` agrees with `choose`.
    #[test]
    fn mutated_accept_headers_negotiate_consistently(
        accept in Corpus::new(SEEDS.iter().copied(), DICTIONARY).mutants().prop_map(|m: Mutant| m.text()),
        endpoint in endpoint(),
    ) {
        check_agreement(&accept, endpoint)?;
    }

    /// Arbitrary text: no panic, and the same agreement.
    #[test]
    fn arbitrary_accept_headers_negotiate_consistently(accept in ".{0,200}", endpoint in endpoint()) {
        check_agreement(&accept, endpoint)?;
    }
}

proptest! {
    #![proptest_config(cases(2000))]

    /// Generated lists of media ranges, with q-values valid and not, optional whitespace
    /// and leading zeros: the answer is the model's, which reads the ranges rather than the
    /// text (the best offer by q then version among the first 32 ranges, q = 0 and invalid
    /// q-values ignored).
    #[test]
    fn generated_accept_headers_negotiate_as_the_model_says(
        ranges in prop::collection::vec(range(), 0..40),
        ows in prop::sample::select(&["", " ", "\t", "  "][..]),
        endpoint in endpoint(),
    ) {
        let accept = ranges
            .iter()
            .map(|r| r.render(ows))
            .collect::<Vec<_>>()
            .join(&format!("{ows},{ows}"));
        let offers: Vec<(ApiVersion, u16)> =
            ranges.iter().take(RANGES_READ).filter_map(Range::offer).collect();
        let all = best(offers.iter());
        let served = best(offers.iter().filter(|(v, _)| endpoint.serves(*v)));
        prop_assert_eq!(choose(Some(&accept), VENDOR), all.ok_or(VersionError::Missing));
        for plain_ok in [false, true] {
            let expected = match (served, all) {
                (Some(v), _) => Ok(Negotiated::Vendor(v)),
                (None, Some(requested)) => Err(VersionError::Incompatible { endpoint, requested }),
                (None, None) if plain_ok => Ok(Negotiated::Plain),
                (None, None) => Err(VersionError::Missing),
            };
            prop_assert_eq!(negotiate(Some(&accept), VENDOR, endpoint, plain_ok), expected, "{}", accept);
        }
    }

    /// Every version the parser can read (up to four digits a part) comes back from its
    /// own media type, for any vendor name the configuration allows; another vendor's
    /// media type offers nothing.
    #[test]
    fn every_media_type_reads_back_as_its_version_and_vendor(
        major in 0u16..=9999,
        minor in 0u16..=9999,
        vendor in "[a-z0-9-]{1,16}",
        other in "[a-z0-9-]{1,16}",
    ) {
        let version = ApiVersion { major, minor };
        let accept = version.media_type(&vendor);
        prop_assert_eq!(negotiate(Some(&accept), &vendor, version, false), Ok(Negotiated::Vendor(version)));
        prop_assert_eq!(choose(Some(&accept), &vendor), Ok(version));
        if other != vendor {
            prop_assert_eq!(choose(Some(&accept), &other), Err(VersionError::Missing));
        }
    }
}
