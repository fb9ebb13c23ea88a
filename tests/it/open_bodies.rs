//! What clients without a token can make the gateway hold is small and bounded in total
//! (issue 33, finding 2): a body sent to an open operation is at most
//! `upstream.max_open_body_bytes`, a declared length over a limit is answered 413 before
//! any of the body is read, every held body takes its bytes from one budget
//! (`server.body_budget_bytes`: past it a request waits, then 503), and connections per
//! client address are capped by default. Against the real 16.2 dashboard.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MIB: usize = 1024 * 1024;
/// The open operation the web UI posts its errors to.
const JS_ERROR: &str = "/ui-api/logging/js-error";
/// The attack of the finding: this many connections, each sending a body of the token
/// holders' limit (10 MiB) to the open operation.
const ATTACKERS: usize = 20;

fn gateway(dash: &Dashboard) -> Gateway {
    Gateway::with_dashboard_users().tls(false).upstream(dash)
}

/// The gateway process's resident memory (`VmRSS`), in bytes.
fn resident_bytes(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS in /proc/PID/status");
    let kib: usize = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib * 1024
}

/// A POST to the open operation without a token: its head, declaring `length` (or
/// chunked when `None`).
fn open_post_head(addr: SocketAddr, length: Option<usize>) -> String {
    let framing = match length {
        Some(n) => format!("Content-Length: {n}"),
        None => "Transfer-Encoding: chunked".to_string(),
    };
    format!(
        "POST {JS_ERROR} HTTP/1.1\r\nHost: {addr}\r\nAccept: {V1}\r\n\
         Content-Type: application/json\r\n{framing}\r\n\r\n"
    )
}

/// One attacker: sends the head, then all but the last byte of a 10 MiB body (as one
/// chunk when chunked), as fast as the gateway takes it; stops at the first refusal (the
/// gateway answered and closed). Keeps the connection open until `release`.
async fn attacker(
    addr: SocketAddr,
    chunked: bool,
    written: tokio::sync::mpsc::Sender<()>,
    release: tokio::sync::watch::Receiver<bool>,
) {
    let body = 10 * MIB;
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = open_post_head(addr, (!chunked).then_some(body));
    let mut sent = stream.write_all(head.as_bytes()).await.is_ok();
    if chunked && sent {
        sent = stream
            .write_all(format!("{body:x}\r\n").as_bytes())
            .await
            .is_ok();
    }
    let block = vec![b'a'; 64 * 1024];
    let mut left = body - 1;
    while sent && left > 0 {
        let n = left.min(block.len());
        sent = stream.write_all(&block[..n]).await.is_ok();
        left -= n;
    }
    written.send(()).await.unwrap();
    let mut release = release;
    let _ = release.wait_for(|go| *go).await;
    drop(stream);
}

/// The finding's attack: 20 connections without a token sending 10 MiB bodies (declared
/// and chunked) to the open operation raise the gateway's resident memory by less than
/// 100 MiB, and it stays under the shipped pod's 256 MiB. Before: each held up to 10 MiB
/// (~250 MB in all), and a gateway limited like the pod was killed.
#[tokio::test]
async fn twenty_connections_without_a_token_sending_large_bodies_hold_little_memory() {
    let dash = Dashboard::shared();
    let gw = gateway(dash).start();
    // Warm: the first forwarded request sets up what every later one reuses.
    let warm = gw.raw_post(
        JS_ERROR,
        &[("Accept", V1)],
        br#"{"url":"/","message":"warm"}"#,
    );
    assert!(warm.status < 500, "{}", warm.text());
    let before = resident_bytes(gw.pid());
    let (written, mut done) = tokio::sync::mpsc::channel(ATTACKERS);
    let (release, held) = tokio::sync::watch::channel(false);
    let attackers: Vec<_> = (0..ATTACKERS)
        .map(|i| tokio::spawn(attacker(gw.addr, i % 2 == 1, written.clone(), held.clone())))
        .collect();
    for _ in 0..ATTACKERS {
        tokio::time::timeout(Duration::from_secs(60), done.recv())
            .await
            .expect("every attacker wrote its body or was refused within 60 s");
    }
    // Every body the gateway took is in its memory now (the old gateway kept reading
    // them until the body timeout).
    let during = resident_bytes(gw.pid());
    release.send(true).unwrap();
    for a in attackers {
        a.await.unwrap();
    }
    let grown = during.saturating_sub(before);
    assert!(
        grown < 100 * MIB,
        "resident memory grew by {} MiB ({} -> {} MiB)",
        grown / MIB,
        before / MIB,
        during / MIB
    );
    assert!(during < 256 * MIB, "{} MiB resident", during / MIB);
    // And the gateway still serves.
    let token = gw.login(ADMIN, ADMIN_PW).await;
    assert_eq!(gw.api_get("/api/summary", Some(&token)).await.status, 200);
}

