//! Slow request bodies never reach the dashboard (issue 22, items 1 and 6): the gateway reads
//! a forwarded body whole, under `server.body_timeout_ms`, before it takes a connection to
//! the dashboard; GET and HEAD with a body are refused; and at most
//! `upstream.max_in_flight` requests reach a dashboard at once, the others waiting in a
//! bounded queue, then refused with 503. Against the real 16.2 dashboard.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::common::*;
use reqwest::Method;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long the slow clients keep at it in the long test (the 20 s).
const ATTACK: Duration = Duration::from_secs(20);
const SLOW_CLIENTS: usize = 50;
/// The body every slow client declares, and the pause between its bytes (the finding's).
const DECLARED: usize = 1000;
const BYTE_EVERY: Duration = Duration::from_secs(2);
/// A slow client answered (400 for GET with a body) comes back this soon.
const RECONNECT: Duration = Duration::from_millis(100);

fn gateway(dash: &Dashboard) -> Gateway {
    Gateway::with_dashboard_users().upstream(dash)
}

/// One slow client's request head: an open route without a token, or an API route with
/// a read-only user's token.
fn slow_head(kind: usize, host: &str, token: &str) -> String {
    match kind % 3 {
        0 => format!("GET / HTTP/1.1\r\nHost: {host}\r\nContent-Length: {DECLARED}\r\n\r\n"),
        1 => format!(
            "POST /ui-api/logging/js-error HTTP/1.1\r\nHost: {host}\r\nAccept: {V1}\r\nContent-Type: application/json\r\nContent-Length: {DECLARED}\r\n\r\n"
        ),
        _ => format!(
            "POST /api/user/validate_password HTTP/1.1\r\nHost: {host}\r\nAccept: {V1}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {DECLARED}\r\n\r\n"
        ),
    }
}

/// Sends `head`, then its body one byte every `BYTE_EVERY`, until `until`; opens a new
/// connection (after `RECONNECT`) whenever the server answers or closes one.
async fn slow_client(addr: SocketAddr, head: String, until: Instant) {
    let mut first = true;
    while Instant::now() < until {
        if !std::mem::take(&mut first) {
            tokio::time::sleep(RECONNECT).await;
        }
        let Ok(mut stream) = TcpStream::connect(addr).await else {
            continue;
        };
        if stream.write_all(head.as_bytes()).await.is_err() {
            continue;
        }
        let mut answer = [0u8; 1024];
        loop {
            tokio::select! {
                read = stream.read(&mut answer) => match read {
                    // Answered or closed: the connection is done.
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                },
                _ = tokio::time::sleep(BYTE_EVERY) => {
                    if Instant::now() >= until || stream.write_all(b" ").await.is_err() {
                        break;
                    }
                }
            }
        }
    }
}

/// Asks for `/api/health/minimal` in a loop until `until`: the latencies of the answers,
/// and every failure (an error, a status other than 200, or no answer within 5 s).
async fn health_loop(
    client: reqwest::Client,
    url: String,
    token: String,
    until: Instant,
) -> (Vec<Duration>, Vec<String>) {
    let (mut latencies, mut failures) = (Vec::new(), Vec::new());
    while Instant::now() < until {
        let started = Instant::now();
        let sent = client
            .get(&url)
            .header("Accept", V1)
            .header("Authorization", format!("Bearer {token}"))
            .timeout(Duration::from_secs(5))
            .send()
            .await;
        match sent {
            Ok(r) if r.status() == 200 => match r.bytes().await {
                Ok(_) => latencies.push(started.elapsed()),
                Err(e) => failures.push(format!("reading the answer: {e}")),
            },
            Ok(r) => failures.push(format!("status {}", r.status())),
            Err(e) => failures.push(format!("{e}")),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (latencies, failures)
}

fn p99(latencies: &mut [Duration]) -> Duration {
    latencies.sort();
    let index = (latencies.len() * 99).div_ceil(100).saturating_sub(1);
    latencies[index]
}

#[tokio::test]
async fn fifty_slow_body_clients_freeze_neither_the_dashboard_nor_the_gateway() {
    let dash = Dashboard::shared();
    let gw = gateway(dash).start();
    let viewer = gw.login(VIEWER, VIEWER_PW).await;
    let direct_viewer = dash.login(VIEWER).await;
    let until = Instant::now() + ATTACK;
    let host = gw.addr.to_string();
    let slow: Vec<_> = (0..SLOW_CLIENTS)
        .map(|i| tokio::spawn(slow_client(gw.addr, slow_head(i, &host, &viewer), until)))
        .collect();
    // The slow clients first: their heads are in before the first health request.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let client = client_builder().build().unwrap();
    let direct = tokio::spawn(health_loop(
        client.clone(),
        format!("{}/api/health/minimal", dash.url()),
        direct_viewer,
        until,
    ));
    let through = tokio::spawn(health_loop(
        client,
        gw.url("/api/health/minimal"),
        viewer,
        until,
    ));
    let (mut direct_latencies, direct_failures) = direct.await.unwrap();
    let (mut gateway_latencies, gateway_failures) = through.await.unwrap();
    for client in slow {
        client.await.unwrap();
    }
    for (who, latencies, failures) in [
        ("direct", &mut direct_latencies, &direct_failures),
        (
            "through the gateway",
            &mut gateway_latencies,
            &gateway_failures,
        ),
    ] {
        assert!(
            failures.is_empty(),
            "{who}: {} failures ({:?}), {} answers",
            failures.len(),
            failures.iter().take(5).collect::<Vec<_>>(),
            latencies.len()
        );
        assert!(!latencies.is_empty(), "{who}: no answer at all");
        let p99 = p99(latencies);
        eprintln!("{who}: {} answers, p99 {p99:?}", latencies.len());
        assert!(
            p99 < Duration::from_secs(1),
            "{who}: p99 {p99:?} over {} answers",
            latencies.len()
        );
    }
}

/// Writes `head` and `partial` of its body, then waits for the answer and the close.
async fn stall_after(addr: SocketAddr, head: &str, partial: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(partial).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer))
        .await
        .expect("the gateway answers and closes the connection")
        .unwrap();
    parse_http1(&answer).expect("an HTTP answer")
}

