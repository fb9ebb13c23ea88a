//! What a careless client or an attacker gets: bounded request heads (431), slow heads cut
//! off (408), idle connections closed, connections per address capped (429), a Connection
//! header nominating the gateway's own headers served instead of closed, hop-by-hop fields
//! kept from the dashboard, an ambiguous Content-Length refused, and a backend that resets the
//! connection answered as 502, not as "no active manager".

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::*;

/// Sends `request` on a new connection and reads until the gateway closes it.
fn exchange(gw: &RunningGateway, request: &[u8]) -> Reply {
    gw.raw_until_close(request)
}

fn get_with_headers(path: &str, headers: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: gw\r\nAccept: {V1}\r\n{headers}Connection: close\r\n\r\n")
        .into_bytes()
}

fn assert_gateway_error(reply: &Reply, status: u16, detail: &str) {
    assert_eq!(reply.status, status, "{}", reply.text());
    let body = reply.json();
    assert_eq!(body["status"].as_str().unwrap()[..3], status.to_string());
    assert!(
        body["detail"].as_str().unwrap().contains(detail),
        "{}",
        reply.text()
    );
    assert_eq!(
        body["request_id"].as_str(),
        reply.header("x-request-id").as_deref()
    );
}

#[tokio::test]
async fn a_request_head_over_32_kib_is_431_before_any_other_work() {
    let gw = Gateway::with_admin_and_viewer().tls(false).start();
    // No token: without the bound this is the usual 401.
    let pad = "a".repeat(200 * 1024);
    let reply = exchange(
        &gw,
        &get_with_headers("/api/summary", &format!("X-Pad: {pad}\r\n")),
    );
    assert_gateway_error(&reply, 431, "32768 bytes");
    // Just under the bound: served as usual.
    let pad = "a".repeat(30 * 1024);
    let reply = exchange(
        &gw,
        &get_with_headers("/api/summary", &format!("X-Pad: {pad}\r\n")),
    );
    assert_eq!(reply.status, 401, "{}", reply.text());
    assert!(gw
        .metrics()
        .await
        .contains("clustergate_connections_refused_total{reason=\"header_too_large\"} 1"));
}

#[test]
fn more_header_lines_than_the_cap_is_431() {
    let gw = Gateway::with_admin_and_viewer()
        .tls(false)
        .extra_toml("server", "max_header_count = 20")
        .start();
    let lines = |n: usize| (0..n).map(|i| format!("X-{i}: v\r\n")).collect::<String>();
    // Host, Accept and Connection count too.
    let reply = exchange(&gw, &get_with_headers("/api/summary", &lines(17)));
    assert_eq!(reply.status, 401, "{}", reply.text());
    let reply = exchange(&gw, &get_with_headers("/api/summary", &lines(18)));
    assert_gateway_error(&reply, 431, "20 header lines");
}

#[tokio::test]
async fn an_http2_header_list_over_the_bound_is_refused_with_431() {
    let gw = Gateway::with_admin_and_viewer().tls(true).start();
    let reply = gw
        .send(
            gw.request(reqwest::Method::GET, "/api/summary", None, Some(V1))
                .header("x-pad", "a".repeat(40 * 1024)),
        )
        .await;
    assert_eq!(reply.version, reqwest::Version::HTTP_2);
    assert_eq!(reply.status, 431);
}

