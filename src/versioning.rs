//! API versions carried in the Accept header as `application/vnd.<vendor>.api.vX.Y+json`.
//! Accept is parsed as RFC 9110 §12.5.1 says (a list of media ranges with parameters and
//! q-values), where the dashboard only accepts one bare vendor type.

use std::fmt;

use crate::decimal::push_decimal;

/// A `major.minor` API version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiVersion {
    pub major: u16,
    pub minor: u16,
}

impl ApiVersion {
    pub const V1_0: ApiVersion = ApiVersion { major: 1, minor: 0 };

    /// The dashboard's rule: an endpoint at E.F serves a client at A.B when A = E and B <= F.
    pub fn serves(self, client: ApiVersion) -> bool {
        self.major == client.major && client.minor <= self.minor
    }

    /// `X.Y`, as scope tables write versions.
    pub fn parse(text: &str) -> Option<ApiVersion> {
        let (major, minor) = text.split_once('.')?;
        Some(ApiVersion {
            major: parse_number(major)?,
            minor: parse_number(minor)?,
        })
    }

    pub fn media_type(self, vendor: &str) -> String {
        // Written piece by piece: through `format!` it cost 1,000 instructions, on every
        // forwarded request.
        let mut text = String::with_capacity(32 + vendor.len());
        text.push_str("application/vnd.");
        text.push_str(vendor);
        text.push_str(".api.v");
        push_decimal(&mut text, self.major);
        text.push('.');
        push_decimal(&mut text, self.minor);
        text.push_str("+json");
        text
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// What a request's Accept header settled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Negotiated {
    /// A vendor media type at this (client) version: answer with the vendor type.
    Vendor(ApiVersion),
    /// No vendor type, and the endpoint accepts that: answer `application/json`.
    Plain,
}

/// Why no version could be agreed; the dashboard answers both with 415.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("Unable to find version in request header")]
    Missing,
    #[error("Incorrect version: endpoint is '{endpoint}', client requested '{requested}'")]
    Incompatible {
        endpoint: ApiVersion,
        requested: ApiVersion,
    },
}

/// At most this many media ranges are read from one Accept header.
const MAX_RANGES: usize = 32;

/// The vendor versions an Accept header offers with q > 0, each with its q in thousandths.
fn offers<'a>(accept: &'a str, vendor: &'a str) -> impl Iterator<Item = (ApiVersion, u16)> + 'a {
    split_list(accept)
        .take(MAX_RANGES)
        .filter_map(move |range| {
            let mut parts = range.split(';');
            let version = vendor_version(parts.next()?.trim(), vendor)?;
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map_or(Some(1000), |(_, v)| parse_q(v.trim()))?;
            (q > 0).then_some((version, q))
        })
}

/// Agrees on a version for an endpoint at `endpoint`: the acceptable vendor type with the
/// highest q, the highest version among equals. `plain_ok` lets a request without any
/// vendor type through (for `/api/auth/check`, which load balancers call).
pub fn negotiate(
    accept: Option<&str>,
    vendor: &str,
    endpoint: ApiVersion,
    plain_ok: bool,
) -> Result<Negotiated, VersionError> {
    // One pass over the offers: the best one the endpoint serves, and the best of all.
    let (mut served, mut any) = (None, None);
    for (version, q) in accept.into_iter().flat_map(|a| offers(a, vendor)) {
        let rank = (q, version);
        if endpoint.serves(version) && served.is_none_or(|best| rank > best) {
            served = Some(rank);
        }
        if any.is_none_or(|best| rank > best) {
            any = Some(rank);
        }
    }
    match (served, any) {
        (Some((_, version)), _) => Ok(Negotiated::Vendor(version)),
        (None, Some((_, requested))) => Err(VersionError::Incompatible {
            endpoint,
            requested,
        }),
        (None, None) if plain_ok => Ok(Negotiated::Plain),
        (None, None) => Err(VersionError::Missing),
    }
}

