//! The dashboards' side of the assembly: the Ceph dashboards of `[upstream]` as one kind of
//! backend (`crate::dashboards`), the gateway's service account on them, who they see on
//! users' requests, their API description, and their health checks as one pingora service.
//! A second kind of backend would be assembled in a file like this one, beside it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use pingora::server::Server;
use pingora::services::background::background_service;

use super::server::StartError;
use crate::access::Admission;
use crate::config::{Config, UpstreamConfig, UpstreamIdentity, UpstreamTrust};
use crate::dashboard_identity::{AccountLogins, DashboardIdentity, RoleAccounts};
use crate::dashboards::credentials::{AccountStores, ServiceAccount};
use crate::dashboards::health::{HealthChecker, ReleaseLearned};
use crate::dashboards::Upstreams;
use crate::docs::Docs;
use crate::observe::metrics::Metrics;
use crate::secrets;
use crate::state::Stores;
use crate::versioning::ApiVersion;

/// The dashboards, the gateway's account on them, and their API description.
pub(super) struct Dashboards {
    pub(super) upstreams: Arc<Upstreams>,
    pub(super) account: Arc<ServiceAccount>,
    /// Who the dashboards see on users' requests, when not the service account nor the
    /// user's own session.
    pub(super) identity: Option<Arc<dyn DashboardIdentity>>,
    pub(super) account_name: String,
    /// Until the gateway takes it.
    pub(super) docs: Option<Docs>,
    health_interval: Duration,
}

impl Dashboards {
    /// The dashboards of `[upstream]`, if any.
    pub(super) fn configured(
        config: &Config,
        stores: &Stores,
        metrics: &Arc<Metrics>,
    ) -> Result<Option<Dashboards>, StartError> {
        let Some(upstream) = config.upstream.clone() else {
            tracing::warn!("no [upstream] configured: only the auth endpoints are served");
            return Ok(None);
        };
        let (upstreams, account) = service_side(&upstream, &config.api.vendor, stores, metrics)?;
        let docs = Docs::new(
            upstreams.clone(),
            upstream.docs_path.clone(),
            upstream.docs_refresh,
            config.server.public_url.clone(),
        );
        let identity = match config.identity() {
            UpstreamIdentity::Roles => Some(role_accounts(
                &upstream,
                &account,
                stores,
                metrics,
                &config.server.state_dir,
            )? as Arc<dyn DashboardIdentity>),
            UpstreamIdentity::Service | UpstreamIdentity::User => None,
        };
        Ok(Some(Dashboards {
            upstreams,
            account,
            identity,
            account_name: upstream.username,
            docs: Some(docs),
            health_interval: upstream.health_interval,
        }))
    }

    /// Their health checks, as a pingora background service; what they learn of each
    /// manager's release is logged with the table `admission` gives it.
    pub(super) fn add_services(&self, server: &mut Server, admission: Arc<ArcSwap<Admission>>) {
        let health = HealthChecker {
            upstreams: self.upstreams.clone(),
            account: self.account.clone(),
            interval: self.health_interval,
            release_learned: release_learned(admission),
        };
        server.add_service(background_service("dashboard health checks", health));
    }
}

/// The dashboards, and the gateway's service account on them.
pub(super) fn service_side(
    upstream: &UpstreamConfig,
    vendor: &str,
    stores: &Stores,
    metrics: &Arc<Metrics>,
) -> Result<(Arc<Upstreams>, Arc<ServiceAccount>), StartError> {
    if upstream.trust == UpstreamTrust::InsecureSkipVerify {
        tracing::warn!(
            "upstream.insecure_skip_verify = true: the backends' certificates are NOT verified"
        );
    }
    let upstreams = Arc::new(Upstreams::new(upstream)?);
    for backend in upstreams.backends().iter() {
        tracing::info!(server = %backend.base, "dashboard backend");
    }
    let account = Arc::new(ServiceAccount::new(
        upstream.username.clone(),
        upstream.password.clone(),
        ApiVersion::V1_0.media_type(vendor),
        AccountStores {
            tokens: stores.upstream_tokens.clone(),
            attempts: stores.dashboard_attempts.clone(),
        },
        upstream.login_backoff,
        metrics.clone(),
    ));
    Ok((upstreams, account))
}

/// The accounts holding users' roles (`upstream.identity = "roles"`), their passwords
/// derived from `upstream.accounts_key_file`, or a key generated into `state_dir`.
pub(super) fn role_accounts(
    upstream: &UpstreamConfig,
    service: &Arc<ServiceAccount>,
    stores: &Stores,
    metrics: &Arc<Metrics>,
    state_dir: &Path,
) -> Result<Arc<RoleAccounts>, StartError> {
    let config = &upstream.role_accounts;
    let key = match &config.key_file {
        Some(path) => secrets::read_secret(path),
        None => secrets::read_or_create(&state_dir.join(ACCOUNTS_KEY_FILE)),
    }
    .map_err(StartError::AccountsKey)?;
    tracing::info!(max = config.max, "upstream.identity = \"roles\": each user acts on the dashboards as an account the gateway manages holding exactly their roles");
    Ok(Arc::new(RoleAccounts::new(
        service.clone(),
        key,
        AccountLogins {
            tokens: stores.account_tokens.clone(),
            attempts: stores.dashboard_attempts.clone(),
            backoff: upstream.login_backoff,
            uses: stores.account_use.clone(),
        },
        metrics.clone(),
        config.max,
    )))
}

/// The generated key of the managed accounts' passwords, in `server.state_dir`.
const ACCOUNTS_KEY_FILE: &str = "dashboard-accounts-key";

/// Logs which table a manager's release gives it: its own, or the nearest lower one.
fn release_learned(admission: Arc<ArcSwap<Admission>>) -> ReleaseLearned {
    Box::new(move |backend, release| {
        let choice = admission.load().table_for(Some(release));
        let table = choice.release.map_or("custom".into(), |r| r.to_string());
        if choice.exact {
            tracing::info!(server = %backend.base, release = %release, table = %table, "the manager's Ceph release");
        } else {
            tracing::warn!(server = %backend.base, release = %release, table = %table, "no operation table for the manager's Ceph release: the nearest lower one applies (access.unknown_operations decides the rest)");
        }
    })
}
