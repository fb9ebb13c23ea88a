//! The browser's single sign-on (`[oidc]`), under `/auth/oidc/`: `login` sends the browser
//! to the provider (authorization code flow, PKCE, `state`, `nonce`; what must come back is
//! kept in a short-lived cookie signed like the tokens, so any gateway finishes the login);
//! the callback (`oidc.redirect_path`) trades the code, issues the gateway's own token as
//! `/api/auth` does (permissions from the mapped roles, `jti`, revocable) with the same
//! cookie, and lands the browser on the dashboard's UI the way the dashboard's own SAML
//! login does (`/#/login?access_token=...`, which the UI checks and keeps). The provider's
//! back-channel logout ends the sessions and provider tokens it names. What single sign-on
//! tokens are worth on requests is the credential source's (`source/oidc.rs`).

use super::source::{OidcSource, LOGIN_URL};
use super::AuthError;
use super::{Auth, AuthRequest, AuthSubject};
use crate::edge::respond::LocalResponse;
use crate::oidc::{LoginError, LogoutToken};
use crate::state::{StateError, UnixTime};
use crate::tokens::PendingLogin;

/// How long a back-channel logout is remembered at least: the provider's access tokens
/// issued before it stay refused this long (their lifetime is the provider's to choose;
/// a day is more than any provider's default).
const PROVIDER_LOGOUT_HOLD: UnixTime = 24 * 3600;

/// The pending login's cookie: `SameSite=Lax`, as the provider sends the browser back by
/// a cross-site navigation (a `Strict` cookie would stay behind).
const PENDING_COOKIE: &str = "cg_oidc_login";

/// Set by a single sign-on user's logout until the provider's logout is done: the web UI,
/// whose requests still in flight meet 401s, may send the browser to the login page (and
/// so to the provider, whose session still stands) before it follows the logout's
/// `redirect_url`; `login` then sends it to the provider's logout instead, once.
pub const LOGGED_OUT_COOKIE: &str = "cg_oidc_logged_out";

/// Where the provider tells the gateway a user logged out (back-channel logout).
pub const BACKCHANNEL_LOGOUT: &str = "/auth/oidc/backchannel-logout";

impl Auth {
    /// A request under `/auth/oidc/`: the login's start or its callback (GET), or the
    /// provider's back-channel logout (POST).
    pub async fn sso(
        &self,
        method: &http::Method,
        path: &str,
        req: &AuthRequest<'_>,
        now: UnixTime,
        subject: &mut AuthSubject,
    ) -> Result<LocalResponse, AuthError> {
        let sso = self
            .sources
            .sso()
            .ok_or_else(|| AuthError::not_found(path))?;
        subject.method = Some("oidc");
        let allow = if path == BACKCHANNEL_LOGOUT {
            "POST"
        } else {
            "GET"
        };
        if method.as_str() != allow {
            return Err(AuthError::MethodNotAllowed { allow });
        }
        if path == BACKCHANNEL_LOGOUT {
            return self.backchannel_logout(sso, req, now).await;
        }
        let result = if path == format!("/{LOGIN_URL}") {
            self.sso_start(sso, req, now)
        } else if path == sso.provider().redirect_path {
            let finished = self.sso_callback(sso, req, now, subject).await;
            self.metrics.oidc.login(login_result(&finished));
            finished
        } else {
            return Err(AuthError::not_found(path));
        };
        result.map_err(|e| {
            tracing::info!(error = %e, "single sign-on login refused");
            AuthError::SingleSignOn(e)
        })
    }

    fn sso_start(
        &self,
        sso: &OidcSource,
        req: &AuthRequest<'_>,
        now: UnixTime,
    ) -> Result<LocalResponse, LoginError> {
        let provider = sso.provider();
        let logging_out = req.cookie(LOGGED_OUT_COOKIE).is_some();
        if let Some(logout) = provider.logout_url(&format!("{}/", provider.home)) {
            if logging_out {
                let done = format!("{LOGGED_OUT_COOKIE}=; Path=/auth/oidc/; Max-Age=0");
                return Ok(redirect(&logout).with_header("set-cookie", done));
            }
        }
        let start = provider.start_login(&provider.redirect_uri, now)?;
        let sealed = self
            .tokens
            .load()
            .seal_pending_login(start.pending)
            .map_err(|e| LoginError::Exchange(e.to_string()))?;
        let cookie = format!(
            "{PENDING_COOKIE}={sealed}; HttpOnly; Path=/auth/oidc/; SameSite=Lax; Max-Age=600{}",
            if self.tls { "; Secure" } else { "" }
        );
        Ok(redirect(&start.location).with_header("set-cookie", cookie))
    }

