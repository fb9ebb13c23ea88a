//! The request path, top to bottom, as pingora runs it. The modules decide; this file
//! calls them in order:
//! 1. `request_filter`: normalize the path (`paths`), classify it (`routes`); answer the
//!    auth endpoints (`auth`) and the docs (`docs`) here; admit the rest (`access`: token
//!    401, operation 404, role 403, version 415) and read its body whole (`request`).
//! 2. `upstream_peer`: the active manager this request has not tried (`upstream::Attempt`),
//!    and a place on it (`upstream::in_flight`).
//! 3. `upstream_request_filter`: swap the client's credentials for the user's own
//!    dashboard token (`auth`'s session) or the service account's (`forward`).
//! 4. `upstream_response_filter`: a standby's answer or a refused service token never
//!    reaches the client: the attempt decides, and `error_while_proxy` retries; a refused
//!    user token ends that user's session.
//! 5. `response_filter`: security headers, no backend address in `Location`.
//! 6. `fail_to_proxy` answers errors in the dashboard's shape (`errors`); `logging`
//!    measures (`metrics`) and records the request (`access_log`, `audit`).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::modules::http::HttpModules;
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use tracing::Instrument;

use crate::access::{self, Admission, Lookup, OperationId};
use crate::access_log::{self, AccessLog, Served};
use crate::audit::Audit;
use crate::auth::{self, Auth, AuthRequest, AuthSubject};
use crate::client_addr::TrustedProxies;
use crate::docs::{self, Docs};
use crate::errors::GatewayError;
use crate::forward::{self, Forward};
use crate::metrics::Metrics;
use crate::paths;
use crate::readiness::Readiness;
use crate::request::{self, BodyLimits};
use crate::respond::{self, LocalResponse};
use crate::routes::Route;
use crate::state::{unix_now, unix_now_ms};
use crate::upstream::credentials::{CredentialError, ServiceAccount};
use crate::upstream::in_flight::Place;
use crate::upstream::login::LoginError;
use crate::upstream::{
    health, Attempt, Backend, BackendState, ErrorVerdict, ResponseVerdict, Upstreams,
};

/// The gateway as pingora sees it.
pub struct Gateway {
    pub auth: Arc<Auth>,
    /// Replaced by a reload (the scope table and `access.*`).
    pub admission: Arc<ArcSwap<Admission>>,
    /// No backends without `[upstream]`: then admission refuses every forward.
    pub upstreams: Arc<Upstreams>,
    /// The gateway's own dashboard account; `None` without backends.
    pub account: Option<Arc<ServiceAccount>>,
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
}

/// Per-request state.
pub struct RequestCtx {
    pub id: String,
    started: Instant,
    route: Route,
    /// Carries the request id into every log line of this request.
    span: tracing::Span,
    /// Set when admitted: the upstream hooks run only then.
    forward: Option<Forward>,
    attempt: Attempt,
    /// A forwarded request's body, read whole before a dashboard connection was taken.
    body: Option<Bytes>,
    /// The dashboard place this request holds (`upstream::in_flight`), from the try's
    /// connection to the end of its answer.
    place: Option<Place>,
    /// Who sent it (`client_addr`): what the login limit counts and the logs name.
    client: Option<IpAddr>,
    /// The normalized path; empty until then (or when it cannot be).
    path: String,
    /// The scope table's operation the path matched (forwarded routes), with the table it
    /// is in: a reload may replace the table before the request is logged.
    operation: Option<(Arc<Admission>, OperationId)>,
    /// Whom an auth endpoint's request was about.
    subject: AuthSubject,
}

/// Which dashboard token a forwarded request carries.
enum Credential {
    /// The user's own (their dashboard session).
    User(Arc<str>),
    /// The service account's.
    Service,
    /// None: what the gateway serves without a token (the web UI's files).
    None,
}

impl Credential {
    fn of(forward: &Forward) -> Credential {
        match (&forward.user_token, &forward.user) {
            (Some(own), _) => Credential::User(own.token.clone()),
            (None, Some(_)) => Credential::Service,
            (None, None) => Credential::None,
        }
    }
}

/// What `request_filter` decided.
enum Next {
    Answer(LocalResponse),
    Forward(Forward),
}

#[async_trait]
impl ProxyHttp for Gateway {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> RequestCtx {
        // Encoded directly: `to_string` goes through the formatter, on every request.
        let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
        let id = uuid::Uuid::new_v4()
            .hyphenated()
            .encode_lower(&mut text)
            .to_owned();
        RequestCtx {
            span: tracing::info_span!("request", request_id = %id),
            id,
            started: Instant::now(),
            route: Route::Other,
            forward: None,
            attempt: Attempt::default(),
            body: None,
            place: None,
            client: None,
            path: String::new(),
            operation: None,
            subject: AuthSubject::default(),
        }
    }

