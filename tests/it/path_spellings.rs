//! Spellings of a guarded path never bypass authentication or roles. `/api/settings` and
//! `/api/cluster_conf` need `config-opt`, which read-only users lack. Every spelling is sent
//! as a raw request target (clients normalize; attackers do not) without a token, as the
//! viewer and as the admin, and the same target goes straight to the real dashboard to
//! learn which spellings it serves as the guarded resource.

use crate::common::*;

/// Spellings the dashboard serves as the guarded path, or that normalize to it.
const SAME_RESOURCE: [&str; 27] = [
    "/api/settings",
    "/api/%73ettings",
    "/api/set%74ings",
    "/api/%73%65ttings",
    "/%61pi/settings",
    "/api/%2e/settings",
    "/api/%2E/settings",
    "/api/./settings",
    "/./api/settings",
    "/api/x/../settings",
    "/api/x/%2e%2e/settings",
    "/api/../api/settings",
    "/api/pool/../settings",
    "/api/settings/x/..",
    "/api/settings/.",
    "/api/settings/%2e",
    "/api//settings",
    "/api///settings",
    "/api/settings/",
    "/api/settings//",
    "//api/settings",
    "/api/cluster_conf",
    "/api/cluster%5Fconf",
    "/api/cluster_conf/",
    "/api//cluster_conf",
    "/api/cluster_conf/.",
    "/api/x/../cluster_conf",
];

/// Spellings that cannot be normalized safely (an encoded backslash, controls, invalid or
/// overlong UTF-8, bad escapes, climbing above the root): 400 before anything else.
const REFUSED: [&str; 13] = [
    "/api/settings%5C",
    "/api%5Csettings",
    "/api\\settings",
    "/api/settings%00",
    "/api/settings%0A",
    "/api/settings%09",
    "/api/settings%FF",
    "/api/settings%C3%28",
    "/api/settings%zz",
    "/api/settings%4",
    "/api/../../settings",
    "/../api/settings",
    "/api/x/%C0%AE%C0%AE/settings",
];

/// Spellings the dashboard does not serve as the guarded path (case, `;` parameters,
/// double encoding, look-alike letters, other names, an encoded `/` its server keeps
/// encoded within the segment): 404 with a token, never the guarded resource.
const OTHER_RESOURCE: [&str; 19] = [
    "/api/settings%2F",
    "/api/settings%2f",
    "/api/cluster_conf%2F",
    "/API/settings",
    "/api/Settings",
    "/api/%53ettings",
    "/api/SETTINGS",
    "/api/settings;x=1",
    "/api;x/settings",
    "/api/settings%3Bx",
    "/api/%2573ettings",
    "/api/settings%20",
    "/api/settings.json",
    "/api/settings.",
    "/api/settings~",
    "/api/cluster_conf;a",
    "/api/cluster_conf.json",
    "/api/%EF%BD%93ettings",
    "/api/x/%252e%252e/settings",
];

/// Odd targets only held to the invariant: never 2xx without a token or for the viewer.
/// (An absolute-form target naming another host than `Host` gets pingora's bare 400.)
const ODD: [&str; 7] = [
    "/api%2Fsettings",
    "http://cg-test.invalid/api/settings",
    "/api/settings?x=1",
    "/api/settings#x",
    "/api/settings/..",
    "/api/settings/%2e%2e",
    "/api/settings?%2F",
];

struct Tokens {
    viewer: String,
    admin: String,
    dash_admin: String,
}

async fn setup() -> (&'static Dashboard, RunningGateway, Tokens) {
    let dash = Dashboard::shared();
    let gw = Gateway::with_dashboard_users().upstream(dash).start();
    let tokens = Tokens {
        viewer: gw.login(VIEWER, VIEWER_PW).await,
        admin: gw.login(ADMIN, ADMIN_PW).await,
        dash_admin: dash.login(ADMIN).await,
    };
    (dash, gw, tokens)
}

fn get(gw: &RunningGateway, target: &str, token: Option<&str>) -> Reply {
    gw.raw_request("GET", target, token, &[], b"")
}

fn is_success(r: &Reply) -> bool {
    (200..300).contains(&r.status)
}

/// Whether an answer is the guarded resource itself (settings or config options list).
fn serves_guarded(r: &Reply) -> bool {
    is_success(r)
        && serde_json::from_slice::<serde_json::Value>(&r.body)
            .is_ok_and(|v| v.as_array().is_some_and(|a| !a.is_empty()))
}

#[tokio::test]
async fn no_spelling_is_served_without_a_token_or_to_a_viewer() {
    let (_dash, gw, t) = setup().await;
    let all = SAME_RESOURCE
        .iter()
        .chain(&REFUSED)
        .chain(&OTHER_RESOURCE)
        .chain(&ODD);
    let mut seen = Vec::new();
    for target in all {
        let anonymous = get(&gw, target, None);
        let viewer = get(&gw, target, Some(&t.viewer));
        assert!(
            !is_success(&anonymous),
            "{target} without a token: {}",
            anonymous.text()
        );
        assert!(
            !is_success(&viewer),
            "{target} as viewer: {}",
            viewer.text()
        );
        seen.push(format!(
            "{target:40} none {} viewer {}",
            anonymous.status, viewer.status
        ));
    }
    println!("{}", seen.join("\n"));
}

