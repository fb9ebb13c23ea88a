//! What changes on a request on its way to a dashboard, and on the answer on its way
//! back: the client's credentials are swapped for the dashboard token of the account the
//! dashboard sees (`dashboard_identity`, or the service account's), the gateway's
//! decisions (path, version, user) are carried in headers, and no backend address leaks.

use std::net::IpAddr;
use std::sync::Arc;

use http::header::{
    ACCEPT, ACCEPT_ENCODING, AUTHORIZATION, CONTENT_LENGTH, COOKIE, FORWARDED, HOST, LOCATION,
    SET_COOKIE, TRANSFER_ENCODING,
};
use http::{HeaderMap, HeaderName, HeaderValue};
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::proxy::Session;
use pingora::{InvalidHTTPHeader, OrErr};

use crate::auth::UserToken;
use crate::dashboards::Upstreams;
use crate::decimal::push_decimal;
use crate::edge::headers::{carries_only, edit_request};
use crate::users::User;

/// What the gateway decided about a request it forwards.
#[derive(Debug, Clone)]
pub struct Forward {
    /// The normalized path, plus the client's query.
    pub path_and_query: String,
    /// `None` for what the gateway serves without a token (the web UI's files).
    pub user: Option<Arc<User>>,
    /// The user's own dashboard token, sent instead of the service account's; `None`:
    /// the service account's (`upstream.identity = "service"`).
    pub user_token: Option<UserToken>,
    /// The account the gateway manages that the dashboard sees instead of the service
    /// account (`upstream.identity = "roles"`, `dashboard_identity`); `None` otherwise.
    pub seen_as: Option<Arc<str>>,
    /// The single vendor media type chosen from the client's Accept (API paths).
    pub accept: Option<Arc<str>>,
    /// Its answer may carry a dashboard token (`token_redaction`): read whole, sent without.
    pub redact_tokens: bool,
}

/// Who asked, as the `X-Forwarded-*` headers tell the backend.
pub struct Client {
    pub ip: Option<String>,
    pub tls: bool,
    pub host: Option<HeaderValue>,
}

impl Client {
    /// Who sent `session`'s request; `tls`: over the gateway's TLS listener.
    /// `client`: who sent it as `client_addr` resolves it (the TCP peer, or the client a
    /// trusted proxy names), so that the dashboard sees the address the gateway judged.
    pub fn of(session: &Session, tls: bool, client: Option<IpAddr>) -> Client {
        let header = session.req_header();
        // (an authority is always a valid header value)
        let authority = header
            .uri
            .authority()
            .map(|a| HeaderValue::from_str(a.as_str()));
        Client {
            ip: client.map(ip_text),
            tls,
            host: header
                .headers
                .get(HOST)
                .cloned()
                .or_else(|| authority.and_then(Result::ok)),
        }
    }
}

/// `ip` as text. An IPv4 address is written digit by digit: its `Display` costs ten times
/// as much, on every forwarded request.
fn ip_text(ip: IpAddr) -> String {
    let IpAddr::V4(v4) = ip else {
        return ip.to_string();
    };
    let mut text = String::with_capacity(15);
    for (i, octet) in v4.octets().into_iter().enumerate() {
        if i > 0 {
            text.push('.');
        }
        push_decimal(&mut text, octet);
    }
    text
}

/// A body the gateway read whole because it came without a length (chunked, or HTTP/2)
/// goes out with its length: the dashboard refuses bodies without one (411).
pub fn set_body_length(req: &mut RequestHeader, length: usize) {
    edit_request(req, |headers| {
        headers.remove(TRANSFER_ENCODING);
        headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
    });
}

/// Headers a client may not set for the backend. Those the gateway sets are replaced by
/// inserting them; the others are removed.
const REPLACED: [HeaderName; 7] = [
    AUTHORIZATION,
    X_FORWARDED_FOR,
    X_FORWARDED_PROTO,
    X_FORWARDED_HOST,
    X_FORWARDED_USER,
    FORWARDED,
    HeaderName::from_static("x-real-ip"),
];

