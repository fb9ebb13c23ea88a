//! The dashboards behind the gateway: which one is the active manager, how to reach it,
//! and the gateway's own credentials on it. Only the active manager's dashboard serves;
//! standbys answer 303 to the active one, or an error status.

pub mod answer_buffer;
mod attempt;
pub mod client;
pub mod credentials;
pub mod failover;
pub mod health;
pub mod in_flight;
pub mod login;
pub mod release;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::Notify;

use pingora::http::RequestHeader;
use pingora::upstreams::peer::HttpPeer;
use pingora::utils::tls::WrappedX509;

pub use attempt::{Attempt, AttemptError, ErrorVerdict, ResponseVerdict, Tried};
pub use client::{Client, ClientError};

use crate::ceph_release::CephRelease;
use crate::config::{
    AnswerBufferLimits, BackendUrl, InFlightLimits, Timeouts, UpstreamConfig, UpstreamTrust,
};
use crate::observe::metrics::{BackendSeries, Metrics};
use answer_buffer::AnswerBuffers;
use in_flight::InFlight;

/// What a backend was last seen to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum BackendState {
    /// Not checked yet.
    Unknown = 0,
    /// Its dashboard serves: the active manager.
    Active = 1,
    /// It answers, but as a standby (a redirect or an error on `health_path`).
    Standby = 2,
    /// It does not answer.
    Down = 3,
}

impl BackendState {
    fn from_u8(v: u8) -> Self {
        match v {
            1 => BackendState::Active,
            2 => BackendState::Standby,
            3 => BackendState::Down,
            _ => BackendState::Unknown,
        }
    }
}

/// One manager's dashboard.
#[derive(Debug)]
pub struct Backend {
    pub index: usize,
    pub url: BackendUrl,
    /// `scheme://host:port`: also the metrics label.
    pub base: String,
    addr: SocketAddr,
    state: AtomicU8,
    /// The Ceph release its manager runs (`CephRelease::packed`; 0: not known), learned
    /// each time it becomes the active manager (`release`).
    release: AtomicU32,
    /// The forwarded requests it serves at once; kept by a reload that keeps the server.
    pub in_flight: Arc<InFlight>,
}

impl Backend {
    pub fn state(&self) -> BackendState {
        BackendState::from_u8(self.state.load(Ordering::Acquire))
    }

    /// Records what the backend is; returns the previous state.
    pub fn set_state(&self, state: BackendState) -> BackendState {
        BackendState::from_u8(self.state.swap(state as u8, Ordering::AcqRel))
    }

    /// The Ceph release its manager runs, once learned.
    pub fn release(&self) -> Option<CephRelease> {
        CephRelease::unpacked(self.release.load(Ordering::Acquire))
    }

    pub fn set_release(&self, release: Option<CephRelease>) {
        let packed = release.map_or(0, CephRelease::packed);
        self.release.store(packed, Ordering::Release);
    }

    /// The `Host` the backend expects.
    pub fn host_header(&self) -> &str {
        self.base
            .split_once("://")
            .map_or(self.base.as_str(), |(_, host)| host)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("upstream.servers: cannot resolve {0}: {1}")]
    Resolve(String, String),
}

/// The backends, how to connect to them, and which one serves.
/// What the request path knows of the active manager: which table and roles apply, or
/// why none can (503).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActiveRelease {
    /// No manager is active.
    NoneActive,
    /// One is; its release is not learned yet.
    Unknown,
    /// One is, running this release.
    Known(CephRelease),
}

impl ActiveRelease {
    pub fn release(self) -> Option<CephRelease> {
        match self {
            ActiveRelease::Known(release) => Some(release),
            ActiveRelease::NoneActive | ActiveRelease::Unknown => None,
        }
    }
}

