//! `POST /api/auth`: a password login. 201 with a token and the user's permissions, or one
//! 400 for every kind of refusal, taking as long whichever it was. The configured
//! credential source checks the password; the limit per client, the token and the user's
//! dashboard session are the same whoever checked it.

use serde_json::{json, Map, Value};

use super::dashboard::DashboardLogin;
use super::request::{string_field, ttl_field};
use super::source::{CredentialSource, LoggedIn, LoginAttempt};
use super::AuthError;
use super::{Auth, AuthRequest, AuthSubject, AUTH_VERSION};
use crate::edge::respond::LocalResponse;
use crate::observe::metrics::LoginResult;
use crate::state::{UnixMillis, UnixTime, UserSession};
use crate::tokens::{Claims, Issued};
use crate::users::password::HashError;
use crate::users::User;
use crate::versioning;

impl Auth {
    /// `subject` learns the username tried and whether the attempt locked it.
    pub async fn login(
        &self,
        req: &AuthRequest<'_>,
        now_ms: UnixMillis,
        subject: &mut AuthSubject,
    ) -> Result<LocalResponse, AuthError> {
        let result = self.try_login(req, now_ms, subject).await;
        self.metrics.auth.login(match &result {
            Ok(_) => LoginResult::Success,
            Err(AuthError::InvalidCredentials) => LoginResult::InvalidCredentials,
            Err(AuthError::Password(HashError::Busy)) => LoginResult::Busy,
            Err(AuthError::RateLimited { .. }) => LoginResult::RateLimited,
            Err(
                AuthError::Unavailable(_)
                | AuthError::State(_)
                | AuthError::Password(_)
                | AuthError::Signing
                | AuthError::NoDashboardAccount,
            ) => LoginResult::Error,
            Err(_) => LoginResult::BadRequest,
        });
        result
    }

    async fn try_login(
        &self,
        req: &AuthRequest<'_>,
        now_ms: UnixMillis,
        subject: &mut AuthSubject,
    ) -> Result<LocalResponse, AuthError> {
        let now = now_ms / 1000;
        let negotiated =
            versioning::negotiate(req.accept().as_deref(), &self.vendor, AUTH_VERSION, false)?;
        let body = login_body(req)?;
        let username = string_field(&body, "username")?;
        subject.username = Some(username.clone());
        let source = self.sources.password();
        subject.method = Some(source.method());
        let password = string_field(&body, "password")?;
        let ttl = ttl_field(&body)?;

        let attempt = LoginAttempt {
            username: &username,
            password,
            now_ms,
            policy: &self.policy,
        };
        let logged_in = self.checked_by(source, attempt, req, subject).await?;
        let issued = self.issue(&logged_in, ttl, now)?;
        let LoggedIn {
            user,
            dashboard,
            session_permissions,
            ..
        } = logged_in;
        if let Some(dashboard) = dashboard {
            self.open_session(&issued.claims, &user, dashboard, session_permissions, now)
                .await?;
        }
        tracing::info!(username = %user.username, jti = %issued.claims.jti, "login");
        let body = json!({
            "token": issued.token,
            "username": user.username,
            "permissions": user.grants.to_map(req.edition),
            "pwdExpirationDate": null,
            "sso": false,
            "pwdUpdateRequired": false,
        });
        let cookie = format!("token={}; {}", issued.token, self.cookie_attributes());
        Ok(
            LocalResponse::json(201, self.content_type(negotiated), &body)
                .with_header("set-cookie", cookie),
        )
    }

    /// The source checks the password. Both limits apply: the client's bucket first, so
    /// that a client refused here costs no hash and counts against no username; a login
    /// that did not fail gives its token back.
    async fn checked_by(
        &self,
        source: &dyn CredentialSource,
        attempt: LoginAttempt<'_>,
        req: &AuthRequest<'_>,
        subject: &mut AuthSubject,
    ) -> Result<LoggedIn, AuthError> {
        let now_ms = attempt.now_ms;
        let taken = self.take_login_token(req.client, now_ms).await?;
        let checked = source.log_in(attempt, subject).await;
        if !matches!(checked, Err(AuthError::InvalidCredentials)) {
            self.give_back_login_token(taken, now_ms).await?;
        }
        checked
    }

    /// The token of a good login: it ends at the earliest of the user's dashboard token,
    /// the `ttl` asked for and `auth.token_ttl_seconds`.
    fn issue(
        &self,
        logged_in: &LoggedIn,
        ttl: Option<u64>,
        now: UnixTime,
    ) -> Result<Issued, AuthError> {
        let asked_end = ttl.map(|seconds| now.saturating_add(seconds));
        let not_after = [logged_in.dashboard.as_ref().and_then(|d| d.exp), asked_end]
            .into_iter()
            .flatten()
            .min();
        let username = &logged_in.user.username;
        let (fingerprint, issued_at) = (&logged_in.fingerprint, logged_in.issued_at);
        self.tokens
            .load()
            .issue_until(username, fingerprint, issued_at, not_after)
            .map_err(|e| {
                tracing::error!(error = %e, "cannot sign a token");
                AuthError::Signing
            })
    }

