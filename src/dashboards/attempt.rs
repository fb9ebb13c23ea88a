//! One forwarded request's way through the managers, as a plain state machine: which
//! backends it tried, which one it is on now and with which token, and whether the next
//! error is retried. The proxy hooks report what happened (an answer's status, a probe's
//! verdict, an error); the transitions here decide, and are tested case by case.
//!
//! The rules: only the active manager serves. A standby answers 303 (or an error), and
//! processed nothing, so any request is sent again elsewhere. A refused service token is
//! renewed once, when the service account agrees, and the same backend asked again. A connection dropped before the answer
//! is retried for idempotent requests only, once on the same backend, then elsewhere. A body larger than pingora's retry buffer
//! cannot be sent twice.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Backend, Upstreams};

/// The backends one request has tried, as a bit set over their indexes. Backends past the
/// first 64 are never marked: the set stays a word, and no deployment has 64 managers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tried(u64);

impl Tried {
    pub fn contains(self, index: usize) -> bool {
        index < 64 && self.0 & (1 << index) != 0
    }

    fn insert(&mut self, index: usize) {
        if index < 64 {
            self.0 |= 1 << index;
        }
    }

    fn remove(&mut self, index: usize) {
        if index < 64 {
            self.0 &= !(1 << index);
        }
    }
}

/// A retry this request decided on, for the error that follows to carry out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// A standby answered: it processed nothing; the next backend is asked.
    NextBackend,
    /// The service token was refused: the same backend is asked with a new one.
    NewToken,
}

/// What to do with a backend's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResponseVerdict {
    /// It is the answer: pass it to the client.
    Deliver,
    /// A redirect or a server error: only the backend's health path tells a standby from
    /// the active manager's own error (e.g. 503 without an orchestrator). Report the probe's
    /// verdict with [`Attempt::on_probe`].
    Probe,
    /// The service token was refused: the service account decides whether `refused` is
    /// replaced ([`super::credentials::ServiceAccount::refused`]); if so,
    /// [`Attempt::retry_with_new_token`], else the 401 is delivered.
    Renew { refused: Arc<str> },
    /// The user's own dashboard token was refused: the client gets the 401 and the
    /// user's session ends. Never retried with the service account's token.
    EndSession,
}

/// What to do with an error of this attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorVerdict {
    /// Send the request again, whatever pingora made of the error.
    Retry,
    /// Send it again unless pingora ruled that out (it retries a connection dropped before
    /// the answer only when the connection was reused; a manager that fails over drops
    /// fresh ones too, and nginx's `proxy_next_upstream error` retries those as well).
    RetryUnlessRuledOut,
    /// No retry; answer the client with this, or as the error itself says.
    GiveUp(Option<AttemptError>),
}

/// Why a request's attempts end without an answer from a dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AttemptError {
    /// The active manager this request tried closed the connection, and no other is left.
    #[error("the dashboard closed the connection")]
    BackendClosed,
    #[error("no active dashboard backend")]
    NoActiveBackend,
    /// A request too large to keep for a retry met a failover while it was sent.
    #[error("the active dashboard changed while a large request was sent; retry it")]
    ChangedDuringLargeRequest,
}

/// One request's attempts.
#[derive(Debug, Default)]
pub struct Attempt {
    tried: Tried,
    backend: Option<Arc<Backend>>,
    token: Option<Arc<str>>,
    /// Sent with the user's own dashboard token, not the service account's.
    as_user: bool,
    sent_at: Option<Instant>,
    /// The service token may be renewed once per request: the retry budget for refusals.
    renewed: bool,
    /// A dropped connection may be sent again once to the same backend: a pooled
    /// connection the dashboard had closed while idle says nothing about the manager.
    redialed: bool,
    pending: Option<Pending>,
}

