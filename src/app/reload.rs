//! Reloading the configuration on SIGHUP (`systemctl reload`), without a restart: the users
//! and roles files, the TLS certificate and key, the signing keys, the scope table and
//! `access.*`, `upstream.servers`, `upstream.password_file` and `log.level` are read again. SIGHUP also reopens the audit file,
//! whether or not the configuration reloads: logrotate sends it after moving the file away.
//!
//! Everything is validated first, by the same `config::load` as `check-config`, and every
//! new part is built before any is installed: a bad file keeps the whole running
//! configuration. Each part is installed by one atomic swap that requests read on their
//! way (`ArcSwap`), so requests in flight finish with what they started with. A user
//! removed or disabled by the reload is refused at once: every token check looks the user
//! up. Tokens issued before a reload removed, disabled or changed (password hash, roles) a
//! user are refused from then on: they carry the fingerprint of their credential, and the
//! reload records a reset for the user in the shared state, which every gateway reads
//! when the user is back. Settings the running process cannot change (its listeners, threads, state store,
//! ...) are named in the log as "needs a restart".

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tokio::signal::unix::{signal, SignalKind};

use super::parts::{PartsError, Reloadable};
use super::restart::needs_restart;
use crate::access::Admission;
use crate::auth::Auth;
use crate::config::{self, Config, ConfigErrors, RoleMap, TlsMode, UpstreamIdentity};
use crate::dashboards::credentials::ServiceAccount;
use crate::dashboards::{Backend, UpstreamError, Upstreams};
use crate::observe::audit::Audit;
use crate::observe::logs::{LogError, LogLevel};
use crate::observe::metrics::Metrics;
use crate::secrets::Secret;
use crate::state::UnixTime;
use crate::tls::{self, ServingCert, TlsError};
use crate::tokens::TokenService;
use crate::users::{Reset, UserDb};

/// What the request path reads that a reload replaces.
pub struct Live {
    pub auth: Arc<Auth>,
    pub admission: Arc<ArcSwap<Admission>>,
    pub upstreams: Arc<Upstreams>,
    /// `None` without TLS, or with a generated certificate (nothing to read again).
    pub certificate: Option<Arc<ServingCert>>,
    /// Reopened on every SIGHUP.
    pub audit: Arc<Audit>,
    /// The logger's filter (`log.level`).
    pub log_level: LogLevel,
    /// The gateway's dashboard account: its password is read again.
    pub account: Option<Arc<ServiceAccount>>,
}

