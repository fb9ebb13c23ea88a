//! Forwarding to the real (shared) Ceph dashboard: the backend's answers reach the client as
//! the dashboard gives them, refusals are decided at the edge without reaching it, versions
//! are negotiated, the active manager's own errors pass through, and bodies are bounded.

use crate::common::*;
use reqwest::Method;
use serde_json::json;

const READ_PATHS: [&str; 5] = [
    "/api/health/minimal",
    "/api/summary",
    "/api/pool",
    "/api/host",
    "/api/monitor",
];

fn gateway(dash: &Dashboard) -> Gateway {
    Gateway::with_dashboard_users().upstream(dash)
}

#[tokio::test]
async fn admin_and_viewer_get_the_backends_status_type_and_json_for_read_paths() {
    let dash = Dashboard::shared();
    let gw = gateway(dash).start();
    for (user, password) in [(ADMIN, ADMIN_PW), (VIEWER, VIEWER_PW)] {
        let token = gw.login(user, password).await;
        let direct_token = dash.login(user).await;
        for path in READ_PATHS {
            let via = gw.api(Method::GET, path, Some(&token), None).await;
            let direct = dash
                .send(Method::GET, path, Some(&direct_token), V1, None)
                .await;
            let what = format!("{user} GET {path}");
            assert_eq!(direct.status, 200, "{what} (direct): {}", direct.text());
            assert_eq!(via.status, direct.status, "{what}: {}", via.text());
            assert_eq!(via.content_type(), direct.content_type(), "{what}");
            assert_eq!(
                json_shape(&via.json()),
                json_shape(&direct.json()),
                "{what}: JSON keys differ\nvia gateway: {}\ndirect: {}",
                via.text(),
                direct.text()
            );
            assert_no_backend_location(&via, dash, &what);
        }
    }
}

#[tokio::test]
async fn viewer_writes_get_403_from_the_gateway_and_never_reach_the_backend() {
    let dash = Dashboard::shared();
    let gw = gateway(dash).start();
    let token = gw.login(VIEWER, VIEWER_PW).await;
    let direct_token = dash.login(VIEWER).await;
    let cases = [
        (
            Method::POST,
            "/api/pool",
            Some(json!({"pool": "cg-test-refused"})),
        ),
        (Method::DELETE, "/api/user/x", None),
    ];
    for (method, path, body) in cases {
        let what = format!("viewer {method} {path}");
        // The dashboard's own decision for its read-only user, first.
        let direct = dash
            .send(method.clone(), path, Some(&direct_token), V1, body.as_ref())
            .await;
        assert_eq!(direct.status, 403, "{what} (direct): {}", direct.text());
        let before = gw.upstream_requests().await;
        let r = gw.api(method, path, Some(&token), body.as_ref()).await;
        assert_forbidden(&r);
        assert_eq!(json_shape(&r.json()), json_shape(&direct.json()), "{what}");
        let after = gw.upstream_requests().await;
        assert_eq!(before, after, "{what} reached the backend\n{}", gw.logs());
    }
}

