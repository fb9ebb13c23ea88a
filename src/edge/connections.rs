//! Client connections up to a parsed request: each HTTP/1 request head is read here,
//! bounded in size, in header lines and in time, before pingora parses it; idle keep-alive
//! connections wait in a small future; and connections per client address are capped
//! (but for those of `server.trusted_proxies`, each carrying many clients).
//!
//! pingora reads request heads of up to 1 MiB with no time bound of its own, so a slow or
//! oversized head would pin memory for as long as the client likes. Reading the head here
//! also keeps idle connections small: pingora serves each HTTP/1 request inside one large
//! boxed future (the whole proxy state machine), about 33 KB resident per connection if a
//! keep-alive connection waited in there; here it waits holding no buffer, and only a
//! complete head, the bytes read after it included, is handed to pingora's parser.
//! HTTP/2 connections are pingora's, their header list bounded by its h2 settings.

use std::cell::RefCell;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use bytes::BytesMut;
use dashmap::DashMap;
use pingora::apps::{HttpPersistentSettings, HttpServerApp, ServerApp};
use pingora::protocols::http::ServerSession;
use pingora::protocols::{Stream, ALPN};
use pingora::server::ShutdownWatch;
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::time::Instant;

use crate::client_addr::{ClientNet, TrustedProxies};
use crate::config::ClientLimits;
use crate::edge::respond::{self, LocalResponse};
use crate::observe::metrics::{ConnectionRefusal, Metrics};

/// Why a client was refused before its request was parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionError {
    #[error("more than {limit} connections from one address")]
    TooManyConnections { limit: usize },
    #[error("a request head over {bytes} bytes")]
    HeaderTooLarge { bytes: usize },
    #[error("a request head over {lines} header lines")]
    TooManyHeaderLines { lines: usize },
    #[error("a request head not whole within {millis} ms")]
    HeaderTimeout { millis: u128 },
}

impl ConnectionError {
    /// The metric's reason.
    fn reason(self) -> ConnectionRefusal {
        match self {
            ConnectionError::TooManyConnections { .. } => ConnectionRefusal::TooManyConnections,
            ConnectionError::HeaderTooLarge { .. } => ConnectionRefusal::HeaderTooLarge,
            ConnectionError::TooManyHeaderLines { .. } => ConnectionRefusal::TooManyHeaderLines,
            ConnectionError::HeaderTimeout { .. } => ConnectionRefusal::HeaderTimeout,
        }
    }
}

/// One read of a request: what pingora starts its header buffer with.
const READ_BYTES: usize = 4096;

/// The answer to a refused client, given its request id (the error mapping is above `edge`).
pub type RefusalAnswer = fn(ConnectionError, &str) -> LocalResponse;

/// Wraps an HTTP application (the proxy) with the client limits.
pub struct ClientConnections<A> {
    app: Arc<A>,
    answer: RefusalAnswer,
    limits: ClientLimits,
    per_address: ConnectionsPerAddress,
    metrics: Arc<Metrics>,
    tls: bool,
}

impl<A> ClientConnections<A> {
    pub fn new(
        app: A,
        answer: RefusalAnswer,
        limits: ClientLimits,
        trusted_proxies: TrustedProxies,
        metrics: Arc<Metrics>,
        tls: bool,
    ) -> Self {
        ClientConnections {
            app: Arc::new(app),
            answer,
            per_address: ConnectionsPerAddress::new(limits.max_connections_per_ip, trusted_proxies),
            limits,
            metrics,
            tls,
        }
    }

    /// Answers a client refused before pingora parsed its request, then closes.
    async fn refuse(&self, mut stream: Stream, refusal: ConnectionError) {
        self.metrics.connections.refused(refusal.reason());
        let request_id = uuid::Uuid::new_v4().to_string();
        let response = (self.answer)(refusal, &request_id);
        tracing::info!(request_id, status = response.status, error = %refusal, "client refused");
        if let Ok(bytes) = respond::closing_http1(response, self.tls, &request_id) {
            // The client may be gone or never read: its loss.
            let write = async {
                stream.write_all(&bytes).await?;
                stream.shutdown().await
            };
            let _ = tokio::time::timeout(self.limits.header_timeout, write).await;
        }
    }
}

