//! The login and token-check bodies, and the credentials in headers (`auth::request`,
//! `auth::password_login`, `auth::check`): real bodies mutated byte by byte and JSON objects
//! generated field by field, answered as a model of the endpoints says. Never a panic,
//! never a 5xx: a login is 201 exactly for the right credentials and 400 or 415
//! otherwise; a token check is 200 with one of its two bodies, or 400 for a body that is
//! not a JSON object with a string token.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::cases;
use super::mutate::{Corpus, Mutant};
use crate::auth::request::client_token;
use crate::auth::testing::{auth_without_lockout, body_of, NOW, NOW_MS};
use crate::auth::{Auth, AuthRequest, AuthSubject};
use crate::errors::GatewayError;

/// The endpoints' shared state, and tokens it issued.
struct Fixture {
    auth: Arc<Auth>,
    admin: String,
    viewer: String,
    disabled: String,
    expired: String,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        // Lockout is a policy, not a parser: with it, the generated wrong passwords would
        // lock the users out and the right one be refused.
        let auth = auth_without_lockout();
        let issue = |name: &str, now| crate::auth::testing::token_for(&auth, name, now);
        Fixture {
            admin: issue("admin", NOW),
            viewer: issue("viewer", NOW),
            disabled: issue("disabled", NOW),
            expired: issue("admin", NOW - 9 * 3600),
            auth,
        }
    })
}

impl Fixture {
    /// The user a token is valid for.
    fn user_of(&self, token: &str) -> Option<&'static str> {
        if token == self.admin {
            Some("admin")
        } else if token == self.viewer {
            Some("viewer")
        } else {
            None
        }
    }
}

fn block_on<F: Future>(future: F) -> F::Output {
    thread_local! {
        static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
    }
    RUNTIME.with(|runtime| runtime.block_on(future))
}

fn headers(accept: &str, content_type: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::ACCEPT,
        HeaderValue::from_str(accept).expect("a header"),
    );
    if let Some(content_type) = content_type {
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_str(content_type).expect("a header"),
        );
    }
    headers
}

const JSON_DICTIONARY: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\\",
    "\\u0000",
    "\\ud800",
    "\\u0061",
    "null",
    "true",
    "1e999",
    "-0",
    "\"username\"",
    "\"password\"",
    "\"token\"",
    "\"admin\"",
    "\"pw\"",
    " ",
    "\u{feff}",
    "\u{ff}",
];

/// Login bodies: what the dashboard's web UI and scripts send, and near misses.
fn login_corpus() -> Corpus {
    Corpus::new(
        [
            r#"{"username":"admin","password":"pw"}"#,
            r#"{"username": "viewer", "password": "pw", "stay_signed_in": false}"#,
            "{\n  \"username\": \"admin\",\n  \"password\": \"pw\"\n}\n",
            r#"{"password":"pw","username":"admin"}"#,
            r#"{"username":"\u0061dmin","password":"p\u0077"}"#,
            r#"{"username":"admin","password":"wrong"}"#,
            r#"{"username":"disabled","password":"pw"}"#,
            r#"{"username":1,"password":"pw"}"#,
            r#"{"username":"admin"}"#,
            "{}",
            "[]",
            "null",
            "",
        ],
        JSON_DICTIONARY,
    )
}

/// Login objects generated field by field.
fn login_object() -> impl Strategy<Value = Bytes> {
    use prop::sample::select;
    let value = prop_oneof![
        4 => select(&["admin", "viewer", "disabled", "pw", "", "Admin", "admin ", "nobody"][..]).prop_map(|s| json!(s)),
        1 => select(vec![json!(null), json!(1), json!(true), json!(["admin"]), json!({"a": "pw"})]),
    ];
    let field = select(
        &[
            "username",
            "password",
            "stay_signed_in",
            "Username",
            "token",
        ][..],
    );
    prop::collection::vec((field, value), 0..5).prop_map(|fields| {
        let object: Map<String, Value> = fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        Bytes::from(Value::Object(object).to_string())
    })
}

/// The user a login body must log in: a JSON object with the right string credentials.
fn login_model(body: &[u8]) -> Option<String> {
    let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body) else {
        return None;
    };
    match (fields.get("username"), fields.get("password")) {
        (Some(Value::String(user)), Some(Value::String(password)))
            if matches!(user.as_str(), "admin" | "viewer") && password == "pw" =>
        {
            Some(user.clone())
        }
        _ => None,
    }
}

