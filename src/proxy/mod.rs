//! The request path, top to bottom, as pingora runs it: each hook below calls, in order,
//! the modules that decide (which, and what each decides: docs/architecture.md, "One
//! request's walk"). The hooks stay short; a decision added goes into its module.
//!
//! Beside the hooks: `ctx` (a request's state, and what the logs make of it), `decide`
//! (what `request_filter` decides), `credential` (which dashboard token a request carries,
//! and a new one after a refusal) and `retry` (what the hooks do with what a try learned
//! about the managers, `dashboards::failover`).

mod cached;
mod credential;
mod ctx;
mod decide;
mod retry;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::modules::http::HttpModules;
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use tracing::Instrument;

use crate::access::Admission;
use crate::answer_cache::AnswerCache;
use crate::auth::Auth;
use crate::client_addr::TrustedProxies;
use crate::dashboard_identity::DashboardIdentity;
use crate::dashboards::answer_buffer::HeldAnswer;
use crate::dashboards::credentials::ServiceAccount;
use crate::dashboards::{health, BackendState, ErrorVerdict, ResponseVerdict, Upstreams};
use crate::docs::Docs;
use crate::edge::body_budget::BodyBudget;
use crate::edge::request;
use crate::edge::respond::{self, WriteBounds};
use crate::errors::GatewayError;
use crate::forward;
use crate::observe::access_log::{self, AccessLog};
use crate::observe::audit::Audit;
use crate::observe::metrics::Metrics;
use crate::readiness::Readiness;
use crate::state::unix_now;
use crate::token_redaction::Redaction;
use ctx::RequestCtx;
use decide::Next;

/// The gateway as pingora sees it.
pub struct Gateway {
    pub auth: Arc<Auth>,
    /// Replaced by a reload (the scope table and `access.*`).
    pub admission: Arc<ArcSwap<Admission>>,
    /// No backends without `[upstream]`: then admission refuses every forward.
    pub upstreams: Arc<Upstreams>,
    /// The gateway's own dashboard account; `None` without backends.
    pub account: Option<Arc<ServiceAccount>>,
    /// Who the dashboard sees on users' requests when not the service account nor the
    /// user's own session (`upstream.identity = "roles"`).
    pub identity: Option<Arc<dyn DashboardIdentity>>,
    /// The API description; `None` without backends to fetch it from.
    pub docs: Option<Docs>,
    pub metrics: Arc<Metrics>,
    /// What the token check tells balancers.
    pub readiness: Arc<Readiness>,
    /// Whether clients reach this listener over TLS.
    pub tls: bool,
    /// Whose `X-Forwarded-For` names the client (for the limit on failed logins and the
    /// logs).
    pub trusted_proxies: TrustedProxies,
    pub access_log: AccessLog,
    pub audit: Arc<Audit>,
    /// `server.body_timeout_ms`: every request body the gateway reads.
    pub body_timeout: Duration,
    /// What all the request bodies held at once may take (`server.body_budget_bytes`).
    pub body_budget: BodyBudget,
    /// How fast every answer must reach its client.
    pub write_bounds: WriteBounds,
    /// Answers of the polled operations, shared and kept a moment.
    pub answer_cache: Arc<AnswerCache>,
}

#[async_trait]
impl ProxyHttp for Gateway {
    type CTX = RequestCtx;

    /// A request's state, empty until `request_filter` admits it.
    fn new_ctx(&self) -> RequestCtx {
        RequestCtx::new()
    }

    /// No downstream modules: pingora's default is a disabled compression module, which it
    /// would still build for every request and call on every response. The dashboard's own
    /// compression passes through.
    fn init_downstream_modules(&self, _modules: &mut HttpModules) {}

    /// Runs before anything is answered: every answer's writes are bounded in time.
    async fn early_request_filter(
        &self,
        session: &mut Session,
        _ctx: &mut RequestCtx,
    ) -> Result<()> {
        self.write_bounds.apply(session);
        Ok(())
    }