pub struct Upstreams {
    /// Replaced whole when a reload changes `upstream.servers`.
    backends: ArcSwap<Vec<Arc<Backend>>>,
    /// Set once the first health check has run: until then no backend's state is known,
    /// and requests wait for it rather than hear "no active manager" (a fresh process, as
    /// an upgrade's successor, gets traffic from its first moment).
    checked: AtomicBool,
    first_check: Notify,
    ca: Option<Arc<[WrappedX509]>>,
    insecure: bool,
    pub timeouts: Timeouts,
    pub health_path: String,
    pub max_body_bytes: usize,
    /// The body limit of operations served without a token.
    pub max_open_body_bytes: usize,
    /// Each backend's places (`upstream.max_in_flight`, the queue and its wait).
    in_flight: InFlightLimits,
    /// What the answers read ahead of their clients may hold (`answer_buffer`).
    pub answer_buffers: Arc<AnswerBuffers>,
    pub client: Client,
}

/// `servers` as backends, in order; one that is in `known` keeps its state and its places.
fn resolve(
    servers: &[BackendUrl],
    known: &[Arc<Backend>],
    limits: InFlightLimits,
) -> Result<Vec<Arc<Backend>>, UpstreamError> {
    let mut backends = Vec::with_capacity(servers.len());
    for (index, url) in servers.iter().enumerate() {
        let base = url.base();
        let addr = (url.host.as_str(), url.port)
            .to_socket_addrs()
            .map_err(|e| UpstreamError::Resolve(base.clone(), e.to_string()))?
            .next()
            .ok_or_else(|| UpstreamError::Resolve(base.clone(), "no address".into()))?;
        let kept = known.iter().find(|b| b.base == base && b.addr == addr);
        let state = kept.map_or(BackendState::Unknown, |b| b.state());
        let release = kept
            .and_then(|b| b.release())
            .map_or(0, CephRelease::packed);
        let in_flight =
            kept.map_or_else(|| Arc::new(InFlight::new(limits)), |b| b.in_flight.clone());
        backends.push(Arc::new(Backend {
            index,
            base,
            url: url.clone(),
            addr,
            state: AtomicU8::new(state as u8),
            release: AtomicU32::new(release),
            in_flight,
        }));
    }
    Ok(backends)
}

impl Upstreams {
    pub fn new(config: &UpstreamConfig) -> Result<Upstreams, UpstreamError> {
        let backends = ArcSwap::from_pointee(resolve(&config.servers, &[], config.in_flight)?);
        let (checked, first_check) = (AtomicBool::new(false), Notify::new());
        let ca = match &config.trust {
            UpstreamTrust::CaFile { certificates, .. } => Some(
                certificates
                    .iter()
                    .map(|der| WrappedX509::new(der.clone(), pingora::utils::tls::parse_x509))
                    .collect::<Arc<[WrappedX509]>>(),
            ),
            _ => None,
        };
        Ok(Upstreams {
            backends,
            checked,
            first_check,
            ca,
            insecure: config.trust == UpstreamTrust::InsecureSkipVerify,
            timeouts: config.timeouts,
            health_path: config.health_path.clone(),
            max_body_bytes: config.max_body_bytes,
            max_open_body_bytes: config.max_open_body_bytes,
            in_flight: config.in_flight,
            answer_buffers: AnswerBuffers::new(config.answer_buffers),
            client: Client::new(),
        })
    }

    /// No backends (no `[upstream]`): nothing is forwarded, and nothing is waited for.
    pub fn none() -> Upstreams {
        Upstreams {
            backends: ArcSwap::from_pointee(Vec::new()),
            checked: AtomicBool::new(true),
            first_check: Notify::new(),
            ca: None,
            insecure: false,
            // Never used: nothing is forwarded without backends.
            timeouts: Timeouts::derive(Duration::ZERO, Duration::ZERO),
            health_path: String::new(),
            max_body_bytes: 0,
            max_open_body_bytes: 0,
            in_flight: InFlightLimits {
                max: 1,
                queued: 0,
                wait: Duration::ZERO,
            },
            answer_buffers: AnswerBuffers::new(AnswerBufferLimits {
                per_answer: 0,
                total: 0,
            }),
            client: Client::new(),
        }
    }