/// Why a reload kept the running configuration.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("{0}")]
    Invalid(ConfigErrors),
    #[error(transparent)]
    Parts(#[from] PartsError),
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    #[error("certificate: {0}")]
    Certificate(#[from] TlsError),
    #[error("log.level: {0}")]
    LogLevel(#[from] LogError),
    #[error("a previous reload stopped midway; restart the gateway")]
    Poisoned,
}

/// Reloads on SIGHUP; a pingora background service.
pub struct Reloader {
    live: Live,
    metrics: Arc<Metrics>,
    /// The configuration running now: what a reload is compared with.
    running: Mutex<Config>,
    /// The gateway's dashboard account, which the admission table protects.
    account_name: Option<String>,
    /// Resets a reload could not record (the store was down), tried again at the next
    /// SIGHUP before its configuration is read.
    unrecorded: Mutex<Vec<CredentialReset>>,
}

/// A user's tokens issued before `at` are refused; all have expired at `until`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CredentialReset {
    username: String,
    at: UnixTime,
    until: UnixTime,
}

/// Every new part, built before any is installed.
struct Prepared {
    users: UserDb,
    tokens: TokenService,
    admission: Admission,
    backends: Option<Vec<Arc<Backend>>>,
    /// The certificate to serve, with its notAfter (for its metric).
    certificate: Option<(Arc<pingora::tls::sign::CertifiedKey>, i64)>,
    /// The new `log.level`'s filter, when it changed (and `RUST_LOG` does not set it).
    log_filter: Option<tracing_subscriber::EnvFilter>,
    /// `oidc.role_map`, when single sign-on is on (the provider itself needs a restart).
    role_map: Option<RoleMap>,
    /// The service account's password (`upstream.password_file`).
    service_password: Option<Secret>,
}

impl Reloader {
    pub fn new(
        live: Live,
        metrics: Arc<Metrics>,
        running: Config,
        account_name: Option<String>,
    ) -> Reloader {
        Reloader {
            live,
            metrics,
            running: Mutex::new(running),
            account_name,
            unrecorded: Mutex::new(Vec::new()),
        }
    }

    /// Reads the configuration again and installs it, or keeps the running one. Returns
    /// the users whose earlier tokens the new users refuse, to record in the shared state.
    fn reload(&self, now: UnixTime) -> Result<Vec<CredentialReset>, ReloadError> {
        // Only this service reloads; a poisoned lock means a reload panicked.
        let mut running = self.running.lock().map_err(|_| ReloadError::Poisoned)?;
        let new = config::load(&running.source).map_err(ReloadError::Invalid)?;
        let prepared = self.prepare(&running, &new)?;
        for key in needs_restart(&running, &new) {
            tracing::warn!(
                key,
                "changed in the configuration file, but needs a restart"
            );
        }
        // A token may have been issued under either TTL.
        let ttl = running.auth.token_ttl.max(new.auth.token_ttl).as_secs();
        let resets = credential_resets(&self.live.auth.users.load(), &prepared.users, now, ttl);
        self.install(prepared);
        *running = new;
        Ok(resets)
    }

    /// Records `resets` (after the unrecorded ones of earlier reloads); keeps those the
    /// store refused for the next SIGHUP. Until recorded, a user removed and added back
    /// with the same credential on another gateway is not refused there.
    async fn record(&self, resets: Vec<CredentialReset>, now: UnixTime) {
        let mut pending = match self.unrecorded.lock() {
            Ok(mut unrecorded) => std::mem::take(&mut *unrecorded),
            Err(_) => Vec::new(),
        };
        pending.extend(resets);
        let store = &self.live.auth.stores.credential_resets;
        let mut failed = Vec::new();
        for reset in pending {
            match store
                .reset(&reset.username, reset.at, reset.until, now)
                .await
            {
                Ok(()) => {
                    tracing::info!(username = ?reset.username, "tokens issued before this reload changed the user are refused")
                }
                Err(e) => {
                    tracing::error!(error = %e, username = ?reset.username, "cannot record that the user's earlier tokens are refused; tried again at the next reload");
                    failed.push(reset);
                }
            }
        }
        if let Ok(mut unrecorded) = self.unrecorded.lock() {
            unrecorded.extend(failed);
        }
    }

    fn prepare(&self, running: &Config, new: &Config) -> Result<Prepared, ReloadError> {
        let Reloadable {
            users,
            tokens,
            tables,
        } = Reloadable::build(new, running)?;
        let admission = Admission::new(
            tables,
            self.live.auth.clone(),
            running.api.vendor.clone(),
            self.account_name.as_deref(),
            // Whom the dashboards see changes only with a restart.
            running.identity() == UpstreamIdentity::Roles,
        );
        let servers = |c: &Config| c.upstream.as_ref().map(|u| u.servers.clone());
        let backends = match (servers(running), servers(new)) {
            (Some(old), Some(new)) if old != new => {
                Some(self.live.upstreams.resolve_servers(&new)?)
            }
            _ => None,
        };
        let certificate = match (&self.live.certificate, &new.server.tls) {
            (Some(_), TlsMode::Files { certified, .. }) => {
                Some((certified.clone(), tls::not_after(certified)?))
            }
            _ => None,
        };
        let log_filter = match running.log.level != new.log.level {
            true => self.live.log_level.parse(&new.log.level)?,
            false => None,
        };
        Ok(Prepared {
            users,
            tokens,
            admission,
            backends,
            certificate,
            log_filter,
            role_map: new.oidc.as_ref().map(|o| o.role_map.clone()),
            service_password: new.upstream.as_ref().map(|u| u.password.clone()),
        })
    }

    fn install(&self, prepared: Prepared) {
        let live = &self.live;
        live.auth.users.store(Arc::new(prepared.users));
        live.auth.tokens.store(Arc::new(prepared.tokens));
        live.admission.store(Arc::new(prepared.admission));
        if let (Some(provider), Some(role_map)) = (live.auth.provider(), prepared.role_map) {
            // Provider tokens are mapped on every request: the next one gets the new roles.
            provider.role_map.store(Arc::new(role_map));
        }
        // The metrics read the backends at each scrape: a server taken off goes with them.
        if let Some(backends) = prepared.backends {
            live.upstreams.replace_backends(backends);
            for backend in live.upstreams.backends().iter() {
                tracing::info!(server = %backend.base, state = ?backend.state(), "dashboard backend");
            }
        }
        if let (Some(serving), Some((certified, not_after))) =
            (&live.certificate, prepared.certificate)
        {
            serving.replace(certified);
            self.metrics.deployment.tls_cert_expiry(not_after);
        }
        if let (Some(account), Some(password)) = (&live.account, prepared.service_password) {
            account.set_password(password);
        }
        if let Some(filter) = prepared.log_filter {
            // Fails only once the logger is gone, which is at exit.
            if let Err(e) = live.log_level.install(filter) {
                tracing::error!(error = %e, "log.level stays as it was");
            }
        }
    }
}

/// The resets of the users active in `old` that `new` removes, disables or gives another
/// password hash or roles. One removed or disabled can log in only after a later reload:
/// its reset is the next second, so that no token of this second survives its coming back.
/// One changed logs in again at once: its reset is this second, and the fingerprint
/// refuses its tokens of this second that carry the old credential.
fn credential_resets(
    old: &UserDb,
    new: &UserDb,
    now: UnixTime,
    ttl_seconds: u64,
) -> Vec<CredentialReset> {
    old.resets_in(new)
        .into_iter()
        .map(|(username, reset)| {
            let at = match reset {
                Reset::Gone => now + 1,
                Reset::Changed => now,
            };
            CredentialReset {
                username: username.to_string(),
                at,
                until: at.saturating_add(ttl_seconds),
            }
        })
        .collect()
}

#[async_trait]
impl BackgroundService for Reloader {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(hangups) => hangups,
            Err(e) => {
                tracing::error!(error = %e, "cannot handle SIGHUP: reloading is off");
                return;
            }
        };
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                got = hangups.recv() => {
                    if got.is_none() {
                        return;
                    }
                    self.on_hangup().await;
                }
            }
        }
    }
}

