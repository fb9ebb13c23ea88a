//! What the audit and access logs make of real logins through `Auth` (the audit's own
//! tests use made-up subjects): no secret reaches a line, and a login the client limit
//! refuses is audited with its 429. Here, not in `observe`, so that the logs never import
//! the auth above them.

use std::net::IpAddr;

use http::Method;

use super::testing::{auth, auth_limited, credentials, post, request, NOW_MS};
use super::{AuthError, AuthRequest, AuthSubject};
use crate::config::LogFormat;
use crate::observe::access_log::tests::{access_lines, forwarded_call};
use crate::observe::access_log::{logged_path, Served};
use crate::observe::audit::{events, line};
use crate::routes::Route;

/// A login carrying a token in its query, headers and cookie and a password in its
/// body: neither the access line (both formats) nor the audit lines show any of them.
#[tokio::test]
async fn no_token_or_password_reaches_a_log_line() {
    const SECRETS: [&str; 4] = [
        "Query-Secret-1",
        "Bearer-Secret-2",
        "Cookie-Secret-3",
        "Pw-Secret-4",
    ];
    let header = {
        let mut h =
            pingora::http::RequestHeader::build("POST", b"/api/auth?token=Query-Secret-1", None)
                .unwrap();
        h.insert_header("authorization", "Bearer Bearer-Secret-2")
            .unwrap();
        h.insert_header("cookie", "token=Cookie-Secret-3").unwrap();
        h.insert_header("accept", "application/vnd.ceph.api.v1.0+json")
            .unwrap();
        h.insert_header("content-type", "application/json").unwrap();
        h
    };
    let auth = auth();
    for (password, locks) in [
        ("Pw-Secret-4", false),
        ("Pw-Secret-4", false),
        ("Pw-Secret-4", true),
    ] {
        let request = AuthRequest::of(
            &header,
            credentials("admin", password).into(),
            None,
            crate::users::RoleEdition::Pacific,
        );
        let mut subject = AuthSubject::default();
        let status = match auth.login(&request, NOW_MS, &mut subject).await {
            Ok(response) => response.status,
            Err(e) => refused_status(e),
        };
        assert_eq!((status, subject.locked), (400, locks));
        let served = Served {
            route: Route::Login,
            method: &header.method,
            path: logged_path("", &header.uri),
            operation: "auth",
            user: None,
            backend: None,
            status,
            ..forwarded_call(&header.method)
        };
        let mut text = String::new();
        for format in [LogFormat::Text, LogFormat::Json] {
            text += &access_lines(format, "trace", &served);
        }
        for (event, user) in events(&served, &subject) {
            text += &String::from_utf8(line(&served, event, user, &subject)).unwrap();
        }
        assert!(
            text.contains("\"event\":\"login\"") && text.contains("/api/auth"),
            "{text}"
        );
        for secret in SECRETS {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
}

/// A login the client's limit refuses (429) is a failed login, with the username tried
/// and the client the limit counted.
#[tokio::test]
async fn a_login_refused_by_the_client_limit_is_audited_with_its_429() {
    let auth = auth_limited(crate::state::BucketRate {
        burst: 1,
        refill_ms: 60_000,
    });
    let headers = post("application/vnd.ceph.api.v1.0+json");
    let client = IpAddr::from([192, 0, 2, 7]);
    let mut statuses = Vec::new();
    for password in ["wrong", "pw"] {
        let mut req = request(&headers, credentials("admin", password));
        req.client = Some(client);
        let mut subject = AuthSubject::default();
        let status = match auth.login(&req, NOW_MS, &mut subject).await {
            Ok(response) => response.status,
            Err(e) => refused_status(e),
        };
        statuses.push(status);
        let served = Served {
            route: Route::Login,
            operation: "auth",
            path: "/api/auth",
            user: None,
            backend: None,
            client: Some(client),
            status,
            ..forwarded_call(&Method::POST)
        };
        let lines: Vec<serde_json::Value> = events(&served, &subject)
            .map(|(event, user)| {
                serde_json::from_slice(&line(&served, event, user, &subject)).unwrap()
            })
            .collect();
        assert_eq!(lines.len(), 1, "{lines:?}");
        let fields = ["event", "user", "client", "result"].map(|key| lines[0][key].clone());
        assert_eq!(
            fields,
            [
                "login".into(),
                "admin".into(),
                "192.0.2.7".into(),
                serde_json::Value::from(status)
            ]
        );
    }
    assert_eq!(statuses, [400, 429]);
}

/// The status `error_answers` (above this module) answers a refused login with.
fn refused_status(e: AuthError) -> u16 {
    match e {
        AuthError::InvalidCredentials => 400,
        AuthError::RateLimited { .. } => 429,
        other => panic!("not a refused login: {other}"),
    }
}