    /// Keeps the user's dashboard session for the token just issued (`claims`), with the
    /// permissions the source gives it.
    async fn open_session(
        &self,
        claims: &Claims,
        user: &User,
        login: DashboardLogin,
        permissions: Option<String>,
        now: UnixTime,
    ) -> Result<(), AuthError> {
        let Some(dashboard) = &self.dashboard else {
            return Ok(());
        };
        let session = UserSession {
            username: user.username.clone(),
            dashboard_token: login.token,
            permissions,
            until: claims.exp,
        };
        dashboard.open(&claims.jti, &session, now).await?;
        Ok(())
    }
}

/// The login's JSON object; an empty body is a 400 that says what to send.
fn login_body(req: &AuthRequest<'_>) -> Result<Map<String, Value>, AuthError> {
    req.json_object()?.ok_or_else(|| {
        AuthError::bad_request(
            "The request body is empty; send {\"username\": ..., \"password\": ...}.",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{
        auth, body_of, credentials, post, request, LOCKOUT_SECONDS, NOW, NOW_MS,
    };
    use super::*;

    #[tokio::test]
    async fn good_credentials_give_201_with_token_cookie_and_permissions() {
        let auth = auth();
        let headers = post("application/vnd.ceph.api.v1.0+json");
        let req = request(&headers, r#"{"username":"admin","password":"pw"}"#);
        let response = auth
            .login(&req, NOW_MS, &mut AuthSubject::default())
            .await
            .unwrap();
        assert_eq!(response.status, 201);
        assert_eq!(response.content_type, "application/vnd.ceph.api.v1.0+json");
        let body = body_of(&response);
        let token = body["token"].as_str().unwrap();
        assert_eq!(body["username"], "admin");
        assert_eq!(
            body["permissions"]["pool"],
            json!(["create", "delete", "read", "update"])
        );
        assert_eq!(body["pwdExpirationDate"], json!(null));
        assert_eq!(
            response.headers,
            vec![(
                "set-cookie",
                format!("token={token}; HttpOnly; Path=/; SameSite=Strict")
            )]
        );
        assert!(auth.tokens.load().verify(token, NOW).is_ok());
    }

    /// `ttl` in hours, as 20.2's dashboard reads it, never past the gateway's own lifetime;
    /// what the dashboard answers 500 or with an expired token is a 400 here.
    #[tokio::test]
    async fn a_ttl_in_hours_shortens_the_token_and_a_bad_one_is_a_400() {
        let auth = auth();
        let headers = post("application/vnd.ceph.api.v1.0+json");
        let lifetime = |ttl: &str| {
            let req = request(
                &headers,
                format!(r#"{{"username":"admin","password":"pw","ttl":{ttl}}}"#),
            );
            let auth = &auth;
            async move {
                let answer = auth.login(&req, NOW_MS, &mut AuthSubject::default()).await;
                answer.map(|response| {
                    let token = body_of(&response)["token"].as_str().unwrap().to_string();
                    let claims = auth.tokens.load().verify(&token, NOW).unwrap();
                    claims.exp - claims.iat
                })
            }
        };
        let full = lifetime("null").await.unwrap();
        assert_eq!(full, 8 * 3600);
        for (ttl, seconds) in [("1", 3600), ("\"2\"", 7200), ("1.9", 3600), ("true", 3600)] {
            assert_eq!(lifetime(ttl).await.unwrap(), seconds, "ttl {ttl}");
        }
        assert_eq!(lifetime("100000000").await.unwrap(), full);
        for bad in ["0", "-1", "false", "\"x\"", "[]", "{}", "\"1.5\""] {
            let refused = lifetime(bad).await.unwrap_err();
            assert!(matches!(refused, AuthError::BadRequest(_)), "ttl {bad}");
        }
    }

    #[tokio::test]
    async fn every_refusal_is_the_same_400() {
        let auth = auth();
        let headers = post("application/vnd.ceph.api.v1.0+json");
        for body in [
            r#"{"username":"admin","password":"wrong"}"#,
            r#"{"username":"nobody","password":"pw"}"#,
            r#"{"username":"disabled","password":"pw"}"#,
        ] {
            let req = request(&headers, body);
            assert!(
                matches!(
                    auth.login(&req, NOW_MS, &mut AuthSubject::default()).await,
                    Err(AuthError::InvalidCredentials)
                ),
                "{body}"
            );
        }
    }

    #[tokio::test]
    async fn lockout_refuses_the_right_password_until_it_expires() {
        let auth = auth();
        let headers = post("application/vnd.ceph.api.v1.0+json");
        let attempt = |pw: &str| request(&headers, credentials("admin", pw));
        for _ in 0..3 {
            assert!(auth
                .login(&attempt("bad"), NOW_MS, &mut AuthSubject::default())
                .await
                .is_err());
        }
        assert!(matches!(
            auth.login(&attempt("pw"), NOW_MS + 1000, &mut AuthSubject::default())
                .await,
            Err(AuthError::InvalidCredentials)
        ));
        let later = (NOW + LOCKOUT_SECONDS + 1) * 1000;
        assert!(auth
            .login(&attempt("pw"), later, &mut AuthSubject::default())
            .await
            .is_ok());
    }

    /// The audit log names the username tried and the failure that locked it, once.
    #[tokio::test]
    async fn the_subject_is_the_username_tried_and_the_failure_that_locked_it() {
        let auth = auth();
        let headers = post("application/vnd.ceph.api.v1.0+json");
        let mut seen = Vec::new();
        for _ in 0..4 {
            let mut subject = AuthSubject::default();
            let req = request(&headers, credentials("admin", "bad"));
            assert!(auth.login(&req, NOW_MS, &mut subject).await.is_err());
            assert_eq!(subject.username.as_deref(), Some("admin"));
            seen.push(subject.locked);
        }
        assert_eq!(seen, [false, false, true, false]);
        let mut subject = AuthSubject::default();
        let req = request(&headers, credentials("nobody", "pw"));
        assert!(auth.login(&req, NOW_MS, &mut subject).await.is_err());
        assert_eq!(subject.username.as_deref(), Some("nobody"));
    }

    #[tokio::test]
    async fn a_lockout_is_counted_once_however_many_attempts_it_refuses() {
        let auth = auth();
        let headers = post("application/vnd.ceph.api.v1.0+json");
        let attempt = |pw: &str| request(&headers, credentials("admin", pw));
        let lockouts = || {
            let text = String::from_utf8(auth.metrics.render().unwrap()).unwrap();
            text.lines()
                .find_map(|l| l.strip_prefix("clustergate_lockouts_total "))
                .map(str::to_string)
        };
        for _ in 0..2 {
            assert!(auth
                .login(&attempt("bad"), NOW_MS, &mut AuthSubject::default())
                .await
                .is_err());
        }
        assert_eq!(lockouts().as_deref(), Some("0"));
        for _ in 0..3 {
            assert!(auth
                .login(&attempt("bad"), NOW_MS, &mut AuthSubject::default())
                .await
                .is_err());
        }
        assert_eq!(lockouts().as_deref(), Some("1"));
    }

    #[tokio::test]
    async fn concurrent_attempts_cannot_slip_past_the_lockout() {
        let auth = auth();
        let headers = post("application/vnd.ceph.api.v1.0+json");
        let mut attempts = tokio::task::JoinSet::new();
        for _ in 0..10 {
            let auth = auth.clone();
            let headers = headers.clone();
            attempts.spawn(async move {
                let req = request(&headers, r#"{"username":"admin","password":"bad"}"#);
                auth.login(&req, NOW_MS, &mut AuthSubject::default())
                    .await
                    .is_err()
            });
        }
        while let Some(refused) = attempts.join_next().await {
            assert!(refused.unwrap());
        }
        let req = request(&headers, r#"{"username":"admin","password":"pw"}"#);
        assert!(matches!(
            auth.login(&req, NOW_MS, &mut AuthSubject::default()).await,
            Err(AuthError::InvalidCredentials)
        ));
    }

    /// The last attempt allowed may still succeed, and a success starts the count again.
    #[tokio::test]
    async fn a_success_resets_the_failure_count() {
        let auth = auth();
        let headers = post("application/vnd.ceph.api.v1.0+json");
        let attempt = |pw: &str| request(&headers, credentials("admin", pw));
        for _ in 0..2 {
            assert!(auth
                .login(&attempt("bad"), NOW_MS, &mut AuthSubject::default())
                .await
                .is_err());
        }
        assert!(auth
            .login(&attempt("pw"), NOW_MS, &mut AuthSubject::default())
            .await
            .is_ok());
        for _ in 0..2 {
            assert!(auth
                .login(&attempt("bad"), NOW_MS, &mut AuthSubject::default())
                .await
                .is_err());
        }
        assert!(auth
            .login(&attempt("pw"), NOW_MS, &mut AuthSubject::default())
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn wrong_accept_is_415_before_the_body_is_looked_at() {
        let auth = auth();
        let headers = post("*/*");
        let req = request(&headers, "not json");
        assert!(matches!(
            auth.login(&req, NOW_MS, &mut AuthSubject::default()).await,
            Err(AuthError::Version(_))
        ));
    }

    #[tokio::test]
    async fn bad_bodies_are_400_with_a_reason() {
        let auth = auth();
        let headers = post("application/vnd.ceph.api.v1.0+json");
        for body in [
            "",
            "{",
            "[]",
            "{}",
            r#"{"username":"admin"}"#,
            r#"{"username":1,"password":"x"}"#,
        ] {
            let req = request(&headers, body.to_string());
            let err = auth
                .login(&req, NOW_MS, &mut AuthSubject::default())
                .await
                .unwrap_err();
            assert!(matches!(err, AuthError::BadRequest(_)), "{body}: {err:?}");
        }
    }
}