    /// Whether the first health check has run (or there is nothing to check).
    pub fn checked(&self) -> bool {
        self.checked.load(Ordering::Acquire)
    }

    /// Waits (at most `limit`) until the first health check has told the backends apart.
    pub async fn first_check(&self, limit: Duration) {
        if self.checked.load(Ordering::Acquire) {
            return;
        }
        let notified = self.first_check.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if !self.checked.load(Ordering::Acquire) {
            let _ = tokio::time::timeout(limit, notified).await;
        }
    }

    /// The health checker ran a round: every backend's state is known.
    pub fn mark_checked(&self) {
        if !self.checked.swap(true, Ordering::AcqRel) {
            self.first_check.notify_waiters();
        }
    }

    /// The backends now (a reload may replace them; a request keeps those it had).
    pub fn backends(&self) -> Arc<Vec<Arc<Backend>>> {
        self.backends.load_full()
    }

    /// `servers` as backends to replace these with (a reload). A server that stays keeps
    /// its known state, so that the active manager serves on without waiting for a health
    /// check; the new ones are checked at the next round.
    pub fn resolve_servers(
        &self,
        servers: &[BackendUrl],
    ) -> Result<Vec<Arc<Backend>>, UpstreamError> {
        resolve(servers, &self.backends.load(), self.in_flight)
    }

    pub fn replace_backends(&self, backends: Vec<Arc<Backend>>) {
        self.backends.store(Arc::new(backends));
    }

    /// The active backend a request has not tried yet.
    pub fn pick(&self, tried: Tried) -> Option<Arc<Backend>> {
        self.backends
            .load()
            .iter()
            .filter(|b| !tried.contains(b.index))
            .find(|b| b.state() == BackendState::Active)
            .cloned()
    }

    /// The backend known to be the active manager.
    pub fn active(&self) -> Option<Arc<Backend>> {
        self.pick(Tried::default())
    }

    /// What is known of the active manager's release. (One look at the backends, holding
    /// none: asked on every forwarded request.)
    pub fn active_release(&self) -> ActiveRelease {
        let backends = self.backends.load();
        match backends.iter().find(|b| b.state() == BackendState::Active) {
            None => ActiveRelease::NoneActive,
            Some(active) => active
                .release()
                .map_or(ActiveRelease::Unknown, ActiveRelease::Known),
        }
    }

    /// The release the managers are known to run: the active manager's once learned; with
    /// no manager active, the one release every backend seen active was last seen to run (a
    /// failover in progress, or every manager stopped). A standby never seen active does not
    /// count: its release is learned before it is recorded active. `None`: not known --
    /// nothing learned yet (a fresh process, a manager that will not say) or backends last
    /// seen on different releases.
    pub fn release_known(&self) -> Option<CephRelease> {
        match self.active_release() {
            ActiveRelease::Known(release) => return Some(release),
            ActiveRelease::Unknown => return None,
            ActiveRelease::NoneActive => {}
        }
        let backends = self.backends.load();
        let mut releases = backends.iter().filter_map(|b| b.release());
        let first = releases.next()?;
        releases.all(|r| r == first).then_some(first)
    }

    /// Shows the configured backends in the upstream gauges, the active one being the
    /// one `active` picks, each known release with the table `table_of` it gives (called at
    /// each scrape).
    pub fn observe(&self, metrics: &Metrics, table_of: &dyn Fn(CephRelease) -> String) {
        let active = self.active();
        let backends = self.backends.load();
        let series: Vec<BackendSeries<'_>> = backends
            .iter()
            .map(|backend| BackendSeries {
                server: &backend.base,
                up: matches!(
                    backend.state(),
                    BackendState::Active | BackendState::Standby
                ),
                active: active.as_ref().is_some_and(|a| a.base == backend.base),
                in_flight: backend.in_flight.in_flight(),
                queued: backend.in_flight.waiting(),
                release: backend
                    .release()
                    .map(|release| (release.to_string(), table_of(release))),
            })
            .collect();
        metrics.backends.observe(&series);
    }

