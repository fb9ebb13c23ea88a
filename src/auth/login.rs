//! `POST /api/auth`: a login. 201 with a token and the user's permissions, or one 400
//! for every kind of refusal, taking as long whichever it was.

use std::sync::Arc;

use serde_json::json;

use super::dashboard::DashboardLogin;
use super::request::{string_field, ttl_field};
use super::AuthError;
use super::{Auth, AuthRequest, AuthSubject, AUTH_VERSION};
use crate::config::{AuthSource, LockoutPolicy};
use crate::edge::respond::LocalResponse;
use crate::observe::metrics::LoginResult;
use crate::state::{UnixMillis, UnixTime};
use crate::users::password::HashError;
use crate::users::{Credential, User};
use crate::versioning;

/// A login whose password was good: the user, and their own dashboard login when the
/// dashboard checked it or the user acts as themselves there.
pub(super) struct LoggedIn {
    pub user: Arc<User>,
    pub dashboard: Option<DashboardLogin>,
    /// The credential the password was checked against, which the token carries; `None`
    /// when the dashboard checked it.
    pub credential: Option<Arc<Credential>>,
}

/// Where a login attempt stands with the username's lockout, decided before its password
/// is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    Allowed,
    /// The last one allowed: the username is locked unless it succeeds.
    Last,
    /// Locked: refused without checking the password.
    Locked,
}

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
        let body = req.json_object()?.ok_or_else(|| {
            AuthError::bad_request(
                "The request body is empty; send {\"username\": ..., \"password\": ...}.",
            )
        })?;
        let username = string_field(&body, "username")?;
        subject.username = Some(username.clone());
        subject.method = Some(match self.source {
            AuthSource::Local => "local",
            AuthSource::Dashboard => "dashboard",
        });
        let password = string_field(&body, "password")?;
        let ttl = ttl_field(&body)?;

        // Both limits apply: the client's bucket first, so that a client refused here
        // costs no hash and counts against no username.
        let taken = self.take_login_token(req.client, now_ms).await?;
        let checked = match self.source {
            AuthSource::Local => self.check_locally(&username, password, now, subject).await,
            AuthSource::Dashboard => {
                self.check_with_dashboard(&username, &password, now_ms, subject)
                    .await
            }
        };
        if !matches!(checked, Err(AuthError::InvalidCredentials)) {
            self.give_back_login_token(taken, now_ms).await?;
        }
        let LoggedIn {
            user,
            dashboard,
            credential,
        } = checked?;

        if self.lockout.is_some() && self.source == AuthSource::Local {
            self.stores.lockouts.clear(&username).await?;
        }
        // (ends at the earliest of the user's dashboard token, the ttl asked for and
        // auth.token_ttl_seconds)
        let asked_end = ttl.map(|seconds| now.saturating_add(seconds));
        let not_after = [dashboard.as_ref().and_then(|d| d.exp), asked_end]
            .into_iter()
            .flatten()
            .min();
        let (fingerprint, issued_at) = match &credential {
            // Never issued before the user's last reset, which may be the next second when
            // the user was removed and is back within the same second.
            Some(credential) => {
                let reset = self.last_reset(&user.username, credential, now).await?;
                (
                    credential.fingerprint.as_str(),
                    reset.map_or(now, |at| at.max(now)),
                )
            }
            None => ("", now),
        };
        let issued = self
            .tokens
            .load()
            .issue_until(&user.username, fingerprint, issued_at, not_after)
            .map_err(|e| {
                tracing::error!(error = %e, "cannot sign a token");
                AuthError::Signing
            })?;
        if let Some(dashboard) = dashboard {
            self.open_session(&issued.claims, &user, dashboard, now)
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

    /// The users file checks the password; with `upstream.identity = "user"` the user's
    /// own dashboard account is logged in as well.
    async fn check_locally(
        &self,
        username: &str,
        password: String,
        now: UnixTime,
        subject: &mut AuthSubject,
    ) -> Result<LoggedIn, AuthError> {
        // Kept only when the dashboard is asked too (the hash check consumes it).
        let own_password = self.dashboard.is_some().then(|| password.clone());
        let (user, credential) = self
            .check_password(username, password, now, subject)
            .await?;
        let dashboard = match own_password {
            Some(password) => Some(self.own_dashboard_login(username, &password, now).await?),
            None => None,
        };
        Ok(LoggedIn {
            user,
            dashboard,
            credential: Some(credential),
        })
    }

    /// The user and the credential checked, if `password` is theirs and
    /// their username is not locked out; every refusal is `InvalidCredentials`. `subject`
    /// learns whether this failure locked the username.
    async fn check_password(
        &self,
        username: &str,
        password: String,
        now: UnixTime,
        subject: &mut AuthSubject,
    ) -> Result<(Arc<User>, Arc<Credential>), AuthError> {
        let (user, stand_in) = {
            let users = self.users.load();
            let user = users
                .active_with_credential(username)
                .map(|(user, credential)| (user.clone(), credential.clone()));
            (user, users.stand_in.clone())
        };
        let attempt = match (&user, self.lockout) {
            (Some(_), Some(policy)) => self.admit(username, policy, now).await?,
            _ => Attempt::Allowed,
        };
        // A refused or unknown user is checked against the stand-in: same cost, never a match.
        let hash = user
            .as_ref()
            .filter(|_| attempt != Attempt::Locked)
            .and_then(|(u, _)| u.password_hash.clone());
        self.metrics.auth.password_verified();
        let verified = self.passwords.verify(hash, &stand_in, password).await?;

        // `?username`: the name is the client's text, escaped so it cannot forge log lines.
        let Some(user) = user.filter(|_| verified) else {
            let locked_out = attempt == Attempt::Locked;
            tracing::info!(username = ?username, locked_out, "login refused");
            if attempt == Attempt::Last {
                subject.locked = true;
                self.locked_out(username);
            }
            return Err(AuthError::InvalidCredentials);
        };
        Ok(user)
    }

    /// The last attempt allowed failed: the lock `admit` set holds (counted once per lock).
    pub(super) fn locked_out(&self, username: &str) {
        self.metrics.auth.lockout();
        if let Some(policy) = self.lockout {
            tracing::warn!(username = ?username, attempts = policy.attempts, lock_seconds = policy.duration.as_secs(), "user locked out after consecutive failed logins");
        }
    }

    /// Counts this attempt before the slow hash, so that concurrent attempts cannot all
    /// slip past the limit (a success clears the count). Once the count passes the
    /// policy's attempts, the username is locked and refused without checking its password.
    async fn admit(
        &self,
        username: &str,
        policy: LockoutPolicy,
        now: UnixTime,
    ) -> Result<Attempt, AuthError> {
        let lockouts = &self.stores.lockouts;
        if lockouts.locked_until(username, now).await?.is_some() {
            return Ok(Attempt::Locked);
        }
        let attempts = lockouts.record_failure(username, now).await?;
        if attempts < policy.attempts {
            return Ok(Attempt::Allowed);
        }
        // The last attempt allowed may still succeed; the lock holds if it does not.
        let until = now.saturating_add(policy.duration.as_secs());
        lockouts.lock(username, until).await?;
        Ok(match attempts == policy.attempts {
            true => Attempt::Last,
            false => Attempt::Locked,
        })
    }
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