#[tokio::test]
async fn spellings_of_the_guarded_path_get_its_checks_and_its_answer() {
    let (dash, gw, t) = setup().await;
    // The absolute form (RFC 9112 3.2.2), which the dashboard serves too.
    let absolute = format!("http://{}/api/settings", gw.addr);
    for target in SAME_RESOURCE.iter().copied().chain([absolute.as_str()]) {
        let anonymous = get(&gw, target, None);
        assert_eq!(
            anonymous.status,
            401,
            "{target} without a token: {}",
            anonymous.text()
        );
        assert_unauthorized(&anonymous);
        let viewer = get(&gw, target, Some(&t.viewer));
        assert_eq!(viewer.status, 403, "{target} as viewer: {}", viewer.text());
        assert_forbidden(&viewer);
        let admin = get(&gw, target, Some(&t.admin));
        assert!(
            serves_guarded(&admin),
            "{target} as admin: {} {}",
            admin.status,
            admin.text()
        );
    }
    // Where the dashboard serves a spelling itself, the gateway's answer is the same one.
    for target in [
        "/api/%73ettings",
        "/api//settings",
        "/api/settings/",
        "/api/cluster%5Fconf",
    ] {
        let direct = dash.raw_request("GET", target, Some(&t.dash_admin), b"");
        assert!(
            serves_guarded(&direct),
            "{target} direct: {}",
            direct.status
        );
        let via = get(&gw, target, Some(&t.admin));
        assert_eq!(
            json_shape(&via.json()),
            json_shape(&direct.json()),
            "{target}"
        );
    }
    // Writes through a spelling are refused as the plain write is.
    for target in ["/api/%73ettings", "/api/x/../settings", "/api/settings/"] {
        let r = gw.raw_request(
            "PUT",
            target,
            Some(&t.viewer),
            &[("Content-Type", "application/json")],
            b"{}",
        );
        assert_forbidden(&r);
    }
}

#[tokio::test]
async fn spellings_that_cannot_be_normalized_get_400_and_never_reach_the_backend() {
    let (_dash, gw, t) = setup().await;
    let before = gw.upstream_requests().await;
    for target in REFUSED {
        for (who, token) in [
            ("no token", None),
            ("viewer", Some(&t.viewer)),
            ("admin", Some(&t.admin)),
        ] {
            let r = get(&gw, target, token.map(String::as_str));
            assert_eq!(r.status, 400, "{target} ({who}): {}", r.text());
            assert_invalid_path(&r);
            let detail = r.json()["detail"].as_str().unwrap().to_string();
            assert!(detail.contains("path"), "{target} ({who}): {detail}");
        }
    }
    assert_eq!(
        before,
        gw.upstream_requests().await,
        "a refused spelling reached the backend"
    );
}

#[tokio::test]
async fn spellings_the_dashboard_does_not_serve_as_the_guarded_path_are_not_served_either() {
    let (dash, gw, t) = setup().await;
    for target in OTHER_RESOURCE {
        // The premise: the dashboard itself does not take it for the guarded path.
        let direct = dash.raw_request("GET", target, Some(&t.dash_admin), b"");
        assert!(
            !serves_guarded(&direct),
            "the dashboard serves {target}: the gateway must guard it"
        );
        let anonymous = get(&gw, target, None);
        assert!(
            matches!(anonymous.status, 401 | 404),
            "{target} without a token: {} {}",
            anonymous.status,
            anonymous.text()
        );
        for (who, token) in [("viewer", &t.viewer), ("admin", &t.admin)] {
            let r = get(&gw, target, Some(token));
            assert_eq!(r.status, 404, "{target} ({who}): {}", r.text());
            assert!(!serves_guarded(&r), "{target} ({who})");
        }
    }
}

#[tokio::test]
async fn method_spellings_do_not_weaken_the_role_check() {
    // The dashboard refuses lowercase methods itself (400): a gateway that checks them as
    // "read" and forwards them relies on that, with its administrator service account.
    let (dash, gw, t) = setup().await;
    let writes = [
        ("delete", "/api/user/cg-test-nonexistent"),
        ("Delete", "/api/user/cg-test-nonexistent"),
        ("post", "/api/pool"),
        ("pOST", "/api/pool"),
        ("put", "/api/pool/cg-test-nonexistent"),
        ("patch", "/api/pool/cg-test-nonexistent"),
    ];
    for (method, target) in writes {
        let direct = dash.raw_request(method, target, Some(&t.dash_admin), b"{}");
        assert!(!is_success(&direct), "the dashboard runs {method} {target}");
        let before = gw.upstream_requests().await;
        let r = gw.raw_request(
            method,
            target,
            Some(&t.viewer),
            &[("Content-Type", "application/json")],
            b"{}",
        );
        let after = gw.upstream_requests().await;
        assert!(!is_success(&r), "viewer {method} {target}: {}", r.text());
        assert!(
            matches!(r.status, 400 | 403 | 405 | 501),
            "viewer {method} {target}: {} {}",
            r.status,
            r.text()
        );
        assert_eq!(
            before,
            after,
            "viewer {method} {target} was forwarded to the backend (answer {} {})",
            r.status,
            r.text()
        );
    }
}