/// Request headers a login may come with: (Accept, Content-Type, the Accept is one the
/// endpoint serves, the Content-Type is JSON).
const LOGIN_HEADERS: &[(&str, Option<&str>, bool, bool)] = &[
    (
        "application/vnd.ceph.api.v1.0+json",
        Some("application/json"),
        true,
        true,
    ),
    (
        "application/vnd.ceph.api.v1.0+json",
        Some("application/json; charset=utf-8"),
        true,
        true,
    ),
    (
        "application/vnd.ceph.api.v1.0+json",
        Some("text/javascript"),
        true,
        true,
    ),
    (
        "application/vnd.ceph.api.v1.0+json",
        Some("application/x-www-form-urlencoded"),
        true,
        false,
    ),
    ("application/vnd.ceph.api.v1.0+json", None, true, false),
    ("*/*", Some("application/json"), false, true),
    (
        "application/vnd.ceph.api.v2.0+json",
        Some("application/json"),
        false,
        true,
    ),
];

/// Token-check bodies, with tokens the gateway issued.
fn check_corpus(f: &Fixture) -> Corpus {
    let with = |token: &str| format!(r#"{{"token":"{token}"}}"#);
    Corpus::new(
        [
            with(&f.admin),
            with(&f.viewer),
            with(&f.disabled),
            with(&f.expired),
            format!(r#"{{"token": "{}", "extra": [1, 2]}}"#, f.admin),
            r#"{"token":null}"#.into(),
            r#"{"token":""}"#.into(),
            r#"{"token":"garbage"}"#.into(),
            r#"{"token":7}"#.into(),
            "{}".into(),
            String::new(),
        ],
        JSON_DICTIONARY,
    )
}

/// The token a check reads: the body's (a JSON object's string `token`), else the
/// query's. `Err`: the body is refused with 400.
fn check_model(body: &[u8], query_token: Option<&str>) -> Result<Option<String>, ()> {
    let body_token = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(fields)) => match fields.get("token") {
                Some(Value::String(token)) => Some(token.clone()),
                None | Some(Value::Null) => None,
                Some(_) => return Err(()),
            },
            _ => return Err(()),
        }
    };
    Ok(body_token.or(query_token.map(str::to_string)))
}

/// Queries a check may come with, and the token each carries.
fn check_query(f: &'static Fixture) -> impl Strategy<Value = (Option<String>, Option<String>)> {
    prop::sample::select(vec![
        (None, None),
        (Some(format!("token={}", f.admin)), Some(f.admin.clone())),
        (
            Some(format!("a=1&token={}", f.viewer)),
            Some(f.viewer.clone()),
        ),
        (
            Some(format!("token={}", f.admin.replace('.', "%2E"))),
            Some(f.admin.clone()),
        ),
        (Some("token=garbage".into()), Some("garbage".into())),
        (Some(format!("tok={}", f.admin)), None),
    ])
}

fn credential_corpus(f: &Fixture, seeds: &[&str]) -> Corpus {
    let seeds = seeds
        .iter()
        .map(|s| s.replace("ADMIN", &f.admin).replace("VIEWER", &f.viewer));
    Corpus::new(
        seeds,
        &[" ", ";", "=", "\"", "Bearer ", "token=", ",", "\t"],
    )
}

proptest! {
    #![proptest_config(cases(600))]

    /// Login bodies (mutated real ones, generated objects, arbitrary bytes) under the
    /// headers clients send: 201 with a token for exactly the right credentials, else
    /// 415 for a wrong Accept or a body not declared as JSON, else 400.
    #[test]
    fn login_answers_201_exactly_for_the_right_credentials_else_400_or_415(
        body in prop_oneof![
            3 => login_corpus().mutants().prop_map(|m: Mutant| m.input),
            2 => login_object(),
            1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Bytes::from),
        ],
        (accept, content_type, accept_ok, json_type) in prop_oneof![
            4 => Just(LOGIN_HEADERS[0]),
            1 => prop::sample::select(LOGIN_HEADERS),
        ],
    ) {
        let f = fixture();
        let headers = headers(accept, content_type);
        let blank = body.iter().all(u8::is_ascii_whitespace);
        let expected = match (accept_ok, blank, json_type) {
            (false, _, _) => Err(415),
            (true, true, _) => Err(400),
            (true, false, false) => Err(415),
            (true, false, true) => login_model(&body).ok_or(400),
        };
        let req = AuthRequest { headers: &headers, query: None, body: body.clone(), client: None, edition: crate::users::RoleEdition::Pacific };
        match (block_on(f.auth.login(&req, NOW_MS, &mut AuthSubject::default())), expected) {
            (Ok(response), Ok(user)) => {
                prop_assert_eq!(response.status, 201);
                let answer = body_of(&response);
                prop_assert_eq!(&answer["username"], &json!(user));
                let token = answer["token"].as_str().unwrap_or_default();
                let claims = f.auth.tokens.load().verify(token, NOW);
                prop_assert_eq!(claims.map(|c| c.username.clone()), Ok(user));
            }
            (Err(e), Err(status)) => prop_assert_eq!(GatewayError::from(e).status(), status),
            (answer, expected) => prop_assert!(false, "{:?} answered {:?}, expected {:?}", body, answer.map(|r| r.status), expected),
        }
    }
}

