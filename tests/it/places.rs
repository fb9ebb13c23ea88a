//! No client takes the dashboard's places (issue 33, findings 1 and 4), against the real
//! 16.2 dashboard: clients that never read their answer (HTTP/1 sockets that read nothing,
//! an HTTP/2 connection whose window stays closed) hold no place once the dashboard's answer
//! has been read, and their writes end at the write deadline; and one user's slow reads take
//! at most half the places, so the administrator's calls are served meanwhile.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use reqwest::Method;

/// How long one administrator's call may take while the others hold what they can.
const SERVED_WITHIN: Duration = Duration::from_secs(3);
/// How many calls the administrator makes, one after the other.
const ADMIN_CALLS: usize = 10;

/// `upstream.max_in_flight` as the shipped Kubernetes ConfigMap sets it.
fn configmap_max_in_flight() -> usize {
    let text = std::fs::read_to_string(repo_path("deploy/kubernetes/configmap.yaml")).unwrap();
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("max_in_flight"))
        .expect("the ConfigMap sets upstream.max_in_flight");
    line.split('=').nth(1).unwrap().trim().parse().unwrap()
}

fn repo_path(relative: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// `n` HTTP/1 connections, each asking for `script` with a query of its own (each a miss of
/// the UI store) and reading nothing, with a small receive buffer. Each names a client
/// address of its own (the gateway trusts 127.0.0.1's `X-Forwarded-For`): many attackers,
/// so that no share per address is what keeps a place free.
fn unread_requests(addr: SocketAddr, script: &str, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|i| {
            let socket =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            socket.set_recv_buffer_size(4096).unwrap();
            socket.connect(&addr.into()).unwrap();
            let mut stream = TcpStream::from(socket);
            let head = format!(
                "GET {script}?unread={i} HTTP/1.1\r\nHost: {addr}\r\nX-Forwarded-For: {}\r\n\r\n",
                client_address(i)
            );
            stream.write_all(head.as_bytes()).unwrap();
            stream
        })
        .collect()
}

/// The `i`th attacker's address (TEST-NET-3).
fn client_address(i: usize) -> String {
    format!("203.0.113.{}", i + 1)
}

/// A gateway in front of the shared 16.2 dashboard that takes 127.0.0.1's word for the
/// client's address.
fn gateway(max_in_flight: usize) -> Gateway {
    Gateway::with_dashboard_users()
        .upstream(Dashboard::shared())
        .trusted_proxies(&["127.0.0.1/32"])
        .extra_toml("upstream", &format!("max_in_flight = {max_in_flight}"))
}