impl Reloader {
    async fn on_hangup(&self) {
        tracing::info!("SIGHUP: reopening the audit file and reloading the configuration");
        if let Err(e) = self.live.audit.reopen() {
            tracing::error!(error = %e, "the audit log stays on the file it had");
        }
        let now = crate::state::unix_now();
        // Earlier resets first, before a user they concern can be back.
        self.record(Vec::new(), now).await;
        match self.reload(now) {
            Ok(resets) => {
                self.record(resets, now).await;
                self.metrics.deployment.config_reload_succeeded(now);
                tracing::info!("configuration reloaded");
            }
            Err(ReloadError::Invalid(errors)) => {
                self.metrics.deployment.config_reload_failed();
                for problem in &errors.0 {
                    tracing::error!(%problem, "reload refused; the running configuration stays");
                }
            }
            Err(e) => {
                self.metrics.deployment.config_reload_failed();
                tracing::error!(error = %e, "reload refused; the running configuration stays");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_gone_is_reset_from_the_next_second_and_a_changed_one_from_this_one() {
        use crate::users::{PasswordHash, Role, UserSpec};
        let hash = PasswordHash::parse(&bcrypt::hash("pw", 4).unwrap()).unwrap();
        let spec = |name: &str, role| UserSpec {
            username: name.into(),
            password_hash: hash.clone(),
            roles: vec![role],
            custom_roles: Vec::new(),
            enabled: true,
        };
        let old = UserDb::new(vec![
            spec("gone", Role::ReadOnly),
            spec("changed", Role::ReadOnly),
            spec("same", Role::ReadOnly),
        ])
        .unwrap();
        let new = UserDb::new(vec![
            spec("changed", Role::Administrator),
            spec("same", Role::ReadOnly),
        ])
        .unwrap();
        let reset = |username: &str, at| CredentialReset {
            username: username.into(),
            at,
            until: at + 60,
        };
        assert_eq!(
            credential_resets(&old, &new, 1000, 60),
            [reset("changed", 1000), reset("gone", 1001)]
        );
    }
}