/// Headers a dashboard in its own single sign-on mode takes as who is asking, unsigned:
/// 20.2's OAuth2 mode reads the token from `X-Access-Token` (`services/auth/oauth2.py`
/// `get_token`, only its payload decoded); a newer variant of that code in Ceph's source
/// takes the identity oauth2-proxy hands on instead (`X-User`, `X-Email`,
/// `X-User-Groups`, and the `X-Forwarded-*` / `X-Auth-Request-*` forms oauth2-proxy can
/// send). Behind the gateway
/// the gateway says who asks (`Authorization`, `X-Forwarded-User`): a client's copy of
/// any of these is removed, so that no client names itself to a dashboard configured so.
const IDENTITY_HEADERS: [HeaderName; 13] = [
    HeaderName::from_static("x-access-token"),
    HeaderName::from_static("x-user"),
    HeaderName::from_static("x-email"),
    HeaderName::from_static("x-user-groups"),
    HeaderName::from_static("x-forwarded-email"),
    HeaderName::from_static("x-forwarded-groups"),
    HeaderName::from_static("x-forwarded-preferred-username"),
    HeaderName::from_static("x-forwarded-access-token"),
    HeaderName::from_static("x-auth-request-user"),
    HeaderName::from_static("x-auth-request-email"),
    HeaderName::from_static("x-auth-request-groups"),
    HeaderName::from_static("x-auth-request-preferred-username"),
    HeaderName::from_static("x-auth-request-access-token"),
];

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
const X_FORWARDED_USER: HeaderName = HeaderName::from_static("x-forwarded-user");

/// Connection options a request may carry to the backend; every other token of its
/// `Connection` header nominates a hop-by-hop header.
const CONNECTION_OPTIONS: [&str; 3] = ["close", "keep-alive", "upgrade"];

/// Headers whose nomination is ignored: the gateway sets or replaces them, or the
/// request's framing depends on them.
const NOT_HOP_BY_HOP: [&str; 4] = ["host", "content-length", "transfer-encoding", "cookie"];

/// `Connection` tokens read from one request, at most: past this the request is refused.
pub const MAX_CONNECTION_TOKENS: usize = 32;

/// A `Connection` header the gateway does not forward.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionHeaderError {
    #[error("The Connection header names more than {MAX_CONNECTION_TOKENS} options.")]
    TooManyOptions,
    #[error("The Connection header is invalid.")]
    Invalid,
}

