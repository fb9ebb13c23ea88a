//! Health checks: every `health_interval`, each backend's `health_path` is fetched; a 2xx
//! means its dashboard serves (the active manager), any other answer a standby, no answer
//! a down server. The same probe re-checks a backend that answered a request with an
//! error, to tell a standby from the active manager's own error answers.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use super::credentials::ServiceAccount;
use super::{Backend, BackendState, Upstreams};

/// The health page (the dashboard's index.html) is a few kilobytes.
const MAX_HEALTH_REPLY: usize = 1024 * 1024;

/// Fetches `health_path` from `backend` and says what the backend is.
pub async fn probe(upstreams: &Upstreams, backend: &Backend, timeout: Duration) -> BackendState {
    let Ok(req) = upstreams.request(backend, "GET", &upstreams.health_path) else {
        return BackendState::Down;
    };
    let peer = upstreams.peer(backend, timeout);
    match upstreams
        .client
        .send(&peer, req, None, MAX_HEALTH_REPLY, timeout)
        .await
    {
        Ok(reply) if (200..300).contains(&reply.status()) => BackendState::Active,
        Ok(_) => BackendState::Standby,
        Err(e) => {
            tracing::debug!(server = %backend.base, error = %e, "health check failed");
            BackendState::Down
        }
    }
}

/// Records `state` for `backend`, logging changes (the metrics read the states at each
/// scrape).
pub fn record(backend: &Backend, state: BackendState) {
    let before = backend.set_state(state);
    if before != state {
        tracing::info!(server = %backend.base, from = ?before, to = ?state, "backend state changed");
    }
}

/// The background task that keeps every backend's state current, and the service
/// account's token fresh ahead of its expiry.
pub struct HealthChecker {
    pub upstreams: Arc<Upstreams>,
    pub account: Arc<ServiceAccount>,
    pub interval: Duration,
}

impl HealthChecker {
    pub async fn check_all(&self) {
        let mut probes = tokio::task::JoinSet::new();
        for backend in self.upstreams.backends().iter() {
            let upstreams = self.upstreams.clone();
            let backend = backend.clone();
            let timeout = self.upstreams.timeouts.health_probe;
            probes.spawn(async move {
                let state = probe(&upstreams, &backend, timeout).await;
                (backend, state)
            });
        }
        while let Some(joined) = probes.join_next().await {
            if let Ok((backend, state)) = joined {
                record(&backend, state);
            }
        }
        self.upstreams.mark_checked();
        if let Some(active) = self.upstreams.active() {
            let now = crate::state::unix_now();
            if let Err(e) = self.account.token(&self.upstreams, &active, now).await {
                tracing::debug!(error = %e, "service account token not renewed in the background");
            }
        }
    }
}

#[async_trait]
impl BackgroundService for HealthChecker {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = ticker.tick() => self.check_all().await,
            }
        }
    }
}