#[async_trait]
impl<A> ServerApp for ClientConnections<A>
where
    A: HttpServerApp + Send + Sync + 'static,
{
    async fn process_new(
        self: &Arc<Self>,
        mut stream: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        let peer = peer_ip(&stream);
        let Some(_slot) = self.per_address.enter(peer) else {
            let limit = self.limits.max_connections_per_ip.unwrap_or_default();
            let refused = ConnectionError::TooManyConnections { limit };
            if matches!(stream.selected_alpn_proto(), None | Some(ALPN::H1)) {
                self.refuse(stream, refused).await;
            } else {
                // An HTTP/2 client cannot read an HTTP/1 answer: it sees the close.
                self.metrics
                    .connections
                    .refused(ConnectionRefusal::TooManyConnections);
            }
            return None;
        };
        if !matches!(stream.selected_alpn_proto(), None | Some(ALPN::H1)) {
            return self.app.process_new(stream, shutdown).await;
        }
        let mut settings: Option<HttpPersistentSettings> = None;
        // A fresh connection must start its request within the header timeout; between
        // requests, a kept-alive one may idle for the keep-alive timeout.
        let mut wait = self.limits.header_timeout;
        loop {
            let head = match read_head(&mut stream, wait, &self.limits).await {
                Head::Complete(head) => head,
                Head::Closed => return None,
                Head::Refused(refusal) => {
                    self.refuse(stream, refusal).await;
                    return None;
                }
            };
            let mut session = http1_session(stream);
            let mut carried = settings.take().unwrap_or_else(|| {
                // A fresh connection, set up as pingora sets one up.
                session.set_keepalive(Some(self.limits.keepalive_timeout.as_secs()));
                HttpPersistentSettings::for_session(&session)
            });
            // pingora's request parser starts from the bytes already read.
            carried.set_pipelined_prefix(head);
            carried.apply_to_session(&mut session);
            if *shutdown.borrow() {
                session.set_keepalive(None);
            }
            let reused = self.app.process_new_http(session, shutdown).await?;
            (stream, settings) = reused.consume();
            wait = self.limits.keepalive_timeout;
        }
    }

    async fn cleanup(&self) {
        self.app.http_cleanup().await;
    }
}

/// How reading a request head ended.
enum Head {
    /// The whole head, and whatever came after it.
    Complete(BytesMut),
    /// Nothing to answer: the client closed or stayed idle, the read failed, or the
    /// server is shutting down.
    Closed,
    /// A head over the limits: answered, then the connection is closed.
    Refused(ConnectionError),
}

/// Reads the next request's head: its first bytes within `wait`, the rest within the
/// header timeout of the first byte, within the size and line bounds.
///
/// A shutdown does not end the wait: a kept-alive client may send its next request at any
/// moment, and closing under it would fail that request. It is served (with
/// `Connection: close`) until the grace period ends the process; an upgrade's new process
/// meanwhile accepts the new connections.
async fn read_head(stream: &mut Stream, wait: Duration, limits: &ClientLimits) -> Head {
    let Some(mut head) = next_request_bytes(stream, wait).await else {
        return Head::Closed;
    };
    let deadline = Instant::now() + limits.header_timeout;
    loop {
        match scan_head(&head, limits) {
            HeadScan::Complete => return Head::Complete(head),
            HeadScan::TooLarge => {
                let bytes = limits.max_header_bytes;
                return Head::Refused(ConnectionError::HeaderTooLarge { bytes });
            }
            HeadScan::TooManyLines => {
                let lines = limits.max_header_count;
                return Head::Refused(ConnectionError::TooManyHeaderLines { lines });
            }
            HeadScan::Partial => {}
        }
        let more = tokio::time::timeout_at(deadline, read_more(stream, &mut head));
        match more.await {
            Ok(Ok(0)) | Ok(Err(_)) => return Head::Closed,
            Ok(Ok(_)) => {}
            Err(_) => {
                let millis = limits.header_timeout.as_millis();
                return Head::Refused(ConnectionError::HeaderTimeout { millis });
            }
        }
    }
}

