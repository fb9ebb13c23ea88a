//! Fetching the provider's documents (discovery, JWKS): a narrow trait, so the key store
//! is tested against a fake, and its one implementation over the gateway's own client
//! (pingora's connector: the same TLS stack as the dashboards'), bounded in time and size.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::RequestHeader;
use pingora::upstreams::peer::HttpPeer;
use pingora::utils::tls::WrappedX509;

use crate::config::ProviderUrl;
use crate::dashboards::client::{Client, ClientError};

/// A provider document is a few KB; a JWKS with many keys a few dozen.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// One fetch's time limit, connection included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot resolve {0}")]
    Resolve(String),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("{url} answered {status}")]
    Status { url: String, status: u16 },
}

/// GETs a JSON document of the provider; POSTs a form to its token endpoint.
#[async_trait]
pub trait Fetch: Send + Sync {
    async fn get(&self, url: &ProviderUrl) -> Result<Bytes, FetchError>;
    /// `form` (urlencoded) with `authorization` (a client's Basic credentials), if any;
    /// the answer's status and body, whatever the status.
    async fn post_form(
        &self,
        url: &ProviderUrl,
        form: String,
        authorization: Option<String>,
    ) -> Result<(u16, Bytes), FetchError>;
}

/// Over the gateway's client, trusting `ca` (or the system's roots).
pub struct HttpFetch {
    client: Client,
    ca: Option<Arc<[WrappedX509]>>,
}

impl HttpFetch {
    pub fn new(ca: Option<Vec<Vec<u8>>>) -> HttpFetch {
        let ca = ca.map(|certificates| {
            certificates
                .into_iter()
                .map(|der| WrappedX509::new(der, pingora::utils::tls::parse_x509))
                .collect::<Arc<[WrappedX509]>>()
        });
        HttpFetch {
            client: Client::new(),
            ca,
        }
    }

    async fn peer(&self, url: &ProviderUrl) -> Result<HttpPeer, FetchError> {
        let addr = tokio::net::lookup_host((url.host.as_str(), url.port))
            .await
            .ok()
            .and_then(|mut found| found.next())
            .ok_or_else(|| FetchError::Resolve(url.host.clone()))?;
        let sni = if url.tls {
            url.host.clone()
        } else {
            String::new()
        };
        let mut peer = HttpPeer::new(addr, url.tls, sni);
        peer.options.connection_timeout = Some(FETCH_TIMEOUT);
        peer.options.read_timeout = Some(FETCH_TIMEOUT);
        peer.options.write_timeout = Some(FETCH_TIMEOUT);
        if url.tls {
            peer.options.ca = self.ca.clone();
        }
        Ok(peer)
    }
}