    async fn sso_callback(
        &self,
        sso: &OidcSource,
        req: &AuthRequest<'_>,
        now: UnixTime,
        subject: &mut AuthSubject,
    ) -> Result<LocalResponse, LoginError> {
        let provider = sso.provider();
        if let Some(error) = req.query_param("error") {
            return Err(LoginError::Refused(error.chars().take(64).collect()));
        }
        let pending = self.pending_login(req, now)?;
        let code = req.query_param("code").ok_or(LoginError::State)?;
        let login = provider
            .finish_login(&code, &pending, &provider.redirect_uri, now)
            .await?;
        let user = provider.user_for(sso.display_name(login.username), &login.identity)?;
        subject.username = Some(user.username.clone());
        subject.provider_subject = Some(login.identity.sub.clone());
        let issued = self
            .tokens
            .load()
            .issue_sso(&user.username, login.identity, now)
            .map_err(|e| LoginError::Exchange(e.to_string()))?;
        tracing::info!(username = %user.username, jti = %issued.claims.jti, "single sign-on login");
        let token_cookie = format!("token={}; {}", issued.token, self.cookie_attributes());
        let clear_pending = format!("{PENDING_COOKIE}=; Path=/auth/oidc/; Max-Age=0");
        Ok(redirect(&format!(
            "{}/#/login?access_token={}",
            provider.home, issued.token
        ))
        .with_header("set-cookie", token_cookie)
        .with_header("set-cookie", clear_pending))
    }

    /// The provider's back-channel logout: ends the sessions its token names on every
    /// gateway sharing the state store, once per token (its `jti` is remembered until it
    /// expires; a replay is refused). 200 with no body, as the specification asks; 400 for
    /// a token that is not a good logout token, or one used already.
    async fn backchannel_logout(
        &self,
        sso: &OidcSource,
        req: &AuthRequest<'_>,
        now: UnixTime,
    ) -> Result<LocalResponse, AuthError> {
        let token = req
            .form_param("logout_token")
            .ok_or_else(|| AuthError::bad_request("no logout_token"))?;
        let logout = sso
            .provider()
            .logout_token(&token, now)
            .await
            .map_err(|e| {
                tracing::info!(error = %e, "back-channel logout refused");
                AuthError::bad_request(format!("logout_token: {e}"))
            })?;
        // Ended before the token is recorded: if the store fails in between, the
        // provider's retry is not refused as a replay (a replay ends nothing new).
        self.end_provider_sessions(sso, &logout, now).await?;
        let used = sso.logout_key("jti", &logout.jti);
        if !self
            .stores
            .used_tokens
            .first_use(&used, logout.good_until, now)
            .await?
        {
            tracing::info!("back-channel logout refused: its token was used already");
            return Err(AuthError::bad_request("logout_token: used already"));
        }
        tracing::info!(subject = ?logout.sub, by_session = logout.sid.is_some(), "back-channel logout: the user's sessions end");
        Ok(
            LocalResponse::json_text(200, "application/json", String::new())
                .with_header("cache-control", "no-store".to_string()),
        )
    }

    /// Refuses, on every gateway, the gateway's tokens and the provider's access tokens
    /// issued before `logout` of its `sub` (all the user's sessions) and of its `sid` (the
    /// one login session). The later of two resets is kept, so a replayed or older logout
    /// token never ends a session opened after it.
    async fn end_provider_sessions(
        &self,
        sso: &OidcSource,
        logout: &LogoutToken,
        now: UnixTime,
    ) -> Result<(), StateError> {
        // Those of the logout's own second too (`iat` counts whole seconds), and never
        // from later than now (a provider whose clock is ahead).
        let at = logout.iat.min(now) + 1;
        let until = now + self.tokens.load().ttl_seconds().max(PROVIDER_LOGOUT_HOLD) + 1;
        for (kind, value) in [("sub", &logout.sub), ("sid", &logout.sid)] {
            if let Some(value) = value {
                let key = sso.logout_key(kind, value);
                self.stores
                    .credential_resets
                    .reset(&key, at, until, now)
                    .await?;
            }
        }
        Ok(())
    }

    /// The pending login of this browser, if the callback's `state` is its.
    fn pending_login(
        &self,
        req: &AuthRequest<'_>,
        now: UnixTime,
    ) -> Result<PendingLogin, LoginError> {
        let sealed = req.cookie(PENDING_COOKIE).ok_or(LoginError::State)?;
        let pending = self
            .tokens
            .load()
            .open_pending_login(sealed, now)
            .map_err(|_| LoginError::State)?;
        let state = req.query_param("state").ok_or(LoginError::State)?;
        // Both are ours, random and equally long: no timing to learn from.
        if state != pending.state {
            return Err(LoginError::State);
        }
        Ok(pending)
    }
}

/// A finished login's `clustergate_oidc_logins_total` label.
fn login_result(result: &Result<LocalResponse, LoginError>) -> &'static str {
    match result {
        Ok(_) => "success",
        Err(LoginError::Unavailable) => "unavailable",
        Err(LoginError::State) => "bad_state",
        Err(LoginError::Code) => "bad_code",
        Err(LoginError::Refused(_)) => "refused",
        Err(LoginError::Exchange(_)) => "error",
        Err(LoginError::Token(_)) => "invalid",
    }
}

fn redirect(location: &str) -> LocalResponse {
    LocalResponse::json_text(302, "text/plain", String::new())
        .with_header("location", location.to_string())
}