#[test]
fn a_head_sent_a_byte_at_a_time_is_cut_off_at_the_header_timeout() {
    let gw = Gateway::with_admin_and_viewer()
        .tls(false)
        .extra_toml("server", "header_timeout_ms = 1000")
        .start();
    let mut stream = TcpStream::connect(gw.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let started = Instant::now();
    let request = get_with_headers("/api/summary", "");
    let mut answer = Vec::new();
    // One byte every 100 ms (the whole head would take several seconds), reading between.
    for byte in request.iter().take(60) {
        if stream.write_all(&[*byte]).is_err() {
            break;
        }
        let mut buf = [0u8; 4096];
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    let elapsed = started.elapsed();
    let reply = parse_http1(&answer).unwrap_or_else(|| {
        panic!(
            "no answer after {elapsed:?}: {:?}",
            String::from_utf8_lossy(&answer)
        )
    });
    assert_gateway_error(&reply, 408, "1000 ms");
    assert!(
        elapsed < Duration::from_secs(5),
        "cut off after {elapsed:?}"
    );
}

#[test]
fn a_connection_that_sends_nothing_and_an_idle_keepalive_one_are_closed() {
    let gw = Gateway::with_admin_and_viewer()
        .tls(false)
        .extra_toml("server", "header_timeout_ms = 500")
        .extra_toml("server", "keepalive_timeout_s = 1")
        .start();
    let closed_within = |stream: &mut TcpStream, limit: Duration| {
        stream.set_read_timeout(Some(limit)).unwrap();
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).is_ok()
    };
    let mut silent = TcpStream::connect(gw.addr).unwrap();
    assert!(
        closed_within(&mut silent, Duration::from_secs(5)),
        "a silent connection stays open"
    );

    let mut kept = TcpStream::connect(gw.addr).unwrap();
    kept.write_all(
        b"POST /api/auth/check HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n\
          Content-Length: 2\r\n\r\n{}",
    )
    .unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut first = [0u8; 12];
    kept.read_exact(&mut first).unwrap();
    assert_eq!(&first[..9], b"HTTP/1.1 ");
    // Answered and kept alive: idle past keepalive_timeout_s, it is closed.
    assert!(
        closed_within(&mut kept, Duration::from_secs(5)),
        "an idle keep-alive connection stays open"
    );
}

#[test]
fn connections_per_client_address_are_capped_with_a_429() {
    let gw = Gateway::with_admin_and_viewer()
        .tls(false)
        .extra_toml("server", "max_connections_per_ip = 3")
        .start();
    let held: Vec<TcpStream> = (0..3).map(|_| served_connection(&gw)).collect();
    let reply = exchange(&gw, &get_with_headers("/api/summary", ""));
    assert_gateway_error(&reply, 429, "Too many connections");
    assert_eq!(reply.header("retry-after").as_deref(), Some("1"));
    drop(held);
    // The gateway frees the places when it sees the closes, a moment later.
    let deadline = Instant::now() + Duration::from_secs(10);
    let reply = loop {
        let reply = exchange(&gw, &get_with_headers("/api/summary", ""));
        if reply.status != 429 || Instant::now() > deadline {
            break reply;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        reply.status,
        401,
        "a freed place serves again: {}",
        reply.text()
    );
}

/// A kept-alive connection the gateway has answered once, so it has surely been accepted
/// and counted (a connection only just opened may still wait in the listen queue).
fn served_connection(gw: &RunningGateway) -> TcpStream {
    let mut stream = TcpStream::connect(gw.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = format!("GET /api/summary HTTP/1.1\r\nHost: gw\r\nAccept: {V1}\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    let reply = loop {
        if let Some(reply) = parse_http1(&answer) {
            break reply;
        }
        let read = stream.read(&mut chunk).unwrap();
        assert!(
            read > 0,
            "closed before answering: {:?}",
            String::from_utf8_lossy(&answer)
        );
        answer.extend_from_slice(&chunk[..read]);
    };
    assert_eq!(reply.status, 401, "{}", reply.text());
    stream
}

#[tokio::test]
async fn a_connection_header_nominating_the_gateways_headers_is_served() {
    let dash = Dashboard::shared();
    let gw = Gateway::with_admin_and_viewer()
        .tls(false)
        .upstream(dash)
        .start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let reply = exchange(
        &gw,
        &format!(
            "GET /api/health/minimal HTTP/1.1\r\nHost: gw\r\nAccept: {V1}\r\n\
             Authorization: Bearer {token}\r\n\
             Connection: keep-alive, X-Forwarded-User, Authorization, X-Forwarded-For\r\n\
             Connection: close\r\n\r\n"
        )
        .into_bytes(),
    );
    assert_eq!(reply.status, 200, "{}\n{}", reply.text(), gw.logs());
    assert!(reply.json()["health"].is_object(), "{}", reply.text());
}

#[tokio::test]
async fn hop_by_hop_fields_of_a_clients_request_do_not_reach_the_dashboard() {
    let dash = Dashboard::shared();
    let backend = dash.host_ports()[0].parse().unwrap();
    let relay = ResettingRelay::start_with(backend, "GET /api/health/minimal ", Fault::Record);
    let gw = Gateway::with_admin_and_viewer()
        .tls(false)
        .upstream_via(dash, vec![relay.url()])
        .start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let hop_by_hop = [
        "Keep-Alive: timeout=5",
        "Proxy-Connection: keep-alive",
        "Proxy-Authenticate: Basic",
        "Proxy-Authorization: Basic Zm9vOmJhcg==",
        "TE: trailers",
        "Trailer: X-Checksum",
        "Upgrade: h2c",
        "HTTP2-Settings: AAMAAABkAAQAAP__",
    ];
    let reply = exchange(
        &gw,
        &get_with_headers(
            "/api/health/minimal",
            &format!(
                "Authorization: Bearer {token}\r\n{}\r\n",
                hop_by_hop.join("\r\n")
            ),
        ),
    );
    assert_eq!(reply.status, 200, "{}\n{}", reply.text(), gw.logs());
    let sent = String::from_utf8_lossy(&relay.recorded.lock().unwrap()).to_ascii_lowercase();
    assert!(sent.contains("\r\naccept: "), "nothing recorded: {sent}");
    for field in hop_by_hop {
        let name = field.split(':').next().unwrap().to_ascii_lowercase();
        assert!(
            !sent.contains(&format!("\r\n{name}:")),
            "{name} reached the dashboard:\n{sent}"
        );
    }
}

#[test]
fn a_requests_content_length_frames_its_body_and_an_ambiguous_one_is_a_400() {
    let gw = Gateway::with_admin_and_viewer().tls(false).start();
    let check = |framing: &str| {
        let request = format!(
            "POST /api/auth/check HTTP/1.1\r\nHost: gw\r\nAccept: {V1}\r\n\
             Content-Type: application/json\r\n{framing}Connection: close\r\n\r\n{{}}"
        );
        exchange(&gw, request.as_bytes())
    };
    let plain = check("Content-Length: 2\r\n");
    assert_ne!(plain.status, 400, "{}", plain.text());
    for same in [
        "Content-Length: 2, 2\r\n",
        "Content-Length: 2\r\nContent-Length: 2\r\n",
        "Content-Length: 002\r\n",
    ] {
        let reply = check(same);
        assert_eq!(
            (reply.status, reply.json()),
            (plain.status, plain.json()),
            "{same:?}"
        );
    }
    for ambiguous in [
        "Content-Length: 2, 3\r\n",
        "Content-Length: 2\r\nContent-Length: 3\r\n",
        "Content-Length: 2x\r\n",
        "Content-Length: +2\r\n",
        "Content-Length: 99999999999999999999999\r\n",
    ] {
        let reply = check(ambiguous);
        assert_eq!(reply.status, 400, "{ambiguous:?}: {}", reply.text());
    }
}

#[tokio::test]
async fn a_dashboard_that_resets_the_connection_is_a_502_not_no_active_manager() {
    let dash = Dashboard::shared();
    let backend = dash.host_ports()[0].parse().unwrap();
    let relay = ResettingRelay::start(backend, "GET /api/health/minimal ");
    let gw = Gateway::with_admin_and_viewer()
        .tls(false)
        .upstream_via(dash, vec![relay.url()])
        .start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    // The manager is active and healthy: other paths are served.
    let summary = gw.api_get("/api/summary", Some(&token)).await;
    assert_eq!(summary.status, 200, "{}", summary.text());

    let reply = gw.api_get("/api/health/minimal", Some(&token)).await;
    assert_eq!(reply.status, 502, "{}\n{}", reply.text(), gw.logs());
    assert_eq!(
        reply.json()["detail"],
        "the dashboard closed the connection",
        "{}",
        reply.text()
    );
    assert!(relay.resets.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    assert_eq!(gw.api_get("/api/summary", Some(&token)).await.status, 200);
}