    /// No downstream modules: pingora's default is a disabled compression module, which it
    /// would still build for every request and call on every response. The dashboard's own
    /// compression passes through.
    fn init_downstream_modules(&self, _modules: &mut HttpModules) {}

    /// Runs first: answers locally, or admits the request for forwarding (`Ok(false)`).
    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        let span = ctx.span.clone();
        let response = match self.decide(session, ctx).instrument(span).await {
            Ok(Next::Forward(forward)) => {
                ctx.forward = Some(forward);
                return Ok(false);
            }
            Ok(Next::Answer(response)) => response,
            Err(error) => {
                let _enter = ctx.span.enter();
                tracing::debug!(status = error.status(), %error, "refused");
                LocalResponse::from_error(&error, &ctx.id)
            }
        };
        respond::send(session, response, self.tls, &ctx.id).await?;
        Ok(true)
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> Result<Box<HttpPeer>> {
        let backend = ctx
            .attempt
            .pick(&self.upstreams)
            .map_err(GatewayError::into_pingora)?;
        // A retry leaves the place of the manager it tried first.
        ctx.place = None;
        ctx.place = Some(self.enter(&backend, ctx).await?);
        let read_timeout = self.upstreams.timeouts.read;
        Ok(Box::new(self.upstreams.peer(&backend, read_timeout)))
    }

    /// Swaps the client's credentials for the user's own dashboard token, or the service
    /// account's.
    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let Some(backend) = ctx.attempt.backend().cloned() else {
            return Error::e_explain(InternalError, "forwarding without a backend");
        };
        let token = match ctx.forward.as_ref().map(Credential::of) {
            Some(Credential::User(token)) => Some(token),
            // Only authenticated requests act as the service account.
            Some(Credential::Service) => Some(self.service_token(&backend, ctx).await?),
            Some(Credential::None) | None => None,
        };
        let Some(forward) = &ctx.forward else {
            return Error::e_explain(InternalError, "forwarding without a decision");
        };
        let client = forward::Client::of(session, self.tls, ctx.client);
        let host = backend.host_header();
        forward::rewrite_request(upstream_request, forward, host, token.as_deref(), client)?;
        if let Some(body) = &ctx.body {
            forward::set_body_length(upstream_request, body.len());
        }
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
            .upstream_response(&backend.base, status, elapsed);
        match ctx.attempt.on_response(status) {
            ResponseVerdict::Deliver => Ok(()),
            // Boxed: the probe is rare and its future large, and this hook's future is moved
            // into a box (by `async_trait`) on every request.
            ResponseVerdict::Probe => Box::pin(self.check_standby(&backend, status, ctx)).await,
            ResponseVerdict::Renew { refused } => {
                if !self.renews(&refused).await {
                    return Ok(());
                }
                ctx.attempt.retry_with_new_token();
                Err(GatewayError::unreachable_backend()
                    .into_retry("retrying with a new service token"))
            }
            ResponseVerdict::EndSession => {
                if let Some(token) = ctx.forward.as_ref().and_then(|f| f.user_token.as_ref()) {
                    // Boxed: rare, and its future large (see `Probe` above).
                    Box::pin(self.auth.user_token_refused(token, unix_now())).await;
                }
                Ok(())
            }
        }
    }

    async fn response_filter(
        &self,
        _session: &mut Session,
        response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        forward::rewrite_response(response, &self.upstreams)?;
        respond::set_common_headers(response, self.tls, &ctx.id)
    }

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
                e = answer.into_pingora().more_context(e.to_string())
            }
        }
        e
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut RequestCtx,
    ) -> FailToProxy {
        let Some(error) = GatewayError::from_pingora(e) else {
            let _enter = ctx.span.enter();
            tracing::debug!(error = %e, "client went away");
            return FailToProxy {
                error_code: 0,
                can_reuse_downstream: false,
            };
        };
        // A request that could have been sent again learns whether its manager is still the
        // active one (a POST in flight keeps the 502: whether it was carried out is unknown).
        let resendable = session.req_header().method.is_idempotent();
        let error = match resendable && session.response_written().is_none() {
            true => Box::pin(self.confirm(error, ctx)).await,
            false => error,
        };
        let _enter = ctx.span.enter();
        tracing::warn!(error = %e, status = error.status(), "cannot proxy");
        let response = LocalResponse::from_error(&error, &ctx.id);
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
            .observe_request(ctx.route, method, status, elapsed);
        let served = self.served(session, ctx, status, elapsed);
        self.access_log.record(&served, &ctx.span);
        self.audit.record(&served, &ctx.subject);
    }
}

