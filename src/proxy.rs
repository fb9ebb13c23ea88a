//! The request path, top to bottom, as pingora runs it. The modules decide; this file
//! calls them in order:
//! 1. `request_filter`: normalize the path (`paths`), classify it (`routes`); answer the
//!    auth endpoints (`auth`) and the docs (`docs`) here; for API paths check the token
//!    (401), the role (`access`, 403) and the version (`versioning`, 415), then forward.
//! 2. `upstream_peer`: the active manager (`upstream`) this request has not tried yet.
//! 3. `upstream_request_filter`: swap the client's credentials for the service account's
//!    (`forward`).
//! 4. `upstream_response_filter`: a standby's answer or a refused service token never
//!    reaches the client: mark, and retry (`error_while_proxy` allows the retry).
//! 5. `response_filter`: security headers, no backend address in `Location`.
//! 6. `fail_to_proxy` answers errors in the dashboard's shape; `logging` measures.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::modules::http::HttpModules;
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use tracing::Instrument;

use crate::access::{AccessError, AccessTable, Requirement};
use crate::auth::{Auth, AuthRequest};
use crate::docs::{self, Docs};
use crate::errors::GatewayError;
use crate::forward::{self, Forward};
use crate::metrics::Metrics;
use crate::paths;
use crate::respond::{self, LocalResponse};
use crate::routes::Route;
use crate::state::UnixTime;
use crate::upstream::credentials::{CredentialError, ServiceAccount};
use crate::upstream::{health, Backend, BackendState, Tried, Upstreams};
use crate::versioning;

/// Auth request bodies are a few hundred bytes; anything near this is abuse.
pub const AUTH_BODY_LIMIT: usize = 64 * 1024;
/// The methods the dashboard's operations use; others are refused before any check.
const FORWARDED_METHODS: [http::Method; 6] = [
    http::Method::GET,
    http::Method::HEAD,
    http::Method::POST,
    http::Method::PUT,
    http::Method::PATCH,
    http::Method::DELETE,
];
/// What pingora keeps of a request body to send it again (its retry buffer).
const RETRY_BUFFER_BYTES: usize = 64 * 1024;
/// Paths are echoed in 404 details up to this many bytes.
const MAX_ECHOED_PATH: usize = 256;

/// Why a forwarded attempt is retried on another (or the same) backend.
const STANDBY: ErrorType = ErrorType::Custom("backend is not the active manager");
const TOKEN_REFUSED: ErrorType = ErrorType::Custom("backend refused the service token");

/// The gateway as pingora sees it.
pub struct Gateway {
    pub auth: Arc<Auth>,
    pub metrics: Arc<Metrics>,
    /// Whether clients reach this listener over TLS.
    pub tls: bool,
    pub vendor: String,
    /// `None` when no backend is configured.
    pub forwarding: Option<Forwarding>,
}

/// Everything forwarding needs.
pub struct Forwarding {
    pub upstreams: Arc<Upstreams>,
    pub account: Arc<ServiceAccount>,
    pub access: AccessTable,
    pub docs: Docs,
    /// `/api/user/<service account>`: changing or deleting it would cut the gateway off.
    pub service_account_path: String,
}

impl Forwarding {
    fn changes_service_account(&self, method: &http::Method, path: &str) -> bool {
        let on_it = path
            .strip_prefix(self.service_account_path.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
        on_it && method != http::Method::GET && method != http::Method::HEAD
    }
}

/// Per-request state.
pub struct RequestCtx {
    pub id: String,
    pub started: Instant,
    pub route: Route,
    /// Carries the request id into every log line of this request.
    pub span: tracing::Span,
    forward: Option<Forward>,
    tried: Tried,
    backend: Option<Arc<Backend>>,
    upstream_token: Option<Arc<str>>,
    upstream_sent: Option<Instant>,
    relogged: bool,
    retry: bool,
    /// The length of a body that came without one (chunked, or HTTP/2), read whole.
    buffered_body: Option<usize>,
    body_bytes: usize,
    /// An error already decided, for `fail_to_proxy` to answer.
    failure: Option<GatewayError>,
}

#[async_trait]
impl ProxyHttp for Gateway {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> RequestCtx {
        let id = uuid::Uuid::new_v4().to_string();
        RequestCtx {
            span: tracing::info_span!("request", request_id = %id),
            id,
            started: Instant::now(),
            route: Route::Other,
            forward: None,
            tried: 0,
            backend: None,
            upstream_token: None,
            upstream_sent: None,
            relogged: false,
            retry: false,
            buffered_body: None,
            body_bytes: 0,
            failure: None,
        }
    }

