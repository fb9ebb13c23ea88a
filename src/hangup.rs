//! SIGHUP, for log rotation: the audit file is opened again at its path, so that lines go
//! to a new file once logrotate has moved the old one away. Without a handler SIGHUP would
//! stop the gateway. The configuration reload (issue 11, item 1) takes the signal over:
//! it calls [`Audit::reopen`] among its steps and replaces this service.

use std::sync::Arc;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tokio::signal::unix::{signal, SignalKind};

use crate::audit::Audit;

/// The background service that answers SIGHUP.
pub struct ReopenOnHangup {
    pub audit: Arc<Audit>,
}

#[async_trait]
impl BackgroundService for ReopenOnHangup {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(hangups) => hangups,
            Err(e) => {
                tracing::error!(error = %e, "cannot handle SIGHUP: it would stop the gateway");
                return;
            }
        };
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                received = hangups.recv() => {
                    if received.is_none() {
                        return;
                    }
                    match self.audit.reopen() {
                        Ok(()) => tracing::info!("SIGHUP: audit log reopened"),
                        Err(e) => tracing::error!(error = %e, "SIGHUP: the audit log stays on the file it had"),
                    }
                }
            }
        }
    }
}
