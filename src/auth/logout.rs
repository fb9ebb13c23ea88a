//! `POST /api/auth/logout`: revoke the token until it would have expired, end the user's
//! own dashboard session (the dashboard logs its token out too), and expire the cookie.
//! Idempotent for any token we issued, as on the dashboard.

use serde_json::{json, Value};

use super::AuthError;
use super::{Auth, AuthRequest, AuthSubject, AUTH_VERSION};
use crate::edge::respond::LocalResponse;
use crate::state::UnixTime;
use crate::users::RoleEdition;
use crate::versioning;

impl Auth {
    /// `subject` learns whose token it was.
    pub async fn logout(
        &self,
        req: &AuthRequest<'_>,
        now: UnixTime,
        subject: &mut AuthSubject,
    ) -> Result<LocalResponse, AuthError> {
        let negotiated =
            versioning::negotiate(req.accept().as_deref(), &self.vendor, AUTH_VERSION, false)?;
        let token = req.credential().ok_or(AuthError::Unauthorized)?;
        // Expired and already revoked tokens are still ours: logging out again is fine.
        let claims = self
            .tokens
            .load()
            .verify_issued(token)
            .map_err(|_| AuthError::Unauthorized)?;
        subject.username = Some(claims.username.clone());
        self.stores
            .revocations
            .revoke(&claims.jti, claims.exp, now)
            .await?;
        self.tokens.load().forget(token);
        self.end_dashboard_session(&claims.jti, now).await?;
        tracing::info!(username = %claims.username, jti = %claims.jti, "logout");
        // `Path=/` so that browsers really drop the cookie set at login (the dashboard omits it).
        let cookie = format!(
            "token=; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=0; {}",
            self.cookie_attributes()
        );
        // A single sign-on user's browser logs out at the provider too (RP-initiated
        // logout), then comes back to the UI.
        let provider_logout = self
            .sources
            .issuer_of(&claims)
            .and_then(|source| source.logout_url(&claims));
        let mut answer = LocalResponse::json(
            200,
            self.content_type(negotiated),
            &logout_body(req.edition, provider_logout.clone()),
        )
        .with_header("set-cookie", cookie);
        if provider_logout.is_some() {
            let logged_out = format!(
                "{}=1; HttpOnly; Path=/auth/oidc/; SameSite=Lax; Max-Age=120{}",
                super::sso::LOGGED_OUT_COOKIE,
                if self.tls { "; Secure" } else { "" }
            );
            answer = answer.with_header("set-cookie", logged_out);
        }
        Ok(answer)
    }
}

/// The logout answer as the manager's release gives it: since 20.2 it names the login
/// mode, `local` for a password login.
/// `provider_logout`: a single sign-on session's RP-initiated logout at the provider, which
/// the UI follows (20.2's at once for `"protocol": "oauth2"`, as in its own OAuth2 mode).
fn logout_body(edition: RoleEdition, provider_logout: Option<String>) -> Value {
    let protocol = if provider_logout.is_some() {
        "oauth2"
    } else {
        "local"
    };
    let redirect_url = provider_logout.unwrap_or_else(|| "#/login".to_string());
    if crate::releases::answers(edition).logout_names_protocol {
        json!({ "redirect_url": redirect_url, "protocol": protocol })
    } else {
        json!({ "redirect_url": redirect_url })
    }
}

impl Auth {
    /// Logs out the dashboard token of gateway token `jti`, if it has one.
    async fn end_dashboard_session(&self, jti: &str, now: UnixTime) -> Result<(), AuthError> {
        let Some(dashboard) = &self.dashboard else {
            return Ok(());
        };
        if let Some(session) = dashboard.find(jti, now).await? {
            dashboard.end(&session.token, true).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{auth, post, request, token_for, NOW};
    use super::*;

    fn with_bearer(token: &str) -> http::HeaderMap {
        let mut headers = post("application/vnd.ceph.api.v1.0+json");
        headers.insert(
            http::header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        headers
    }

    #[tokio::test]
    async fn logout_revokes_the_token_and_is_idempotent() {
        let auth = auth();
        let token = token_for(&auth, "admin", NOW);
        let headers = with_bearer(&token);
        let req = request(&headers, "");
        assert!(auth.authenticate(&headers, None, NOW).await.is_ok());
        let mut subject = AuthSubject::default();
        let response = auth.logout(&req, NOW, &mut subject).await.unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(subject.username.as_deref(), Some("admin"));
        assert!(response.headers[0]
            .1
            .contains("Max-Age=0; HttpOnly; Path=/"));
        assert!(matches!(
            auth.authenticate(&headers, None, NOW).await,
            Err(AuthError::Unauthorized)
        ));
        assert_eq!(
            auth.logout(&req, NOW, &mut AuthSubject::default())
                .await
                .unwrap()
                .status,
            200
        );
    }

    #[test]
    fn the_logout_answer_is_the_releases() {
        assert_eq!(
            logout_body(RoleEdition::Pacific, None).to_string(),
            r##"{"redirect_url":"#/login"}"##
        );
        assert_eq!(
            logout_body(RoleEdition::Tentacle, None).to_string(),
            r##"{"redirect_url":"#/login","protocol":"local"}"##
        );
    }

    #[tokio::test]
    async fn an_expired_token_of_ours_still_logs_out() {
        let auth = auth();
        let token = token_for(&auth, "admin", NOW - 9 * 3600);
        let headers = with_bearer(&token);
        let req = request(&headers, "");
        assert_eq!(
            auth.logout(&req, NOW, &mut AuthSubject::default())
                .await
                .unwrap()
                .status,
            200
        );
    }

    #[tokio::test]
    async fn no_token_or_a_foreign_one_is_401() {
        let auth = auth();
        let none = post("application/vnd.ceph.api.v1.0+json");
        let req = request(&none, "");
        assert!(matches!(
            auth.logout(&req, NOW, &mut AuthSubject::default()).await,
            Err(AuthError::Unauthorized)
        ));
        let garbage = with_bearer("a.b.c");
        let req = request(&garbage, "");
        assert!(matches!(
            auth.logout(&req, NOW, &mut AuthSubject::default()).await,
            Err(AuthError::Unauthorized)
        ));
    }
}