    /// No downstream modules: pingora's default is a disabled compression module, which it
    /// would still build for every request and call on every response. The dashboard's own
    /// compression passes through.
    fn init_downstream_modules(&self, _modules: &mut HttpModules) {}

    /// Runs first: answers locally, or decides what to forward (`Ok(false)`).
    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        let span = ctx.span.clone();
        let outcome = self.decide(session, ctx).instrument(span).await;
        let response = match outcome {
            Ok(Decision::Forward(forward)) => {
                ctx.forward = Some(forward);
                return Ok(false);
            }
            Ok(Decision::Answer(response)) => response,
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
        let Some(forwarding) = &self.forwarding else {
            return Error::e_explain(HTTPStatus(502), "no dashboard backend is configured");
        };
        // A backend that refused the connection was marked down: if none is left, no
        // manager is active (as during a failover), which clients should retry.
        let Some(backend) = forwarding.upstreams.pick(ctx.tried) else {
            ctx.failure = Some(no_active_backend());
            return Error::e_explain(HTTPStatus(503), "no active dashboard backend");
        };
        if backend.index < 64 {
            ctx.tried |= 1 << backend.index;
        }
        ctx.backend = Some(backend.clone());
        Ok(Box::new(
            forwarding
                .upstreams
                .peer(backend, forwarding.upstreams.read_timeout),
        ))
    }

    /// Swaps the client's credentials for the service account's token.
    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let (Some(forwarding), Some(backend)) = (&self.forwarding, ctx.backend.clone()) else {
            return Error::e_explain(InternalError, "forwarding without a backend");
        };
        // Only authenticated requests act as the service account.
        let authenticated = ctx.forward.as_ref().is_some_and(|f| f.user.is_some());
        let token = match authenticated {
            true => Some(self.service_token(forwarding, backend.clone(), ctx).await?),
            false => None,
        };
        let Some(forward) = &ctx.forward else {
            return Error::e_explain(InternalError, "forwarding without a decision");
        };
        let header = session.req_header();
        let client = forward::Client {
            ip: session
                .client_addr()
                .and_then(|a| a.as_inet())
                .map(|a| a.ip().to_string()),
            tls: self.tls,
            host: header
                .headers
                .get("host")
                .and_then(|v| v.to_str().ok())
                .or_else(|| header.uri.authority().map(|a| a.as_str())),
        };
        forward::rewrite_request(
            upstream_request,
            forward,
            backend.host_header(),
            token.as_deref(),
            &client,
        )?;
        if let Some(length) = ctx.buffered_body {
            // The dashboard refuses bodies without a length (411): send the buffered one
            // (pingora replays it from its retry buffer) with its length.
            upstream_request.remove_header("transfer-encoding");
            upstream_request.insert_header("content-length", length.to_string())?;
        }
        ctx.upstream_token = token;
        ctx.upstream_sent = Some(Instant::now());
        Ok(())
    }