#[tokio::test]
async fn a_body_slower_than_body_timeout_ms_gets_408_and_the_connection_closed() {
    let dash = Dashboard::shared();
    let gw = gateway(dash)
        .extra_toml("server", "body_timeout_ms = 500")
        .start();
    let token = gw.login(VIEWER, VIEWER_PW).await;
    let host = gw.addr.to_string();
    let forwarded = format!(
        "POST /api/user/validate_password HTTP/1.1\r\nHost: {host}\r\nAccept: {V1}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    );
    let login = format!(
        "POST /api/auth HTTP/1.1\r\nHost: {host}\r\nAccept: {V1}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    );
    for (what, head) in [("forwarded", forwarded), ("login", login)] {
        let started = Instant::now();
        let r = stall_after(gw.addr, &head, b"{\"pass").await;
        assert_status_shape(&r, 408, "408 Request Timeout", None);
        assert!(started.elapsed() >= Duration::from_millis(500), "{what}");
    }
    assert_eq!(
        gw.upstream_requests().await,
        0.0,
        "no slow body reached the dashboard"
    );
}

#[tokio::test]
async fn a_refused_requests_unread_body_holds_the_connection_no_longer_than_body_timeout_ms() {
    let dash = Dashboard::shared();
    let gw = gateway(dash)
        .extra_toml("server", "body_timeout_ms = 500")
        .start();
    // No token: 401 before the body is read; the client goes on sending it slowly. pingora
    // closes a connection answered before its request body was read (never drains it), so
    // a refused body holds nothing: this keeps it so.
    let head = format!(
        "POST /api/pool HTTP/1.1\r\nHost: {}\r\nAccept: {V1}\r\nContent-Type: application/json\r\nContent-Length: {DECLARED}\r\n\r\n",
        gw.addr
    );
    let mut stream = TcpStream::connect(gw.addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        assert!(
            Instant::now() < deadline,
            "the connection is still open: {}",
            String::from_utf8_lossy(&answer)
        );
        tokio::select! {
            read = stream.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            },
            _ = tokio::time::sleep(Duration::from_millis(200)) => {
                if stream.write_all(b" ").await.is_err() {
                    break;
                }
            }
        }
    }
    let r = parse_http1(&answer).expect("an HTTP answer");
    assert_eq!(r.status, 401, "{}", r.text());
}

#[tokio::test]
async fn get_and_head_with_a_body_get_400_and_never_reach_the_dashboard() {
    let dash = Dashboard::shared();
    let gw = gateway(dash).start();
    let token = gw.login(VIEWER, VIEWER_PW).await;
    let host = gw.addr.to_string();
    for (path, token) in [
        ("/", None),
        ("/api/health/minimal", Some(token.as_str())),
        ("/docs", None),
    ] {
        let req = raw_request_bytes("GET", path, &host, token, &[], b"hello");
        let r = gw.raw_until_close(&req);
        assert_status_shape(&r, 400, "400 Bad Request", None);
    }
    // A HEAD answer has no body to parse: its status line is enough.
    let head = format!("HEAD / HTTP/1.1\r\nHost: {host}\r\nContent-Length: 5\r\n\r\nhello");
    let mut stream = TcpStream::connect(gw.addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer))
        .await
        .expect("the gateway answers and closes the connection")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert_eq!(gw.upstream_requests().await, 0.0);
    // Without a body they are served.
    let r = gw
        .api(Method::GET, "/api/health/minimal", Some(&token), None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[tokio::test]
async fn a_chunked_body_over_64_kib_reaches_the_dashboard_whole_with_a_length() {
    let dash = Dashboard::shared();
    let gw = gateway(dash).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let password = "x".repeat(100 * 1024);
    let body = serde_json::to_vec(&serde_json::json!({ "password": password })).unwrap();
    let mut req = format!(
        "POST /api/user/validate_password HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: {V1}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
        gw.addr
    )
    .into_bytes();
    for chunk in body.chunks(4000) {
        req.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        req.extend_from_slice(chunk);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    let r = gw.raw_until_close(&req);
    let direct_token = dash.login(ADMIN).await;
    let direct = dash
        .send(
            Method::POST,
            "/api/user/validate_password",
            Some(&direct_token),
            V1,
            Some(&serde_json::json!({ "password": password })),
        )
        .await;
    assert_eq!(r.status, direct.status, "{}", r.text());
    assert_eq!(r.json(), direct.json());
}

#[tokio::test]
async fn past_max_in_flight_requests_wait_then_get_503_with_retry_after_counted() {
    let dash = Dashboard::shared();
    let gw = gateway(dash)
        .extra_toml("upstream", "max_in_flight = 1")
        .extra_toml("upstream", "max_queued = 1")
        .extra_toml("upstream", "queue_timeout_ms = 300")
        // Streamed answers: a place is held until its client has taken the answer.
        .extra_toml("upstream", "answer_buffer_bytes = 0")
        .extra_toml("upstream", "answer_buffers_total_bytes = 0")
        .start();
    let token = gw.login(VIEWER, VIEWER_PW).await;
    let server = [("server", dash.url())];
    // A client that asks for the UI's 3.5 MB script and reads none of it holds the one
    // place (the answer streamed) until it goes away.
    let script = gw.main_script().await;
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&gw.addr.into()).unwrap();
    let mut holder = std::net::TcpStream::from(socket);
    let head = format!("GET {script} HTTP/1.1\r\nHost: {}\r\n\r\n", gw.addr);
    std::io::Write::write_all(&mut holder, head.as_bytes()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while gw.metric("clustergate_upstream_in_flight", &server).await != 1.0 {
        assert!(
            Instant::now() < deadline,
            "the script's request holds no place"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let started = Instant::now();
    let r = gw
        .api(Method::GET, "/api/health/minimal", Some(&token), None)
        .await;
    assert_status_shape(&r, 503, "503 Service Unavailable", None);
    assert_eq!(r.header("retry-after").as_deref(), Some("1"));
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "it waited first"
    );
    assert_eq!(
        gw.metric("clustergate_upstream_overload_total", &server)
            .await,
        1.0
    );

    drop(holder);
    let deadline = Instant::now() + Duration::from_secs(10);
    while gw.metric("clustergate_upstream_in_flight", &server).await != 0.0 {
        assert!(Instant::now() < deadline, "the place is not given back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = gw
        .api(Method::GET, "/api/health/minimal", Some(&token), None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[tokio::test]
async fn a_body_read_whole_over_http2_reaches_the_dashboard() {
    let dash = Dashboard::shared();
    let gw = gateway(dash).tls(true).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let body = serde_json::json!({ "password": "x".repeat(100 * 1024) });
    let resp = gw
        .request(
            Method::POST,
            "/api/user/validate_password",
            Some(&token),
            Some(V1),
        )
        .json(&body)
        .send()
        .await
        .unwrap();
    let r = Reply::from_reqwest(resp).await;
    assert_eq!(r.version, reqwest::Version::HTTP_2);
    let direct_token = dash.login(ADMIN).await;
    let direct = dash
        .send(
            Method::POST,
            "/api/user/validate_password",
            Some(&direct_token),
            V1,
            Some(&body),
        )
        .await;
    assert_eq!(r.status, direct.status, "{}", r.text());
    assert_eq!(r.json(), direct.json());
}
