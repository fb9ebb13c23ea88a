//! The command's side of the gateway's HTTP API: one JSON request at a time over pingora's
//! connector (the gateway's own client), TLS verified as told, each bounded in time and in
//! the size of the answer.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use pingora::http::RequestHeader;
use pingora::upstreams::peer::HttpPeer;
use pingora::utils::tls::WrappedX509;
use serde::Deserialize;

use super::{KeysError, Trust};
use crate::config::ProviderUrl;
use crate::dashboards::client::{Client, ClientError};

/// One request's time limit, connection and TLS handshake included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// The largest answer read: a list of a few thousand keys.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// What the command asks for: the dashboard's versioned JSON, as the gateway serves it.
const ACCEPT: &str = "application/vnd.ceph.api.v1.0+json";

/// A connection's settings: where the gateway is and how it is trusted.
pub struct Gateway {
    client: Client,
    url: ProviderUrl,
    ca: Option<Arc<[WrappedX509]>>,
    insecure: bool,
}

/// The dashboard-shaped error body the gateway answers with.
#[derive(Deserialize)]
struct ErrorBody {
    detail: Option<String>,
    request_id: Option<String>,
}

impl Gateway {
    pub fn new(url: ProviderUrl, trust: &Trust) -> Result<Gateway, KeysError> {
        let ca = match trust {
            Trust::CaFile(path) => Some(
                crate::tls::read_ca_file(path)
                    .map_err(|e| KeysError::CaFile(e.to_string()))?
                    .into_iter()
                    .map(|der| WrappedX509::new(der, pingora::utils::tls::parse_x509))
                    .collect::<Arc<[WrappedX509]>>(),
            ),
            Trust::System | Trust::Insecure => None,
        };
        Ok(Gateway {
            client: Client::new(),
            url,
            ca,
            insecure: matches!(trust, Trust::Insecure),
        })
    }

    /// Sends `method path` with `bearer` and the JSON `body`; the answer's body if its
    /// status is `expected`, else the gateway's error (its status, `detail` and `request_id`).
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        bearer: Option<&str>,
        body: Option<&serde_json::Value>,
        expected: u16,
    ) -> Result<Bytes, KeysError> {
        let body = body.map(|json| Bytes::from(json.to_string()));
        let request = self.request(method, path, bearer, body.as_ref().map(Bytes::len))?;
        let reply = self
            .client
            .send(
                &self.peer().await?,
                request,
                body,
                MAX_ANSWER_BYTES,
                REQUEST_TIMEOUT,
            )
            .await?;
        match reply.status() {
            status if status == expected => Ok(reply.body),
            status => Err(refusal(status, &reply.body)),
        }
    }

    fn request(
        &self,
        method: &str,
        path: &str,
        bearer: Option<&str>,
        body_length: Option<usize>,
    ) -> Result<RequestHeader, KeysError> {
        let protocol = |e: Box<pingora::Error>| ClientError::Protocol(e.to_string());
        let mut request = RequestHeader::build(method, path.as_bytes(), None).map_err(protocol)?;
        let host = match self.url.host.contains(':') {
            true => format!("[{}]:{}", self.url.host, self.url.port),
            false => format!("{}:{}", self.url.host, self.url.port),
        };
        let headers = [
            ("host", host),
            ("accept", ACCEPT.to_string()),
            (
                "user-agent",
                concat!("clustergate-keys/", env!("CARGO_PKG_VERSION")).to_string(),
            ),
        ];
        for (name, value) in headers {
            request.insert_header(name, value).map_err(protocol)?;
        }
        // (GET and DELETE go without a body, and so without its headers)
        if let Some(length) = body_length {
            request
                .insert_header("content-type", "application/json")
                .map_err(protocol)?;
            request
                .insert_header("content-length", length.to_string())
                .map_err(protocol)?;
        }
        if let Some(token) = bearer {
            request
                .insert_header("authorization", format!("Bearer {token}"))
                .map_err(protocol)?;
        }
        Ok(request)
    }

    async fn peer(&self) -> Result<HttpPeer, KeysError> {
        let url = &self.url;
        let addr = tokio::net::lookup_host((url.host.as_str(), url.port))
            .await
            .ok()
            .and_then(|mut found| found.next())
            .ok_or_else(|| KeysError::Resolve(url.host.clone()))?;
        let sni = match url.tls {
            true => url.host.clone(),
            false => String::new(),
        };
        let mut peer = HttpPeer::new(addr, url.tls, sni);
        peer.options.connection_timeout = Some(REQUEST_TIMEOUT);
        peer.options.read_timeout = Some(REQUEST_TIMEOUT);
        peer.options.write_timeout = Some(REQUEST_TIMEOUT);
        if url.tls {
            peer.options.ca = self.ca.clone();
            if self.insecure {
                peer.options.verify_cert = false;
                peer.options.verify_hostname = false;
            }
        }
        Ok(peer)
    }
}

/// The gateway's refusal: its status, and the `detail` and `request_id` of its body when
/// it has the dashboard's shape.
fn refusal(status: u16, body: &[u8]) -> KeysError {
    let parsed = serde_json::from_slice::<ErrorBody>(body).ok();
    let (detail, request_id) = parsed.map_or((None, None), |b| (b.detail, b.request_id));
    KeysError::Refused {
        status,
        detail: detail.unwrap_or_else(|| "(no detail in the answer)".to_string()),
        request_id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_carries_the_gateways_status_detail_and_request_id() {
        let body = br#"{"status": 403, "detail": "roles beyond yours: administrator", "request_id": "r-1"}"#;
        let shown = refusal(403, body).to_string();
        assert_eq!(
            shown,
            "the gateway answered 403: roles beyond yours: administrator (request_id r-1)"
        );
        let shown = refusal(502, b"<html>bad gateway</html>").to_string();
        assert_eq!(shown, "the gateway answered 502: (no detail in the answer)");
    }
}