impl Attempt {
    /// The active backend this request has not tried yet, now its current one. When none
    /// is left but an active one was tried (it closed the connection, and the retry found
    /// no other), the answer is that backend's failure, 502; 503 only when none is active.
    pub fn pick(&mut self, upstreams: &Upstreams) -> Result<Arc<Backend>, AttemptError> {
        let backend = upstreams.pick(self.tried).ok_or_else(|| {
            match self.tried != Tried::default() && upstreams.any_active() {
                true => AttemptError::BackendClosed,
                false => AttemptError::NoActiveBackend,
            }
        })?;
        self.tried.insert(backend.index);
        self.backend = Some(backend.clone());
        Ok(backend)
    }

    /// The backend being tried.
    pub fn backend(&self) -> Option<&Arc<Backend>> {
        self.backend.as_ref()
    }

    /// The request goes out now, with `token` (none for what needs no login).
    pub fn sending(&mut self, token: Option<Arc<str>>) {
        self.token = token;
        self.as_user = false;
        self.sent_at = Some(Instant::now());
    }

    /// The request goes out now, with the user's own dashboard token.
    pub fn sending_as_user(&mut self) {
        self.token = None;
        self.as_user = true;
        self.sent_at = Some(Instant::now());
    }

    /// Time since the request went out.
    pub fn elapsed(&self) -> Duration {
        self.sent_at.map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// Decides about the current backend's answer.
    pub fn on_response(&mut self, status: u16) -> ResponseVerdict {
        if status == 303 || status >= 500 {
            return ResponseVerdict::Probe;
        }
        if status == 401 && self.as_user {
            return ResponseVerdict::EndSession;
        }
        if status == 401 && !self.renewed {
            if let Some(refused) = self.token.take() {
                self.renewed = true;
                return ResponseVerdict::Renew { refused };
            }
        }
        ResponseVerdict::Deliver
    }

    /// The refused service token is replaced: the same backend is asked again.
    pub fn retry_with_new_token(&mut self) {
        self.pending = Some(Pending::NewToken);
        if let Some(backend) = &self.backend {
            self.tried.remove(backend.index);
        }
    }

    /// The probe after [`ResponseVerdict::Probe`] said whether the backend is still the
    /// active manager; returns whether its answer is dropped for the next backend.
    pub fn on_probe(&mut self, still_active: bool) -> bool {
        if !still_active {
            self.pending = Some(Pending::NextBackend);
        }
        !still_active
    }

    /// The backend refused the service account's login as a standby would.
    pub fn on_standby_login(&mut self) {
        self.pending = Some(Pending::NextBackend);
    }

    /// Decides whether an error while proxying is retried. `replayable`: the whole body
    /// is still in pingora's retry buffer; `answering`: the client already has the
    /// answer's head, so a second answer cannot follow it.
    pub fn on_error(
        &mut self,
        idempotent: bool,
        replayable: bool,
        answering: bool,
    ) -> ErrorVerdict {
        match (self.pending.take(), replayable) {
            _ if answering => ErrorVerdict::GiveUp(None),
            (Some(_), true) => ErrorVerdict::Retry,
            (Some(_), false) => ErrorVerdict::GiveUp(Some(AttemptError::ChangedDuringLargeRequest)),
            (None, true) if idempotent => {
                if !self.redialed {
                    self.redialed = true;
                    if let Some(backend) = &self.backend {
                        self.tried.remove(backend.index);
                    }
                }
                ErrorVerdict::RetryUnlessRuledOut
            }
            (None, _) => ErrorVerdict::GiveUp(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboards::BackendState;

    /// Three managers: the second is active.
    fn managers() -> Upstreams {
        let upstreams = Upstreams::for_tests(3);
        upstreams.backends()[1].set_state(BackendState::Active);
        upstreams
    }

    fn sent(upstreams: &Upstreams, token: Option<&str>) -> Attempt {
        let mut attempt = Attempt::default();
        attempt.pick(upstreams).unwrap();
        attempt.sending(token.map(Arc::from));
        attempt
    }

    #[test]
    fn the_active_manager_is_picked_once() {
        let upstreams = managers();
        let mut attempt = Attempt::default();
        assert_eq!(attempt.pick(&upstreams).unwrap().index, 1);
        // Only a dropped connection retries the active manager's request: the answer is
        // that manager's failure (see below).
        let again = attempt.pick(&upstreams).unwrap_err();
        assert_eq!(again, AttemptError::BackendClosed);
    }

    #[test]
    fn nothing_active_is_no_active_backend() {
        let upstreams = Upstreams::for_tests(2);
        assert_eq!(
            Attempt::default().pick(&upstreams).unwrap_err(),
            AttemptError::NoActiveBackend
        );
    }

    #[test]
    fn a_normal_answer_is_delivered() {
        let upstreams = managers();
        let mut attempt = sent(&upstreams, Some("t"));
        for status in [200, 201, 204, 304, 400, 403, 404] {
            assert_eq!(attempt.on_response(status), ResponseVerdict::Deliver);
        }
    }

    #[test]
    fn a_standby_redirect_moves_the_request_to_the_next_manager_whatever_the_method() {
        let upstreams = managers();
        let mut attempt = sent(&upstreams, Some("t"));
        assert_eq!(attempt.on_response(303), ResponseVerdict::Probe);
        assert!(attempt.on_probe(false));
        // Not idempotent (a POST): still retried, the standby processed nothing.
        assert_eq!(attempt.on_error(false, true, false), ErrorVerdict::Retry);
        // The standby was tried: the next pick is another manager or none.
        upstreams.backends()[2].set_state(BackendState::Active);
        upstreams.backends()[1].set_state(BackendState::Standby);
        assert_eq!(attempt.pick(&upstreams).unwrap().index, 2);
    }

    #[test]
    fn a_standby_server_error_is_retried_like_a_redirect() {
        let upstreams = managers();
        let mut attempt = sent(&upstreams, None);
        assert_eq!(attempt.on_response(500), ResponseVerdict::Probe);
        assert!(attempt.on_probe(false));
        assert_eq!(attempt.on_error(true, true, false), ErrorVerdict::Retry);
    }

    #[test]
    fn the_active_managers_own_503_is_delivered() {
        let upstreams = managers();
        let mut attempt = sent(&upstreams, Some("t"));
        assert_eq!(attempt.on_response(503), ResponseVerdict::Probe);
        assert!(!attempt.on_probe(true));
        // Nothing pending: a later error is judged on its own.
        assert_eq!(
            attempt.on_error(false, true, false),
            ErrorVerdict::GiveUp(None),
            "no retry was decided"
        );
    }

    #[test]
    fn a_refused_token_is_renewed_once_on_the_same_manager() {
        let upstreams = managers();
        let mut attempt = sent(&upstreams, Some("old"));
        assert_eq!(
            attempt.on_response(401),
            ResponseVerdict::Renew {
                refused: Arc::from("old")
            }
        );
        attempt.retry_with_new_token();
        assert_eq!(attempt.on_error(false, true, false), ErrorVerdict::Retry);
        assert_eq!(attempt.pick(&upstreams).unwrap().index, 1, "same manager");
        attempt.sending(Some(Arc::from("new")));
        // Refused again: the dashboard means it; the client gets its 401.
        assert_eq!(attempt.on_response(401), ResponseVerdict::Deliver);
    }

    #[test]
    fn a_refusal_the_account_does_not_renew_for_is_the_answer() {
        let upstreams = managers();
        let mut attempt = sent(&upstreams, Some("t"));
        assert!(matches!(
            attempt.on_response(401),
            ResponseVerdict::Renew { .. }
        ));
        // No retry was decided: the 401 reaches the client.
        assert_eq!(
            attempt.on_error(false, true, false),
            ErrorVerdict::GiveUp(None)
        );
    }

    #[test]
    fn a_refused_user_token_ends_the_session_and_is_never_renewed() {
        let upstreams = managers();
        let mut attempt = Attempt::default();
        attempt.pick(&upstreams).unwrap();
        attempt.sending_as_user();
        assert_eq!(attempt.on_response(401), ResponseVerdict::EndSession);
        // Nothing is pending: the 401 reaches the client, no retry follows.
        assert_eq!(
            attempt.on_error(false, true, false),
            ErrorVerdict::GiveUp(None)
        );
        assert_eq!(attempt.on_response(200), ResponseVerdict::Deliver);
    }

    #[test]
    fn a_401_without_a_service_token_is_the_dashboards_answer() {
        let upstreams = managers();
        let mut attempt = sent(&upstreams, None);
        assert_eq!(attempt.on_response(401), ResponseVerdict::Deliver);
    }

    #[test]
    fn a_standby_refusing_the_login_moves_the_request_on() {
        let upstreams = managers();
        let mut attempt = Attempt::default();
        attempt.pick(&upstreams).unwrap();
        attempt.on_standby_login();
        assert_eq!(attempt.on_error(false, true, false), ErrorVerdict::Retry);
    }

    #[test]
    fn a_dropped_connection_is_retried_for_idempotent_requests_only() {
        let upstreams = managers();
        let mut get = sent(&upstreams, Some("t"));
        assert_eq!(
            get.on_error(true, true, false),
            ErrorVerdict::RetryUnlessRuledOut
        );
        let mut post = sent(&upstreams, Some("t"));
        assert_eq!(
            post.on_error(false, true, false),
            ErrorVerdict::GiveUp(None)
        );
    }

    #[test]
    fn a_connection_dropped_after_the_answer_started_is_never_retried() {
        let upstreams = managers();
        let mut get = sent(&upstreams, Some("t"));
        assert_eq!(get.on_error(true, true, true), ErrorVerdict::GiveUp(None));
        // Not even a decided retry: the client has the first answer's head.
        let mut standby = sent(&upstreams, Some("t"));
        standby.on_standby_login();
        assert_eq!(
            standby.on_error(true, true, true),
            ErrorVerdict::GiveUp(None)
        );
    }

    #[test]
    fn a_body_past_the_retry_buffer_is_never_sent_twice() {
        let upstreams = managers();
        let mut put = sent(&upstreams, Some("t"));
        assert_eq!(put.on_error(true, false, false), ErrorVerdict::GiveUp(None));

        let mut standby = sent(&upstreams, Some("t"));
        assert_eq!(standby.on_response(303), ResponseVerdict::Probe);
        assert!(standby.on_probe(false));
        match standby.on_error(false, false, false) {
            ErrorVerdict::GiveUp(Some(answer)) => {
                assert_eq!(answer, AttemptError::ChangedDuringLargeRequest);
            }
            other => panic!("expected an answer, got {other:?}"),
        }
    }

    #[test]
    fn a_decided_retry_is_used_once() {
        let upstreams = managers();
        let mut attempt = sent(&upstreams, Some("t"));
        attempt.on_standby_login();
        assert_eq!(attempt.on_error(false, true, false), ErrorVerdict::Retry);
        assert_eq!(
            attempt.on_error(false, true, false),
            ErrorVerdict::GiveUp(None)
        );
    }

    #[test]
    fn an_active_manager_that_dropped_the_retried_request_is_a_502_not_a_503() {
        let upstreams = managers();
        let mut get = sent(&upstreams, Some("t"));
        assert_eq!(
            get.on_error(true, true, false),
            ErrorVerdict::RetryUnlessRuledOut
        );
        // Sent again once to the same manager (a stale pooled connection says nothing
        // about it); dropped again, no other active manager is left, and it still is.
        assert_eq!(get.pick(&upstreams).unwrap().index, 1);
        assert_eq!(
            get.on_error(true, true, false),
            ErrorVerdict::RetryUnlessRuledOut
        );
        assert_eq!(
            get.pick(&upstreams).unwrap_err(),
            AttemptError::BackendClosed
        );
        // Had it stopped being active, no manager serves: 503.
        upstreams.backends()[1].set_state(BackendState::Down);
        let answer = get.pick(&upstreams).unwrap_err();
        assert_eq!(answer.to_string(), "no active dashboard backend");
    }

    #[test]
    fn the_tried_set_ignores_backends_past_64() {
        let mut tried = Tried::default();
        tried.insert(3);
        tried.insert(70);
        assert!(tried.contains(3));
        assert!(!tried.contains(70));
        tried.remove(3);
        assert_eq!(tried, Tried::default());
    }
}