/// Sends `head` alone (no byte of the body) and reads the answer; `None` when none came
/// within 5 s. Also says whether the gateway then closed the connection.
fn answer_to_head_alone(addr: SocketAddr, head: &str) -> Option<(Reply, bool)> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return parse_http1(&answer).map(|r| (r, true)),
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            // A timeout with a whole answer: answered, the connection left open.
            Err(_) => return parse_http1(&answer).map(|r| (r, false)),
        }
    }
}

/// A declared length over the limit is answered 413 before any byte of the body is sent,
/// and the connection is closed (the body is never read): for the open operation past
/// `upstream.max_open_body_bytes` (16 KiB), for a token holder past
/// `upstream.max_body_bytes`. Before: the gateway waited for the body (up to the limit)
/// and answered only after `server.body_timeout_ms`.
#[tokio::test]
async fn a_declared_length_over_the_limit_is_413_with_nothing_read() {
    let dash = Dashboard::shared();
    let gw = gateway(dash).max_body_bytes(MIB).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let token_head = format!(
        "POST /api/user/validate_password HTTP/1.1\r\nHost: {}\r\nAccept: {V1}\r\n\
         Authorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        gw.addr,
        MIB + 1
    );
    for (what, head) in [
        (
            "open, 16 KiB + 1",
            open_post_head(gw.addr, Some(16 * 1024 + 1)),
        ),
        ("open, 10 GiB", open_post_head(gw.addr, Some(10 << 30))),
        ("token holder, 1 MiB + 1", token_head),
    ] {
        let (reply, closed) = answer_to_head_alone(gw.addr, &head)
            .unwrap_or_else(|| panic!("{what}: no answer within 5 s without the body"));
        assert_status_shape(&reply, 413, "413 Payload Too Large", None);
        assert!(
            closed,
            "{what}: the connection stays open with the body unread"
        );
    }
}

/// The open operation takes what the web UI sends (`{url, message, stack}`, a few KB),
/// and refuses more than 16 KiB without a token, sent chunked too; a token holder's body
/// of that size is forwarded. Before: 10 MiB for anyone.
#[tokio::test]
async fn bodies_without_a_token_are_limited_to_16_kib_and_token_holders_keep_their_limit() {
    let dash = Dashboard::shared();
    let gw = gateway(dash).start();
    let stack: String = (0..40)
        .map(|i| format!("    at e.f{i} (http://gw/main.35ec9db61bcbaf2e5786.js:1:{i}000)\n"))
        .collect();
    let report = serde_json::json!({
        "url": "https://gw:8443/#/pool",
        "message": "Cannot read properties of undefined (reading 'pools')",
        "stack": stack,
    })
    .to_string();
    let r = gw.raw_post(
        JS_ERROR,
        &[("Accept", V1), ("Content-Type", "application/json")],
        report.as_bytes(),
    );
    assert_eq!(r.status, 200, "the web UI's error report: {}", r.text());

    let big = vec![b' '; 20 * 1024];
    let r = gw.raw_post(
        JS_ERROR,
        &[("Accept", V1), ("Content-Type", "application/json")],
        &big,
    );
    assert_status_shape(&r, 413, "413 Payload Too Large", None);
    let mut chunked = open_post_head(gw.addr, None).into_bytes();
    chunked.extend_from_slice(format!("{:x}\r\n", big.len()).as_bytes());
    chunked.extend_from_slice(&big);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    let r = gw.raw_until_close(&chunked);
    assert_status_shape(&r, 413, "413 Payload Too Large", None);

    let token = gw.login(ADMIN, ADMIN_PW).await;
    let mut padded = br#"{"password": "Cg-test-pass-123"}"#.to_vec();
    padded.extend_from_slice(&big);
    let auth = format!("Bearer {token}");
    let r = gw.raw_post(
        "/api/user/validate_password",
        &[
            ("Accept", V1),
            ("Content-Type", "application/json"),
            ("Authorization", &auth),
        ],
        &padded,
    );
    assert_eq!(r.status, 200, "a token holder's 20 KiB body: {}", r.text());
}

