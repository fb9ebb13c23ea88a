//! What the auth endpoints read from a request: headers, the query, the body. Kept apart
//! from pingora's session so handlers can be tested with plain values.

use std::borrow::Cow;
use std::net::IpAddr;

use bytes::Bytes;
use http::HeaderMap;
use serde_json::{Map, Value};

use super::AuthError;
use crate::users::RoleEdition;

/// The name of the cookie that carries the token, as on the dashboard.
pub const TOKEN_COOKIE: &str = "token";

pub struct AuthRequest<'a> {
    pub headers: &'a HeaderMap,
    pub query: Option<&'a str>,
    pub body: Bytes,
    /// Who sent it (see `client_addr`); `None` when the connection has no IP peer.
    pub client: Option<IpAddr>,
    /// The system roles of the active manager's release, for the `permissions` answered.
    pub edition: RoleEdition,
}

impl<'a> AuthRequest<'a> {
    pub fn of(
        header: &'a pingora::http::RequestHeader,
        body: Bytes,
        client: Option<IpAddr>,
        edition: RoleEdition,
    ) -> Self {
        AuthRequest {
            headers: &header.headers,
            query: header.uri.query(),
            body,
            client,
            edition,
        }
    }

    /// A field of an `application/x-www-form-urlencoded` body.
    pub fn form_param(&self, name: &str) -> Option<String> {
        form_urlencoded_value(&self.body, name)
    }

    /// The value of cookie `name`.
    pub fn cookie(&self, name: &str) -> Option<&'a str> {
        cookie(self.headers, name)
    }

    /// The Accept header, its repeated lines joined into one list.
    pub fn accept(&self) -> Option<Cow<'a, str>> {
        crate::edge::request::joined_header(self.headers, http::header::ACCEPT)
    }

    /// The client's token: an `Authorization: Bearer` header wins over the `token`
    /// cookie (the dashboard prefers the cookie, so a stale cookie breaks a valid header).
    pub fn credential(&self) -> Option<&'a str> {
        client_token(self.headers)
    }

    /// The body as a JSON object; `Ok(None)` when there is no body. A body that is not
    /// declared as JSON is refused with 415, as the dashboard does.
    pub fn json_object(&self) -> Result<Option<Map<String, Value>>, AuthError> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        if !is_json_content_type(header_str(self.headers, http::header::CONTENT_TYPE)) {
            return Err(AuthError::NotJson);
        }
        match serde_json::from_slice::<Value>(&self.body) {
            Ok(Value::Object(map)) => Ok(Some(map)),
            Ok(_) => Err(AuthError::bad_request(
                "The request body must be a JSON object.",
            )),
            Err(e) => Err(AuthError::bad_request(format!(
                "Invalid JSON document: {e}."
            ))),
        }
    }

    /// A query parameter, percent-decoded.
    pub fn query_param(&self, name: &str) -> Option<Cow<'a, str>> {
        self.query?
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| percent_encoding::percent_decode_str(v).decode_utf8().ok())
    }
}

/// A field of a form body (`+` is a space there), percent-decoded.
fn form_urlencoded_value(body: &[u8], name: &str) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    text.split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == name)
        .and_then(|(_, v)| {
            let spaced = v.replace('+', " ");
            percent_encoding::percent_decode_str(&spaced)
                .decode_utf8()
                .ok()
                .map(|v| v.into_owned())
        })
}

/// A required string field of a JSON body.
pub fn string_field(body: &Map<String, Value>, name: &str) -> Result<String, AuthError> {
    match body.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(AuthError::bad_request(format!(
            "Field '{name}' must be a string."
        ))),
        None => Err(AuthError::bad_request(format!("Missing field: {name}."))),
    }
}

/// The seconds a login's optional `ttl` asks for: whole hours, as the dashboard reads it
/// since 20.2 (`int(ttl)`: a number, truncated, a numeral, `true`; `null` for none). Where
/// the dashboard answers 500 (`"x"`, a list) or issues a token already expired (0 or
/// fewer hours), the gateway answers 400.
pub fn ttl_field(body: &Map<String, Value>) -> Result<Option<u64>, AuthError> {
    let hours = match body.get("ttl") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Bool(b)) => Some(i64::from(*b)),
        // (truncated toward zero, as Python's int())
        Some(Value::Number(n)) => n.as_i64().or_else(|| n.as_f64().map(|f| f.trunc() as i64)),
        Some(Value::String(s)) => s.trim().parse::<i64>().ok(),
        Some(_) => None,
    };
    match hours {
        Some(hours) if hours > 0 => {
            Ok(Some(u64::try_from(hours).unwrap_or(0).saturating_mul(3600)))
        }
        _ => Err(AuthError::bad_request(
            "Field 'ttl' must be a whole number of hours, at least 1.",
        )),
    }
}