impl HttpFetch {
    /// One request to the provider; its status and body.
    async fn exchange(
        &self,
        method: &str,
        url: &ProviderUrl,
        headers: &[(&'static str, String)],
        body: Option<Bytes>,
    ) -> Result<(u16, Bytes), FetchError> {
        let peer = self.peer(url).await?;
        let protocol = |e: Box<pingora::Error>| ClientError::Protocol(e.to_string());
        let mut request =
            RequestHeader::build(method, url.path_and_query.as_bytes(), None).map_err(protocol)?;
        let host = match url.port {
            443 | 80 => url.host.clone(),
            port => format!("{}:{port}", url.host),
        };
        request.insert_header("host", host).map_err(protocol)?;
        request
            .insert_header("accept", "application/json")
            .map_err(protocol)?;
        for (name, value) in headers {
            request.insert_header(*name, value).map_err(protocol)?;
        }
        let reply = self
            .client
            .send(&peer, request, body, MAX_DOCUMENT_BYTES, FETCH_TIMEOUT)
            .await?;
        Ok((reply.status(), reply.body))
    }
}

#[async_trait]
impl Fetch for HttpFetch {
    async fn get(&self, url: &ProviderUrl) -> Result<Bytes, FetchError> {
        match self.exchange("GET", url, &[], None).await? {
            (200, body) => Ok(body),
            (status, _) => Err(FetchError::Status {
                url: url.text.clone(),
                status,
            }),
        }
    }

    async fn post_form(
        &self,
        url: &ProviderUrl,
        form: String,
        authorization: Option<String>,
    ) -> Result<(u16, Bytes), FetchError> {
        let mut headers = vec![
            (
                "content-type",
                "application/x-www-form-urlencoded".to_string(),
            ),
            ("content-length", form.len().to_string()),
        ];
        headers.extend(authorization.map(|a| ("authorization", a)));
        self.exchange("POST", url, &headers, Some(Bytes::from(form)))
            .await
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A provider in memory: its discovery document, a JWKS of Ed25519 keys it can sign
    //! with, and an outage switch.

    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;

    use super::*;

    /// Ed25519 test keys: id, public `x`, private key (PKCS#8 DER, base64).
    pub const KEYS: [(&str, &str, &str); 2] = [
        (
            "k1",
            "3B5hzU9eZ7sSOTogzkK3F5FsdRImiclSsuYt8UcC7iE",
            "MC4CAQAwBQYDK2VwBCIEIArVyAk8/+ZEDGpGSsx9pCK0rNYVLIxM7DPboiKvTDPO",
        ),
        (
            "k2",
            "NpGOTnCwF3MFgzhuYsmxWFCA6zJkFWtbUuOG5W3eSX4",
            "MC4CAQAwBQYDK2VwBCIEIK8FPwrUMgBD7FT+/Dt/0b//S2NasGtrzgy9lAFI797e",
        ),
    ];

    pub struct FakeProvider {
        pub issuer: String,
        published: Mutex<Vec<&'static str>>,
        down: AtomicBool,
        jwks_fetches: AtomicUsize,
    }

    impl FakeProvider {
        pub fn new(kids: &[&'static str]) -> Arc<FakeProvider> {
            Arc::new(FakeProvider {
                issuer: "https://idp.example.com/realms/ceph".into(),
                published: Mutex::new(kids.to_vec()),
                down: AtomicBool::new(false),
                jwks_fetches: AtomicUsize::new(0),
            })
        }

        pub fn set_keys(&self, kids: &[&'static str]) {
            *self.published.lock().unwrap() = kids.to_vec();
        }

        pub fn set_down(&self, down: bool) {
            self.down.store(down, Ordering::SeqCst);
        }

        pub fn jwks_fetches(&self) -> usize {
            self.jwks_fetches.load(Ordering::SeqCst)
        }

        pub fn jwks_with_use(kids: &[&str], key_use: &str) -> String {
            let keys: Vec<serde_json::Value> = KEYS
                .iter()
                .filter(|(kid, _, _)| kids.contains(kid))
                .map(|(kid, x, _)| serde_json::json!({"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "use": key_use, "alg": "EdDSA"}))
                .collect();
            serde_json::json!({ "keys": keys }).to_string()
        }
    }

    #[async_trait]
    impl Fetch for FakeProvider {
        async fn get(&self, url: &ProviderUrl) -> Result<Bytes, FetchError> {
            if self.down.load(Ordering::SeqCst) {
                return Err(FetchError::Resolve(url.host.clone()));
            }
            if url.text.ends_with("/.well-known/openid-configuration") {
                let doc = serde_json::json!({
                    "issuer": self.issuer,
                    "jwks_uri": format!("{}/jwks", self.issuer),
                    "authorization_endpoint": format!("{}/auth", self.issuer),
                    "token_endpoint": format!("{}/token", self.issuer),
                });
                return Ok(doc.to_string().into());
            }
            self.jwks_fetches.fetch_add(1, Ordering::SeqCst);
            let kids = self.published.lock().unwrap().clone();
            Ok(FakeProvider::jwks_with_use(&kids, "sig").into())
        }

        async fn post_form(
            &self,
            url: &ProviderUrl,
            _form: String,
            _authorization: Option<String>,
        ) -> Result<(u16, Bytes), FetchError> {
            Err(FetchError::Resolve(url.host.clone()))
        }
    }
}