/// What the bytes read so far hold of a request head.
#[derive(Debug, PartialEq, Eq)]
enum HeadScan {
    Complete,
    Partial,
    TooLarge,
    TooManyLines,
}

/// Finds the end of the head (an empty line; httparse takes bare LF line ends too) and
/// checks it against the limits. Empty lines before the request line are skipped, as
/// the parser skips them.
fn scan_head(bytes: &[u8], limits: &ClientLimits) -> HeadScan {
    let start = bytes
        .iter()
        .position(|b| *b != b'\r' && *b != b'\n')
        .unwrap_or(bytes.len());
    let rest = &bytes[start..];
    // One pass over the line ends: the first one followed by an empty line ends the head.
    let mut lines = 0;
    let mut end = None;
    for at in memchr::memchr_iter(b'\n', rest) {
        lines += 1;
        let after = &rest[at + 1..];
        if after.starts_with(b"\n") || after.starts_with(b"\r\n") {
            lines += 1;
            end = Some(at + if after[0] == b'\n' { 2 } else { 3 });
            break;
        }
        if lines > limits.max_header_count + 1 {
            break;
        }
    }
    let head_len = end.unwrap_or(rest.len());
    // The request line and each header end with a newline; the empty line ends the head.
    let header_lines = lines.saturating_sub(if end.is_some() { 2 } else { 1 });
    if header_lines > limits.max_header_count {
        HeadScan::TooManyLines
    } else if start + head_len > limits.max_header_bytes {
        HeadScan::TooLarge
    } else if end.is_some() {
        HeadScan::Complete
    } else {
        HeadScan::Partial
    }
}

/// The first bytes of the next request; `None` when the client closes, stays idle for
/// `wait`, or fails.
async fn next_request_bytes(stream: &mut Stream, wait: Duration) -> Option<BytesMut> {
    let read = std::future::poll_fn(|cx| poll_read(stream, cx));
    match tokio::time::timeout(wait, read).await {
        Ok(Ok(bytes)) if !bytes.is_empty() => Some(bytes),
        _ => None,
    }
}

/// Appends one read to `head`; returns the bytes read (0 at the end of the stream).
async fn read_more(stream: &mut Stream, head: &mut BytesMut) -> io::Result<usize> {
    let bytes = std::future::poll_fn(|cx| poll_read(stream, cx)).await?;
    head.extend_from_slice(&bytes);
    Ok(bytes.len())
}

thread_local! {
    /// Where a waiting connection reads, shared by the thread's connections: a read that
    /// finds nothing leaves it untouched, so an idle connection holds no buffer.
    static SCRATCH: RefCell<[u8; READ_BYTES]> = const { RefCell::new([0; READ_BYTES]) };
}

/// A session for the next HTTP/1 request on `stream`. Its headers are read without their
/// original case: the gateway drops it anyway where it rewrites them (`headers`), and
/// pingora keeps it in a second map, one entry allocated per header.
fn http1_session(stream: Stream) -> ServerSession {
    let mut session = ServerSession::new_http1(stream);
    session.set_keep_header_case(false);
    session
}

/// One read, copied out of the shared buffer into one of its own (empty at the end of
/// the stream).
fn poll_read(stream: &mut Stream, cx: &mut Context<'_>) -> Poll<io::Result<BytesMut>> {
    SCRATCH.with_borrow_mut(|scratch| {
        let mut buf = ReadBuf::new(scratch);
        ready!(Pin::new(&mut *stream).poll_read(cx, &mut buf))?;
        let mut bytes = BytesMut::with_capacity(READ_BYTES);
        bytes.extend_from_slice(buf.filled());
        Poll::Ready(Ok(bytes))
    })
}

/// The connection's TCP peer.
fn peer_ip(stream: &Stream) -> Option<IpAddr> {
    Some(stream.get_socket_digest()?.peer_addr()?.as_inet()?.ip())
}

/// Open connections per client address (IPv6 clients by their /64), when capped. Entries
/// live only while their address holds a connection, so the table is bounded by the open
/// connections. A trusted proxy's connections are not counted: every client behind it
/// shares its address, and the cap would refuse them all together.
struct ConnectionsPerAddress {
    cap: Option<usize>,
    uncounted: TrustedProxies,
    open: Arc<DashMap<ClientNet, usize>>,
}