    /// Whether the gateway can serve what it forwards: some backend is known to be the
    /// active manager, or none is configured (then only the auth endpoints are served).
    pub fn serving(&self) -> bool {
        self.backends.load().is_empty() || self.any_active()
    }

    /// Whether some backend is known to be the active manager.
    pub fn any_active(&self) -> bool {
        self.backends
            .load()
            .iter()
            .any(|b| b.state() == BackendState::Active)
    }

    /// A peer for `backend`, with our timeouts and TLS trust.
    pub fn peer(&self, backend: &Backend, read_timeout: Duration) -> HttpPeer {
        let sni = if backend.url.tls {
            backend.url.host.clone()
        } else {
            String::new()
        };
        let mut peer = HttpPeer::new(backend.addr, backend.url.tls, sni);
        peer.options.connection_timeout = Some(self.timeouts.connect);
        peer.options.read_timeout = Some(read_timeout);
        peer.options.write_timeout = Some(self.timeouts.write);
        peer.options.idle_timeout = Some(self.timeouts.idle);
        // Every answer's headers are rewritten and sent in lower case (`headers.rs`): the
        // map of their original case would be filled for nothing (vendor/pingora-core,
        // change 3).
        peer.options.keep_response_header_case = false;
        if backend.url.tls {
            peer.options.ca = self.ca.clone();
            if self.insecure {
                peer.options.verify_cert = false;
                peer.options.verify_hostname = false;
            }
        }
        peer
    }

    /// A request header for the gateway's own calls to `backend`.
    pub fn request(
        &self,
        backend: &Backend,
        method: &str,
        path: &str,
    ) -> Result<RequestHeader, ClientError> {
        let protocol = |e: Box<pingora::Error>| ClientError::Protocol(e.to_string());
        let mut req = RequestHeader::build(method, path.as_bytes(), None).map_err(protocol)?;
        req.insert_header("host", backend.host_header())
            .map_err(protocol)?;
        req.insert_header(
            "user-agent",
            concat!("clustergate/", env!("CARGO_PKG_VERSION")),
        )
        .map_err(protocol)?;
        Ok(req)
    }
}

