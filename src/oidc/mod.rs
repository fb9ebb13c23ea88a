//! Single sign-on with an OpenID Connect provider (`[oidc]`): the provider's discovery
//! document and signing keys (`keys`, fetched through `fetch`), and the verification of
//! its access tokens into a user with the dashboard roles its groups map to (`verify`),
//! and the browser's authorization code flow and logouts at the provider (`code_flow`).
//! The key set is fetched at start by a background service (`KeyRefresher`) and the
//! gateway is not ready until it has one.

mod code_flow;
pub mod fetch;
pub mod keys;
mod verify;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use serde::Deserialize;

use crate::config::{ClaimPath, KeyPolicy, OidcConfig, ProviderUrl, RoleMap};
use crate::observe::metrics::Metrics;
pub use code_flow::{LoginError, LogoutToken};
pub use keys::{KeyError, KeyStore, RefreshError};
pub use verify::OidcError;

/// What the provider's discovery document tells the gateway.
#[derive(Debug)]
pub struct Discovery {
    pub jwks_uri: ProviderUrl,
    /// Browser logins need both; without them only bearer tokens are accepted.
    pub authorization_endpoint: Option<ProviderUrl>,
    pub token_endpoint: Option<ProviderUrl>,
    /// RP-initiated logout; `None`: logout ends the gateway's session only.
    pub end_session_endpoint: Option<ProviderUrl>,
}

#[derive(Deserialize)]
struct DiscoveryDocument {
    issuer: String,
    jwks_uri: String,
    authorization_endpoint: Option<String>,
    token_endpoint: Option<String>,
    end_session_endpoint: Option<String>,
}

impl Discovery {
    /// The document must name `issuer` exactly (OpenID Connect Discovery 1.0, 4.3): a
    /// document for another issuer would hand out another provider's keys.
    pub fn parse(body: &[u8], issuer: &ProviderUrl) -> Result<Discovery, RefreshError> {
        let bad = |e: String| RefreshError::Discovery(e);
        let doc: DiscoveryDocument =
            serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
        if doc.issuer.trim_end_matches('/') != issuer.text {
            return Err(bad(format!(
                "it names issuer {:?}, not {:?}",
                doc.issuer, issuer.text
            )));
        }
        let url = |text: Option<String>| text.and_then(|t| ProviderUrl::parse(&t).ok());
        Ok(Discovery {
            jwks_uri: ProviderUrl::parse(&doc.jwks_uri).map_err(bad)?,
            authorization_endpoint: url(doc.authorization_endpoint),
            token_endpoint: url(doc.token_endpoint),
            end_session_endpoint: url(doc.end_session_endpoint),
        })
    }
}

/// The provider as the gateway uses it: its keys, and what its tokens must be.
pub struct Provider {
    pub keys: KeyStore,
    pub issuer: ProviderUrl,
    audience: String,
    algorithms: Vec<jsonwebtoken::Algorithm>,
    clock_skew: Duration,
    /// `oidc.access_token_types`, as `config::normal_token_type` writes them.
    access_token_types: Vec<String>,
    username_claim: String,
    roles_claim: ClaimPath,
    /// Replaced by a reload (SIGHUP).
    pub role_map: ArcSwap<RoleMap>,
    pub local_login: bool,
    policy: KeyPolicy,
    client_id: String,
    client_secret: Option<crate::secrets::Secret>,
    scopes: Vec<String>,
    pub redirect_path: String,
    /// `server.public_url` + `redirect_path`: where the provider sends browsers back.
    pub redirect_uri: String,
    /// `server.public_url`, without a trailing `/`: the dashboard's UI.
    pub home: String,
}