/// For a forwarded request, whose endpoint version only the backend knows: the vendor
/// type with the highest q, the highest version among equals (the dashboard itself
/// answers 415 to any list, so exactly one type is forwarded). Runs on every forwarded
/// API request, so it collects nothing.
pub fn choose(accept: Option<&str>, vendor: &str) -> Result<ApiVersion, VersionError> {
    // The usual Accept: one vendor type without parameters, read without splitting it.
    let single = accept.filter(|a| !a.contains([',', ';', '"']));
    if let Some(version) = single.and_then(|a| vendor_version(a.trim(), vendor)) {
        return Ok(version);
    }
    accept
        .into_iter()
        .flat_map(|a| offers(a, vendor))
        .max_by_key(|(v, q)| (*q, *v))
        .map(|(v, _)| v)
        .ok_or(VersionError::Missing)
}

/// `application/vnd.<vendor>.api.vX.Y+json` (type and subtype are case-insensitive).
fn vendor_version(media_type: &str, vendor: &str) -> Option<ApiVersion> {
    let (ty, subtype) = media_type.split_once('/')?;
    if !ty.trim().eq_ignore_ascii_case("application") {
        return None;
    }
    let rest = strip_prefix_ignoring_case(subtype.trim(), "vnd.")?;
    let rest = strip_prefix_ignoring_case(rest, vendor)?;
    let rest = strip_prefix_ignoring_case(rest, ".api.v")?;
    let rest = strip_suffix_ignoring_case(rest, "+json")?;
    ApiVersion::parse(rest)
}

/// `text` without `prefix`, which it starts with in any ASCII case.
fn strip_prefix_ignoring_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| text.get(prefix.len()..))
        .flatten()
}

/// `text` without `suffix`, which it ends with in any ASCII case.
fn strip_suffix_ignoring_case<'a>(text: &'a str, suffix: &str) -> Option<&'a str> {
    let end = text.len().checked_sub(suffix.len())?;
    let tail = text.get(end..)?;
    tail.eq_ignore_ascii_case(suffix)
        .then(|| text.get(..end))
        .flatten()
}

