//! Idle keep-alive connections wait for their next request in a small future.
//!
//! pingora serves each HTTP/1 request of a connection inside one large boxed future (the
//! whole proxy state machine), and a keep-alive connection waits for its next request in
//! there: measured, about 33 KB resident per idle connection. `LeanKeepalive` waits for
//! the first bytes of each request itself, holding no buffer while it waits, and only
//! then hands the connection, those bytes included, to pingora. HTTP/2 connections are
//! pingora's as before.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use bytes::BytesMut;
use pingora::apps::{HttpPersistentSettings, HttpServerApp, ServerApp};
use pingora::protocols::http::ServerSession;
use pingora::protocols::{Stream, ALPN};
use pingora::server::ShutdownWatch;
use tokio::io::{AsyncRead, ReadBuf};

/// How long a client connection may sit idle between requests (pingora's own default).
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// The first read of a request: what pingora starts its header buffer with.
const FIRST_READ_BYTES: usize = 4096;

/// Wraps an HTTP application (the proxy) so that idle connections stay small.
pub struct LeanKeepalive<A> {
    app: Arc<A>,
}

impl<A> LeanKeepalive<A> {
    pub fn new(app: A) -> Self {
        LeanKeepalive { app: Arc::new(app) }
    }
}

#[async_trait]
impl<A> ServerApp for LeanKeepalive<A>
where
    A: HttpServerApp + Send + Sync + 'static,
{
    async fn process_new(
        self: &Arc<Self>,
        mut stream: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        if !matches!(stream.selected_alpn_proto(), None | Some(ALPN::H1)) {
            return self.app.process_new(stream, shutdown).await;
        }
        let mut settings: Option<HttpPersistentSettings> = None;
        loop {
            let first_bytes = next_request_bytes(&mut stream, shutdown).await?;
            let mut session = ServerSession::new_http1(stream);
            let mut carried = settings.take().unwrap_or_else(|| {
                // A fresh connection, set up as pingora sets one up.
                session.set_keepalive(Some(IDLE_TIMEOUT.as_secs()));
                HttpPersistentSettings::for_session(&session)
            });
            // pingora's request parser starts from the bytes already read.
            carried.set_pipelined_prefix(first_bytes);
            carried.apply_to_session(&mut session);
            if *shutdown.borrow() {
                session.set_keepalive(None);
            }
            let reused = self.app.process_new_http(session, shutdown).await?;
            (stream, settings) = reused.consume();
        }
    }

    async fn cleanup(&self) {
        self.app.http_cleanup().await;
    }
}

/// The first bytes of the next request; `None` when the client closes, stays idle too
/// long, fails, or the server is shutting down.
async fn next_request_bytes(stream: &mut Stream, shutdown: &ShutdownWatch) -> Option<BytesMut> {
    let mut shutdown = shutdown.clone();
    if *shutdown.borrow_and_update() {
        return None;
    }
    let read = tokio::time::timeout(
        IDLE_TIMEOUT,
        std::future::poll_fn(|cx| poll_first_bytes(stream, cx)),
    );
    tokio::select! {
        biased;
        result = read => match result {
            Ok(Ok(bytes)) if !bytes.is_empty() => Some(bytes),
            _ => None,
        },
        _ = shutdown.changed() => None,
    }
}

thread_local! {
    /// Where a waiting connection reads, shared by the thread's connections: a read that
    /// finds nothing leaves it untouched, so an idle connection holds no buffer.
    static FIRST_READ: RefCell<[u8; FIRST_READ_BYTES]> = const { RefCell::new([0; FIRST_READ_BYTES]) };
}

/// One read of the next request's first bytes, copied out of the shared buffer into one
/// of their own (empty at the end of the stream).
fn poll_first_bytes(stream: &mut Stream, cx: &mut Context<'_>) -> Poll<io::Result<BytesMut>> {
    FIRST_READ.with_borrow_mut(|scratch| {
        let mut buf = ReadBuf::new(scratch);
        ready!(Pin::new(&mut *stream).poll_read(cx, &mut buf))?;
        let mut bytes = BytesMut::with_capacity(FIRST_READ_BYTES);
        bytes.extend_from_slice(buf.filled());
        Poll::Ready(Ok(bytes))
    })
}
