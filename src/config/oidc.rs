//! `[oidc]`: single sign-on with an OpenID Connect provider. Its issuer (the discovery
//! document is fetched from it at start), the gateway's client there, which claims name the
//! user and hold their groups, how those groups map to dashboard roles, and what a provider
//! token must be to be accepted (algorithms, audience, clock skew). Only `role_map` is
//! applied by a reload; the rest needs a restart (`app::restart`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::file::OidcSection;
use super::parse::{key_name, Source};
use super::users::roles;
use super::ConfigErrors;
use crate::secrets::Secret;
use crate::users::{CustomRole, Grants, Role};

#[derive(Debug, Clone, PartialEq)]
pub struct OidcConfig {
    /// Exactly as the provider's tokens and discovery document spell it.
    pub issuer: ProviderUrl,
    pub client_id: String,
    /// A confidential client's secret (browser login); `None`: a public client (PKCE only).
    pub client_secret: Option<Secret>,
    pub scopes: Vec<String>,
    pub redirect_path: String,
    /// The claim naming the user; `sub` when the token has none.
    pub username_claim: String,
    pub roles_claim: ClaimPath,
    pub role_map: RoleMap,
    pub algorithms: Vec<jsonwebtoken::Algorithm>,
    pub audience: String,
    pub clock_skew: Duration,
    /// The JOSE `typ` an access token's header must carry (RFC 9068's `at+jwt` by
    /// default), each lowercase and without `application/`; `""`: a header without `typ`.
    pub access_token_types: Vec<String>,
    /// `false`: `POST /api/auth` (the users file) is closed; only the provider logs in.
    pub local_login: bool,
    /// The CA certificates (DER, from `oidc.ca_file`) the provider's TLS certificate must
    /// chain to; `None`: the system's.
    pub ca_certificates: Option<Vec<Vec<u8>>>,
    pub keys: KeyPolicy,
}

/// How the provider's signing keys (its JWKS) are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyPolicy {
    /// Fetched again this often.
    pub refresh: Duration,
    /// A token naming an unknown `kid` fetches them again at most this often.
    pub min_refresh: Duration,
    /// Through a provider outage the last good set is used this long after it was fetched.
    pub max_stale: Duration,
}

/// An `http(s)` URL of the provider; plain `http` only on a loopback address (tests and
/// a provider on the same host), since keys fetched in the clear can be replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderUrl {
    /// As written, without a trailing `/` (the issuer is compared as a string).
    pub text: String,
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Path and query, at least `/`.
    pub path_and_query: String,
}

impl ProviderUrl {
    /// The URL, or why `text` is not a usable provider URL.
    pub fn parse(text: &str) -> Result<ProviderUrl, String> {
        let uri: http::Uri = text
            .parse()
            .map_err(|e| format!("{text:?} is not a URL: {e}"))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(format!("{text:?} must start with https://")),
        };
        let host = uri
            .host()
            .ok_or_else(|| format!("{text:?} names no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if !tls && !is_loopback(&host) {
            return Err(format!("{text:?}: plain http is accepted only on a loopback address (the keys could be replaced on the way); use https://"));
        }
        // "https://host?x" has a query but an empty path: the request target is "/?x".
        let path = match uri.path() {
            "" => "/",
            path => path,
        };
        let path_and_query = match uri.query() {
            Some(query) => format!("{path}?{query}"),
            None => path.to_string(),
        };
        Ok(ProviderUrl {
            text: text.trim_end_matches('/').to_string(),
            tls,
            port: uri.port_u16().unwrap_or(if tls { 443 } else { 80 }),
            host,
            path_and_query,
        })
    }