fn parse_number(digits: &str) -> Option<u16> {
    if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// RFC 9110 §12.4.2 qvalue: `0[.ddd]` or `1[.000]`, in thousandths.
fn parse_q(value: &str) -> Option<u16> {
    let (int, frac) = value.split_once('.').unwrap_or((value, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths: u16 = format!("{frac:0<3}").parse().ok()?;
    match int {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// Splits a header list on commas outside quoted strings.
fn split_list(value: &str) -> impl Iterator<Item = &str> {
    let mut in_quotes = false;
    let mut escaped = false;
    value
        .split(move |c: char| {
            match c {
                _ if escaped => escaped = false,
                '\\' if in_quotes => escaped = true,
                '"' => in_quotes = !in_quotes,
                ',' if !in_quotes => return true,
                _ => {}
            }
            false
        })
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vendor_offers(accept: &str, vendor: &str) -> Vec<(ApiVersion, u16)> {
        offers(accept, vendor).collect()
    }

    const V1_0: ApiVersion = ApiVersion::V1_0;
    const fn v(major: u16, minor: u16) -> ApiVersion {
        ApiVersion { major, minor }
    }

    #[test]
    fn negotiate_table() {
        use Negotiated::*;
        let missing = Err(VersionError::Missing);
        let incompatible = |requested| {
            Err(VersionError::Incompatible {
                endpoint: V1_0,
                requested,
            })
        };
        let cases: &[(Option<&str>, bool, Result<Negotiated, VersionError>)] = &[
            (Some("application/vnd.ceph.api.v1.0+json"), false, Ok(Vendor(V1_0))),
            (Some("Application/VND.Ceph.API.v1.0+JSON"), false, Ok(Vendor(V1_0))),
            (Some("application/vnd.ceph.api.v01.00+json"), false, Ok(Vendor(V1_0))),
            (Some("application/vnd.ceph.api.v1.0+json; q=0.9"), false, Ok(Vendor(V1_0))),
            (Some("application/json;q=0.5, application/vnd.ceph.api.v1.0+json"), false, Ok(Vendor(V1_0))),
            (Some("application/vnd.ceph.api.v1.0+json, */*"), false, Ok(Vendor(V1_0))),
            (Some("application/vnd.ceph.api.v1.0+json;q=0"), false, missing),
            (Some("application/vnd.ceph.api.v1.0+json;q=0"), true, Ok(Plain)),
            (Some("application/vnd.ceph.api.v9.9+json"), false, incompatible(v(9, 9))),
            (Some("application/vnd.ceph.api.v9.9+json"), true, incompatible(v(9, 9))),
            (Some("application/vnd.ceph.api.v1.1+json"), false, incompatible(v(1, 1))),
            (Some("application/vnd.ceph.api.v2.0+json;q=1, application/vnd.ceph.api.v1.0+json;q=0.1"), false, Ok(Vendor(V1_0))),
            (Some("application/vnd.ceph.api.v1+json"), false, missing),
            (Some("application/vnd.ceph.api.v1.0.0+json"), false, missing),
            (Some("application/vnd.other.api.v1.0+json"), false, missing),
            (Some("application/vnd.ceph.api.v1.0+json;q=2"), false, missing),
            (Some("application/vnd.ceph.api.v1.0+json;q=0.1234"), false, missing),
            (Some("*/*"), false, missing),
            (Some("*/*"), true, Ok(Plain)),
            (Some("application/json"), true, Ok(Plain)),
            (Some(""), false, missing),
            (None, false, missing),
            (None, true, Ok(Plain)),
        ];
        for (accept, plain_ok, expected) in cases {
            assert_eq!(
                negotiate(*accept, "ceph", V1_0, *plain_ok),
                *expected,
                "{accept:?}"
            );
        }
    }

    #[test]
    fn highest_q_wins_then_highest_version() {
        let endpoint = v(1, 2);
        let pick = |a| negotiate(Some(a), "ceph", endpoint, false);
        assert_eq!(
            pick("application/vnd.ceph.api.v1.0+json;q=0.9, application/vnd.ceph.api.v1.1+json;q=0.5"),
            Ok(Negotiated::Vendor(v(1, 0)))
        );
        assert_eq!(
            pick("application/vnd.ceph.api.v1.0+json, application/vnd.ceph.api.v1.2+json"),
            Ok(Negotiated::Vendor(v(1, 2)))
        );
    }

    #[test]
    fn choose_forwards_the_best_offer_whatever_its_version() {
        let pick = |a| choose(Some(a), "ceph");
        assert_eq!(pick("application/vnd.ceph.api.v0.1+json"), Ok(v(0, 1)));
        assert_eq!(
            pick("application/vnd.ceph.api.v1.0+json;q=0.5, application/vnd.ceph.api.v2.0+json"),
            Ok(v(2, 0))
        );
        assert_eq!(
            pick("application/vnd.ceph.api.v1.0+json, application/vnd.ceph.api.v1.1+json"),
            Ok(v(1, 1))
        );
        assert_eq!(pick("*/*"), Err(VersionError::Missing));
        assert_eq!(choose(None, "ceph"), Err(VersionError::Missing));
    }

    #[test]
    fn commas_inside_quoted_parameters_do_not_split() {
        let offers = vendor_offers(
            r#"text/plain;x="a,b", application/vnd.ceph.api.v1.0+json"#,
            "ceph",
        );
        assert_eq!(offers, vec![(V1_0, 1000)]);
    }

    #[test]
    fn only_the_first_ranges_are_read() {
        let long = format!(
            "{}application/vnd.ceph.api.v1.0+json",
            "text/plain, ".repeat(100)
        );
        assert!(vendor_offers(&long, "ceph").is_empty());
    }

    #[test]
    fn serves_follows_the_dashboard_rule() {
        assert!(v(1, 1).serves(v(1, 0)));
        assert!(v(1, 1).serves(v(1, 1)));
        assert!(!v(1, 0).serves(v(1, 1)));
        assert!(!v(2, 0).serves(v(1, 0)));
    }

    #[test]
    fn media_type_and_messages_match_the_dashboard() {
        assert_eq!(
            V1_0.media_type("ceph"),
            "application/vnd.ceph.api.v1.0+json"
        );
        for (major, minor) in [(0, 1), (10, 0), (65535, 9), (9, 65535)] {
            assert_eq!(
                v(major, minor).media_type("x"),
                format!("application/vnd.x.api.v{major}.{minor}+json")
            );
        }
        let e = VersionError::Incompatible {
            endpoint: V1_0,
            requested: v(9, 9),
        };
        assert_eq!(
            e.to_string(),
            "Incorrect version: endpoint is '1.0', client requested '9.9'"
        );
    }
}
