//! TLS: the generated certificate and its CA, operator certificates, HTTP/2 via ALPN, and the
//! TLS-only headers and cookie attribute.

use std::fs;

use crate::common::*;
use reqwest::Version;
use serde_json::json;

#[tokio::test]
async fn the_generated_cert_verifies_against_the_generated_ca_for_127_0_0_1_and_localhost() {
    let gw = Gateway::new().user(User::admin()).tls(true).start();
    let by_ip = gw.send(gw.client().get(gw.url("/nothing"))).await;
    assert_not_found(&by_ip);
    let localhost = client_builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(gw.ca_cert())
        .resolve("localhost", gw.addr)
        .build()
        .unwrap();
    let url = format!("https://localhost:{}/nothing", gw.addr.port());
    assert_not_found(&gw.send(localhost.get(url)).await);
}

#[tokio::test]
async fn a_client_without_the_generated_ca_refuses_the_connection() {
    let gw = Gateway::new().user(User::admin()).tls(true).start();
    let untrusting = client_builder()
        .tls_built_in_root_certs(false)
        .build()
        .unwrap();
    let err = untrusting.get(gw.url("/nothing")).send().await;
    assert!(
        err.is_err(),
        "a client with no roots accepted the gateway's certificate"
    );
    let wrong_name = client_builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(gw.ca_cert())
        .resolve("not-the-gateway.example", gw.addr)
        .build()
        .unwrap();
    let url = format!("https://not-the-gateway.example:{}/nothing", gw.addr.port());
    assert!(
        wrong_name.get(url).send().await.is_err(),
        "certificate valid for a name not in its SAN"
    );
}

#[tokio::test]
async fn the_ca_private_key_is_not_kept_anywhere_in_state_dir() {
    let gw = Gateway::new().user(User::admin()).tls(true).start();
    let tls = gw.state_dir().join("tls");
    let ca = fs::read_to_string(tls.join("ca.pem")).unwrap();
    assert!(
        ca.contains("BEGIN CERTIFICATE") && !ca.contains("PRIVATE KEY"),
        "ca.pem: {ca}"
    );
    let mut keys = Vec::new();
    for entry in fs::read_dir(&tls).unwrap() {
        let path = entry.unwrap().path();
        let text = fs::read_to_string(&path).unwrap_or_default();
        keys.extend(std::iter::repeat_n(
            path.clone(),
            text.lines()
                .filter(|l| l.starts_with("-----BEGIN") && l.contains("PRIVATE KEY"))
                .count(),
        ));
    }
    assert_eq!(
        keys,
        vec![tls.join("key.pem")],
        "private keys in state_dir/tls"
    );
}

#[tokio::test]
async fn http2_is_negotiated_via_alpn_and_http1_still_works() {
    let gw = Gateway::new().user(User::admin()).tls(true).start();
    let r = gw
        .send(gw.client().get(gw.url("/api/summary")).header("Accept", V1))
        .await;
    assert_eq!(r.version, Version::HTTP_2);
    assert_unauthorized(&r);
    let h1 = gw.build_client(true);
    let r = gw
        .send(h1.get(gw.url("/api/summary")).header("Accept", V1))
        .await;
    assert_eq!(r.version, Version::HTTP_11);
    assert_unauthorized(&r);
}

#[tokio::test]
async fn login_check_and_logout_work_over_http2() {
    let gw = Gateway::with_admin_and_viewer().tls(true).start();
    let r = gw.try_login(ADMIN, ADMIN_PW).await;
    assert_eq!(r.version, Version::HTTP_2);
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["permissions"], admin_permissions());
    let token = r.json()["token"].as_str().unwrap().to_string();

    let r = gw.check(&token).await;
    assert_eq!(r.version, Version::HTTP_2);
    assert_check_ok(&r, ADMIN, &admin_permissions());
    assert_not_found(&gw.api_get("/api/summary", Some(&token)).await);

    let r = gw.logout(&token).await;
    assert_eq!(r.version, Version::HTTP_2);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!({"redirect_url": "#/login"}));
    assert_login_url(&gw.check(&token).await);
    assert_unauthorized(&gw.api_get("/api/summary", Some(&token)).await);
    assert_invalid_credentials(&gw.try_login(VIEWER, "wrong").await);
}

#[tokio::test]
async fn a_body_over_64_kib_gives_413_over_http2() {
    let gw = Gateway::new().user(User::admin()).tls(true).start();
    let big = json!({"username": ADMIN, "password": "x".repeat(70 * 1024)});
    let r = gw.post_json("/api/auth", Some(V1), &big).await;
    assert_eq!(r.version, Version::HTTP_2);
    assert_status_shape(&r, 413, "413 Payload Too Large", None);
    gw.login(ADMIN, ADMIN_PW).await;
}

#[tokio::test]
async fn tls_adds_secure_to_the_cookie_and_hsts_to_every_response() {
    let gw = Gateway::new().user(User::admin()).tls(true).start();
    let r = gw.try_login(ADMIN, ADMIN_PW).await;
    assert_eq!(r.status, 201);
    let cookie = r.token_cookie();
    let attrs: Vec<&str> = cookie.split(';').map(str::trim).collect();
    for want in ["HttpOnly", "Path=/", "SameSite=Strict", "Secure"] {
        assert!(attrs.contains(&want), "missing {want} in {cookie}");
    }
    assert_security_headers(&r, true, "201 login");
    let token = r.json()["token"].as_str().unwrap().to_string();
    assert_security_headers(&gw.try_login(ADMIN, "wrong").await, true, "400 login");
    assert_security_headers(&gw.api_get("/api/summary", None).await, true, "401 api");
    assert_security_headers(
        &gw.api_get("/api/summary", Some(&token)).await,
        true,
        "404 api",
    );
    assert_security_headers(
        &gw.post_json("/api/auth", Some("*/*"), &json!({})).await,
        true,
        "415 login",
    );
}

#[tokio::test]
async fn a_restart_reuses_the_generated_certificate_and_ca() {
    let mut gw = Gateway::new().user(User::admin()).tls(true).start();
    let tls = gw.state_dir().join("tls");
    let ca = fs::read(tls.join("ca.pem")).unwrap();
    let cert = fs::read(tls.join("cert.pem")).unwrap();
    let old_client = gw.build_client(false);
    gw.restart(|_| {});
    assert_eq!(fs::read(tls.join("ca.pem")).unwrap(), ca, "ca.pem changed");
    assert_eq!(
        fs::read(tls.join("cert.pem")).unwrap(),
        cert,
        "cert.pem changed"
    );
    let r = gw
        .send(old_client.get(gw.url("/api/summary")).header("Accept", V1))
        .await;
    assert_unauthorized(&r);
}

#[tokio::test]
async fn operator_cert_and_key_files_are_served_instead_of_a_generated_pair() {
    let (ca, chain, key) = operator_certificate();
    let gw = Gateway::new()
        .user(User::admin())
        .tls(true)
        .file("certs/server.pem", &chain)
        .file("certs/server.key", &key)
        .extra_toml("server", "cert_file = \"certs/server.pem\"")
        .extra_toml("server", "key_file = \"certs/server.key\"")
        .start();
    assert!(
        !gw.state_dir().join("tls/ca.pem").exists(),
        "generated a CA despite cert_file/key_file"
    );
    let client = client_builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
        .build()
        .unwrap();
    let r = gw
        .send(client.get(gw.url("/api/summary")).header("Accept", V1))
        .await;
    assert_eq!(r.version, Version::HTTP_2);
    assert_unauthorized(&r);
}
