//! What `request_filter` decides: a local answer (the auth endpoints, the docs, a
//! refusal) or a request admitted for forwarding, its body read.

use std::net::IpAddr;
use std::sync::Arc;

use pingora::prelude::*;
use pingora::proxy::Session;

use super::{Gateway, RequestCtx};
use crate::access::{self, Admission, Lookup, Rules};
use crate::answer_cache::Stored;
use crate::auth::{self, AuthRequest, KeyApiRequest};
use crate::dashboards::in_flight::Place;
use crate::dashboards::{ActiveRelease, Backend, Upstreams};
use crate::docs;
use crate::edge::paths;
use crate::edge::request::{self, BodyLimits, HeldBody};
use crate::edge::respond::LocalResponse;
use crate::errors::GatewayError;
use crate::forward::{self, Forward};
use crate::releases;
use crate::routes::Route;
use crate::state::{unix_now, unix_now_ms};
use crate::users::RoleEdition;

/// What `request_filter` decided.
pub(super) enum Next {
    Answer(LocalResponse),
    Forward(Forward),
    /// Admitted, and answered by the answer cache.
    Cached(Forward, Arc<Stored>),
}

impl Gateway {
    /// Answers locally, or admits the request for forwarding.
    pub(super) async fn decide(
        &self,
        session: &mut Session,
        ctx: &mut RequestCtx,
    ) -> Result<Next, GatewayError> {
        ctx.client = self.client(session);
        request::refuse_bodies_of_get_and_head(session)?;
        let path = paths::normalize(session.req_header().uri.path())?;
        ctx.route = Route::classify(&path);
        // A login's and a check's `permissions` are of the managers' release, learned by
        // the first check (as is who may manage every user's API keys).
        let needs_backends = matches!(
            ctx.route,
            Route::Login | Route::TokenCheck | Route::Keys | Route::Api | Route::Other
        );
        if needs_backends && !self.upstreams.checked() {
            // Boxed: rare (a fresh process), and this future is moved on every request.
            let limit = self.upstreams.timeouts.health_probe;
            Box::pin(self.upstreams.first_check(limit)).await;
        }
        let next = match ctx.route {
            Route::Login | Route::TokenCheck | Route::Logout => {
                self.answer_auth(session, ctx).await.map(Next::Answer)
            }
            Route::Keys => self
                .answer_keys(session, ctx, &path)
                .await
                .map(Next::Answer),
            Route::Docs => {
                let method = &session.req_header().method;
                let admission = self.admission.load();
                let table = self.rules_now(&admission).table;
                let offered = |method: &http::Method, template: &str| {
                    admission.offer(table, method, template)
                };
                docs::answer(self.docs.as_ref(), method, &path, &offered)
                    .await
                    .map(Next::Answer)
                    .map_err(GatewayError::from)
            }
            Route::Sso => self.answer_sso(session, ctx, &path).await.map(Next::Answer),
            Route::Api | Route::Other => match self.prepare_forward(session, ctx, &path).await {
                Ok(forward) => Ok(self.consult_cache(session, ctx, forward).await),
                Err(error) => Err(error),
            },
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
        // One table for the whole request, though a reload may replace it meanwhile: that
        // of the active manager's release.
        let admission = self.admission.load_full();
        let active = self.upstreams.active_release();
        let rules = admission.rules_for(active.release());
        let method = &session.req_header().method;
        let lookup = admission.lookup(rules.table, method, path, ctx.route);
        let header = session.req_header();
        let request = access::Request::of(header, ctx.route, path, rules.edition, ctx.client);
        let admitted = self.admit(&admission, request, lookup, active).await;
        if admitted.is_ok() && lookup.operation.is_none() && ctx.route == Route::Api {
            self.note_unknown(&admission, &session.req_header().method, path, ctx);
        }
        ctx.operation = lookup.operation.map(|id| (admission, id));
        let forward = admitted?;
        ctx.subject.of_user(forward.user.as_deref());
        forward::settle_connection_header(session.req_header_mut())?;
        let limits = self.body_limits(self.forwarded_body_limit(&forward));
        ctx.body = request::read_forwarded_body(session, limits, &self.body_budget).await?;
        Ok(forward)
    }

    /// Admission (405, 401, 404, 403, 415), then a manager to forward to whose release is
    /// known (503): `active` is `Upstreams::active_release`.
    async fn admit(
        &self,
        admission: &Admission,
        request: access::Request<'_>,
        lookup: Lookup,
        active: ActiveRelease,
    ) -> Result<Forward, GatewayError> {
        let path = request.path;
        let mut forward = admission
            .admit(request, lookup, unix_now())
            .await
            .map_err(|e| GatewayError::refused_admission(e, path))?;
        match active {
            ActiveRelease::NoneActive => Err(GatewayError::no_active_backend()),
            ActiveRelease::Unknown => Err(GatewayError::release_unknown()),
            ActiveRelease::Known(_) => {
                forward.seen_as = self.seen_as(&forward);
                Ok(forward)
            }
        }
    }

    /// An admitted API request no operation of the table matches (forwarded for the
    /// dashboard to decide, `access.unknown_operations = "forward"`): counted, and logged
    /// the first time per manager, without its query.
    fn note_unknown(
        &self,
        admission: &Admission,
        method: &http::Method,
        path: &str,
        ctx: &RequestCtx,
    ) {
        let Some(manager) = self.upstreams.active() else {
            return;
        };
        let release = manager
            .release()
            .map_or_else(String::new, |r| r.to_string());
        self.metrics.requests.unknown_operation(&release, method);
        if let Some(operation) = admission.first_unknown(&manager.base, method, path) {
            let _enter = ctx.span.enter();
            tracing::info!(server = %manager.base, release = %release, %method, %operation, "an operation the gateway's table does not know: forwarded for the dashboard to decide as the user's roles (logged once per manager)");
        }
    }

    /// The managed account the dashboard sees on `forward`'s request: a user's that does
    /// not carry their own dashboard session, when the gateway has such accounts.
    fn seen_as(&self, forward: &Forward) -> Option<Arc<str>> {
        let identity = self.identity.as_ref()?;
        let user = forward
            .user
            .as_ref()
            .filter(|_| forward.user_token.is_none())?;
        Some(identity.seen_as(user))
    }

    /// The rules that apply now: those of the active manager's release
    /// (`Admission::rules_for`).
    fn rules_now(&self, admission: &Admission) -> Rules {
        admission.rules_for(self.upstreams.active_release().release())
    }

    /// What a forwarded body may be: small for the operations served without a token
    /// (anyone may send them), `upstream.max_body_bytes` for a token holder's.
    fn forwarded_body_limit(&self, forward: &Forward) -> usize {
        match forward.user {
            None => self.upstreams.max_open_body_bytes,
            Some(_) => self.upstreams.max_body_bytes,
        }
    }

    /// The system roles an auth endpoint answers with (see [`roles_answered`]). A logout
    /// grants nothing: it is answered whatever is known.
    fn auth_roles(&self, route: Route) -> Result<RoleEdition, GatewayError> {
        let guess = self.rules_now(&self.admission.load()).edition;
        if route == Route::Logout {
            return Ok(guess);
        }
        roles_answered(&self.upstreams, guess).ok_or_else(GatewayError::release_unknown)
    }

    /// Up to `bytes` of a request body, within `server.body_timeout_ms`.
    fn body_limits(&self, bytes: usize) -> BodyLimits {
        BodyLimits {
            bytes,
            time: self.body_timeout,
        }
    }

    /// A place on `backend` (`dashboards::in_flight`), in the share of the request's user or
    /// address; 503 when none comes free in time.
    pub(super) async fn enter(&self, backend: &Backend, ctx: &RequestCtx) -> Result<Place> {
        backend.in_flight.enter(ctx.holder()).await.map_err(|overload| {
            self.metrics
                .upstream.overload(&backend.base, overload.reason());
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

    /// The browser's single sign-on, and the provider's back-channel logout (a small form).
    async fn answer_sso(
        &self,
        session: &mut Session,
        ctx: &mut RequestCtx,
        path: &str,
    ) -> Result<LocalResponse, GatewayError> {
        let body = self.auth_body(session).await?;
        let edition = self.rules_now(&self.admission.load()).edition;
        let req = AuthRequest::of(session.req_header(), body.bytes, ctx.client, edition);
        let method = &session.req_header().method;
        self.auth
            .sso(method, path, &req, unix_now(), &mut ctx.subject)
            .await
            .map_err(GatewayError::from)
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
        let body = self.auth_body(session).await?;
        let edition = self.auth_roles(ctx.route)?;
        let req = AuthRequest::of(session.req_header(), body.bytes, ctx.client, edition);
        let serving = self.readiness.check().is_ok();
        self.auth
            .answer(ctx.route, &req, unix_now_ms(), serving, &mut ctx.subject)
            .await
            .map_err(GatewayError::from)
    }

    /// The body of a request the gateway answers itself (the auth endpoints, single
    /// sign-on, the key API): small, read whole; its bytes stay reserved in the body
    /// budget while the caller holds it.
    async fn auth_body(&self, session: &mut Session) -> Result<HeldBody, GatewayError> {
        let limits = self.body_limits(auth::BODY_LIMIT);
        Ok(request::read_body(session, limits, &self.body_budget).await?)
    }

    /// A request to the API keys' management (`auth::key_api`).
    async fn answer_keys(
        &self,
        session: &mut Session,
        ctx: &mut RequestCtx,
        path: &str,
    ) -> Result<LocalResponse, GatewayError> {
        let body = self.auth_body(session).await?;
        let edition = self.auth_roles(ctx.route)?;
        let header = session.req_header();
        let req = AuthRequest::of(header, body.bytes, ctx.client, edition);
        let call = KeyApiRequest {
            method: &header.method,
            path,
            request: &req,
        };
        let answer = self.auth.keys(&call, unix_now(), &mut ctx.subject).await;
        answer.map_err(GatewayError::from)
    }
}

/// The system roles whose `permissions` a login or a token check answers with: those of
/// the release the managers are known to run (`Upstreams::release_known`); without
/// dashboards, where nothing is forwarded, `guess`. `None` while that release is not
/// known: the newest table's roles could grant more than the manager's dashboard would
/// (20.2's pool-manager reads `prometheus`, 16.2's does not).
fn roles_answered(upstreams: &Upstreams, guess: RoleEdition) -> Option<RoleEdition> {
    if upstreams.backends().is_empty() {
        return Some(guess);
    }
    upstreams
        .release_known()
        .map(|release| releases::family(Some(release)).edition)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ceph_release::CephRelease;
    use crate::dashboards::BackendState;

    #[test]
    fn logins_and_checks_answer_the_roles_of_the_release_the_managers_are_known_to_run() {
        let guess = RoleEdition::Tentacle;
        assert_eq!(
            roles_answered(&Upstreams::none(), guess),
            Some(guess),
            "no dashboards: nothing is forwarded"
        );
        let upstreams = Upstreams::for_tests(1);
        let manager = upstreams.backends()[0].clone();
        assert_eq!(
            roles_answered(&upstreams, guess),
            None,
            "before the first check"
        );
        manager.set_state(BackendState::Active);
        assert_eq!(roles_answered(&upstreams, guess), None, "it would not say");
        manager.set_release(CephRelease::parse("16.2"));
        assert_eq!(
            roles_answered(&upstreams, guess),
            Some(RoleEdition::Pacific)
        );
        manager.set_release(CephRelease::parse("20.2"));
        assert_eq!(
            roles_answered(&upstreams, RoleEdition::Pacific),
            Some(RoleEdition::Tentacle)
        );
    }
}