proptest! {
    #![proptest_config(cases(1000))]

    /// Token-check bodies (mutated real ones, arbitrary bytes) and queries: 200 with the
    /// user of a valid token, or the login-url body; 400 for a body that is not a JSON
    /// object or whose token is not a string.
    #[test]
    fn token_check_answers_the_tokens_user_or_the_login_url(
        body in prop_oneof![
            4 => check_corpus(fixture()).mutants().prop_map(|m: Mutant| m.input),
            1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Bytes::from),
        ],
        (query, query_token) in check_query(fixture()),
        accept in prop::sample::select(&["*/*", "application/vnd.ceph.api.v1.0+json"][..]),
    ) {
        let f = fixture();
        let headers = headers(accept, Some("application/json"));
        let req = AuthRequest { headers: &headers, query: query.as_deref(), body: body.clone(), client: None, edition: crate::users::RoleEdition::Pacific };
        let answer = block_on(f.auth.check(&req, NOW, true));
        match (answer, check_model(&body, query_token.as_deref())) {
            (Ok(response), Ok(token)) => {
                prop_assert_eq!(response.status, 200);
                let expected = match token.as_deref().and_then(|t| f.user_of(t)) {
                    Some(user) => json!(user),
                    None => Value::Null,
                };
                let answer = body_of(&response);
                prop_assert_eq!(&answer["username"], &expected);
                if expected.is_null() {
                    prop_assert_eq!(answer, json!({"login_url": "#/login", "cluster_status": "POST_INSTALLED"}));
                }
            }
            (Err(e), Err(())) => prop_assert_eq!(GatewayError::from(e).status(), 400),
            (answer, expected) => prop_assert!(false, "{:?} answered {:?}, expected {:?}", body, answer.map(|r| r.status), expected),
        }
    }

    /// Authorization and Cookie headers, mutated: the credential found is a non-empty
    /// part of one of them (a quoted cookie keeps its inner spaces, as the dashboard's
    /// cookie parser does), and a request is authenticated exactly when it is a valid
    /// token; otherwise 401.
    #[test]
    fn credentials_in_headers_authenticate_only_a_valid_token(
        authorization in credential_corpus(fixture(), &["Bearer ADMIN", "bearer   VIEWER ", "Basic eDp5", "Bearer", ""]).mutants(),
        cookie in credential_corpus(fixture(), &["token=ADMIN", "a=1; token=VIEWER; c=2", "token=\"ADMIN\"", "token=", ""]).mutants(),
    ) {
        let f = fixture();
        let mut headers = HeaderMap::new();
        for (name, value) in [(http::header::AUTHORIZATION, &authorization.input), (http::header::COOKIE, &cookie.input)] {
            // What HTTP cannot carry (a line break, a NUL) never reaches the parser.
            if let Ok(value) = HeaderValue::from_bytes(value) {
                headers.insert(name, value);
            }
        }
        let found = client_token(&headers);
        if let Some(token) = found {
            prop_assert!(!token.is_empty());
            prop_assert!(headers.values().any(|v| v.to_str().is_ok_and(|v| v.contains(token))));
        }
        let user = found.and_then(|t| f.user_of(t));
        match block_on(f.auth.authenticate(&headers, None, NOW)) {
            Ok(authenticated) => prop_assert_eq!(Some(authenticated.user.username.as_str()), user),
            Err(e) => {
                prop_assert_eq!(GatewayError::from(e).status(), 401);
                prop_assert_eq!(user, None);
            }
        }
    }
}