    /// The issuer's discovery document (OpenID Connect Discovery 1.0, section 4).
    pub fn discovery(&self) -> Result<ProviderUrl, String> {
        ProviderUrl::parse(&format!("{}/.well-known/openid-configuration", self.text))
    }
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Where the roles or groups are in a token's claims: `groups`,
/// `realm_access.roles`, `resource_access.ceph.roles`, `resource_access."ceph-dashboard".roles`
/// (the subset of JMESPath the dashboard's `sso enable oauth2 roles_path` takes for these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimPath(pub Vec<String>);

impl ClaimPath {
    pub fn parse(text: &str) -> Result<ClaimPath, String> {
        let mut segments = Vec::new();
        let mut rest = text;
        // Each pass takes one segment; a path has at most as many as characters.
        for _ in 0..=text.len() {
            let (segment, after) = match rest.strip_prefix('"') {
                Some(quoted) => {
                    let end = quoted.find('"').ok_or("a quoted name is not closed")?;
                    (&quoted[..end], &quoted[end + 1..])
                }
                None => {
                    let end = rest.find('.').unwrap_or(rest.len());
                    let name = &rest[..end];
                    let plain = |c: char| c.is_ascii_alphanumeric() || c == '_';
                    if name.starts_with(|c: char| c.is_ascii_digit()) || !name.chars().all(plain) {
                        return Err(format!("{name:?} must be letters, digits and '_' (quote other names: \"ceph-dashboard\")"));
                    }
                    (name, &rest[end..])
                }
            };
            if segment.is_empty() {
                return Err("a name in the path is empty".into());
            }
            segments.push(segment.to_string());
            match after.strip_prefix('.') {
                Some(next) => rest = next,
                None if after.is_empty() => return Ok(ClaimPath(segments)),
                None => return Err(format!("expected '.' before {after:?}")),
            }
        }
        Err("too long".into())
    }

    /// The strings at the path in `claims`: a list of strings, or one string.
    pub fn values(&self, claims: &serde_json::Value) -> Vec<String> {
        let found = self
            .0
            .iter()
            .try_fold(claims, |value, segment| value.get(segment));
        match found {
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            Some(serde_json::Value::String(one)) => vec![one.clone()],
            _ => Vec::new(),
        }
    }
}

/// The dashboard roles each provider group or role grants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleMap(BTreeMap<String, MappedRoles>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct MappedRoles {
    system: Vec<Role>,
    custom: Vec<CustomRole>,
}

/// What a provider user's groups grant: `None` when no group is mapped (the user is
/// refused; there is no default role).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapped {
    pub roles: Vec<Role>,
    pub custom_roles: Vec<CustomRole>,
    pub grants: Grants,
}

impl RoleMap {
    /// The union over every mapped group among `groups`, as the dashboard unions roles.
    pub fn map(&self, groups: &[String]) -> Option<Mapped> {
        let mut held = groups.iter().filter_map(|g| self.0.get(g)).peekable();
        held.peek()?;
        let mut roles: Vec<Role> = Vec::new();
        let mut custom_roles: Vec<CustomRole> = Vec::new();
        let mut grants = Grants::of(&[]);
        for mapped in held {
            for role in &mapped.system {
                if !roles.contains(role) {
                    roles.push(*role);
                }
            }
            for role in &mapped.custom {
                if !custom_roles.iter().any(|c| c.name == role.name) {
                    custom_roles.push(role.clone());
                }
            }
            grants = mapped
                .custom
                .iter()
                .fold(grants.union(&Grants::of(&mapped.system)), |all, c| {
                    all.union(&c.grants)
                });
        }
        Some(Mapped {
            roles,
            custom_roles,
            grants,
        })
    }
}

/// Algorithms a provider token may be signed with; `none` and HS* are never accepted (an
/// HMAC "signed" with the provider's public key would verify).
const ASYMMETRIC: [(&str, jsonwebtoken::Algorithm); 10] = {
    use jsonwebtoken::Algorithm::*;
    [
        ("RS256", RS256),
        ("RS384", RS384),
        ("RS512", RS512),
        ("PS256", PS256),
        ("PS384", PS384),
        ("PS512", PS512),
        ("ES256", ES256),
        ("ES384", ES384),
        ("EdDSA", EdDSA),
        ("Ed25519", EdDSA),
    ]
};

/// The least `oidc.jwks_refresh_seconds` may be.
const MIN_JWKS_REFRESH: u64 = 10;