#[cfg(test)]
impl Upstreams {
    /// `count` backends on unused local ports, none checked yet.
    pub fn for_tests(count: u16) -> Upstreams {
        let mut upstreams = Upstreams::none();
        let backends = (0..count)
            .map(|i| {
                let url = BackendUrl {
                    tls: false,
                    host: "127.0.0.1".into(),
                    port: 9 + i,
                };
                Arc::new(Backend {
                    index: usize::from(i),
                    base: url.base(),
                    addr: SocketAddr::from(([127, 0, 0, 1], url.port)),
                    url,
                    state: AtomicU8::new(BackendState::Unknown as u8),
                    release: AtomicU32::new(0),
                    in_flight: Arc::new(InFlight::new(upstreams.in_flight)),
                })
            })
            .collect();
        upstreams.backends = ArcSwap::from_pointee(backends);
        upstreams
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pingora::protocols::http::v1::client::HttpSession;

    #[test]
    fn the_release_known_is_the_active_managers_else_the_one_all_were_last_seen_on() {
        let release = |text: &str| CephRelease::parse(text);
        let upstreams = Upstreams::for_tests(2);
        let [x, y] = [0, 1].map(|i| upstreams.backends()[i].clone());
        assert_eq!(upstreams.release_known(), None, "nothing learned yet");
        x.set_state(BackendState::Active);
        assert_eq!(
            upstreams.release_known(),
            None,
            "active, its release not told"
        );
        y.set_release(release("20.2"));
        assert_eq!(
            upstreams.release_known(),
            None,
            "a standby's is not the active one's"
        );
        x.set_release(release("16.2"));
        assert_eq!(upstreams.release_known(), release("16.2"));
        x.set_state(BackendState::Down);
        assert_eq!(
            upstreams.release_known(),
            None,
            "none active, releases differ"
        );
        y.set_release(release("16.2"));
        assert_eq!(
            upstreams.release_known(),
            release("16.2"),
            "none active, one release"
        );
        let upstreams = Upstreams::for_tests(2);
        upstreams.backends()[0].set_release(release("16.2"));
        assert_eq!(
            upstreams.release_known(),
            release("16.2"),
            "none active, a standby never seen active does not count"
        );
        assert_eq!(Upstreams::none().release_known(), None);
    }

    #[tokio::test]
    async fn a_dashboards_answer_is_read_without_its_header_case() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let dashboard = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let head = b"HTTP/1.1 200 OK\r\nX-Trace: a\r\nContent-Length: 0\r\n\r\n";
            tokio::io::AsyncWriteExt::write_all(&mut conn, head)
                .await
                .unwrap();
            conn
        });
        let upstreams = Upstreams::for_tests(1);
        let backend = upstreams.backends()[0].clone();
        let peer = upstreams.peer(&backend, Duration::from_secs(5));
        let stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let stream = Box::new(pingora::protocols::l4::stream::Stream::from(stream));
        let mut session = HttpSession::new_with_options(stream, &peer);
        session.read_response().await.unwrap();
        let answer = session.resp_header().unwrap();
        assert!(!answer.has_case());
        let mut wire = Vec::new();
        answer.header_to_h1_wire(&mut wire);
        assert_eq!(wire, b"x-trace: a\r\nContent-Length: 0\r\n");
        drop(dashboard.await.unwrap());
    }

    #[test]
    fn the_gauges_show_every_backend_up_or_not_and_the_active_one() {
        let metrics = Metrics::new(&prometheus::Registry::new()).unwrap();
        let upstreams = Upstreams::for_tests(3);
        let states = [
            BackendState::Standby,
            BackendState::Active,
            BackendState::Active,
        ];
        for (backend, state) in upstreams.backends().iter().zip(states) {
            backend.set_state(state);
        }
        upstreams.observe(&metrics, &|r| r.to_string());
        let text = String::from_utf8(metrics.render().unwrap()).unwrap();
        for (port, up, active) in [(9, 1, 0), (10, 1, 1), (11, 1, 0)] {
            let server = format!("server=\"http://127.0.0.1:{port}\"");
            assert!(
                text.contains(&format!("clustergate_upstream_up{{{server}}} {up}\n")),
                "{text}"
            );
            let active_line = format!("clustergate_upstream_active{{{server}}} {active}\n");
            assert!(text.contains(&active_line), "{text}");
        }
        upstreams.backends()[1].set_state(BackendState::Down);
        upstreams.observe(&metrics, &|r| r.to_string());
        let text = String::from_utf8(metrics.render().unwrap()).unwrap();
        assert!(text.contains("clustergate_upstream_up{server=\"http://127.0.0.1:10\"} 0\n"));
        assert!(text.contains("clustergate_upstream_active{server=\"http://127.0.0.1:11\"} 1\n"));
    }

    #[test]
    fn the_active_release_is_the_active_backends_as_active_picks_it() {
        let upstreams = Upstreams::for_tests(2);
        let [standby, active] = [0, 1].map(|i| Arc::clone(&upstreams.backends()[i]));
        assert_eq!(upstreams.active_release(), ActiveRelease::NoneActive);
        standby.set_state(BackendState::Standby);
        standby.set_release(CephRelease::parse("18.2"));
        active.set_state(BackendState::Active);
        assert_eq!(upstreams.active_release(), ActiveRelease::Unknown);
        active.set_release(CephRelease::parse("20.2"));
        let picked = upstreams.active().and_then(|b| b.release()).unwrap();
        assert_eq!(upstreams.active_release(), ActiveRelease::Known(picked));
        assert_eq!(Some(picked), CephRelease::parse("20.2"));
    }
}
