//! What the hooks ask of the answer cache (`answer_cache`): an admitted GET of a cached
//! operation, or of a web UI file, is answered from it, waits for an identical one in
//! flight, or leads and has its answer captured as it passes; a forwarded write drops
//! what the cache holds.

use std::time::Duration;

use http::header::{ACCEPT_ENCODING, ACCEPT_LANGUAGE, IF_MODIFIED_SINCE, IF_NONE_MATCH, RANGE};
use http::Method;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::proxy::Session;

use super::decide::Next;
use super::{Gateway, RequestCtx};
use crate::answer_cache::{AnswerCache, Consulted, Key, Kind, Stored};
use crate::edge::respond;
use crate::forward::{self, Forward};
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
        let Some((key, ttl, kind)) = self.cache_key(session.req_header(), ctx, &forward) else {
            return Next::Forward(forward);
        };
        match self.answer_cache.consult(key, ttl, kind).await {
            Consulted::Answer(answer) => Next::Cached(forward, answer),
            Consulted::Lead(capture) => {
                ctx.capture = Some(capture);
                Next::Forward(forward)
            }
            Consulted::Pass => Next::Forward(forward),
        }
    }

    /// The key of a GET the cache keeps: a configured operation's, or a UI file's. A range
    /// is never kept (asked last: every GET comes here, with the cache off too).
    fn cache_key(
        &self,
        header: &RequestHeader,
        ctx: &RequestCtx,
        forward: &Forward,
    ) -> Option<(Key, Duration, Kind)> {
        if header.method != Method::GET {
            return None;
        }
        let keyed = if ctx.route == Route::Other && forward.user.is_none() {
            self.ui_file_key(header, forward)
        } else {
            self.operation_key(header, ctx, forward)
        }?;
        (!header.headers.contains_key(RANGE)).then_some(keyed)
    }

    fn ui_file_key(
        &self,
        header: &RequestHeader,
        forward: &Forward,
    ) -> Option<(Key, Duration, Kind)> {
        let path = forward.path_and_query.split('?').next().unwrap_or_default();
        let (ttl, kind) = self.answer_cache.ui_file(path)?;
        let cookie = forward::language_cookie(&header.headers);
        let languages = AnswerCache::ui_languages(
            cookie.as_ref().map(|c| c.as_bytes()),
            header_bytes(header, ACCEPT_LANGUAGE),
        )?;
        Some((Key::ui_file(path, &languages)?, ttl, kind))
    }

    fn operation_key(
        &self,
        header: &RequestHeader,
        ctx: &RequestCtx,
        forward: &Forward,
    ) -> Option<(Key, Duration, Kind)> {
        let (admission, id) = ctx.operation.as_ref()?;
        let template = admission.template(*id);
        let ttl = self.answer_cache.ttl(template)?;
        let key = Key::of(
            admission,
            template,
            forward,
            header_bytes(header, ACCEPT_ENCODING),
        )?;
        Some((key, ttl, Kind::Api))
    }

    /// Answers from a kept answer: its body as the client takes it, or `304`.
    pub(super) async fn send_kept(
        &self,
        session: &mut Session,
        ctx: &RequestCtx,
        answer: &Stored,
    ) -> pingora::Result<()> {
        let reply = answer.reply(&session.req_header().headers);
        respond::send_kept(
            session,
            reply.status,
            &reply.headers,
            reply.body,
            self.tls,
            &ctx.id,
        )
        .await
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

fn header_bytes(header: &RequestHeader, name: http::HeaderName) -> Option<&[u8]> {
    header.headers.get(name).map(|v| v.as_bytes())
}

/// A UI file that leads is asked for whole and plain: the gateway keeps one body for
/// every client and compresses it itself, so the client's encodings and validators stay
/// here (a `200` answers a conditional request too).
pub(super) fn prepare_upstream(ctx: &RequestCtx, upstream: &mut RequestHeader) {
    if ctx.capture.as_ref().is_some_and(|c| c.is_ui_file()) {
        for name in [ACCEPT_ENCODING, IF_NONE_MATCH, IF_MODIFIED_SINCE] {
            upstream.remove_header(&name);
        }
    }
}

/// The answer's head, for the request that leads: a head not to be shared ends the
/// capture; a UI file's goes out with the caching its kept copies will have.
pub(super) fn capture_head(
    ctx: &mut RequestCtx,
    response: &mut ResponseHeader,
) -> pingora::Result<()> {
    let Some(capture) = &mut ctx.capture else {
        return Ok(());
    };
    if !capture.head(response.status.as_u16(), &response.headers) {
        ctx.capture = None;
    } else if let Some(policy) = capture.cache_control() {
        response.insert_header(http::header::CACHE_CONTROL, policy)?;
    }
    Ok(())
}

/// A piece of the answer's body, for the request that leads.
pub(super) fn capture_body(ctx: &mut RequestCtx, body: Option<&bytes::Bytes>, end: bool) {
    if let Some(capture) = &mut ctx.capture {
        if !capture.body(body, end) {
            ctx.capture = None;
        }
    }
}
