//! Client keep-alive connections: several requests on one connection, and requests that
//! arrive in pieces (`src/connections.rs` reads each request head itself and
//! hands them to pingora's parser).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::*;

/// `POST /api/auth/check` for `token`, kept alive.
fn check_request(token: &str) -> Vec<u8> {
    let body = format!(r#"{{"token": "{token}"}}"#);
    format!(
        "POST /api/auth/check HTTP/1.1\r\nHost: gw\r\nAccept: {V1}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads one response (header and Content-Length body); returns its status and body.
fn read_response(stream: &mut TcpStream) -> (u16, String) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).unwrap(),
            1,
            "connection closed mid-header"
        );
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap();
    let status = head[9..12].parse().unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().unwrap())
        })
        .expect("a Content-Length");
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).unwrap();
    (status, String::from_utf8(body).unwrap())
}

fn connect(gw: &RunningGateway) -> TcpStream {
    let stream = TcpStream::connect(gw.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream
}

#[tokio::test]
async fn one_connection_serves_requests_whole_and_in_pieces() {
    let gw = Gateway::with_admin_and_viewer().tls(false).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let request = check_request(&token);
    let mut stream = connect(&gw);
    for round in 0..3 {
        stream.write_all(&request).unwrap();
        let (status, body) = read_response(&mut stream);
        assert_eq!(status, 200, "round {round}: {body}\n{}", gw.logs());
        assert!(body.contains(ADMIN), "round {round}: {body}");
    }
    // The header in three writes, the body after a pause: parsed as one request.
    for piece in [
        &request[..10],
        &request[10..40],
        &request[40..request.len() - 5],
    ] {
        stream.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    stream.write_all(&request[request.len() - 5..]).unwrap();
    let (status, body) = read_response(&mut stream);
    assert_eq!(status, 200, "{body}\n{}", gw.logs());
    // A malformed request on a kept-alive connection still gets pingora's 400.
    stream.write_all(b"NOT HTTP\r\n\r\n").unwrap();
    let mut rest = String::new();
    let _ = stream.read_to_string(&mut rest);
    assert!(rest.starts_with("HTTP/1.1 400"), "{rest:?}");
}
