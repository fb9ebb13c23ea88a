//! One-shot requests the gateway makes on its own account (logins, health checks, the
//! docs document), over pingora's connector so they share its TLS settings and pool.
//! Every request is bounded in time and in the size of the answer it reads.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use pingora::connectors::http::Connector;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::upstreams::peer::{HttpPeer, Peer};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the backend: {0}")]
    Connect(String),
    #[error("the backend did not answer in time")]
    Timeout,
    #[error("the backend's answer is larger than {0} bytes")]
    TooLarge(usize),
    #[error("bad exchange with the backend: {0}")]
    Protocol(String),
}

/// A complete answer.
pub struct Reply {
    pub header: ResponseHeader,
    pub body: Bytes,
}

impl Reply {
    pub fn status(&self) -> u16 {
        self.header.status.as_u16()
    }
}

pub struct Client {
    connector: Connector,
}

impl Client {
    pub fn new() -> Self {
        Client {
            connector: Connector::new(None),
        }
    }

    /// Sends `request` (with `body`) to `peer` and reads the whole answer, up to
    /// `max_body` bytes, all within `timeout`.
    pub async fn send(
        &self,
        peer: &HttpPeer,
        request: RequestHeader,
        body: Option<Bytes>,
        max_body: usize,
        timeout: Duration,
    ) -> Result<Reply, ClientError> {
        // Boxed, and the connector's future within: together about 11 KB, which would
        // otherwise be part of every caller's (health checks, logins, the docs) and of the
        // hooks' that await them (clippy's large_futures, clippy.toml, keeps it so).
        let exchange = Box::pin(self.exchange(peer, request, body, max_body));
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| ClientError::Timeout)?
    }

    async fn exchange(
        &self,
        peer: &HttpPeer,
        request: RequestHeader,
        body: Option<Bytes>,
        max_body: usize,
    ) -> Result<Reply, ClientError> {
        let protocol = |e: Box<pingora::Error>| ClientError::Protocol(e.to_string());
        let (mut session, _reused) = Box::pin(self.connector.get_http_session(peer))
            .await
            .map_err(|e| ClientError::Connect(e.to_string()))?;
        session
            .write_request_header(Box::new(request))
            .await
            .map_err(protocol)?;
        if let Some(body) = body {
            session
                .write_request_body(body, true)
                .await
                .map_err(protocol)?;
        }
        session.finish_request_body().await.map_err(protocol)?;
        session.read_response_header().await.map_err(protocol)?;
        let header = session
            .response_header()
            .cloned()
            .ok_or_else(|| ClientError::Protocol("no response header".into()))?;
        let mut buffer = BytesMut::new();
        while let Some(chunk) = session.read_response_body().await.map_err(protocol)? {
            if buffer.len() + chunk.len() > max_body {
                return Err(ClientError::TooLarge(max_body));
            }
            buffer.extend_from_slice(&chunk);
        }
        if session.response_done() {
            self.connector
                .release_http_session(session, peer, peer.idle_timeout())
                .await;
        }
        Ok(Reply {
            header,
            body: buffer.freeze(),
        })
    }
}

impl Default for Client {
    fn default() -> Self {
        Client::new()
    }
}