#[tokio::test]
async fn nobody_may_act_on_the_gateways_own_dashboard_account() {
    let dash = Dashboard::shared();
    let gw = gateway(dash).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let guess = json!({"old_password": "guess", "new_password": "Another-Pass-1"});
    let cases = [
        (
            Method::POST,
            "/api/user/clustergate/change_password",
            Some(guess.clone()),
        ),
        (Method::POST, "/api/user/admin/change_password", Some(guess)),
        (
            Method::PUT,
            "/api/user/clustergate",
            Some(json!({"enabled": false})),
        ),
        (Method::DELETE, "/api/user/clustergate", None),
    ];
    for (method, path, body) in cases {
        let what = format!("admin {method} {path}");
        let before = gw.upstream_requests().await;
        let r = gw.api(method, path, Some(&token), body.as_ref()).await;
        assert_eq!(r.status, 403, "{what}: {}", r.text());
        assert!(
            r.text().contains("not offered through the gateway"),
            "{what}: {}",
            r.text()
        );
        let after = gw.upstream_requests().await;
        assert_eq!(before, after, "{what} reached the backend\n{}", gw.logs());
    }
    // Reading it is fine.
    let r = gw
        .api(Method::GET, "/api/user/clustergate", Some(&token), None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[tokio::test]
async fn requests_without_a_usable_token_get_401_and_never_reach_the_backend() {
    let dash = Dashboard::shared();
    let gw = gateway(dash).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    assert_eq!(
        gw.api(Method::GET, "/api/summary", Some(&token), None)
            .await
            .status,
        200
    );
    assert_eq!(gw.logout(&token).await.status, 200);
    let before = gw.upstream_requests().await;
    for (what, token) in [
        ("no token", None),
        ("a garbage token", Some("garbage")),
        ("a token after logout", Some(token.as_str())),
    ] {
        for (method, path) in [(Method::GET, "/api/summary"), (Method::POST, "/api/pool")] {
            let body = (method == Method::POST).then(|| json!({"pool": "cg-test-refused"}));
            let r = gw.api(method.clone(), path, token, body.as_ref()).await;
            assert_eq!(r.status, 401, "{method} {path} with {what}: {}", r.text());
            assert_unauthorized(&r);
        }
    }
    assert_eq!(
        before,
        gw.upstream_requests().await,
        "a refused request reached the backend"
    );
}

#[tokio::test]
async fn accept_lists_forward_the_best_version_the_operation_serves_and_others_get_415_at_the_edge()
{
    let dash = Dashboard::shared();
    let gw = gateway(dash).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let get = |path: &'static str, accept: &'static str| {
        let req = gw.request(Method::GET, path, Some(&token), Some(accept));
        gw.send(req)
    };
    let r = get("/api/summary", "*/*").await;
    assert_unsupported_version(&r, NO_VERSION);

    let v = |x: &str| format!("application/vnd.ceph.api.v{x}+json");
    // /api/host is 1.1 and serves 1.0 too; the dashboard itself answers 415 to any list.
    for accept in [
        "application/vnd.ceph.api.v1.0+json",
        "application/vnd.ceph.api.v1.1+json",
        "application/vnd.ceph.api.v1.0+json;q=0.5, application/vnd.ceph.api.v1.1+json",
        "application/vnd.ceph.api.v1.1+json;q=0.9, */*;q=0.1",
    ] {
        let r = get("/api/host", accept).await;
        assert_eq!(r.status, 200, "Accept {accept}: {}", r.text());
        assert_eq!(r.content_type(), v("1.1"), "Accept {accept}");
    }
    // /api/osd/settings is 0.1 only: the table knows it, so the gateway forwards the best
    // type of the list the operation serves (the dashboard would answer any list 415).
    let r = get("/api/osd/settings", "application/vnd.ceph.api.v0.1+json").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.content_type(), v("0.1"));
    for accept in [
        "application/vnd.ceph.api.v1.0+json;q=0.5, application/vnd.ceph.api.v0.1+json",
        "application/vnd.ceph.api.v0.1+json;q=0.5, application/vnd.ceph.api.v1.0+json",
        "application/vnd.ceph.api.v0.1+json, application/vnd.ceph.api.v1.0+json",
        "*/*;q=0.8, application/vnd.ceph.api.v0.1+json",
    ] {
        let r = get("/api/osd/settings", accept).await;
        assert_eq!(r.status, 200, "Accept {accept}: {}", r.text());
        assert_eq!(r.content_type(), v("0.1"), "Accept {accept}");
    }
    // Nothing it serves: the dashboard's 415, answered at the edge.
    let before = gw.upstream_requests().await;
    for (accept, requested) in [
        ("application/vnd.ceph.api.v1.0+json", "1.0"),
        (
            "application/vnd.ceph.api.v9.9+json;q=0.5, application/vnd.ceph.api.v1.0+json",
            "1.0",
        ),
    ] {
        let r = get("/api/osd/settings", accept).await;
        assert_eq!(r.status, 415, "Accept {accept}: {}", r.text());
        assert_eq!(
            r.json()["detail"],
            format!("Incorrect version: endpoint is '0.1', client requested '{requested}'"),
            "Accept {accept}"
        );
    }
    let r = get("/api/health/minimal", "application/vnd.ceph.api.v9.9+json").await;
    assert_unsupported_version(
        &r,
        "Incorrect version: endpoint is '1.0', client requested '9.9'",
    );
    assert_eq!(before, gw.upstream_requests().await, "a 415 was forwarded");
}

#[tokio::test]
async fn errors_of_the_active_manager_pass_through_unchanged_and_keep_it_in_rotation() {
    let dash = Dashboard::shared();
    let direct_token = dash.login(ADMIN).await;
    let direct = dash
        .send(Method::GET, "/api/service", Some(&direct_token), V1, None)
        .await;
    assert_eq!(direct.status, 503, "direct: {}", direct.text());
    assert_eq!(direct.json()["code"], "orchestrator_status_unavailable");

    let gw = gateway(dash).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    for _ in 0..3 {
        let r = gw
            .api(Method::GET, "/api/service", Some(&token), None)
            .await;
        assert_eq!(r.status, direct.status, "{}", r.text());
        assert_eq!(r.json(), direct.json(), "the body changed on its way");
        assert_eq!(r.content_type(), direct.content_type());
        assert_eq!(
            gw.readyz(),
            200,
            "the active manager left rotation\n{}",
            gw.logs()
        );
    }
    let server = dash.url();
    let metrics = gw.metrics().await;
    assert_eq!(
        metric_sum(&metrics, "clustergate_upstream_up", &[("server", server)]),
        1.0,
        "{metrics}"
    );
    assert!(
        metric_sum(
            &metrics,
            "clustergate_upstream_requests_total",
            &[("server", server), ("status", "503")]
        ) >= 3.0,
        "the 503s were not the backend's: {metrics}"
    );
    let r = gw
        .api(Method::GET, "/api/summary", Some(&token), None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

fn oversized_post(
    gw: &RunningGateway,
    token: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut all = vec![("Content-Type", "application/json")];
    all.extend_from_slice(headers);
    gw.raw_request(
        "POST",
        "/api/user/validate_password",
        Some(token),
        &all,
        body,
    )
}

#[tokio::test]
async fn bodies_over_max_body_bytes_get_413_over_http1_with_a_length_or_chunked() {
    let dash = Dashboard::shared();
    let gw = gateway(dash).max_body_bytes(4096).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let small = json!({"password": "Cg-test-pass-123"});
    let r = gw
        .api(
            Method::POST,
            "/api/user/validate_password",
            Some(&token),
            Some(&small),
        )
        .await;
    assert_eq!(r.status, 200, "a body under the limit: {}", r.text());

    for size in [4097, 64 * 1024] {
        let body = vec![b'a'; size];
        let r = oversized_post(&gw, &token, &[], &body);
        assert_status_shape(&r, 413, "413 Payload Too Large", None);

        let mut chunked = Vec::new();
        for chunk in body.chunks(1000) {
            chunked.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            chunked.extend_from_slice(chunk);
            chunked.extend_from_slice(b"\r\n");
        }
        chunked.extend_from_slice(b"0\r\n\r\n");
        let mut req = format!(
            "POST /api/user/validate_password HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
             Accept: {V1}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n\
             Transfer-Encoding: chunked\r\n\r\n",
            gw.addr
        )
        .into_bytes();
        req.extend_from_slice(&chunked);
        let r = gw.raw_until_close(&req);
        assert_status_shape(&r, 413, "413 Payload Too Large", None);
    }
}

#[tokio::test]
async fn bodies_over_max_body_bytes_get_413_over_http2_not_a_reset() {
    let dash = Dashboard::shared();
    let gw = gateway(dash).max_body_bytes(4096).tls(true).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    for size in [4097, 64 * 1024, 1024 * 1024] {
        let req = gw
            .request(
                Method::POST,
                "/api/user/validate_password",
                Some(&token),
                Some(V1),
            )
            .header("Content-Type", "application/json")
            .body(vec![b'a'; size]);
        let resp = req.send().await.unwrap_or_else(|e| {
            panic!("{size} bytes over HTTP/2: no answer ({e:?})\n{}", gw.logs())
        });
        let r = Reply::from_reqwest(resp).await;
        assert_eq!(r.version, reqwest::Version::HTTP_2, "{size} bytes");
        assert_status_shape(&r, 413, "413 Payload Too Large", None);
    }
    // The connection still serves.
    let r = gw
        .api(Method::GET, "/api/summary", Some(&token), None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[tokio::test]
async fn forwarded_answers_carry_the_request_id_and_security_headers_and_no_backend_address() {
    let dash = Dashboard::shared();
    let gw = gateway(dash).tls(true).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let mut ids = Vec::new();
    for path in [
        "/api/summary",
        "/api/service",
        "/api/nonexistent-cg-test",
        "/api/pool",
    ] {
        let r = gw.api(Method::GET, path, Some(&token), None).await;
        let what = format!("GET {path} ({})", r.status);
        assert_security_headers(&r, true, &what);
        assert_eq!(r.header_all("strict-transport-security").len(), 1, "{what}");
        assert_eq!(r.header_all("x-request-id").len(), 1, "{what}");
        assert_no_backend_location(&r, dash, &what);
        ids.push(r.header("x-request-id").unwrap());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4, "request ids repeat: {ids:?}");
}