/// Holds `bytes` of the body budget: a token holder's POST declaring `bytes`, its body
/// never sent (the gateway reserves the declared length, then waits for it).
async fn hold_budget(gw: &RunningGateway, token: &str, bytes: usize) -> tokio::net::TcpStream {
    let mut stream = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    let head = format!(
        "POST /api/user/validate_password HTTP/1.1\r\nHost: {}\r\nAccept: {V1}\r\n\
         Authorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         Content-Length: {bytes}\r\n\r\n",
        gw.addr
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// An open POST with a small body, sent whole; its answer (the connection then closed).
async fn small_open_post(addr: SocketAddr) -> Reply {
    let report = br#"{"url":"/","message":"m"}"#;
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = open_post_head(addr, Some(report.len()));
    let head = head.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(report).await.unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    parse_http1(&answer).unwrap()
}

/// One budget for all held bodies: while a forwarded body holds it all (its request
/// waiting for a dashboard that does not answer), another request waits within
/// `server.body_timeout_ms`, then is answered 503 with `Retry-After` in the dashboard's
/// shape, counted; a body given back while another waits lets that one through. Before:
/// no budget, every body read.
#[tokio::test]
async fn past_the_body_budget_a_request_waits_then_gets_503() {
    let dash = Dashboard::shared();
    let backend = dash.host_ports()[0].parse().unwrap();
    let slow = "POST /api/user/validate_password ";
    let relay = ResettingRelay::start_with(backend, slow, Fault::Stall);
    let budget = 64 * 1024;
    let gw = Gateway::with_dashboard_users()
        .tls(false)
        .upstream_via(dash, vec![relay.url()])
        .max_body_bytes(budget)
        .extra_toml("upstream", "read_timeout_ms = 6000")
        .extra_toml("server", &format!("body_budget_bytes = {budget}"))
        .extra_toml("server", "body_timeout_ms = 2000")
        .start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    // A whole body of the budget's size, forwarded to a dashboard that never answers.
    let mut held = hold_budget(&gw, &token, budget).await;
    held.write_all(&vec![b' '; budget]).await.unwrap();
    let metrics = gw
        .metrics_until(|m| m.contains(&format!("clustergate_body_bytes_held {budget}\n")))
        .await;
    assert!(
        metrics.contains(&format!("clustergate_body_bytes_held {budget}\n")),
        "{metrics}"
    );
    let started = Instant::now();
    let r = small_open_post(gw.addr).await;
    assert_status_shape(&r, 503, "503 Service Unavailable", None);
    assert_eq!(r.header("retry-after").as_deref(), Some("1"));
    assert!(started.elapsed() < Duration::from_secs(30), "bounded wait");
    let metrics = gw
        .metrics_until(|m| m.contains("clustergate_body_budget_refused_total 1\n"))
        .await;
    assert!(
        metrics.contains("clustergate_body_budget_refused_total 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains(&format!("clustergate_body_budget_bytes {budget}\n")));
    // The stalled request ends (504 at the read timeout), and gives its bytes back.
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), held.read_to_end(&mut answer)).await;
    assert_eq!(parse_http1(&answer).map(|r| r.status), Some(504));

    // A body given back while another waits: the waiting one is served. The first holds
    // the budget with a body that never comes, until its body timeout (408).
    let _unsent = hold_budget(&gw, &token, budget).await;
    // Half its body timeout later: the waiting one's deadline comes after the first's.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let r = tokio::time::timeout(Duration::from_secs(20), small_open_post(gw.addr))
        .await
        .expect("answered");
    assert_eq!(r.status, 200, "{}", r.text());
}

/// A connection the gateway has answered once (so surely accepted and counted), kept.
fn served_connection(addr: SocketAddr) -> Option<TcpStream> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = format!("GET /api/summary HTTP/1.1\r\nHost: gw\r\nAccept: {V1}\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(reply) = parse_http1(&answer) {
            return (reply.status == 401).then_some(stream);
        }
        let read = stream.read(&mut chunk).ok()?;
        if read == 0 {
            return None;
        }
        answer.extend_from_slice(&chunk[..read]);
    }
}

/// By default one address holds at most 64 connections (429 past it); a trusted proxy's
/// connections are not counted, since all its clients share its address. Before: no cap
/// unless configured.
#[test]
fn connections_per_address_are_capped_by_default_but_not_for_a_trusted_proxy() {
    let gw = Gateway::with_admin_and_viewer().tls(false).start();
    let held: Vec<TcpStream> = (0..64)
        .map(|i| served_connection(gw.addr).unwrap_or_else(|| panic!("connection {i}")))
        .collect();
    let mut next = TcpStream::connect(gw.addr).unwrap();
    next.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    next.write_all(
        format!("GET /api/summary HTTP/1.1\r\nHost: gw\r\nAccept: {V1}\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut answer = Vec::new();
    let _ = next.read_to_end(&mut answer);
    let reply = parse_http1(&answer).expect("an answer to the 65th");
    assert_status_shape(&reply, 429, "429 Too Many Requests", None);
    drop(held);

    let gw = Gateway::with_admin_and_viewer()
        .tls(false)
        .trusted_proxies(&["127.0.0.1"])
        .start();
    let held: Vec<TcpStream> = (0..80)
        .map(|i| served_connection(gw.addr).unwrap_or_else(|| panic!("proxy connection {i}")))
        .collect();
    assert_eq!(held.len(), 80);
}