impl Gateway {
    /// Answers locally, or admits the request for forwarding.
    async fn decide(
        &self,
        session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> Result<Next, GatewayError> {
        ctx.client = self.client(session);
        request::refuse_bodies_of_get_and_head(session)?;
        let path = paths::normalize(session.req_header().uri.path())?;
        ctx.route = Route::classify(&path);
        let needs_backends = matches!(ctx.route, Route::TokenCheck | Route::Api | Route::Other);
        if needs_backends && !self.upstreams.checked() {
            // Boxed: rare (a fresh process), and this future is moved on every request.
            let limit = self.upstreams.timeouts.health_probe;
            Box::pin(self.upstreams.first_check(limit)).await;
        }
        let next = match ctx.route {
            Route::Login | Route::TokenCheck | Route::Logout => {
                self.answer_auth(session, ctx).await.map(Next::Answer)
            }
            Route::Docs => {
                let method = &session.req_header().method;
                docs::answer(self.docs.as_ref(), method, &path)
                    .await
                    .map(Next::Answer)
            }
            Route::Api | Route::Other => self
                .prepare_forward(session, ctx, &path)
                .await
                .map(Next::Forward),
        };
        ctx.path = path;
        next
    }

    /// Admission, then the request made ready to forward (its body bounded).
    async fn prepare_forward(
        &self,
        session: &mut Session,
        ctx: &mut RequestCtx,
        path: &str,
    ) -> Result<Forward, GatewayError> {
        // One table for the whole request, though a reload may replace it meanwhile.
        let admission = self.admission.load_full();
        let lookup = admission.lookup(&session.req_header().method, path);
        let admitted = self
            .admit(session, &admission, ctx.route, path, lookup)
            .await;
        ctx.operation = lookup.operation.map(|id| (admission, id));
        let forward = admitted?;
        forward::settle_connection_header(session.req_header_mut())?;
        let limits = self.body_limits(self.upstreams.max_body_bytes);
        ctx.body = request::read_forwarded_body(session, limits).await?;
        Ok(forward)
    }

    /// Admission (405, 401, 404, 403, 415), then a manager to forward to (503).
    async fn admit(
        &self,
        session: &Session,
        admission: &Admission,
        route: Route,
        path: &str,
        lookup: Lookup,
    ) -> Result<Forward, GatewayError> {
        let request = access::Request::of(session.req_header(), route, path);
        let forward = admission.admit(request, lookup, unix_now()).await?;
        if !self.upstreams.any_active() {
            return Err(GatewayError::no_active_backend());
        }
        Ok(forward)
    }

    /// Up to `bytes` of a request body, within `server.body_timeout_ms`.
    fn body_limits(&self, bytes: usize) -> BodyLimits {
        BodyLimits {
            bytes,
            time: self.body_timeout,
        }
    }

    /// A place on `backend` (`upstream::in_flight`); 503 when it stays busy.
    async fn enter(&self, backend: &Backend, ctx: &RequestCtx) -> Result<Place> {
        backend.in_flight.enter().await.map_err(|overload| {
            self.metrics.upstream_overload(&backend.base);
            let _enter = ctx.span.enter();
            tracing::warn!(server = %backend.base, reason = %overload, "the dashboard is busy: refused");
            GatewayError::from(overload).into_pingora()
        })
    }

    /// Who sent the request: the TCP peer, or the client a trusted proxy names.
    fn client(&self, session: &Session) -> Option<IpAddr> {
        let peer = session.client_addr()?.as_inet()?.ip();
        Some(
            self.trusted_proxies
                .client(peer, &session.req_header().headers),
        )
    }

    /// The auth endpoints take a small JSON body, read whole here; `ctx` learns whom the
    /// request was about.
    async fn answer_auth(
        &self,
        session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> Result<LocalResponse, GatewayError> {
        if session.req_header().method != http::Method::POST {
            return Err(GatewayError::MethodNotAllowed { allow: "POST" });
        }
        let body = request::read_body(session, self.body_limits(auth::BODY_LIMIT)).await?;
        let req = AuthRequest::of(session.req_header(), body, ctx.client);
        let serving = self.readiness.check().is_ok();
        self.auth
            .answer(ctx.route, &req, unix_now_ms(), serving, &mut ctx.subject)
            .await
    }

    /// The request as the logs record it, once answered with `status`.
    fn served<'a>(
        &'a self,
        session: &'a Session,
        ctx: &'a RequestCtx,
        status: u16,
        elapsed: Duration,
    ) -> Served<'a> {
        let header = session.req_header();
        // A login or logout names its user once it succeeded (a failed login's name is the
        // client's text: the audit log records it, the access log does not).
        let user = match &ctx.forward {
            Some(forward) => forward.user.as_deref().map(|u| u.username.as_str()),
            None => ctx
                .subject
                .username
                .as_deref()
                .filter(|_| (200..300).contains(&status)),
        };
        let operation = match (ctx.route, &ctx.operation) {
            (Route::Api | Route::Other, Some((admission, id))) => admission.template(*id),
            (Route::Api | Route::Other, None) => "unmatched",
            (route, _) => route.label(),
        };
        Served {
            request_id: &ctx.id,
            client: ctx.client,
            user,
            method: &header.method,
            route: ctx.route,
            operation,
            path: access_log::logged_path(&ctx.path, &header.uri),
            status,
            bytes: session.body_bytes_sent(),
            elapsed,
            backend: ctx.attempt.backend().map(|b| b.base.as_str()),
        }
    }

