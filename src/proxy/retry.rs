//! What the hooks do with what a try learns about the managers (`upstream::failover`):
//! send the request to the next manager, send it again with a new service token, or
//! answer.

use std::sync::Arc;

use pingora::prelude::*;
use pingora::proxy::Session;

use super::ctx::Credential;
use super::{Gateway, RequestCtx};
use crate::dashboard_identity::IdentityError;
use crate::errors::GatewayError;
use crate::state::unix_now;
use crate::upstream::failover::{self, TokenRefusal};
use crate::upstream::{Backend, BackendState};
use crate::users::User;

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

    /// A request the dashboard refused with the service token, or a managed account's,
    /// `refused`: sent again with a new one when the account says so.
    pub(super) async fn renew(&self, refused: &Arc<str>, ctx: &mut RequestCtx) -> Result<()> {
        let now = unix_now();
        let renews = match (ctx.forward.as_ref().map(Credential::of), &self.identity) {
            (Some(Credential::Roles(user)), Some(identity)) => {
                identity.refused(&user, refused, now).await
            }
            _ => failover::renews(self.account.as_deref(), refused, now).await,
        };
        if !renews {
            return Ok(());
        }
        ctx.attempt.retry_with_new_token();
        Err(GatewayError::unreachable_backend().into_retry("retrying with a new service token"))
    }

    /// The dashboard token a forwarded request carries: the user's own, else that of the
    /// account holding the user's roles, else the service account's (only authenticated
    /// requests act as these); none for the web UI's files.
    pub(super) async fn upstream_token(
        &self,
        backend: &Arc<Backend>,
        ctx: &mut RequestCtx,
    ) -> Result<Option<Arc<str>>> {
        match ctx.forward.as_ref().map(Credential::of) {
            Some(Credential::User(token)) => Ok(Some(token)),
            // Boxed: its future (an account's login, perhaps its making) is large.
            Some(Credential::Roles(user)) => {
                Ok(Some(Box::pin(self.role_token(&user, backend, ctx)).await?))
            }
            Some(Credential::Service) => Ok(Some(self.service_token(backend, ctx).await?)),
            Some(Credential::None) | None => Ok(None),
        }
    }

    /// The token of the account holding `user`'s roles (`dashboard_identity`); a standby's
    /// answer sends the request to the next manager.
    async fn role_token(
        &self,
        user: &User,
        backend: &Arc<Backend>,
        ctx: &mut RequestCtx,
    ) -> Result<Arc<str>> {
        let Some(identity) = &self.identity else {
            return Err(GatewayError::no_active_backend().into_pingora());
        };
        match identity
            .token(user, &self.upstreams, backend, unix_now())
            .await
        {
            Ok(token) => Ok(token),
            Err(IdentityError::Standby(status)) => {
                ctx.attempt.on_standby_login();
                Err(GatewayError::no_active_backend()
                    .into_retry(format!("the account's login answered {status}")))
            }
            Err(e) => {
                let _enter = ctx.span.enter();
                tracing::error!(server = %backend.base, error = %e, "no token of the account holding the user's roles");
                Err(GatewayError::from(e).into_pingora())
            }
        }
    }

    /// The service account's token, logging in through `backend` when needed; a standby's
    /// refusal sends the request to the next manager.
    pub(super) async fn service_token(
        &self,
        backend: &Arc<Backend>,
        ctx: &mut RequestCtx,
    ) -> Result<Arc<str>> {
        let Some(account) = &self.account else {
            return Err(GatewayError::no_active_backend().into_pingora());
        };
        match failover::service_token(account, &self.upstreams, backend, unix_now()).await {
            Ok(token) => Ok(token),
            Err(TokenRefusal::Standby(status)) => {
                ctx.attempt.on_standby_login();
                Err(GatewayError::no_active_backend()
                    .into_retry(format!("login answered {status}")))
            }
            Err(TokenRefusal::Failed(e)) => {
                let _enter = ctx.span.enter();
                // A refusal is logged once per login by the account, not per request.
                match e.is_refusal() {
                    true => tracing::debug!(error = %e, "no service account token"),
                    false => {
                        tracing::error!(server = %backend.base, error = %e, "no service account token")
                    }
                }
                Err(GatewayError::from(e).into_pingora())
            }
        }
    }
}