/// The most `oidc.clock_skew_seconds` may be.
const MAX_CLOCK_SKEW: u64 = 300;

/// `[oidc]`, given the roles file's custom roles; `None` when a problem was reported.
pub(super) fn validate(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    oidc: OidcSection,
    custom: &[CustomRole],
) -> Option<OidcConfig> {
    let before = errors.0.len();
    let f = at.file;
    let issuer = match ProviderUrl::parse(&oidc.issuer) {
        Ok(url) => Some(url),
        Err(_) if oidc.issuer.is_empty() => {
            errors.push(f, "oidc.issuer", "required: the provider's issuer URL, as its tokens' `iss` claim names it (e.g. \"https://keycloak.example.com/realms/ceph\")");
            None
        }
        Err(problem) => {
            errors.push(f, "oidc.issuer", problem);
            None
        }
    };
    if oidc.client_id.trim().is_empty() {
        errors.push(
            f,
            "oidc.client_id",
            "required: the gateway's client id at the provider",
        );
    }
    let client_secret = oidc
        .client_secret_file
        .as_deref()
        .and_then(|file| at.password_file(errors, "oidc.client_secret_file", file, ""));
    if !oidc.scopes.iter().any(|s| s == "openid") {
        errors.push(
            f,
            "oidc.scopes",
            "must include \"openid\" (an OpenID Connect login asks for it)",
        );
    }
    check_path(errors, at, &oidc.redirect_path);
    if oidc.username_claim.trim().is_empty() {
        errors.push(
            f,
            "oidc.username_claim",
            "must name a claim, like \"preferred_username\" (\"sub\" is used when a token lacks it)",
        );
    }
    let roles_claim = ClaimPath::parse(&oidc.roles_claim)
        .map_err(|problem| {
            let message = format!("{:?}: {problem}; e.g. \"groups\", \"realm_access.roles\" or \"resource_access.ceph.roles\"", oidc.roles_claim);
            errors.push(f, "oidc.roles_claim", message);
        })
        .ok();
    let role_map = role_map(errors, at, &oidc.role_map, custom);
    let algorithms = algorithms(errors, at, &oidc.algorithms);
    let audience = oidc
        .audience
        .clone()
        .unwrap_or_else(|| oidc.client_id.clone());
    if audience.trim().is_empty() {
        errors.push(
            f,
            "oidc.audience",
            "must not be empty (leave it out for the client id)",
        );
    }
    if oidc.clock_skew_seconds > MAX_CLOCK_SKEW {
        errors.push(
            f,
            "oidc.clock_skew_seconds",
            format!("{} is over {MAX_CLOCK_SKEW}: keep the hosts' clocks in sync (NTP) rather than accept expired tokens", oidc.clock_skew_seconds),
        );
    }
    let access_token_types = access_token_types(errors, at, &oidc.access_token_types);
    let keys = key_policy(errors, at, &oidc);
    let ca_certificates = oidc.ca_file.as_deref().and_then(|ca| {
        crate::tls::read_ca_file(&at.resolve(ca))
            .map_err(|e| errors.push(f, "oidc.ca_file", e.to_string()))
            .ok()
    });
    if errors.0.len() > before {
        return None;
    }
    Some(OidcConfig {
        issuer: issuer?,
        client_id: oidc.client_id,
        client_secret,
        scopes: oidc.scopes,
        redirect_path: oidc.redirect_path,
        username_claim: oidc.username_claim,
        roles_claim: roles_claim?,
        role_map,
        algorithms,
        audience,
        clock_skew: Duration::from_secs(oidc.clock_skew_seconds),
        access_token_types,
        local_login: oidc.local_login,
        ca_certificates,
        keys,
    })
}

/// The prefix of the gateway's own single sign-on paths (login, callback), outside the
/// dashboard's `/api` and `/ui-api`.
pub const SSO_PREFIX: &str = "/auth/oidc/";