/// One connection's place in the count; leaving frees it.
struct Slot {
    address: ClientNet,
    open: Arc<DashMap<ClientNet, usize>>,
}

impl ConnectionsPerAddress {
    fn new(cap: Option<usize>, uncounted: TrustedProxies) -> Self {
        ConnectionsPerAddress {
            cap,
            uncounted,
            open: Arc::new(DashMap::new()),
        }
    }

    /// A place for one more connection from `peer`; `None` when its address holds the
    /// cap. Without a cap, or an address, or from a trusted proxy, nothing is counted.
    fn enter(&self, peer: Option<IpAddr>) -> Option<Option<Slot>> {
        let (Some(cap), Some(peer)) = (self.cap, peer.map(|ip| ip.to_canonical())) else {
            return Some(None);
        };
        if self.uncounted.contains(peer) {
            return Some(None);
        }
        let address = ClientNet::of(peer);
        let mut count = self.open.entry(address).or_insert(0);
        if *count >= cap {
            return None;
        }
        *count += 1;
        Some(Some(Slot {
            address,
            open: self.open.clone(),
        }))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.remove_if_mut(&self.address, |_, count| {
            *count -= 1;
            *count == 0
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(bytes: usize, lines: usize) -> ClientLimits {
        ClientLimits {
            max_header_bytes: bytes,
            max_header_count: lines,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(10),
            min_send_rate: None,
            keepalive_timeout: Duration::from_secs(60),
            max_connections_per_ip: None,
        }
    }

    #[tokio::test]
    async fn a_request_is_read_without_its_header_case() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let client = tokio::spawn(async move {
            let mut client = tokio::net::TcpStream::connect(address).await.unwrap();
            let head = b"GET /api/summary HTTP/1.1\r\nX-Trace: a\r\nHost: gw\r\n\r\n";
            tokio::io::AsyncWriteExt::write_all(&mut client, head)
                .await
                .unwrap();
            client
        });
        let (accepted, _) = listener.accept().await.unwrap();
        let stream: Stream = Box::new(pingora::protocols::l4::stream::Stream::from(accepted));
        let mut session = http1_session(stream);
        assert!(session.read_request().await.unwrap());
        let req = session.req_header();
        assert!(!req.has_case());
        let mut wire = Vec::new();
        req.header_to_h1_wire(&mut wire);
        assert_eq!(wire, b"x-trace: a\r\nHost: gw\r\n");
        drop(client.await.unwrap());
    }

    #[test]
    fn a_head_is_complete_at_its_empty_line_with_crlf_or_bare_lf() {
        let l = limits(1024, 10);
        let cases: [(&[u8], HeadScan); 6] = [
            (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", HeadScan::Complete),
            (b"GET / HTTP/1.1\nHost: a\n\nbody", HeadScan::Complete),
            (b"\r\nGET / HTTP/1.1\r\n\r\n", HeadScan::Complete),
            (b"GET / HTTP/1.1\r\nHost: a\r\n", HeadScan::Partial),
            (b"GET / HT", HeadScan::Partial),
            (b"\r\n", HeadScan::Partial),
        ];
        for (bytes, expected) in cases {
            assert_eq!(scan_head(bytes, &l), expected, "{:?}", bytes.escape_ascii());
        }
    }

    /// The scan as first written, with two searches for the end and a count of the lines:
    /// the one-pass scan must agree with it on every input.
    fn scan_head_by_searching(bytes: &[u8], limits: &ClientLimits) -> HeadScan {
        let start = bytes
            .iter()
            .position(|b| *b != b'\r' && *b != b'\n')
            .unwrap_or(bytes.len());
        let rest = &bytes[start..];
        let end = memchr::memmem::find(rest, b"\n\r\n")
            .map(|at| at + 3)
            .into_iter()
            .chain(memchr::memmem::find(rest, b"\n\n").map(|at| at + 2))
            .min();
        let head = &rest[..end.unwrap_or(rest.len())];
        let lines = memchr::memchr_iter(b'\n', head).count();
        let header_lines = lines.saturating_sub(if end.is_some() { 2 } else { 1 });
        if header_lines > limits.max_header_count {
            HeadScan::TooManyLines
        } else if start + head.len() > limits.max_header_bytes {
            HeadScan::TooLarge
        } else if end.is_some() {
            HeadScan::Complete
        } else {
            HeadScan::Partial
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]
        #[test]
        fn the_one_pass_scan_agrees_with_searching(
            bytes in proptest::collection::vec(
                proptest::sample::select(vec![b'a', b':', b' ', b'\r', b'\n']), 0..80),
            max_bytes in 1usize..80,
            max_lines in 0usize..8,
        ) {
            let l = limits(max_bytes, max_lines);
            proptest::prop_assert_eq!(scan_head(&bytes, &l), scan_head_by_searching(&bytes, &l));
        }
    }

    #[test]
    fn a_head_over_the_byte_limit_is_too_large_complete_or_not() {
        let l = limits(1024, 100);
        let pad = "a".repeat(1100);
        let partial = format!("GET / HTTP/1.1\r\nX-Pad: {pad}");
        assert_eq!(scan_head(partial.as_bytes(), &l), HeadScan::TooLarge);
        let whole = format!("{partial}\r\n\r\n");
        assert_eq!(scan_head(whole.as_bytes(), &l), HeadScan::TooLarge);
        // The body after the head does not count.
        let small = format!("POST / HTTP/1.1\r\nContent-Length: 1100\r\n\r\n{pad}");
        assert_eq!(scan_head(small.as_bytes(), &l), HeadScan::Complete);
    }

    #[test]
    fn header_lines_are_counted_up_to_the_limit() {
        let l = limits(8192, 3);
        let head = |n: usize| {
            let headers: String = (0..n).map(|i| format!("X-{i}: v\r\n")).collect();
            format!("GET / HTTP/1.1\r\n{headers}\r\n")
        };
        assert_eq!(scan_head(head(3).as_bytes(), &l), HeadScan::Complete);
        assert_eq!(scan_head(head(4).as_bytes(), &l), HeadScan::TooManyLines);
        // Counted before the head is complete, too.
        let partial = head(5);
        let partial = &partial.as_bytes()[..partial.len() - 2];
        assert_eq!(scan_head(partial, &l), HeadScan::TooManyLines);
    }

    #[test]
    fn connections_per_address_are_capped_and_freed() {
        let per = ConnectionsPerAddress::new(Some(2), TrustedProxies::default());
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let first = per.enter(Some(a)).unwrap();
        let second = per.enter(Some(a)).unwrap();
        assert!(per.enter(Some(a)).is_none(), "a third from a is refused");
        assert!(per.enter(Some(b)).unwrap().is_some(), "b has its own count");
        drop(first);
        assert!(per.enter(Some(a)).is_some(), "a closed one frees a place");
        drop(second);
        assert!(per.open.get(&ClientNet::of(a)).is_none_or(|c| *c <= 1));
    }

    #[test]
    fn without_a_cap_nothing_is_counted() {
        let per = ConnectionsPerAddress::new(None, TrustedProxies::default());
        let a = "192.0.2.1".parse().ok();
        for _ in 0..10 {
            assert!(per.enter(a).unwrap().is_none());
        }
        assert!(per.open.is_empty());
    }

    #[test]
    fn a_trusted_proxys_connections_are_not_counted_its_neighbours_are() {
        let proxies = TrustedProxies::new(vec!["10.0.0.5/32".parse().unwrap()]);
        let per = ConnectionsPerAddress::new(Some(1), proxies);
        let proxy = "10.0.0.5".parse().ok();
        let mapped = "::ffff:10.0.0.5".parse().ok();
        let held: Vec<_> = (0..10).map(|_| per.enter(proxy).unwrap()).collect();
        assert!(
            held.iter().all(Option::is_none),
            "nothing counted for the proxy"
        );
        assert!(
            per.enter(mapped).unwrap().is_none(),
            "nor its IPv4-mapped spelling"
        );
        let neighbour = "10.0.0.6".parse().ok();
        let _one = per.enter(neighbour).unwrap();
        assert!(
            per.enter(neighbour).is_none(),
            "another address keeps its cap"
        );
    }
}
