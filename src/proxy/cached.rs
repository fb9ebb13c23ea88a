//! What the hooks ask of the answer cache (`answer_cache`): an admitted GET of a cached
//! operation is answered from it, waits for an identical one in flight, or leads and has
//! its answer captured as it passes; a forwarded write drops what the cache holds.

use http::Method;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;

use super::decide::Next;
use super::{Gateway, RequestCtx};
use crate::answer_cache::{Consulted, Key};
use crate::forward::Forward;
use crate::routes::Route;

/// Where the web UI reports its JavaScript errors (`POST /ui-api/logging/js-error`).
const UI_ERROR_REPORTS: &str = "/ui-api/logging/";

impl Gateway {
    /// `forward` admitted: answered by the cache, or forwarded (captured when it leads).
    pub(super) async fn consult_cache(
        &self,
        session: &Session,
        ctx: &mut RequestCtx,
        forward: Forward,
    ) -> Next {
        let header = session.req_header();
        let Some((admission, id)) = &ctx.operation else {
            return Next::Forward(forward);
        };
        let template = admission.template(*id);
        let ttl = match (&header.method, self.answer_cache.ttl(template)) {
            (&Method::GET, Some(ttl)) => ttl,
            _ => return Next::Forward(forward),
        };
        let encoding = header.headers.get(http::header::ACCEPT_ENCODING);
        let Some(key) = Key::of(
            admission,
            template,
            &forward,
            encoding.map(|v| v.as_bytes()),
        ) else {
            return Next::Forward(forward);
        };
        match self.answer_cache.consult(key, ttl).await {
            Consulted::Answer(answer) => Next::Cached(forward, answer),
            Consulted::Lead(capture) => {
                ctx.capture = Some(capture);
                Next::Forward(forward)
            }
            Consulted::Pass => Next::Forward(forward),
        }
    }

    /// A forwarded write (whatever its answer) drops every kept answer; but for the web
    /// UI's report of its own errors, which every open tab may send and which changes
    /// nothing the UI polls.
    pub(super) fn after_answer(&self, session: &Session, ctx: &RequestCtx) {
        let method = &session.req_header().method;
        let write = !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
        let changes_nothing = ctx.path.starts_with(UI_ERROR_REPORTS);
        if write && !changes_nothing && ctx.route == Route::Api && ctx.forward.is_some() {
            self.answer_cache.after_write();
        }
    }
}

/// The answer's head, for the request that leads: a head not to be shared ends the capture.
pub(super) fn capture_head(ctx: &mut RequestCtx, response: &ResponseHeader) {
    if let Some(capture) = &mut ctx.capture {
        if !capture.head(response.status.as_u16(), &response.headers) {
            ctx.capture = None;
        }
    }
}

/// A piece of the answer's body, for the request that leads.
pub(super) fn capture_body(ctx: &mut RequestCtx, body: Option<&bytes::Bytes>, end: bool) {
    if let Some(capture) = &mut ctx.capture {
        if !capture.body(body, end) {
            ctx.capture = None;
        }
    }
}