/// Settles the client's `Connection` header before pingora builds the backend's request
/// from it: a nominated header is removed here, the nomination of a header the gateway
/// sets is ignored, and only the connection options stay. pingora would otherwise close
/// the connection without an answer on a nomination of `X-Forwarded-For` or `Host`.
pub fn settle_connection_header(req: &mut RequestHeader) -> Result<(), ConnectionHeaderError> {
    let values = req.headers.get_all(http::header::CONNECTION);
    if values.iter().all(|v| is_connection_option(v.as_bytes())) {
        return Ok(());
    }
    let tokens: Vec<String> = values
        .iter()
        .flat_map(|v| v.as_bytes().split(|b| *b == b','))
        .map(|t| String::from_utf8_lossy(t.trim_ascii()).to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .take(MAX_CONNECTION_TOKENS + 1)
        .collect();
    if tokens.len() > MAX_CONNECTION_TOKENS {
        return Err(ConnectionHeaderError::TooManyOptions);
    }
    let mut options: Vec<&str> = Vec::new();
    for token in &tokens {
        if let Some(option) = CONNECTION_OPTIONS.iter().find(|o| *o == token) {
            if !options.contains(option) {
                options.push(option);
            }
        } else if !is_set_by_gateway(token) {
            // A token that is no header name names nothing (RFC 9110 7.6.1 lets it be ignored).
            if let Ok(name) = http::HeaderName::from_bytes(token.as_bytes()) {
                req.remove_header(&name);
            }
        }
    }
    req.remove_header(&http::header::CONNECTION);
    if !options.is_empty() {
        req.insert_header(http::header::CONNECTION, options.join(", "))
            .map_err(|_| ConnectionHeaderError::Invalid)?;
    }
    Ok(())
}

/// A `Connection` value that is one connection option (the usual case: nothing to do).
fn is_connection_option(value: &[u8]) -> bool {
    let value = value.trim_ascii();
    CONNECTION_OPTIONS
        .iter()
        .any(|o| value.eq_ignore_ascii_case(o.as_bytes()))
}

fn is_set_by_gateway(name: &str) -> bool {
    REPLACED.iter().any(|h| h.as_str() == name) || NOT_HOP_BY_HOP.contains(&name)
}

/// Characters escaped in `X-Forwarded-User` (UTF-8 percent-encoding where not plain ASCII).
const USER_ESCAPES: &AsciiSet = &CONTROLS.add(b'%').add(b' ').add(b'"').add(b',').add(b';');

/// Rewrites the request pingora built from the client's into the one the dashboard gets.
pub fn rewrite_request(
    req: &mut RequestHeader,
    forward: &Forward,
    backend_host: &str,
    token: Option<&str>,
    client: Client,
) -> pingora::Result<()> {
    // The normalized target is usually what the client sent, byte for byte.
    if req.raw_path() != forward.path_and_query.as_bytes() {
        let uri = forward.path_and_query.parse::<http::Uri>().map_err(|e| {
            pingora::Error::because(pingora::ErrorType::InternalError, "rewriting the path", e)
        })?;
        req.set_uri(uri);
    }
    let user = forward
        .user
        .as_ref()
        .map(|u| value(utf8_percent_encode(&u.username, USER_ESCAPES).to_string()))
        .transpose()?;
    let proto = HeaderValue::from_static(if client.tls { "https" } else { "http" });
    let set = [
        (AUTHORIZATION, token.map(bearer).transpose()?),
        (X_FORWARDED_FOR, client.ip.map(value).transpose()?),
        (X_FORWARDED_PROTO, Some(proto)),
        (X_FORWARDED_HOST, client.host),
        (X_FORWARDED_USER, user),
    ];
    let accept = forward.accept.as_deref();
    let redact = forward.redact_tokens;
    edit_request(req, |headers| {
        // An insert below replaces the client's value; only the others are removed.
        remove_client_headers(headers, |name| {
            !set.iter().any(|(n, v)| n == name && v.is_some())
        });
        for (name, value) in set {
            if let Some(value) = value {
                headers.insert(name, value);
            }
        }
        if headers.contains_key(COOKIE) {
            let language = language_cookie(headers);
            headers.remove(COOKIE);
            if let Some(language) = language {
                headers.insert(COOKIE, language);
            }
        }
        if let Some(accept) = accept {
            if !carries_only(headers, ACCEPT, accept.as_bytes()) {
                headers.insert(ACCEPT, value(accept.to_string())?);
            }
        }
        headers.insert(HOST, value(backend_host.to_string())?);
        if redact {
            // Read as plain text: a compressed answer could not be checked for tokens.
            headers.remove(ACCEPT_ENCODING);
        }
        Ok(())
    })
}

/// Removes the headers of [`REPLACED`] (those `keep_out` says) and of [`IDENTITY_HEADERS`]
/// from a client's request. One pass over the headers the request has (a handful) instead
/// of a lookup per name (twenty, nearly all absent): callgrind counted about 170
/// instructions a lookup, 2,250 a forwarded request.
fn remove_client_headers(headers: &mut HeaderMap, keep_out: impl Fn(&HeaderName) -> bool) {
    let present: Vec<HeaderName> = headers
        .keys()
        .filter(|name| {
            IDENTITY_HEADERS.contains(name) || (REPLACED.contains(name) && keep_out(name))
        })
        .cloned()
        .collect();
    for name in present {
        headers.remove(name);
    }
}

/// `Bearer <token>` for `Authorization`.
fn bearer(token: &str) -> pingora::Result<HeaderValue> {
    let mut text = String::with_capacity(7 + token.len());
    text.push_str("Bearer ");
    text.push_str(token);
    value(text)
}

/// `text` as a header value, without copying it.
fn value(text: String) -> pingora::Result<HeaderValue> {
    HeaderValue::try_from(text).or_err(InvalidHTTPHeader, "a header value the gateway sets")
}

/// The one client cookie the dashboard reads: the web UI's language, which its index page
/// takes from `cd-lang`. No other client cookie is forwarded: the dashboard prefers a
/// `token` cookie to the gateway's `Authorization`, and Python's cookie parser finds one in
/// any separator it accepts (`a=1 token=X`, quoted values, `,`).
const LANGUAGE_COOKIE: &str = "cd-lang";

/// Longer than any language tag the web UI names.
const MAX_LANGUAGE_LEN: usize = 35;

/// The `Cookie` header the dashboard gets: `cd-lang=<tag>` rebuilt from the client's
/// language cookie when its value is a plain tag (ASCII letters, digits, `-`, `_`), so
/// that no parser can read another cookie out of it; `None`: no cookie at all.
pub fn language_cookie(headers: &HeaderMap) -> Option<HeaderValue> {
    let tag = headers
        .get_all(COOKIE)
        .iter()
        .flat_map(|v| v.as_bytes().split(|b| *b == b';'))
        .filter_map(|pair| {
            let (name, tag) = pair.split_at(pair.iter().position(|b| *b == b'=')?);
            (name.trim_ascii() == LANGUAGE_COOKIE.as_bytes()).then(|| tag[1..].trim_ascii())
        })
        // The dashboard's parser keeps the last of repeated names.
        .next_back()?;
    let plain = |b: &u8| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_';
    if tag.is_empty() || tag.len() > MAX_LANGUAGE_LEN || !tag.iter().all(plain) {
        return None;
    }
    let mut cookie = Vec::with_capacity(LANGUAGE_COOKIE.len() + 1 + tag.len());
    cookie.extend_from_slice(LANGUAGE_COOKIE.as_bytes());
    cookie.push(b'=');
    cookie.extend_from_slice(tag);
    HeaderValue::from_bytes(&cookie).ok()
}

/// Makes a `Location` that names a backend relative, so no manager's own address
/// reaches the client, and drops the dashboard's cookies: the gateway's token cookie is
/// the client's session, and 20.2 sets a CherryPy `session_id` (not HttpOnly, no SameSite)
/// on every answer, which its web UI does not need (tests/it/ui_browser.rs runs it without).
/// An answer to be redacted loses its length: it changes.
pub fn rewrite_response(
    resp: &mut ResponseHeader,
    upstreams: &Upstreams,
    redact_tokens: bool,
) -> pingora::Result<()> {
    resp.remove_header(&SET_COOKIE);
    if redact_tokens {
        resp.remove_header(&CONTENT_LENGTH);
    }
    let Some(location) = resp.headers.get(LOCATION).and_then(|v| v.to_str().ok()) else {
        return Ok(());
    };
    let relative = upstreams.backends().iter().find_map(|b| {
        location.strip_prefix(b.base.as_str()).map(|rest| {
            if rest.starts_with('/') {
                rest.to_string()
            } else {
                format!("/{rest}")
            }
        })
    });
    if let Some(relative) = relative {
        resp.insert_header(LOCATION, relative)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::users::{Grants, Role};

    fn forward(username: &str) -> Forward {
        Forward {
            path_and_query: "/api/pool?stats=true".into(),
            user: Some(Arc::new(User {
                username: username.into(),
                password_hash: None,
                roles: vec![Role::ReadOnly],
                custom_roles: Vec::new(),
                grants: Grants::of(&[Role::ReadOnly]),
                enabled: true,
                provider_subject: None,
                api_key: None,
            })),
            user_token: None,
            seen_as: None,
            redact_tokens: false,
            accept: Some("application/vnd.ceph.api.v1.0+json".into()),
        }
    }

    /// A plain-HTTP client whose address and Host are unknown.
    const UNKNOWN_CLIENT: Client = Client {
        ip: None,
        tls: false,
        host: None,
    };

    fn request() -> RequestHeader {
        let mut req = RequestHeader::build("GET", b"/api//pool/?stats=true", None).unwrap();
        req.insert_header("authorization", "Bearer client-token")
            .unwrap();
        req.append_header("cookie", "a=1; token=client-token")
            .unwrap();
        req.append_header("cookie", "b=2").unwrap();
        req.insert_header("x-forwarded-user", "admin").unwrap();
        req.insert_header("x-forwarded-for", "6.6.6.6").unwrap();
        req.insert_header("accept", "application/vnd.ceph.api.v1.0+json;q=0.9, */*")
            .unwrap();
        req
    }

    /// What `remove_client_headers` replaced: a lookup per name.
    fn remove_client_headers_plain(
        headers: &mut HeaderMap,
        keep_out: impl Fn(&HeaderName) -> bool,
    ) {
        for name in &REPLACED {
            if keep_out(name) {
                headers.remove(name);
            }
        }
        for name in &IDENTITY_HEADERS {
            headers.remove(name);
        }
    }

    #[test]
    fn client_headers_are_removed_as_a_lookup_per_name_removed_them() {
        let names: Vec<HeaderName> = REPLACED
            .iter()
            .chain(&IDENTITY_HEADERS)
            .cloned()
            .chain(["accept", "x-other", "cookie"].map(HeaderName::from_static))
            .collect();
        // Every subset of a sliding window of the names, each present once or twice, with
        // the gateway setting every other one of them.
        for start in 0..names.len() {
            let window = &names[start..(start + 6).min(names.len())];
            for subset in 0..(1u32 << window.len()) {
                let mut headers = HeaderMap::new();
                for (i, name) in window.iter().enumerate() {
                    if subset & (1 << i) != 0 {
                        headers.append(name, HeaderValue::from_static("1"));
                        headers.append(name, HeaderValue::from_static("2"));
                    }
                }
                let set_by_gateway = |name: &HeaderName| name.as_str().len().is_multiple_of(2);
                let keep_out = |name: &HeaderName| !set_by_gateway(name);
                let mut plain = headers.clone();
                remove_client_headers_plain(&mut plain, keep_out);
                remove_client_headers(&mut headers, keep_out);
                assert_eq!(headers, plain, "window {start}, subset {subset:b}");
            }
        }
    }

    #[test]
    fn ip_text_is_what_display_writes() {
        for ip in [
            "0.0.0.0",
            "255.255.255.255",
            "10.0.100.9",
            "192.168.1.10",
            "::1",
            "2001:db8::7",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(ip_text(ip), ip.to_string());
        }
    }

    #[test]
    fn client_credentials_and_forwarded_headers_are_replaced() {
        let mut req = request();
        let client = Client {
            ip: Some("10.1.2.3".into()),
            tls: true,
            host: Some(HeaderValue::from_static("gw.example:8443")),
        };
        rewrite_request(
            &mut req,
            &forward("viewer"),
            "127.0.0.1:18080",
            Some("service-token"),
            client,
        )
        .unwrap();
        let get = |n: &str| req.headers.get(n).map(|v| v.to_str().unwrap().to_string());
        assert_eq!(req.uri.to_string(), "/api/pool?stats=true");
        assert_eq!(
            get("authorization").as_deref(),
            Some("Bearer service-token")
        );
        assert_eq!(
            get("cookie"),
            None,
            "no client cookie reaches the dashboard"
        );
        assert_eq!(get("x-forwarded-user").as_deref(), Some("viewer"));
        assert_eq!(get("x-forwarded-for").as_deref(), Some("10.1.2.3"));
        assert_eq!(get("x-forwarded-proto").as_deref(), Some("https"));
        assert_eq!(get("x-forwarded-host").as_deref(), Some("gw.example:8443"));
        assert_eq!(
            get("accept").as_deref(),
            Some("application/vnd.ceph.api.v1.0+json")
        );
        assert_eq!(get("host").as_deref(), Some("127.0.0.1:18080"));
        assert_eq!(req.headers.get_all("x-forwarded-user").iter().count(), 1);
    }

    /// A 20.2 dashboard in its own OAuth2 mode takes `X-Access-Token` (a JWT it only
    /// decodes) as who asks, and its newer form oauth2-proxy's identity headers: none of a
    /// client's reaches a dashboard (issue 33, item 12).
    #[test]
    fn identity_headers_a_dashboard_would_trust_are_removed() {
        // With the service account's token, and without one (the web UI's files).
        for identity in [true, false] {
            let mut req = request();
            for name in &IDENTITY_HEADERS {
                req.append_header(name.clone(), "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.")
                    .unwrap();
            }
            req.append_header("X-ACCESS-TOKEN", "x").unwrap();
            let token = identity.then_some("service-token");
            rewrite_request(&mut req, &forward("viewer"), "h", token, UNKNOWN_CLIENT).unwrap();
            for name in &IDENTITY_HEADERS {
                assert!(req.headers.get(name).is_none(), "{name}");
            }
        }
    }

    #[test]
    fn non_ascii_users_are_percent_encoded() {
        let mut req = request();
        rewrite_request(
            &mut req,
            &forward("jürgen ops"),
            "h",
            Some("t"),
            UNKNOWN_CLIENT,
        )
        .unwrap();
        assert_eq!(
            req.headers.get("x-forwarded-user").unwrap(),
            "j%C3%BCrgen%20ops"
        );
        assert!(req.headers.get("x-forwarded-for").is_none());
        assert_eq!(req.headers.get("x-forwarded-proto").unwrap(), "http");
    }

    #[test]
    fn an_anonymous_request_gets_no_credentials_and_keeps_its_accept() {
        let mut req = request();
        let anonymous = Forward {
            user: None,
            accept: None,
            ..forward("u")
        };
        rewrite_request(&mut req, &anonymous, "h", None, UNKNOWN_CLIENT).unwrap();
        assert!(req.headers.get("authorization").is_none());
        assert!(req.headers.get("x-forwarded-user").is_none());
        assert_eq!(
            req.headers.get("accept").unwrap(),
            "application/vnd.ceph.api.v1.0+json;q=0.9, */*"
        );
    }

    #[test]
    fn an_absolute_target_with_the_same_path_is_sent_in_origin_form() {
        let mut req =
            RequestHeader::build("GET", b"http://gw.example/api/pool?stats=true", None).unwrap();
        rewrite_request(&mut req, &forward("u"), "h", Some("t"), UNKNOWN_CLIENT).unwrap();
        // pingora writes the request line's target from `raw_path`.
        assert_eq!(req.raw_path(), b"/api/pool?stats=true");
    }

    /// The `Cookie` header the dashboard gets for a client's `cookies`.
    fn forwarded_cookie(cookies: &[&str]) -> Option<String> {
        let mut req = RequestHeader::build("GET", b"/", None).unwrap();
        for cookie in cookies {
            req.append_header("cookie", *cookie).unwrap();
        }
        rewrite_request(&mut req, &forward("u"), "h", Some("t"), UNKNOWN_CLIENT).unwrap();
        req.headers
            .get("cookie")
            .map(|v| v.to_str().unwrap().to_string())
    }

    #[test]
    fn no_spelling_of_a_token_cookie_reaches_the_dashboard() {
        for cookies in [
            &["a=1 token=X"][..],
            &["a=1, token=X"],
            &["a=\"1; token=X\""],
            &["token=X"],
            &[" token =X; b=2"],
            &["a=1", "token=X"],
            &["cd-lang=en token=X"],
            &["cd-lang=\"en\" token=X"],
            &["cd-lang=en,token=X"],
            &["cd-lang=en\ttoken=X"],
        ] {
            let forwarded = forwarded_cookie(cookies);
            assert!(
                forwarded.as_deref().is_none_or(|c| !c.contains("token")),
                "{cookies:?} became {forwarded:?}"
            );
        }
    }

    #[test]
    fn only_the_web_uis_language_cookie_is_forwarded() {
        assert_eq!(
            forwarded_cookie(&["theme=dark; cd-lang=zh-Hans; token=X"]).as_deref(),
            Some("cd-lang=zh-Hans")
        );
        assert_eq!(
            forwarded_cookie(&["a=1", " cd-lang = de-DE "]).as_deref(),
            Some("cd-lang=de-DE")
        );
        assert_eq!(forwarded_cookie(&["a=1; b=2"]), None);
        assert_eq!(forwarded_cookie(&["cd-lang="]), None);
        assert_eq!(forwarded_cookie(&["cd-lang=en.US"]), None);
        assert_eq!(
            forwarded_cookie(&[&format!("cd-lang={}", "a".repeat(36))]),
            None
        );
    }

    fn with_connection(values: &[&str]) -> RequestHeader {
        let mut req = request();
        req.insert_header("x-forwarded-for", "6.6.6.6").unwrap();
        req.insert_header("x-trace", "abc").unwrap();
        for value in values {
            req.append_header("connection", *value).unwrap();
        }
        req
    }

    fn connection(req: &RequestHeader) -> Vec<&str> {
        req.headers
            .get_all("connection")
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect()
    }

    #[test]
    fn a_plain_connection_option_is_left_alone() {
        let mut req = with_connection(&["keep-alive"]);
        settle_connection_header(&mut req).unwrap();
        assert_eq!(connection(&req), ["keep-alive"]);
        assert!(req.headers.contains_key("x-trace"));
    }

    #[test]
    fn nominating_headers_the_gateway_sets_is_ignored_and_others_are_removed() {
        let mut req = with_connection(&[
            "keep-alive, X-Forwarded-User, Authorization",
            "X-Forwarded-For, x-trace, Host, \"quoted\"",
        ]);
        settle_connection_header(&mut req).unwrap();
        assert_eq!(connection(&req), ["keep-alive"]);
        assert!(req.headers.contains_key("authorization"));
        assert!(req.headers.contains_key("x-forwarded-for"));
        assert!(
            !req.headers.contains_key("x-trace"),
            "a nominated header is hop-by-hop"
        );
    }

    #[test]
    fn only_nominations_leave_no_connection_header() {
        let mut req = with_connection(&["x-trace"]);
        settle_connection_header(&mut req).unwrap();
        assert!(connection(&req).is_empty());
        assert!(!req.headers.contains_key("x-trace"));
    }

    #[test]
    fn too_many_connection_tokens_are_a_400() {
        let many = vec!["x-a"; MAX_CONNECTION_TOKENS + 1].join(",");
        let mut req = with_connection(&[&many]);
        let refused = settle_connection_header(&mut req).unwrap_err();
        assert_eq!(refused, ConnectionHeaderError::TooManyOptions);
        let mut req = with_connection(&[&vec!["x-a"; MAX_CONNECTION_TOKENS].join(",")]);
        settle_connection_header(&mut req).unwrap();
    }
}
