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
use super::release::{self, ReleaseError};
use super::{Backend, BackendState, Upstreams};
use crate::ceph_release::CephRelease;

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

/// What is told of a manager's release once learned (the application says which table
/// that gives it).
pub type ReleaseLearned = Box<dyn Fn(&Backend, CephRelease) + Send + Sync>;

/// The background task that keeps every backend's state current, each active manager's
/// release known, and the service account's token fresh ahead of its expiry.
pub struct HealthChecker {
    pub upstreams: Arc<Upstreams>,
    pub account: Arc<ServiceAccount>,
    pub interval: Duration,
    pub release_learned: ReleaseLearned,
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
                self.learn_release(&backend, state).await;
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

impl HealthChecker {
    /// Before a manager is first recorded as the active one (a failover, a restart seen as
    /// down, the first check), asks it which release it runs: requests wait for the first
    /// check, so none is checked against a table the manager may not have. A manager that
    /// will not say keeps being asked at each check (and is answered 503 for until then).
    async fn learn_release(&self, backend: &Arc<Backend>, state: BackendState) {
        let becomes_active = backend.state() != BackendState::Active;
        if state != BackendState::Active || !(becomes_active || backend.release().is_none()) {
            return;
        }
        match release::ask(&self.upstreams, &self.account, backend).await {
            Ok(learned) => {
                backend.set_release(Some(learned));
                (self.release_learned)(backend, learned);
            }
            Err(e) => {
                backend.set_release(None);
                // A refused service login is logged once per login by the account.
                if matches!(&e, ReleaseError::Credentials(c) if c.is_refusal()) {
                    tracing::debug!(server = %backend.base, error = %e, "cannot learn the manager's Ceph release");
                    return;
                }
                tracing::warn!(server = %backend.base, error = %e, "cannot learn the manager's Ceph release: logins, token checks and its requests are answered 503 until it can");
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