/// Waits until the gateway has sent `n` more requests to the dashboard than `before`.
async fn until_forwarded(gw: &RunningGateway, before: f64, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while gw.upstream_requests().await < before + n as f64 {
        assert!(
            Instant::now() < deadline,
            "the gateway did not forward the {n} requests\n{}",
            gw.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The administrator's calls, one after the other, are each answered 200 within
/// `SERVED_WITHIN` (never 503, never a wait for a place that does not come).
async fn admin_is_served(gw: &RunningGateway, token: &str) {
    for call in 0..ADMIN_CALLS {
        let reply = tokio::time::timeout(
            SERVED_WITHIN,
            gw.api(Method::GET, "/api/health/minimal", Some(token), None),
        )
        .await
        .unwrap_or_else(|_| panic!("call {call}: no answer within {SERVED_WITHIN:?}"));
        assert_eq!(reply.status, 200, "call {call}: {}", reply.text());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Clients that read nothing of the UI's 3.5 MB main script, one per place.
async fn unread_scripts_hold_no_place(max_in_flight: usize) {
    let gw = gateway(max_in_flight).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let script = gw.main_script().await;
    let before = gw.upstream_requests().await;
    let _unread = unread_requests(gw.addr, &script, max_in_flight);
    until_forwarded(&gw, before, max_in_flight).await;
    admin_is_served(&gw, &token).await;
}

#[tokio::test]
async fn eight_clients_that_never_read_hold_no_place() {
    unread_scripts_hold_no_place(8).await;
}

#[tokio::test]
async fn clients_that_never_read_hold_no_place_with_the_configmaps_limit() {
    unread_scripts_hold_no_place(configmap_max_in_flight()).await;
}

/// Accepts any server certificate: this test is about flow control, not TLS.
#[derive(Debug)]
struct AnyCertificate(Arc<tokio_rustls::rustls::crypto::CryptoProvider>);

mod any_certificate {
    use tokio_rustls::rustls::client::danger::{
        HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
    };
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use tokio_rustls::rustls::{DigitallySignedStruct, Error, SignatureScheme};

    impl ServerCertVerifier for super::AnyCertificate {
        fn verify_server_cert(
            &self,
            _end_entity: &CertificateDer<'_>,
            _intermediates: &[CertificateDer<'_>],
            _server_name: &ServerName<'_>,
            _ocsp_response: &[u8],
            _now: UnixTime,
        ) -> Result<ServerCertVerified, Error> {
            Ok(ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            _message: &[u8],
            _cert: &CertificateDer<'_>,
            _dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, Error> {
            Ok(HandshakeSignatureValid::assertion())
        }

        fn verify_tls13_signature(
            &self,
            _message: &[u8],
            _cert: &CertificateDer<'_>,
            _dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, Error> {
            Ok(HandshakeSignatureValid::assertion())
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
}

/// An HTTP/2 connection to `addr` over TLS whose streams' windows start at 0 and are never
/// opened: the gateway can send no byte of any answer on it.
async fn zero_window_connection(addr: SocketAddr) -> h2::client::SendRequest<bytes::Bytes> {
    use tokio_rustls::rustls;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::from(addr.ip());
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake(tls)
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    send
}

#[tokio::test]
async fn an_http2_connection_with_a_closed_window_holds_no_place_and_is_cut_off() {
    let gw = gateway(8).tls(true).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let script = gw.main_script().await;
    let before = gw.upstream_requests().await;
    let mut send = zero_window_connection(gw.addr).await;
    let mut answers = Vec::new();
    for i in 0..8 {
        let request = http::Request::get(format!("https://{}{script}?window={i}", gw.addr))
            .header("x-forwarded-for", client_address(i))
            .body(())
            .unwrap();
        send = send.ready().await.unwrap();
        let (answer, _) = send.send_request(request, true).unwrap();
        answers.push(answer);
    }
    until_forwarded(&gw, before, 8).await;
    admin_is_served(&gw, &token).await;
    // No byte of any answer could be sent: each stream ends at the write deadline
    // (`server.write_timeout_ms`, 10 s, for the window to open).
    for answer in answers {
        let ended = tokio::time::timeout(Duration::from_secs(60), async move {
            let mut body = answer.await.ok()?.into_body();
            loop {
                match body.data().await {
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => return Some(Err(e)),
                    None => return Some(Ok(())),
                }
            }
        })
        .await
        .expect("a stream whose window never opens is cut off");
        assert!(
            !matches!(ended, Some(Ok(()))),
            "an answer came whole through a closed window"
        );
    }
}

/// A socket that accepts connections and never answers: a Prometheus that hangs.
fn silent_server() -> (SocketAddr, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepting = std::thread::spawn(move || {
        let mut held = Vec::new();
        // Bounded: the test makes 8 slow reads (and the dashboard's retries, if any).
        for stream in listener.incoming().take(64).flatten() {
            held.push(stream);
        }
    });
    (addr, accepting)
}

#[tokio::test]
async fn a_user_with_eight_slow_reads_leaves_the_administrator_places() {
    let dash = Dashboard::dedicated(DashboardOptions::default());
    let (prometheus, _accepting) = silent_server();
    dash.ceph_ok(&[
        "dashboard",
        "set-prometheus-api-host",
        &format!("http://{prometheus}"),
    ]);
    let gw = Gateway::with_dashboard_users().upstream(&dash).start();
    let admin = gw.login(ADMIN, ADMIN_PW).await;
    let viewer = gw.login(VIEWER, VIEWER_PW).await;
    let server = [("server", dash.url())];
    let slow_reads: Vec<_> = (0..8)
        .map(|_| {
            let request = gw.request(
                Method::GET,
                "/api/prometheus/rules",
                Some(&viewer),
                Some(V1),
            );
            tokio::spawn(request.send())
        })
        .collect();
    // The viewer's share: half the places, the others wait for one of its own.
    let deadline = Instant::now() + Duration::from_secs(30);
    while gw.metric("clustergate_upstream_in_flight", &server).await < 4.0 {
        assert!(Instant::now() < deadline, "the slow reads hold no place");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    admin_is_served(&gw, &admin).await;
    // The viewer's reads past its share waited for one of its places, then were refused.
    let over_share = [("server", dash.url()), ("reason", "over_share")];
    let deadline = Instant::now() + Duration::from_secs(30);
    while gw
        .metric("clustergate_upstream_overload_total", &over_share)
        .await
        < 4.0
    {
        assert!(
            Instant::now() < deadline,
            "no refusal for the viewer's share"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for read in slow_reads {
        read.abort();
    }
}