impl Provider {
    pub fn new(
        config: &OidcConfig,
        public_url: &str,
        fetch: Arc<dyn fetch::Fetch>,
        metrics: Arc<Metrics>,
    ) -> Provider {
        let home = public_url.trim_end_matches('/').to_string();
        Provider {
            redirect_uri: format!("{home}{}", config.redirect_path),
            home,
            keys: KeyStore::new(fetch, config.issuer.clone(), config.keys, metrics),
            issuer: config.issuer.clone(),
            audience: config.audience.clone(),
            algorithms: config.algorithms.clone(),
            clock_skew: config.clock_skew,
            access_token_types: config.access_token_types.clone(),
            username_claim: config.username_claim.clone(),
            roles_claim: config.roles_claim.clone(),
            role_map: ArcSwap::from_pointee(config.role_map.clone()),
            local_login: config.local_login,
            policy: config.keys,
            client_id: config.client_id.clone(),
            client_secret: config.client_secret.clone(),
            scopes: config.scopes.clone(),
            redirect_path: config.redirect_path.clone(),
        }
    }

    /// Whether `token` (not yet verified) names this provider as its issuer: only then is
    /// it checked as the provider's. Costs a decode of the payload, on tokens that are not
    /// the gateway's own.
    pub fn named_in(&self, token: &str) -> bool {
        #[derive(Deserialize)]
        struct Issuer {
            iss: String,
        }
        let Some(payload) = token.split('.').nth(1) else {
            return false;
        };
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        base64::Engine::decode(&engine, payload)
            .ok()
            .and_then(|json| serde_json::from_slice::<Issuer>(&json).ok())
            .is_some_and(|claims| claims.iss.trim_end_matches('/') == self.issuer.text)
    }

    /// Whether provider tokens can be checked: a key set is held and fresh enough.
    pub fn ready(&self) -> bool {
        self.keys.current().is_some()
    }
}

/// Fetches the provider's keys at start, retrying until it has them, then on schedule;
/// a pingora background service.
pub struct KeyRefresher {
    pub provider: Arc<Provider>,
}

/// The first retry's wait; it doubles up to the refresh interval (at most a minute).
const FIRST_RETRY: Duration = Duration::from_millis(500);

#[async_trait]
impl BackgroundService for KeyRefresher {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let policy = self.provider.policy;
        let max_retry = policy.refresh.min(Duration::from_secs(60));
        let mut retry = FIRST_RETRY;
        loop {
            let wait = match self.provider.keys.refresh().await {
                Ok(held) => {
                    retry = FIRST_RETRY;
                    tracing::debug!(keys = held, "identity provider keys fetched");
                    policy.refresh
                }
                Err(e) => {
                    tracing::warn!(issuer = %self.provider.issuer.text, error = %e, retry_in_ms = retry.as_millis() as u64, "cannot fetch the identity provider's keys");
                    let wait = retry;
                    retry = (retry * 2).min(max_retry);
                    wait
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.changed() => return,
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A provider over the in-memory one of `fetch::testing`: groups in
    //! `realm_access.roles`, ceph-pools mapped to pool-manager, ceph-viewers to read-only.

    use super::fetch::testing::FakeProvider;
    use super::Provider;

    pub fn provider() -> Provider {
        let fake = FakeProvider::new(&["k1"]);
        let dir = std::env::temp_dir();
        let text = format!(
            "[server]\npublic_url = \"https://gw.example.com\"\n[oidc]\nissuer = {:?}\nclient_id = \"ceph\"\nroles_claim = \"realm_access.roles\"\n[oidc.role_map]\n\"ceph-pools\" = [\"pool-manager\"]\n\"ceph-viewers\" = [\"read-only\"]\n",
            fake.issuer
        );
        let config = crate::config::Config::from_toml_str(&text, &dir.join("c.toml"), &dir)
            .unwrap_or_else(|e| panic!("{e}"));
        let oidc = config.oidc.unwrap_or_else(|| panic!("no [oidc]"));
        let metrics = crate::observe::metrics::Metrics::new(&prometheus::Registry::new())
            .unwrap_or_else(|e| panic!("{e}"));
        Provider::new(&oidc, "https://gw.example.com", fake, metrics)
    }
}