    /// Runs first: answers locally, or admits the request for forwarding (`Ok(false)`).
    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        let span = ctx.span.clone();
        let response = match self.decide(session, ctx).instrument(span).await {
            Ok(Next::Forward(forward)) => {
                ctx.forward = Some(forward);
                return Ok(false);
            }
            Ok(Next::Cached(forward, answer)) => {
                ctx.forward = Some(forward);
                self.send_kept(session, ctx, &answer).await?;
                return Ok(true);
            }
            Ok(Next::Answer(response)) => response,
            Err(error) => {
                let _enter = ctx.span.enter();
                tracing::debug!(status = error.status(), %error, "refused");
                error.answer(&ctx.id)
            }
        };
        respond::send(session, response, self.tls, &ctx.id).await?;
        Ok(true)
    }

    /// The manager this try goes to (the active one not tried yet), and a place on it:
    /// a request waits its turn there rather than pile onto a busy dashboard.
    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> Result<Box<HttpPeer>> {
        let backend = ctx
            .attempt
            .pick(&self.upstreams)
            .map_err(|e| GatewayError::from(e).into_pingora())?;
        // A retry leaves the place of the manager it tried first.
        ctx.place = None;
        ctx.place = Some(self.enter(&backend, ctx).await?);
        let read_timeout = self.upstreams.timeouts.read;
        Ok(Box::new(self.upstreams.peer(&backend, read_timeout)))
    }

    /// Swaps the client's credentials for the dashboard token of whom the dashboard sees
    /// (`upstream_token`).
    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let Some(backend) = ctx.attempt.backend().cloned() else {
            return Error::e_explain(InternalError, "forwarding without a backend");
        };
        let token = self.upstream_token(&backend, ctx).await?;
        let Some(forward) = &ctx.forward else {
            return Error::e_explain(InternalError, "forwarding without a decision");
        };
        let client = forward::Client::of(session, self.tls, ctx.client);
        let host = backend.host_header();
        forward::rewrite_request(upstream_request, forward, host, token.as_deref(), client)?;
        if let Some(body) = &ctx.body {
            forward::set_body_length(upstream_request, body.bytes.len());
        }
        cached::prepare_upstream(ctx, upstream_request);
        match forward.user_token.is_some() {
            true => ctx.attempt.sending_as_user(),
            false => ctx.attempt.sending(token),
        }
        Ok(())
    }

    /// Sends the body read in `request_filter`, on every try.
    async fn request_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        request::hand_over_body(body, end_of_stream, ctx.body.as_ref());
        Ok(())
    }

    /// A standby's answer, or a refusal of the service token, is retried instead of
    /// reaching the client; a refusal of the user's own token ends their session.
    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let Some(backend) = ctx.attempt.backend().cloned() else {
            return Ok(());
        };
        let status = response.status.as_u16();
        let elapsed = ctx.attempt.elapsed();
        self.metrics
            .upstream
            .response(&backend.base, status, elapsed);
        match ctx.attempt.on_response(status) {
            ResponseVerdict::Deliver => Ok(()),
            // Boxed: the probe is rare and its future large, and this hook's future is moved
            // into a box (by `async_trait`) on every request.
            ResponseVerdict::Probe => Box::pin(self.check_standby(&backend, status, ctx)).await,
            ResponseVerdict::Renew { refused } => self.renew(&refused, ctx).await,
            ResponseVerdict::EndSession => {
                if let Some(token) = ctx.forward.as_ref().and_then(|f| f.user_token.as_ref()) {
                    // Boxed: rare, and its future large (see `Probe` above).
                    Box::pin(self.auth.user_token_refused(token, unix_now())).await;
                }
                Ok(())
            }
        }
    }

    /// The dashboard's answer head made the gateway's: its addresses and cookies out, the
    /// security headers in, the head captured when the answer is to be shared.
    async fn response_filter(
        &self,
        _session: &mut Session,
        response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let redact = ctx.forward.as_ref().is_some_and(|f| f.redact_tokens);
        forward::rewrite_response(response, &self.upstreams, redact)?;
        ctx.redaction = redact.then(Redaction::default);
        ctx.held = Some(HeldAnswer::new(&self.upstreams.answer_buffers));
        cached::capture_head(ctx, response)?;
        respond::set_common_headers(response, self.tls, &ctx.id)
    }

    /// The answer is read ahead of the client, and its place on the dashboard given back
    /// at its end; an answer that may carry a dashboard token is sent whole, without it;
    /// the answer of a request that leads its flight is captured (as sent) for the others.
    fn response_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<Option<Duration>> {
        if let Some(held) = &mut ctx.held {
            *body = held.take(body.take(), end_of_stream);
        }
        if end_of_stream {
            ctx.place = None;
        }
        if let Some(redaction) = &mut ctx.redaction {
            *body = redaction
                .take(body.take(), end_of_stream)
                .map_err(|e| Error::because(InternalError, "redacting dashboard tokens", e))?;
        }
        cached::capture_body(ctx, body.as_ref(), end_of_stream);
        Ok(None)
    }

    /// The manager could not be reached: it is marked down and the request, which sent
    /// nothing yet, tries the next one.
    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut RequestCtx,
        mut e: Box<Error>,
    ) -> Box<Error> {
        if let Some(backend) = ctx.attempt.backend() {
            health::record(backend, BackendState::Down);
        }
        // Nothing was sent: another backend may be the active one.
        e.set_retry(true);
        e
    }

    /// An error after the connection was made: `attempt` decides whether the request is
    /// tried again (nothing the dashboard may have acted on is sent twice) or answered.
    fn error_while_proxy(
        &self,
        peer: &HttpPeer,
        session: &mut Session,
        e: Box<Error>,
        ctx: &mut RequestCtx,
        _client_reused: bool,
    ) -> Box<Error> {
        let mut e = e.more_context(format!("Peer: {peer}"));
        let idempotent = session.req_header().method.is_idempotent();
        let replayable = !session.as_ref().retry_buffer_truncated();
        let answering = session.response_written().is_some();
        match ctx.attempt.on_error(idempotent, replayable, answering) {
            ErrorVerdict::Retry => e.set_retry(true),
            ErrorVerdict::RetryUnlessRuledOut => e.retry.decide_reuse(true),
            ErrorVerdict::GiveUp(None) => e.set_retry(false),
            ErrorVerdict::GiveUp(Some(answer)) => {
                e = GatewayError::from(answer)
                    .into_pingora()
                    .more_context(e.to_string())
            }
        }
        e
    }

    /// The request failed for good: the answer in the dashboard's JSON shape, and the
    /// connection closed.
    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut RequestCtx,
    ) -> FailToProxy {
        let Some(error) = self.failure_answer(session, e, ctx).await else {
            return FailToProxy {
                error_code: 0,
                can_reuse_downstream: false,
            };
        };
        let _enter = ctx.span.enter();
        tracing::warn!(error = %e, status = error.status(), "cannot proxy");
        let response = error.answer(&ctx.id);
        // The connection is not reused (a request body may be half read): say so in the
        // answer, so that a client does not send its next request on it as it closes.
        session.set_keepalive(None);
        if let Err(write_error) = respond::send(session, response, self.tls, &ctx.id).await {
            tracing::debug!(error = %write_error, "cannot write the error response");
        }
        FailToProxy {
            error_code: error.status(),
            can_reuse_downstream: false,
        }
    }

    /// How pingora's own lines ("Fail to proxy", at WARN and ERROR) name a request: its
    /// method, path and id, never its query (it may carry secrets) nor its Host.
    fn request_summary(&self, session: &Session, ctx: &RequestCtx) -> String {
        let header = session.req_header();
        let path = access_log::logged_path(&ctx.path, &header.uri);
        format!("{} {path}, request_id: {}", header.method, ctx.id)
    }

    /// Runs once per request, answered or failed.
    async fn logging(&self, session: &mut Session, _e: Option<&Error>, ctx: &mut RequestCtx) {
        let status = session.response_written().map_or(0, |r| r.status.as_u16());
        let method = &session.req_header().method;
        let elapsed = ctx.started.elapsed();
        self.metrics
            .requests
            .observe(ctx.route, method, status, elapsed);
        let served = ctx.served(session, status, elapsed);
        self.access_log.record(&served, &ctx.span);
        self.audit.record(&served, &ctx.subject);
        self.after_answer(session, ctx);
    }
}