/// The browser's way back from the provider: a plain path under [`SSO_PREFIX`] other than
/// the login's own.
fn check_path(errors: &mut ConfigErrors, at: &Source<'_>, path: &str) {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/-_.".contains(c);
    match path.strip_prefix(SSO_PREFIX) {
        Some(rest)
            if !rest.is_empty()
                && !["login", "backchannel-logout"].contains(&rest)
                && rest.chars().all(plain) => {}
        _ => errors.push(
            at.file,
            "oidc.redirect_path",
            format!("{path:?} must be a plain path under {SSO_PREFIX} other than {SSO_PREFIX}login and {SSO_PREFIX}backchannel-logout, like \"/auth/oidc/callback\""),
        ),
    }
}

fn role_map(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    entries: &BTreeMap<String, Vec<String>>,
    custom: &[CustomRole],
) -> RoleMap {
    if entries.is_empty() {
        errors.push(at.file, "oidc.role_map", "map at least one provider group to dashboard roles, e.g. role_map = { \"ceph-admins\" = [\"administrator\"] }: a user with no mapped group is refused");
    }
    let mut map = BTreeMap::new();
    for (group, names) in entries {
        let key = format!("oidc.role_map.{}", key_name(group));
        if names.is_empty() {
            errors.push(
                at.file,
                &key,
                "lists no role: name at least one, or remove the group",
            );
        }
        let (system, custom) = roles(errors, at.file, &key, names, custom);
        map.insert(group.clone(), MappedRoles { system, custom });
    }
    RoleMap(map)
}

fn algorithms(
    errors: &mut ConfigErrors,
    at: &Source<'_>,
    names: &[String],
) -> Vec<jsonwebtoken::Algorithm> {
    if names.is_empty() {
        errors.push(
            at.file,
            "oidc.algorithms",
            "list at least one, e.g. [\"RS256\"]",
        );
    }
    let mut found = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        match ASYMMETRIC.iter().find(|(n, _)| n == name) {
            Some((_, alg)) => found.push(*alg),
            None => {
                let why = match name.to_ascii_uppercase() {
                    n if n == "NONE" => "an unsigned token proves nothing".to_string(),
                    n if n.starts_with("HS") => "an HMAC key is a shared secret; with it a token \"signed\" with the provider's public key would verify".to_string(),
                    _ => "unknown".to_string(),
                };
                let known: Vec<&str> = ASYMMETRIC.iter().map(|(n, _)| *n).collect();
                errors.push(
                    at.file,
                    format!("oidc.algorithms[{i}]"),
                    format!(
                        "{name:?} is never accepted ({why}); the algorithms are {}",
                        known.join(", ")
                    ),
                );
            }
        }
    }
    found
}

/// `oidc.access_token_types`, as they are compared: a media type's case does not count,
/// and `application/` may be left out (RFC 7515, 4.1.9).
fn access_token_types(errors: &mut ConfigErrors, at: &Source<'_>, types: &[String]) -> Vec<String> {
    if types.is_empty() {
        errors.push(at.file, "oidc.access_token_types", "must name at least one type: \"at+jwt\" (RFC 9068), or what the provider's access tokens carry in their header's `typ` (Keycloak, Entra ID: \"JWT\"; none: \"\")");
    }
    for (i, typ) in types.iter().enumerate() {
        if !typ.chars().all(|c| c.is_ascii_graphic()) {
            errors.push(
                at.file,
                format!("oidc.access_token_types[{i}]"),
                format!("{typ:?} is not a media type (printable ASCII, no spaces)"),
            );
        }
    }
    types.iter().map(|t| normal_token_type(t)).collect()
}

/// A JOSE `typ` as compared: lowercase, without `application/`.
pub fn normal_token_type(typ: &str) -> String {
    let lower = typ.to_ascii_lowercase();
    match lower.strip_prefix("application/") {
        Some(short) => short.to_string(),
        None => lower,
    }
}