    /// The answer when no backend is left to try. "The dashboard closed the connection"
    /// holds only if the manager that did is still the active one: one going away in a
    /// failover closes its connections too, and its health path then says so (it is marked,
    /// and no manager is active for the moment).
    async fn confirm(&self, answer: GatewayError, ctx: &RequestCtx) -> GatewayError {
        let Some(backend) = ctx.attempt.backend() else {
            return answer;
        };
        if answer != GatewayError::backend_closed() {
            return answer;
        }
        let state = self.probe_and_mark(backend).await;
        if state == BackendState::Active {
            return answer;
        }
        let _enter = ctx.span.enter();
        tracing::info!(server = %backend.base, ?state, "the manager that closed the connection is no longer active");
        GatewayError::no_active_backend()
    }

    /// Asks `backend`'s health path whether it is still the active manager, between health
    /// checks; one that is not is marked at once, so that no other request goes there.
    async fn probe_and_mark(&self, backend: &Backend) -> BackendState {
        let timeout = self.upstreams.timeouts.standby_probe;
        let state = health::probe(&self.upstreams, backend, timeout).await;
        if state != BackendState::Active {
            health::record(backend, state);
        }
        state
    }

    /// After a redirect or a server error: a backend that is no longer the active manager
    /// (its health path says so) is marked, and the request goes to the next one.
    async fn check_standby(
        &self,
        backend: &Arc<Backend>,
        status: u16,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let state = self.probe_and_mark(backend).await;
        if !ctx.attempt.on_probe(state == BackendState::Active) {
            return Ok(());
        }
        let _enter = ctx.span.enter();
        tracing::info!(server = %backend.base, status, "a standby answered; trying the next backend");
        Err(GatewayError::no_active_backend().into_retry(format!("answered {status}")))
    }

    /// Whether a request refused with the service token `refused` is sent again with a new
    /// one: the account decides. When its store fails the request is sent again anyway, as
    /// before the account decided; the retry then meets the store's error or logs in.
    async fn renews(&self, refused: &Arc<str>) -> bool {
        let Some(account) = &self.account else {
            return false;
        };
        account
            .refused(refused, unix_now())
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot discard the refused service token");
                true
            })
    }

    /// The service account's token, logging in through `backend` when needed. A backend
    /// that refuses the login as a standby is marked and the request retried elsewhere.
    async fn service_token(
        &self,
        backend: &Arc<Backend>,
        ctx: &mut RequestCtx,
    ) -> Result<Arc<str>> {
        let Some(account) = &self.account else {
            return Err(GatewayError::no_active_backend().into_pingora());
        };
        match account.token(&self.upstreams, backend, unix_now()).await {
            Ok(token) => Ok(token),
            Err(CredentialError::Login(LoginError::NotActive(status))) => {
                health::record(backend, BackendState::Standby);
                ctx.attempt.on_standby_login();
                Err(GatewayError::no_active_backend()
                    .into_retry(format!("login answered {status}")))
            }
            Err(e) => {
                let _enter = ctx.span.enter();
                tracing::error!(server = %backend.base, error = %e, "no service account token");
                Err(GatewayError::from(e).into_pingora())
            }
        }
    }
}
