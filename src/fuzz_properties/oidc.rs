//! Single sign-on's parsers: the roles claim path (`oidc.roles_claim`, the dashboard's
//! roles_path syntax), the provider's URLs (`oidc.issuer`, the discovery document's
//! endpoints) and the issuer read from an unverified token's payload (which token check a
//! token goes to). Realistic inputs mutated, paths generated from the grammar (parsed back
//! to their segments and looked up as a model says), and arbitrary text: never a panic.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use proptest::prelude::*;
use serde_json::{json, Value};

use super::cases;
use super::mutate::{Corpus, Mutant};
use crate::config::{ClaimPath, ProviderUrl};

const PATHS: &[&str] = &[
    "groups",
    "realm_access.roles",
    "resource_access.ceph.roles",
    "resource_access.\"ceph-dashboard\".roles",
    "\"cognito:groups\"",
];

const URLS: &[&str] = &[
    "https://keycloak.example.com/realms/ceph",
    "https://login.microsoftonline.com/0000-1111/v2.0",
    "http://127.0.0.1:5556/dex",
    "https://[2001:db8::1]:8443/",
    "https://idp.example.com/.well-known/openid-configuration?x=1",
];

const DICTIONARY: &[&str] = &[
    ".", "\"", "..", "\"\"", "-", "_", "0", "é", "://", ":", "/", "[", "]", "?", "#", "%", "@",
];

/// A segment as the grammar allows it: plain, or quoted with anything but a quote.
fn segment() -> impl Strategy<Value = (String, String)> {
    prop_oneof![
        "[A-Za-z_][A-Za-z0-9_]{0,8}".prop_map(|s| (s.clone(), s)),
        "[^\"]{1,8}".prop_map(|s| (format!("\"{s}\""), s)),
    ]
}

proptest! {
    #![proptest_config(cases(2000))]

    /// Mutated paths and URLs, and arbitrary text: no panic; a parsed URL's parts agree.
    #[test]
    fn mutated_and_arbitrary_paths_and_urls_never_panic(
        path in Corpus::new(PATHS.iter().copied(), DICTIONARY).mutants().prop_map(|m: Mutant| m.text()),
        url in Corpus::new(URLS.iter().copied(), DICTIONARY).mutants().prop_map(|m: Mutant| m.text()),
        text in ".{0,80}",
    ) {
        for input in [&path, &text] {
            if let Ok(parsed) = ClaimPath::parse(input) {
                prop_assert!(!parsed.0.is_empty() && parsed.0.iter().all(|s| !s.is_empty()));
            }
        }
        for input in [&url, &text] {
            if let Ok(parsed) = ProviderUrl::parse(input) {
                prop_assert!(parsed.path_and_query.starts_with('/'));
                prop_assert!(parsed.tls || parsed.host == "localhost" || parsed.host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()));
                prop_assert!(parsed.discovery().is_ok());
            }
        }
    }

    /// Generated paths parse to their segments and find, in claims built along them, the
    /// list there (a string as a one-element list).
    #[test]
    fn generated_paths_parse_to_their_segments_and_find_the_groups(
        segments in prop::collection::vec(segment(), 1..5),
        groups in prop::collection::vec("[a-z-]{1,8}", 0..4),
        single in any::<bool>(),
    ) {
        let text = segments.iter().map(|(written, _)| written.as_str()).collect::<Vec<_>>().join(".");
        let names: Vec<String> = segments.iter().map(|(_, name)| name.clone()).collect();
        let parsed = ClaimPath::parse(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(&parsed.0, &names);
        let leaf = match (single, groups.first()) {
            (true, Some(one)) => json!(one),
            _ => json!(groups),
        };
        let claims = names.iter().rev().fold(leaf, |inner, name| json!({ name.clone(): inner }));
        let expected = match (single, groups.first()) {
            (true, Some(one)) => vec![one.clone()],
            _ => groups.clone(),
        };
        prop_assert_eq!(parsed.values(&claims), expected);
        prop_assert!(parsed.values(&Value::Null).is_empty());
    }

    /// Any bytes as a token's payload: reading its issuer never panics, and names the
    /// provider only when the payload's `iss` is the issuer.
    #[test]
    fn an_unverified_payload_names_the_provider_only_by_its_iss(
        payload in prop::collection::vec(any::<u8>(), 0..120),
        iss in prop_oneof![Just("https://idp.example.com/realms/ceph".to_string()), ".{0,30}"],
    ) {
        let provider = crate::oidc::testing::provider();
        let junk = format!("e30.{}.sig", URL_SAFE_NO_PAD.encode(&payload));
        let named = provider.named_in(&junk);
        prop_assert!(!named || serde_json::from_slice::<Value>(&payload).is_ok());
        let claims = URL_SAFE_NO_PAD.encode(json!({ "iss": iss }).to_string());
        let token = format!("e30.{claims}.sig");
        prop_assert_eq!(provider.named_in(&token), iss.trim_end_matches('/') == "https://idp.example.com/realms/ceph");
    }
}