fn key_policy(errors: &mut ConfigErrors, at: &Source<'_>, oidc: &OidcSection) -> KeyPolicy {
    let at_least = |errors: &mut ConfigErrors, key: &str, value: u64, min: u64, why: &str| {
        if value < min {
            errors.push(
                at.file,
                key,
                format!("{value} is below {min}: must be at least {min} ({why})"),
            );
        }
    };
    at_least(
        errors,
        "oidc.jwks_refresh_seconds",
        oidc.jwks_refresh_seconds,
        MIN_JWKS_REFRESH,
        "every gateway fetches the provider's keys this often; a key rotation is picked up at once anyway, when a token names a new kid",
    );
    at_least(
        errors,
        "oidc.jwks_min_refresh_seconds",
        oidc.jwks_min_refresh_seconds,
        1,
        "tokens naming unknown kids must not make the gateway fetch the keys without pause",
    );
    if oidc.jwks_max_stale_seconds < oidc.jwks_refresh_seconds {
        errors.push(
            at.file,
            "oidc.jwks_max_stale_seconds",
            format!("{} is below jwks_refresh_seconds ({}): must be at least the refresh period, or the keys would be dropped before the next refresh and provider tokens refused (503) between the two", oidc.jwks_max_stale_seconds, oidc.jwks_refresh_seconds),
        );
    }
    KeyPolicy {
        refresh: Duration::from_secs(oidc.jwks_refresh_seconds),
        min_refresh: Duration::from_secs(oidc.jwks_min_refresh_seconds),
        max_stale: Duration::from_secs(oidc.jwks_max_stale_seconds),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{Config, ConfigErrors};
    use crate::users::{Permission, Role, RoleEdition, Scope};

    const MINIMAL: &str = "[server]\npublic_url = \"https://ceph.example.com\"\n[oidc]\nissuer = \"https://idp.example.com/realms/ceph\"\nclient_id = \"ceph\"\n[oidc.role_map]\nceph-admins = [\"administrator\"]\n";

    fn load(text: &str, dir: &Path) -> Result<Config, ConfigErrors> {
        Config::from_toml_str(text, &dir.join("c.toml"), dir)
    }

    fn errors(text: &str) -> ConfigErrors {
        let dir = tempfile::tempdir().unwrap();
        load(text, dir.path()).unwrap_err()
    }

    #[test]
    fn a_minimal_section_gets_the_documented_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let oidc = load(MINIMAL, dir.path()).unwrap().oidc.unwrap();
        assert_eq!(oidc.issuer.text, "https://idp.example.com/realms/ceph");
        assert_eq!(oidc.audience, "ceph");
        assert_eq!(oidc.scopes, ["openid", "profile", "email"]);
        assert_eq!(oidc.redirect_path, "/auth/oidc/callback");
        assert_eq!(oidc.username_claim, "preferred_username");
        assert_eq!(oidc.roles_claim.0, ["groups"]);
        use jsonwebtoken::Algorithm::*;
        assert_eq!(oidc.algorithms, [RS256, ES256, EdDSA]);
        assert_eq!(oidc.clock_skew.as_secs(), 60);
        assert!(oidc.local_login);
        assert!(oidc.client_secret.is_none());
        let admin = oidc
            .role_map
            .map(&["x".into(), "ceph-admins".into()])
            .unwrap();
        assert_eq!(admin.roles, [Role::Administrator]);
        assert!(oidc.role_map.map(&["x".into()]).is_none());
        assert!(load("", dir.path()).unwrap().oidc.is_none());
    }

    #[test]
    fn every_problem_of_the_section_is_reported_at_once() {
        let e = errors(
            "[oidc]\nissuer = \"http://idp.example.com\"\nscopes = [\"profile\"]\nredirect_path = \"/api/cb\"\n\
             roles_claim = \"resource_access.ceph-dashboard.roles\"\nalgorithms = [\"none\", \"HS256\", \"RS256\"]\n\
             clock_skew_seconds = 3600\njwks_refresh_seconds = 1\nclient_secret_file = \"missing\"\n\
             [oidc.role_map]\nops = [\"no-such-role\"]\nnobody = []\n",
        );
        for key in [
            "server.public_url",
            "oidc.issuer",
            "oidc.client_id",
            "oidc.scopes",
            "oidc.redirect_path",
            "oidc.roles_claim",
            "oidc.algorithms[0]",
            "oidc.algorithms[1]",
            "oidc.clock_skew_seconds",
            "oidc.jwks_refresh_seconds",
            "oidc.client_secret_file",
            "oidc.role_map.ops",
            "oidc.role_map.nobody",
        ] {
            assert!(e.mentions(key), "{key} in\n{e}");
        }
        assert!(!e.mentions("oidc.algorithms[2]"), "{e}");
        assert!(
            e.to_string()
                .contains("plain http is accepted only on a loopback address"),
            "{e}"
        );
        assert!(
            errors("[oidc]\nissuer = \"https://x\"\nclient_id = \"c\"\n").mentions("oidc.role_map")
        );
        assert!(errors("[oidc]\nissuer = \"https://x\"\nclient_id = \"c\"\nrole_map = {a = [\"administrator\"]}\nbogus = 1\n").mentions("oidc.bogus"));
    }

    #[test]
    fn access_token_types_are_compared_as_media_types_and_never_empty() {
        let dir = tempfile::tempdir().unwrap();
        let oidc = load(MINIMAL, dir.path()).unwrap().oidc.unwrap();
        assert_eq!(oidc.access_token_types, ["at+jwt"]);
        let typed = MINIMAL.replace(
            "[oidc.role_map]",
            "access_token_types = [\"application/AT+JWT\", \"JWT\", \"\"]\n[oidc.role_map]",
        );
        let oidc = load(&typed, dir.path()).unwrap().oidc.unwrap();
        assert_eq!(oidc.access_token_types, ["at+jwt", "jwt", ""]);
        for (types, key) in [
            ("[]", "oidc.access_token_types"),
            ("[\"at+jwt\", \"at jwt\"]", "oidc.access_token_types[1]"),
        ] {
            let text = MINIMAL.replace(
                "[oidc.role_map]",
                &format!("access_token_types = {types}\n[oidc.role_map]"),
            );
            assert!(errors(&text).mentions(key), "{types}: {}", errors(&text));
        }
    }

    #[test]
    fn check_config_says_what_the_key_schedule_must_be() {
        let with = |lines: &str| {
            errors(&MINIMAL.replace("[oidc.role_map]", &format!("{lines}\n[oidc.role_map]")))
                .to_string()
        };
        let refresh = with("jwks_refresh_seconds = 5");
        assert!(
            refresh.contains("oidc.jwks_refresh_seconds: 5 is below 10: must be at least 10"),
            "{refresh}"
        );
        let stale = with("jwks_refresh_seconds = 600\njwks_max_stale_seconds = 300");
        assert!(
            stale.contains("oidc.jwks_max_stale_seconds: 300 is below jwks_refresh_seconds (600): must be at least the refresh period"),
            "{stale}"
        );
    }

    #[test]
    fn http_is_for_loopback_providers_and_custom_roles_map_too() {
        let dir = tempfile::tempdir().unwrap();
        let roles =
            "[[roles]]\nname = \"pool-auditor\"\n[roles.scopes_permissions]\npool = [\"read\"]\n";
        std::fs::write(dir.path().join("roles.toml"), roles).unwrap();
        let text = "[server]\npublic_url = \"https://ceph.example.com\"\n[auth]\nroles_file = \"roles.toml\"\n[oidc]\nissuer = \"http://127.0.0.1:5556/\"\nclient_id = \"ceph\"\n[oidc.role_map]\nauditors = [\"pool-auditor\"]\n";
        let oidc = load(text, dir.path()).unwrap().oidc.unwrap();
        assert_eq!(oidc.issuer.text, "http://127.0.0.1:5556");
        let auditor = oidc.role_map.map(&["auditors".into()]).unwrap();
        assert!(auditor.roles.is_empty());
        assert!(auditor
            .grants
            .allows(RoleEdition::Pacific, Scope::Pool, Permission::Read));
        assert!(!auditor
            .grants
            .allows(RoleEdition::Pacific, Scope::Pool, Permission::Update));
        // Named too: the account the dashboard sees holds the role mirrored.
        let names: Vec<&str> = auditor
            .custom_roles
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["pool-auditor"]);
    }
}
