//! Which dashboard token a forwarded request carries (the user's own, the account holding
//! the user's roles, the service account's, or none), and sending a request again with a
//! new one when the dashboard refused it.

use std::sync::Arc;

use pingora::prelude::*;

use super::{Gateway, RequestCtx};
use crate::dashboard_identity::IdentityError;
use crate::dashboards::failover::{self, TokenRefusal};
use crate::dashboards::Backend;
use crate::errors::GatewayError;
use crate::forward::Forward;
use crate::state::unix_now;
use crate::users::User;

/// Which dashboard token a forwarded request carries.
enum Credential {
    /// The user's own (their dashboard session).
    User(Arc<str>),
    /// That of the account the gateway manages for the user's roles.
    Roles(Arc<User>),
    /// The service account's.
    Service,
    /// None: what the gateway serves without a token (the web UI's files).
    None,
}

impl Credential {
    fn of(forward: &Forward) -> Credential {
        match (&forward.user_token, &forward.user) {
            (Some(own), _) => Credential::User(own.token.clone()),
            (None, Some(user)) if forward.seen_as.is_some() => Credential::Roles(user.clone()),
            (None, Some(_)) => Credential::Service,
            (None, None) => Credential::None,
        }
    }
}

impl Gateway {
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
