//! A request's own state through the hooks (`RequestCtx`), and what the logs make of it.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pingora::proxy::Session;

use crate::access::{Admission, OperationId};
use crate::answer_cache::Capture;
use crate::auth::AuthSubject;
use crate::dashboards::answer_buffer::HeldAnswer;
use crate::dashboards::in_flight::{Holder, Place};
use crate::dashboards::Attempt;
use crate::edge::request::HeldBody;
use crate::forward::Forward;
use crate::observe::access_log::{self, Served};
use crate::routes::Route;
use crate::token_redaction::Redaction;

/// Per-request state.
pub struct RequestCtx {
    pub id: String,
    pub(super) started: Instant,
    pub(super) route: Route,
    /// Carries the request id into every log line of this request.
    pub(super) span: tracing::Span,
    /// Set when admitted: the upstream hooks run only then.
    pub(super) forward: Option<Forward>,
    pub(super) attempt: Attempt,
    /// A forwarded request's body, read whole before a dashboard connection was taken,
    /// and its bytes in the body budget.
    pub(super) body: Option<HeldBody>,
    /// The dashboard place this request holds (`dashboards::in_flight`), from the try's
    /// connection to the end of the dashboard's answer (read ahead of the client:
    /// `dashboards::answer_buffer`).
    pub(super) place: Option<Place>,
    /// Who sent it (`client_addr`): what the login limit counts and the logs name.
    pub(super) client: Option<IpAddr>,
    /// The normalized path; empty until then (or when it cannot be).
    pub(super) path: String,
    /// The scope table's operation the path matched (forwarded routes), with the table it
    /// is in: a reload may replace the table before the request is logged.
    pub(super) operation: Option<(Arc<Admission>, OperationId)>,
    /// Whom an auth endpoint's request was about.
    pub(super) subject: AuthSubject,
    /// The answer being read whole to be sent without dashboard tokens.
    pub(super) redaction: Option<Redaction>,
    /// The answer being captured for the identical requests waiting (`answer_cache`).
    pub(super) capture: Option<Capture>,
    /// The answer being read ahead of the client (`dashboards::answer_buffer`).
    pub(super) held: Option<HeldAnswer>,
}

impl RequestCtx {
    pub(super) fn new() -> RequestCtx {
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
            redaction: None,
            capture: None,
            held: None,
        }
    }

    /// Whose share of the dashboard's places the request takes: its user's, or without a
    /// token its client address's.
    pub(super) fn holder(&self) -> Holder {
        let user = self.forward.as_ref().and_then(|f| f.user.as_deref());
        match (user, self.client) {
            (Some(user), _) => Holder::User(user.username.clone()),
            (None, Some(address)) => Holder::Address(address),
            (None, None) => Holder::Unknown,
        }
    }

    /// The request as the logs record it, once answered with `status`.
    pub(super) fn served<'a>(
        &'a self,
        session: &'a Session,
        status: u16,
        elapsed: Duration,
    ) -> Served<'a> {
        let header = session.req_header();
        // A login or logout names its user once it succeeded (a failed login's name is the
        // client's text: the audit log records it, the access log does not).
        let user = match &self.forward {
            Some(forward) => forward.user.as_deref().map(|u| u.username.as_str()),
            None => self
                .subject
                .username
                .as_deref()
                .filter(|_| (200..300).contains(&status)),
        };
        let operation = match (self.route, &self.operation) {
            (Route::Api | Route::Other, Some((admission, id))) => admission.template(*id),
            (Route::Api | Route::Other, None) => "unmatched",
            (route, _) => route.label(),
        };
        Served {
            request_id: &self.id,
            client: self.client,
            user,
            method: &header.method,
            route: self.route,
            operation,
            path: access_log::logged_path(&self.path, &header.uri),
            status,
            bytes: session.body_bytes_sent(),
            elapsed,
            backend: self.attempt.backend().map(|b| b.base.as_str()),
            api_key: self.subject.api_key.as_deref(),
        }
    }
}