/// See [`AuthRequest::credential`].
pub fn client_token(headers: &HeaderMap) -> Option<&str> {
    bearer_token(headers).or_else(|| cookie(headers, TOKEN_COOKIE))
}

fn header_str(headers: &HeaderMap, name: http::header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(http::header::AUTHORIZATION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.trim().split_once(' '))
        .find(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|t| !t.is_empty())
}

fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim().trim_matches('"'))
        .filter(|v| !v.is_empty())
}

/// `application/json` or `text/javascript`, parameters allowed (the dashboard wants the
/// bare type; `; charset=utf-8` is common and harmless).
fn is_json_content_type(value: Option<&str>) -> bool {
    value
        .and_then(|v| v.split(';').next())
        .map(str::trim)
        .is_some_and(|t| {
            t.eq_ignore_ascii_case("application/json") || t.eq_ignore_ascii_case("text/javascript")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                http::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn bearer_header_wins_over_cookie() {
        let h = headers(&[("authorization", "Bearer aaa"), ("cookie", "token=bbb")]);
        assert_eq!(client_token(&h), Some("aaa"));
    }

    #[test]
    fn cookie_is_used_without_a_bearer_header() {
        let h = headers(&[
            ("authorization", "Basic eDp5"),
            ("cookie", "a=1; token=bbb; c=2"),
        ]);
        assert_eq!(client_token(&h), Some("bbb"));
    }

    #[test]
    fn bearer_scheme_is_case_insensitive_and_empty_tokens_are_none() {
        assert_eq!(
            client_token(&headers(&[("authorization", "bEaReR xyz")])),
            Some("xyz")
        );
        assert_eq!(client_token(&headers(&[("authorization", "Bearer")])), None);
        assert_eq!(
            client_token(&headers(&[("authorization", "Bearer   ")])),
            None
        );
        assert_eq!(client_token(&headers(&[("cookie", "token=")])), None);
    }

    fn request<'a>(h: &'a HeaderMap, query: Option<&'a str>, body: &str) -> AuthRequest<'a> {
        AuthRequest {
            headers: h,
            query,
            body: Bytes::from(body.to_string()),
            client: None,
            edition: crate::users::RoleEdition::Pacific,
        }
    }

    #[test]
    fn json_object_needs_a_json_content_type_when_there_is_a_body() {
        let none = HeaderMap::new();
        assert!(request(&none, None, "").json_object().unwrap().is_none());
        assert!(matches!(
            request(&none, None, "{}").json_object(),
            Err(AuthError::NotJson)
        ));
        let form = headers(&[("content-type", "application/x-www-form-urlencoded")]);
        assert!(matches!(
            request(&form, None, "a=b").json_object(),
            Err(AuthError::NotJson)
        ));
        let json = headers(&[("content-type", "application/json; charset=utf-8")]);
        assert!(request(&json, None, r#"{"a":1}"#)
            .json_object()
            .unwrap()
            .is_some());
        assert!(matches!(
            request(&json, None, "[1]").json_object(),
            Err(AuthError::BadRequest(_))
        ));
        assert!(matches!(
            request(&json, None, "{").json_object(),
            Err(AuthError::BadRequest(_))
        ));
    }

    #[test]
    fn query_params_are_percent_decoded() {
        let h = HeaderMap::new();
        let r = request(&h, Some("a=1&token=x%2Ey"), "");
        assert_eq!(r.query_param("token").as_deref(), Some("x.y"));
        assert_eq!(r.query_param("missing"), None);
    }

    #[test]
    fn string_field_explains_what_is_wrong() {
        let map: Map<String, Value> = serde_json::from_str(r#"{"username": 123}"#).unwrap();
        let e = string_field(&map, "username").unwrap_err();
        assert_eq!(e.to_string(), "Field 'username' must be a string.");
        let e = string_field(&map, "password").unwrap_err();
        assert_eq!(e.to_string(), "Missing field: password.");
    }
}
