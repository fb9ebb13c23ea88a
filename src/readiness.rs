//! Whether this gateway should get traffic: what `/readyz` and `POST /api/auth/check` tell
//! load balancers. Not while no dashboard is known to be active (with some configured),
//! not while the state store is unreachable, not (with `[oidc]`) before the identity
//! provider's keys were fetched, and not while draining before it stops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::server::{ShutdownSignal, ShutdownSignalWatch, UnixShutdownSignalWatch};

use crate::dashboards::Upstreams;
use crate::oidc::Provider;
use crate::state::StoreHealth;

/// Why the gateway should get no traffic now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    #[error("draining before shutdown")]
    Draining,
    #[error("no active dashboard backend")]
    NoActiveBackend,
    #[error("session store unavailable")]
    StoreUnavailable,
    #[error("identity provider keys not fetched")]
    NoProviderKeys,
}

pub struct Readiness {
    upstreams: Arc<Upstreams>,
    store: Arc<StoreHealth>,
    provider: Option<Arc<Provider>>,
    draining: AtomicBool,
}

impl Readiness {
    pub fn new(
        upstreams: Arc<Upstreams>,
        store: Arc<StoreHealth>,
        provider: Option<Arc<Provider>>,
    ) -> Readiness {
        Readiness {
            upstreams,
            store,
            provider,
            draining: AtomicBool::new(false),
        }
    }

    /// Decided without a round trip: it runs for every token check.
    pub fn check(&self) -> Result<(), NotReady> {
        if self.draining.load(Ordering::Acquire) {
            return Err(NotReady::Draining);
        }
        if !self.upstreams.serving() {
            return Err(NotReady::NoActiveBackend);
        }
        if !self.store.up() {
            return Err(NotReady::StoreUnavailable);
        }
        if self.provider.as_ref().is_some_and(|p| !p.ready()) {
            return Err(NotReady::NoProviderKeys);
        }
        Ok(())
    }

    fn start_draining(&self) {
        self.draining.store(true, Ordering::Release);
    }
}

/// pingora's signals, with a drain before a graceful stop: on SIGTERM the gateway first
/// tells balancers it is not ready for `drain`, serving everything else meanwhile, so
/// that they move traffic away before its listeners close. SIGINT stops at once, even
/// while draining; SIGQUIT (an upgrade hands the listeners over) does not drain.
pub struct DrainThenStop {
    pub readiness: Arc<Readiness>,
    pub drain: Duration,
}

#[async_trait]
impl ShutdownSignalWatch for DrainThenStop {
    async fn recv(&self) -> ShutdownSignal {
        let signal = UnixShutdownSignalWatch.recv().await;
        if !matches!(signal, ShutdownSignal::GracefulTerminate) || self.drain.is_zero() {
            return signal;
        }
        self.readiness.start_draining();
        tracing::info!(
            seconds = self.drain.as_secs_f64(),
            "SIGTERM: draining (/readyz and /api/auth/check answer 503), then stopping"
        );
        tokio::select! {
            _ = tokio::time::sleep(self.drain) => signal,
            fast = UnixShutdownSignalWatch.recv() => match fast {
                ShutdownSignal::FastShutdown => fast,
                _ => signal,
            },
        }
    }
}
