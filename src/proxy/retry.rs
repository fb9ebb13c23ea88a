//! What the hooks do with what a try learns about the managers (`dashboards::failover`):
//! send the request to the next manager, or answer. (Sending it again with a new token is
//! `credential`'s.)

use std::sync::Arc;

use pingora::prelude::*;
use pingora::proxy::Session;

use super::{Gateway, RequestCtx};
use crate::dashboards::failover;
use crate::dashboards::{Backend, BackendState};
use crate::errors::GatewayError;

impl Gateway {
    /// The answer to an error no try could avoid; `None` when the client went away. A
    /// request that could have been sent again learns whether its manager is still the
    /// active one (a POST in flight keeps the 502: whether it was carried out is unknown).
    pub(super) async fn failure_answer(
        &self,
        session: &Session,
        e: &Error,
        ctx: &RequestCtx,
    ) -> Option<GatewayError> {
        let Some(error) = GatewayError::from_pingora(e) else {
            let _enter = ctx.span.enter();
            tracing::debug!(error = %e, "client went away");
            return None;
        };
        let resendable = session.req_header().method.is_idempotent();
        Some(match resendable && session.response_written().is_none() {
            // Boxed: rare, and its future large (a probe of the manager).
            true => Box::pin(self.confirm(error, ctx)).await,
            false => error,
        })
    }

    /// The answer when no backend is left to try. "The dashboard closed the connection"
    /// holds only if the manager that did is still the active one: one going away in a
    /// failover closes its connections too, and its health path then says so (it is
    /// marked, and no manager is active for the moment).
    async fn confirm(&self, answer: GatewayError, ctx: &RequestCtx) -> GatewayError {
        let Some(backend) = ctx.attempt.backend() else {
            return answer;
        };
        if answer != GatewayError::backend_closed() {
            return answer;
        }
        let state = failover::probe_and_mark(&self.upstreams, backend).await;
        if state == BackendState::Active {
            return answer;
        }
        let _enter = ctx.span.enter();
        tracing::info!(server = %backend.base, ?state, "the manager that closed the connection is no longer active");
        GatewayError::no_active_backend()
    }

    /// After a redirect or a server error: a backend that is no longer the active manager
    /// is marked, and the request goes to the next one.
    pub(super) async fn check_standby(
        &self,
        backend: &Arc<Backend>,
        status: u16,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let state = failover::probe_and_mark(&self.upstreams, backend).await;
        if !ctx.attempt.on_probe(state == BackendState::Active) {
            return Ok(());
        }
        let _enter = ctx.span.enter();
        tracing::info!(server = %backend.base, status, "a standby answered; trying the next backend");
        Err(GatewayError::no_active_backend().into_retry(format!("answered {status}")))
    }
}
