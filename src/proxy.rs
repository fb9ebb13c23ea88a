//! The request path, top to bottom, as pingora runs it: classify the route, answer the
//! auth endpoints here, check the token on every other API path, and measure every
//! request. The modules decide; this file only calls them in order.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use tracing::Instrument;

use crate::auth::{Auth, AuthRequest};
use crate::errors::GatewayError;
use crate::metrics::Metrics;
use crate::respond::{self, LocalResponse};
use crate::routes::Route;
use crate::state::UnixTime;

/// Auth request bodies are a few hundred bytes; anything near this is abuse.
pub const AUTH_BODY_LIMIT: usize = 64 * 1024;
/// Paths are echoed in 404 details up to this many bytes.
const MAX_ECHOED_PATH: usize = 256;

/// The gateway as pingora sees it.
pub struct Gateway {
    pub auth: Arc<Auth>,
    pub metrics: Arc<Metrics>,
    /// Whether clients reach this listener over TLS.
    pub tls: bool,
}

/// Per-request state.
pub struct RequestCtx {
    pub id: String,
    pub started: Instant,
    pub route: Route,
    /// Carries the request id into every log line of this request.
    pub span: tracing::Span,
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
        }
    }

    /// Runs first: every request is answered here until forwarding lands.
    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> Result<bool> {
        ctx.route = Route::classify(session.req_header().uri.path());
        let span = ctx.span.clone();
        let response = match self.answer(session, ctx.route).instrument(span).await {
            Ok(response) => response,
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
        _ctx: &mut RequestCtx,
    ) -> Result<Box<HttpPeer>> {
        Error::e_explain(HTTPStatus(502), "no dashboard backend is configured")
    }

    async fn response_filter(
        &self,
        _session: &mut Session,
        response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> Result<()> {
        respond::add_common_headers(response, self.tls, &ctx.id)
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut RequestCtx,
    ) -> FailToProxy {
        let _enter = ctx.span.enter();
        if matches!(e.esource(), ErrorSource::Downstream) {
            tracing::debug!(error = %e, "client went away");
            return FailToProxy {
                error_code: 0,
                can_reuse_downstream: false,
            };
        }
        tracing::warn!(error = %e, "cannot proxy");
        let error = GatewayError::BadGateway {
            detail: "the dashboard backend could not be reached".into(),
        };
        let code = error.status();
        let response = LocalResponse::from_error(&error, &ctx.id);
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
            micros = elapsed.as_micros() as u64,
        );
    }
}

impl Gateway {
    /// The answer to a request the gateway serves itself.
    async fn answer(
        &self,
        session: &mut Session,
        route: Route,
    ) -> Result<LocalResponse, GatewayError> {
        let now = unix_now();
        match route {
            Route::Login | Route::TokenCheck | Route::Logout => {
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
                    Route::Login => self.auth.login(&req, now).await,
                    Route::TokenCheck => self.auth.check(&req, now).await,
                    _ => self.auth.logout(&req, now).await,
                }
            }
            Route::Api => {
                let _user = self
                    .auth
                    .authenticate(&session.req_header().headers, now)
                    .await?;
                Err(not_found(session))
            }
            Route::Docs | Route::Other => Err(not_found(session)),
        }
    }
}

fn not_found(session: &Session) -> GatewayError {
    let path = session.req_header().uri.path();
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