    /// Bounds bodies without a Content-Length (the declared ones were checked up front).
    async fn request_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        _end_of_stream: bool,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let Some(forwarding) = &self.forwarding else {
            return Ok(());
        };
        ctx.body_bytes += body.as_ref().map_or(0, Bytes::len);
        let limit = forwarding.upstreams.max_body_bytes;
        if ctx.body_bytes > limit {
            ctx.failure = Some(GatewayError::PayloadTooLarge { limit });
            return Error::e_explain(HTTPStatus(413), "request body too large");
        }
        Ok(())
    }

    /// A standby's answer, or a refusal of the service token, is retried instead of
    /// reaching the client.
    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        let (Some(forwarding), Some(backend)) = (&self.forwarding, ctx.backend.clone()) else {
            return Ok(());
        };
        let status = response.status.as_u16();
        let elapsed = ctx.upstream_sent.map_or(Duration::ZERO, |t| t.elapsed());
        self.metrics
            .upstream_response(&backend.base, status, elapsed);
        if status == 303 || status >= 500 {
            // Only a standby redirects everything, and the active manager's own errors
            // (e.g. 503 without an orchestrator) are real answers: ask health_path.
            let timeout = forwarding
                .upstreams
                .connect_timeout
                .max(Duration::from_secs(1));
            // Boxed: the probe is rare and its future large, and this hook's future is moved
            // into a box (by `async_trait`) on every request.
            let state = Box::pin(health::probe(&forwarding.upstreams, &backend, timeout)).await;
            if state != BackendState::Active {
                health::record(&self.metrics, &backend, state);
                ctx.retry = true;
                let _enter = ctx.span.enter();
                tracing::info!(server = %backend.base, status, "a standby answered; trying the next backend");
                return Error::e_explain(STANDBY, format!("answered {status}"));
            }
        }
        if status == 401 && !ctx.relogged {
            if let Some(token) = ctx.upstream_token.take() {
                if let Err(e) = forwarding.account.discard(&token).await {
                    tracing::warn!(error = %e, "cannot discard the refused service token");
                }
            }
            ctx.relogged = true;
            ctx.retry = true;
            // The same backend is asked again, with a new token.
            if backend.index < 64 {
                ctx.tried &= !(1 << backend.index);
            }
            return Error::e_explain(TOKEN_REFUSED, "retrying with a new service token");
        }
        Ok(())
    }

    async fn response_filter(
        &self,
        _session: &mut Session,
        response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        if let Some(forwarding) = &self.forwarding {
            forward::rewrite_response(response, &forwarding.upstreams)?;
        }
        if !self.tls {
            // The dashboard sends HSTS over plain HTTP too; only a TLS listener may.
            response.remove_header("strict-transport-security");
        }
        respond::add_common_headers(response, self.tls, &ctx.id)
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut RequestCtx,
        mut e: Box<Error>,
    ) -> Box<Error> {
        if let Some(backend) = &ctx.backend {
            health::record(&self.metrics, backend, BackendState::Down);
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
        let truncated = session.as_ref().retry_buffer_truncated();
        if std::mem::take(&mut ctx.retry) {
            // A standby processed nothing, whatever the method: resend the kept body.
            if truncated {
                ctx.failure = Some(GatewayError::Unavailable {
                    detail: "the active dashboard changed while a large request was sent; retry it"
                        .into(),
                });
            }
            e.set_retry(!truncated);
        } else if !session.req_header().method.is_idempotent() || truncated {
            e.set_retry(false);
        } else {
            // pingora retries a connection dropped before the answer's headers only when the
            // connection was reused. A manager that fails over drops fresh connections too,
            // and an idempotent request may go to the next one (nginx's `proxy_next_upstream
            // error` does the same); nothing has reached the client yet.
            e.retry.decide_reuse(true);
        }
        e
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut RequestCtx,
    ) -> FailToProxy {
        let _enter = ctx.span.enter();
        let error = match ctx.failure.take() {
            Some(error) => error,
            None => match classify_failure(e) {
                Some(error) => error,
                None => {
                    tracing::debug!(error = %e, "client went away");
                    return FailToProxy {
                        error_code: 0,
                        can_reuse_downstream: false,
                    };
                }
            },
        };
        tracing::warn!(error = %e, status = error.status(), "cannot proxy");
        let code = error.status();
        let response = LocalResponse::from_error(&error, &ctx.id);
        // The connection is not reused (a request body may be half read): say so in the
        // answer, so that a client does not send its next request on it as it closes.
        session.set_keepalive(None);
        if let Err(write_error) = respond::send(session, response, self.tls, &ctx.id).await {
            tracing::debug!(error = %write_error, "cannot write the error response");
        }
        FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    /// Runs once per request, answered or failed.
    async fn logging(&self, session: &mut Session, _e: Option<&Error>, ctx: &mut RequestCtx) {
        let status = session.response_written().map_or(0, |r| r.status.as_u16());
        let method = &session.req_header().method;
        let elapsed = ctx.started.elapsed();
        self.metrics
            .observe_request(ctx.route, method, status, elapsed);
        tracing::info!(
            target: "clustergate::access",
            parent: &ctx.span,
            %method,
            path = session.req_header().uri.path(),
            route = ctx.route.label(),
            status,
            backend = ctx.backend.as_ref().map_or("", |b| b.base.as_str()),
            micros = elapsed.as_micros() as u64,
        );
    }
}

/// What `request_filter` decided.
enum Decision {
    Answer(LocalResponse),
    Forward(Forward),
}

impl Gateway {
    /// The service account's token, logging in through `backend` when needed. A backend
    /// that refuses the login as a standby is marked and the request retried elsewhere.
    async fn service_token(
        &self,
        forwarding: &Forwarding,
        backend: Arc<Backend>,
        ctx: &mut RequestCtx,
    ) -> Result<Arc<str>> {
        let result = forwarding
            .account
            .token(&forwarding.upstreams, &backend, unix_now())
            .await;
        match result {
            Ok(token) => Ok(token),
            Err(CredentialError::NotActive(status)) => {
                health::record(&self.metrics, &backend, BackendState::Standby);
                ctx.retry = true;
                Error::e_explain(STANDBY, format!("login answered {status}"))
            }
            Err(e) => {
                ctx.failure = Some(match &e {
                    CredentialError::Client(crate::upstream::ClientError::Timeout) => {
                        GatewayError::GatewayTimeout
                    }
                    _ => GatewayError::BadGateway {
                        detail: "the gateway could not log in to the dashboard backend".into(),
                    },
                });
                let _enter = ctx.span.enter();
                tracing::error!(server = %backend.base, error = %e, "no service account token");
                Error::e_explain(HTTPStatus(502), "no service account token")
            }
        }
    }

    async fn decide(
        &self,
        session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> Result<Decision, GatewayError> {
        let path = paths::normalize(session.req_header().uri.path()).map_err(|e| {
            GatewayError::InvalidPath {
                detail: format!("Invalid request path: {e}."),
            }
        })?;
        ctx.route = Route::classify(&path);
        let now = unix_now();
        match ctx.route {
            Route::Login | Route::TokenCheck | Route::Logout => self
                .answer_auth(session, ctx.route, now)
                .await
                .map(Decision::Answer),
            Route::Docs => self.answer_docs(session, &path).await.map(Decision::Answer),
            Route::Api | Route::Other => {
                let decision = self.decide_forward(session, path, ctx.route, now).await?;
                ctx.buffered_body = self.buffer_unsized_body(session).await?;
                Ok(decision)
            }
        }
    }

    /// Reads a body that came without a length (chunked, or HTTP/2 without
    /// Content-Length) into pingora's retry buffer, so it can be sent with one.
    async fn buffer_unsized_body(
        &self,
        session: &mut Session,
    ) -> Result<Option<usize>, GatewayError> {
        let declared = session
            .req_header()
            .headers
            .contains_key(http::header::CONTENT_LENGTH);
        if declared || session.as_mut().is_body_empty() {
            return Ok(None);
        }
        let limit = self
            .forwarding
            .as_ref()
            .map_or(AUTH_BODY_LIMIT, |f| f.upstreams.max_body_bytes);
        session.as_mut().enable_retry_buffering();
        let body = respond::read_body(session, limit).await?;
        if body.len() > RETRY_BUFFER_BYTES {
            return Err(GatewayError::LengthRequired {
                limit: RETRY_BUFFER_BYTES,
            });
        }
        Ok(Some(body.len()))
    }

    async fn answer_auth(
        &self,
        session: &mut Session,
        route: Route,
        now: UnixTime,
    ) -> Result<LocalResponse, GatewayError> {
        if session.req_header().method != http::Method::POST {
            return Err(GatewayError::MethodNotAllowed { allow: "POST" });
        }
        let body = respond::read_body(session, AUTH_BODY_LIMIT).await?;
        let header = session.req_header();
        let req = AuthRequest {
            headers: &header.headers,
            query: header.uri.query(),
            body,
        };
        match route {
            // Boxed, as is the docs fetch: rare answers with large futures, which would
            // otherwise make `request_filter`'s future (moved into a box on every request
            // by `async_trait`) as large as they are.
            Route::Login => Box::pin(self.auth.login(&req, now)).await,
            Route::TokenCheck => {
                let available = self
                    .forwarding
                    .as_ref()
                    .is_none_or(|f| f.upstreams.any_active());
                self.auth.check(&req, now, available).await
            }
            _ => self.auth.logout(&req, now).await,
        }
    }

    async fn answer_docs(
        &self,
        session: &Session,
        path: &str,
    ) -> Result<LocalResponse, GatewayError> {
        let method = &session.req_header().method;
        if method != http::Method::GET && method != http::Method::HEAD {
            return Err(GatewayError::MethodNotAllowed { allow: "GET, HEAD" });
        }
        match (path, &self.forwarding) {
            ("/docs", Some(_)) => Ok(docs::page()),
            ("/docs/api.json" | "/docs/openapi.json", Some(forwarding)) => {
                Box::pin(forwarding.docs.document()).await
            }
            _ => Err(not_found(path)),
        }
    }

    /// 401, 403 and 415 are decided here, in the dashboard's order, before anything is
    /// sent. API paths need a token unless the gateway opened the operation; the web UI's
    /// files need none.
    async fn decide_forward(
        &self,
        session: &mut Session,
        path: String,
        route: Route,
        now: UnixTime,
    ) -> Result<Decision, GatewayError> {
        let header = session.req_header();
        // Anything else (`delete`, `BREW`) would be checked as a read: refuse it here.
        if !FORWARDED_METHODS.contains(&header.method) {
            return Err(GatewayError::MethodNotAllowed {
                allow: "GET, HEAD, POST, PUT, PATCH, DELETE",
            });
        }
        let Some(forwarding) = &self.forwarding else {
            if route == Route::Api {
                self.auth.authenticate(&header.headers, now).await?;
            }
            return Err(not_found(&path));
        };
        let requirement = forwarding.access.requirement(&header.method, &path);
        let user = match requirement {
            Ok(Requirement::Open) => None,
            Err(_) if route != Route::Api => None,
            _ => Some(self.auth.authenticate(&header.headers, now).await?),
        };
        // Unknown operations, and public ones the gateway does not offer, do not exist here.
        let requirement = requirement.map_err(|e| match e {
            AccessError::NotOffered => GatewayError::NotOffered,
            _ => not_found(&path),
        })?;
        if forwarding.changes_service_account(&header.method, &path) {
            return Err(GatewayError::NotOffered);
        }
        if let Some(user) = &user {
            AccessTable::authorize(user, requirement).map_err(|_| GatewayError::Forbidden)?;
        }
        let accept = match route {
            Route::Api => {
                let accept = respond::joined_header(&header.headers, http::header::ACCEPT);
                let version = versioning::choose(accept.as_deref(), &self.vendor)?;
                Some(version.media_type(&self.vendor))
            }
            _ => None,
        };
        if !forwarding.upstreams.any_active() {
            return Err(no_active_backend());
        }
        let path_and_query = match header.uri.query() {
            Some(query) => format!("{path}?{query}"),
            None => path,
        };
        let limit = forwarding.upstreams.max_body_bytes;
        if respond::declared_length(&header.headers).is_some_and(|n| n > limit) {
            // Read up to the limit first: HTTP/2 clients refused unread see a reset.
            respond::read_body(session, limit).await?;
            return Err(GatewayError::PayloadTooLarge { limit });
        }
        Ok(Decision::Forward(Forward {
            path_and_query,
            user,
            accept,
        }))
    }
}

/// The answer for a pingora error nobody decided on; `None`: the client went away.
fn classify_failure(e: &Error) -> Option<GatewayError> {
    match e.etype() {
        HTTPStatus(503) => Some(no_active_backend()),
        ReadTimedout | WriteTimedout | ConnectTimedout
            if matches!(e.esource(), ErrorSource::Upstream) =>
        {
            Some(GatewayError::GatewayTimeout)
        }
        _ if matches!(e.esource(), ErrorSource::Downstream) => None,
        _ if e.etype() == &STANDBY => Some(no_active_backend()),
        _ => Some(GatewayError::BadGateway {
            detail: "the dashboard backend could not be reached".into(),
        }),
    }
}

fn no_active_backend() -> GatewayError {
    GatewayError::Unavailable {
        detail: "no active dashboard backend".into(),
    }
}

fn not_found(path: &str) -> GatewayError {
    let end = (0..=MAX_ECHOED_PATH.min(path.len()))
        .rev()
        .find(|i| path.is_char_boundary(*i))
        .unwrap_or(0);
    GatewayError::NotFound {
        path: path[..end].to_string(),
    }
}

fn unix_now() -> UnixTime {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
