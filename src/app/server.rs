//! Start-up: turn the validated [`Config`] into running pingora services. Everything
//! with side effects (state directory, generated certificate and secret, the initial
//! admin) happens here, once, before any listener opens.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;

use pingora::listeners::{L4BufferSettings, ListenerConfig};
use pingora::protocols::http::v2::server::default_h2_options;
use pingora::proxy::HttpProxy;
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::{RunArgs, Server};
use pingora::services::listening::Service;
use pingora::tls::sign::CertifiedKey;

use pingora::services::background::background_service;

use super::admin::AdminApp;
use super::dashboards::Dashboards;
use super::listening::{ListenError, Listening, LISTENING_FILE};
use super::parts::{PartsError, Reloadable};
use super::reload::{Live, Reloader};
use super::upgrade::{self, Invocation, SelfUpgrade};
use crate::access::Admission;
use crate::answer_cache::AnswerCache;
use crate::auth::{self, Auth, AuthParts, DashboardAccounts, KeyLimits, KeyPolicy};
use crate::config::{ApiKeysConfig, Config, OidcConfig, ServerConfig, TlsMode, UpstreamIdentity};
use crate::dashboards::credentials::ServiceAccount;
use crate::dashboards::{UpstreamError, Upstreams};
use crate::edge::body_budget::{self, BodyBudget};
use crate::edge::connections::ClientConnections;
use crate::edge::listen_table::ListenTable;
use crate::edge::respond::WriteBounds;
use crate::errors::GatewayError;
use crate::observe::access_log::AccessLog;
use crate::observe::audit::{Audit, AuditError};
use crate::observe::logs::{LogHandles, LogWriter};
use crate::observe::metrics::Metrics;
use crate::oidc::fetch::HttpFetch;
use crate::oidc::{KeyRefresher, Provider};
use crate::proxy::Gateway;
use crate::readiness::{DrainThenStop, Readiness};
use crate::secrets::{self, SecretError};
use crate::state::{BucketRate, StateError, Stores};
use crate::tls::{self, ServingCert, TlsError};
use crate::tokens::TokenService;
use crate::users::{PasswordChecker, UserDb};
use crate::versioning::ApiVersion;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("state_dir: {0}")]
    StateDir(SecretError),
    #[error("upstream.accounts_key_file: {0}")]
    AccountsKey(SecretError),
    #[error(transparent)]
    Parts(#[from] PartsError),
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    #[error("state: {0}")]
    State(StateError),
    #[error("log.audit_file: {0}")]
    Audit(#[from] AuditError),
    #[error(transparent)]
    Listen(#[from] ListenError),
}

/// Client connections read straight into pingora's request buffers instead of through a
/// zeroed 64 KiB read buffer per connection, which idle keep-alive connections kept
/// resident (measured on a bare pingora proxy with mimalloc, 10,000 idle connections:
/// 1,002 MB with it, 376 MB without). Writes keep pingora's small coalescing buffer.
const CLIENT_CONNECTION_BUFFERS: L4BufferSettings = L4BufferSettings {
    read: Some(0),
    write: None,
};

/// How this process starts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Start {
    /// Take the listening sockets over from a running gateway (pingora's graceful upgrade,
    /// through `state_dir/upgrade.sock`), which hands them over on SIGQUIT.
    pub upgrade: bool,
}

/// The running gateway's pid, in `state_dir`.
const PID_FILE: &str = "clustergate.pid";

/// Runs the gateway until a signal stops it (after draining, on SIGTERM); returns an error
/// only when it cannot start. `logs`: the logger's output, which JSON access lines go to,
/// and its filter, which a reload changes.
pub fn run(config: Config, start: Start, logs: LogHandles) -> Result<(), StartError> {
    let state_dir = config.server.state_dir.clone();
    let pid_file = state_dir.join(PID_FILE);
    let (server, shutdown, listening) = build(config, start, logs)?;
    // Where operators (and an upgrade's successor, which rewrites it) find the process.
    if let Err(e) = std::fs::write(&pid_file, format!("{}\n", std::process::id())) {
        tracing::warn!(file = %pid_file.display(), error = %e, "cannot write the pid file");
    }
    // Where they find its listeners (with port 0, the only place besides this log line);
    // the sockets are open, so a client may connect from now on.
    tracing::info!(server = %listening.server, metrics = %listening.metrics, "listening");
    if let Err(e) = listening.write(&state_dir) {
        tracing::warn!(file = %state_dir.join(LISTENING_FILE).display(), error = %e, "cannot write the listening file");
    }
    upgrade::notify_ready();
    server.run(RunArgs {
        shutdown_signal: Box::new(shutdown),
    });
    Ok(())
}

/// Builds the pingora server with its services, what stops it, and where it listens.
fn build(
    config: Config,
    start: Start,
    logs: LogHandles,
) -> Result<(Server, DrainThenStop, Listening), StartError> {
    let running = config.clone();
    secrets::ensure_private_dir(&config.server.state_dir).map_err(StartError::StateDir)?;
    let reloadable = Reloadable::build(&config, &config)?;
    let certificate = certificate(&config.server.tls, &config.server.state_dir)?;
    let mut parts = Parts::build(&config, reloadable, certificate.as_ref())?;
    let (mut server, listening) = open_server(start, &config)?;
    let certificate = certificate.map(ServingCert::new);
    let served_certificate = match config.server.tls {
        TlsMode::Files { .. } => certificate.clone(),
        _ => None,
    };
    let reloader = parts.reloader(running, served_certificate, &logs);
    let gateway = parts.gateway(&config, &logs);
    let service = proxy_service(
        &server,
        gateway,
        listening.server,
        &config.server,
        certificate,
    )?;
    server.add_service(service);
    server.add_service(admin_service(parts.admin(logs.writer), listening.metrics));
    let shutdown = DrainThenStop {
        readiness: parts.readiness.clone(),
        drain: config.server.drain,
    };
    parts.add_background_services(&mut server, reloader);
    Ok((server, shutdown, listening))
}

/// What the services of the process share, built once from the configuration.
struct Parts {
    metrics: Arc<Metrics>,
    audit: Arc<Audit>,
    stores: Stores,
    provider: Option<Arc<Provider>>,
    dashboards: Option<Dashboards>,
    auth: Arc<Auth>,
    admission: Arc<ArcSwap<Admission>>,
    upstreams: Arc<Upstreams>,
    readiness: Arc<Readiness>,
    tls_on: bool,
}

impl Parts {
    fn build(
        config: &Config,
        reloadable: Reloadable,
        certificate: Option<&Arc<CertifiedKey>>,
    ) -> Result<Parts, StartError> {
        let identity = config.identity();
        let (audit, metrics) = observability(config, certificate)?;
        let state = config.state.clone();
        let stores = (state.build(&config.server.state_dir, config.api_keys.max_keys))
            .map_err(StartError::State)?;
        let provider = single_sign_on(config, &metrics);
        let dashboards = Dashboards::configured(config, &stores, &metrics)?;
        let tls_on = certificate.is_some();
        let logins = (reloadable.users, reloadable.tokens);
        let auth = auth(
            config,
            logins,
            &stores,
            &metrics,
            dashboards.as_ref(),
            &provider,
            tls_on,
        );
        let tables = reloadable.tables;
        let account_name = dashboards.as_ref().map(|d| d.account_name.clone());
        let admission = Arc::new(ArcSwap::from_pointee(Admission::new(
            tables,
            auth.clone(),
            config.api.vendor.clone(),
            account_name.as_deref(),
            identity == UpstreamIdentity::Roles,
        )));
        let upstreams = (dashboards.as_ref())
            .map_or_else(|| Arc::new(Upstreams::none()), |d| d.upstreams.clone());
        let readiness = Arc::new(Readiness::new(
            upstreams.clone(),
            stores.health.clone(),
            provider.clone(),
        ));
        Ok(Parts {
            metrics,
            audit,
            stores,
            provider,
            dashboards,
            auth,
            admission,
            upstreams,
            readiness,
            tls_on,
        })
    }

    fn account_name(&self) -> Option<String> {
        self.dashboards.as_ref().map(|d| d.account_name.clone())
    }

    fn service_account(&self) -> Option<Arc<ServiceAccount>> {
        self.dashboards.as_ref().map(|d| d.account.clone())
    }

    /// What a SIGHUP reload replaces, given the configuration the process started with.
    fn reloader(
        &self,
        running: Config,
        certificate: Option<Arc<ServingCert>>,
        logs: &LogHandles,
    ) -> Reloader {
        let live = Live {
            auth: self.auth.clone(),
            admission: self.admission.clone(),
            upstreams: self.upstreams.clone(),
            certificate,
            audit: self.audit.clone(),
            log_level: logs.level.clone(),
            account: self.service_account(),
        };
        Reloader::new(live, self.metrics.clone(), running, self.account_name())
    }

    /// The request path's application (it takes the API description: one reader of it).
    fn gateway(&mut self, config: &Config, logs: &LogHandles) -> Gateway {
        let server = &config.server;
        Gateway {
            auth: self.auth.clone(),
            admission: self.admission.clone(),
            upstreams: self.upstreams.clone(),
            account: self.service_account(),
            identity: self.dashboards.as_ref().and_then(|d| d.identity.clone()),
            docs: self.dashboards.as_mut().and_then(|d| d.docs.take()),
            metrics: self.metrics.clone(),
            readiness: self.readiness.clone(),
            tls: self.tls_on,
            trusted_proxies: server.trusted_proxies.clone(),
            access_log: AccessLog::new(config.log.format, logs.writer.clone(), logs.ansi),
            audit: self.audit.clone(),
            body_timeout: server.clients.body_timeout,
            body_budget: request_body_budget(server, self.upstreams.max_body_bytes, &self.metrics),
            write_bounds: WriteBounds {
                timeout: server.clients.write_timeout,
                min_rate: server.clients.min_send_rate,
            },
            answer_cache: AnswerCache::new(
                config.answer_cache.clone(),
                self.metrics.answer_cache.clone(),
            ),
        }
    }

    /// The admin listener's application, writing its log lines' drops to `log_writer`.
    fn admin(&self, log_writer: LogWriter) -> AdminApp {
        AdminApp {
            metrics: self.metrics.clone(),
            admission: self.admission.clone(),
            upstreams: self.upstreams.clone(),
            readiness: self.readiness.clone(),
            stores: self.stores.clone(),
            log_writer,
            audit: self.audit.clone(),
        }
    }

    /// The health checks, the reload, the provider's keys, the self-upgrade and the
    /// revocation feed, each as a pingora background service.
    fn add_background_services(self, server: &mut Server, reloader: Reloader) {
        if let Some(dashboards) = &self.dashboards {
            dashboards.add_services(server, self.admission.clone());
        }
        server.add_service(background_service("configuration reload", reloader));
        if let Some(provider) = self.provider {
            let refresher = KeyRefresher { provider };
            server.add_service(background_service("identity provider keys", refresher));
        }
        match Invocation::current() {
            Some(invocation) => {
                let upgrade = SelfUpgrade { invocation };
                server.add_service(background_service("self-upgrade", upgrade));
            }
            None => tracing::warn!("cannot find this binary's path: SIGUSR2 self-upgrade is off"),
        }
        if let Some(feed) = self.stores.feed {
            server.add_service(background_service("revocation feed", feed));
        }
    }
}

/// The identity provider of `[oidc]`, if any.
fn single_sign_on(config: &Config, metrics: &Arc<Metrics>) -> Option<Arc<Provider>> {
    let oidc = config.oidc.as_ref()?;
    if config.identity() == UpstreamIdentity::User {
        tracing::warn!("upstream.identity = \"user\": single sign-on users have no dashboard password, so the dashboards see the service account on their requests (docs/single-sign-on.md)");
    }
    let public_url = config.server.public_url.as_deref().unwrap_or_default();
    Some(sso_provider(oidc, public_url, metrics))
}

/// The audit log and the metrics (the TLS certificate's expiry among them).
fn observability(
    config: &Config,
    certificate: Option<&Arc<CertifiedKey>>,
) -> Result<(Arc<Audit>, Arc<Metrics>), StartError> {
    let audit = Arc::new(Audit::open(config.log.audit_file.as_deref())?);
    let metrics = Metrics::new(prometheus::default_registry())?;
    if let Some(certified) = certificate {
        metrics
            .deployment
            .tls_cert_expiry(tls::not_after(certified)?);
    }
    Ok((audit, metrics))
}

/// Logins, token checks and logouts: the users and the token service a reload replaces
/// (`logins`), and the policy around them.
fn auth(
    config: &Config,
    logins: (UserDb, TokenService),
    stores: &Stores,
    metrics: &Arc<Metrics>,
    dashboards: Option<&Dashboards>,
    provider: &Option<Arc<Provider>>,
    tls_on: bool,
) -> Arc<Auth> {
    let identity = config.identity();
    let (users, tokens) = logins;
    Arc::new(Auth::new(AuthParts {
        source: config.auth.source,
        lockout: config.auth.lockout,
        failed_logins_per_client: config.auth.failed_logins_per_client,
        passwords: PasswordChecker::new(
            config.auth.max_concurrent_hashes,
            config.auth.max_queued_logins,
        ),
        vendor: config.api.vendor.clone(),
        tls: tls_on,
        users,
        tokens,
        stores: stores.clone(),
        metrics: metrics.clone(),
        dashboard: users_own_accounts(dashboards, identity, &config.api.vendor, stores),
        oidc: provider.clone(),
        key_limits: KeyLimits {
            rate: key_rate(&config.api_keys),
            max_keys: config.api_keys.max_keys,
        },
        key_policy: KeyPolicy {
            max_lifetime_seconds: config.api_keys.max_lifetime.as_secs(),
        },
    }))
}

/// Each API key's bucket: `burst` requests, refilled at `rate_per_second`.
fn key_rate(settings: &ApiKeysConfig) -> BucketRate {
    BucketRate {
        burst: settings.burst,
        refill_ms: 1000 / u64::from(settings.rate_per_second.max(1)),
    }
}

/// With `upstream.identity = "user"`: the users' own dashboard accounts, logged in as
/// they log in to the gateway.
fn users_own_accounts(
    dashboards: Option<&Dashboards>,
    identity: UpstreamIdentity,
    vendor: &str,
    stores: &Stores,
) -> Option<Arc<DashboardAccounts>> {
    match (dashboards, identity) {
        (Some(d), UpstreamIdentity::User) => Some(Arc::new(DashboardAccounts::new(
            d.upstreams.clone(),
            ApiVersion::V1_0.media_type(vendor),
            stores.user_sessions.clone(),
            d.account_name.clone(),
        ))),
        _ => None,
    }
}

/// The pingora server, bootstrapped (with `start.upgrade`, holding the running gateway's
/// sockets), and its listeners opened.
fn open_server(start: Start, config: &Config) -> Result<(Server, Listening), StartError> {
    let options = Opt {
        upgrade: start.upgrade,
        ..Opt::default()
    };
    let mut server = Server::new_with_opt_and_conf(Some(options), server_conf(&config.server));
    // With `upgrade`: waits (up to 5 s) for the running gateway's listening sockets.
    server.bootstrap();
    // After the bootstrap, which on an upgrade puts the received sockets in the table.
    // Opened here, not by pingora: an address in use fails the start at once (pingora
    // would retry for 30 s, then only panic a thread), and port 0's port is known.
    let listening = Listening::open(
        &ListenTable::of(&server),
        Listening {
            server: config.server.listen,
            metrics: config.metrics.listen,
        },
        &config.server.state_dir,
        start.upgrade,
    )?;
    Ok((server, listening))
}

fn server_conf(server: &ServerConfig) -> ServerConf {
    let grace = server.shutdown_grace.as_secs();
    let in_state_dir = |name: &str| server.state_dir.join(name).to_string_lossy().into_owned();
    ServerConf {
        threads: server.threads,
        work_stealing: server.work_stealing,
        grace_period_seconds: Some(grace),
        graceful_shutdown_timeout_seconds: Some(grace),
        pid_file: in_state_dir(PID_FILE),
        upgrade_sock: in_state_dir("upgrade.sock"),
        ..ServerConf::default()
    }
}

fn certificate(tls: &TlsMode, state_dir: &Path) -> Result<Option<Arc<CertifiedKey>>, StartError> {
    Ok(match tls {
        TlsMode::Off => None,
        TlsMode::Files { certified, .. } => Some(certified.clone()),
        TlsMode::Generated => {
            let paths = tls::ensure_generated(state_dir)?;
            tracing::info!(cert = %paths.cert.display(), ca = %paths.ca.display(), "using the generated certificate; clients can trust the CA file");
            Some(tls::load_certified_key(&paths.cert, &paths.key)?)
        }
    })
}

/// The gateway's service, listening on `listen` (opened in pingora's table).
/// The request body budget: `server.body_budget_bytes`, or derived from the memory limit
/// and the largest body a request may send (`edge::body_budget`).
fn request_body_budget(
    config: &ServerConfig,
    largest_forwarded: usize,
    metrics: &Metrics,
) -> BodyBudget {
    let largest = largest_forwarded.max(auth::BODY_LIMIT);
    let total = config
        .body_budget
        .unwrap_or_else(|| body_budget::derived_total(body_budget::memory_limit(), largest));
    let configured = config.body_budget.is_some();
    tracing::info!(bytes = total, configured, "request body budget");
    BodyBudget::new(total, metrics.bodies.clone())
}

fn proxy_service(
    server: &Server,
    gateway: Gateway,
    listen: SocketAddr,
    config: &ServerConfig,
    certificate: Option<Arc<ServingCert>>,
) -> Result<Service<ClientConnections<HttpProxy<Gateway>>>, StartError> {
    let tls_on = certificate.is_some();
    let metrics = gateway.metrics.clone();
    let mut proxy = pingora::proxy::http_proxy(&server.configuration, gateway);
    // HTTP/2 requests get the same bound on their head as HTTP/1 ones (h2 answers 431).
    let mut h2 = default_h2_options();
    h2.max_header_list_size(u32::try_from(config.clients.max_header_bytes).unwrap_or(u32::MAX));
    proxy.h2_options = Some(h2);
    let mut service = Service::new(
        "clustergate".to_string(),
        ClientConnections::new(
            proxy,
            |refusal, request_id| GatewayError::from(refusal).answer(request_id),
            config.clients.clone(),
            config.trusted_proxies.clone(),
            metrics,
            tls_on,
        ),
    );
    let listen = listen.to_string();
    let mut listener = ListenerConfig::tcp(listen.as_str()).l4_buffer(CLIENT_CONNECTION_BUFFERS);
    if let Some(certified) = certificate {
        listener = listener.tls(tls::listener_settings(certified)?);
    }
    service.add_listener(listener);
    tracing::info!(addr = %listen, tls = tls_on, "gateway listener");
    Ok(service)
}

fn admin_service(admin: AdminApp, listen: SocketAddr) -> Service<AdminApp> {
    let mut service = Service::new("admin".to_string(), admin);
    service.threads = Some(1);
    service.add_tcp(&listen.to_string());
    tracing::info!(addr = %listen, "admin listener (/metrics, /healthz, /readyz)");
    service
}

/// The identity provider of `[oidc]`; its keys are fetched by a background service.
fn sso_provider(config: &OidcConfig, public_url: &str, metrics: &Arc<Metrics>) -> Arc<Provider> {
    let fetch = Arc::new(HttpFetch::new(config.ca_certificates.clone()));
    tracing::info!(issuer = %config.issuer.text, local_login = config.local_login, "single sign-on: the identity provider's tokens are accepted");
    Arc::new(Provider::new(config, public_url, fetch, metrics.clone()))
}
