//! `POST /api/auth`: a login. 201 with a token and the user's permissions, or one 400
//! for every kind of refusal, taking as long whichever it was.

use std::sync::Arc;

use serde_json::json;

use super::{request::string_field, Auth, AuthRequest, AUTH_VERSION};
use crate::config::LockoutPolicy;
use crate::errors::GatewayError;
use crate::metrics::LoginResult;
use crate::respond::LocalResponse;
use crate::state::{UnixMillis, UnixTime};
use crate::users::User;
use crate::versioning;

impl Auth {
    pub async fn login(
        &self,
        req: &AuthRequest<'_>,
        now_ms: UnixMillis,
    ) -> Result<LocalResponse, GatewayError> {
        let result = self.try_login(req, now_ms).await;
        self.metrics.login(match &result {
            Ok(_) => LoginResult::Success,
            Err(GatewayError::InvalidCredentials) => LoginResult::InvalidCredentials,
            Err(GatewayError::TooManyRequests) => LoginResult::Busy,
            Err(GatewayError::LoginRateLimited { .. }) => LoginResult::RateLimited,
            Err(GatewayError::Unavailable { .. } | GatewayError::Internal) => LoginResult::Error,
            Err(_) => LoginResult::BadRequest,
        });
        result
    }

    async fn try_login(
        &self,
        req: &AuthRequest<'_>,
        now_ms: UnixMillis,
    ) -> Result<LocalResponse, GatewayError> {
        let now = now_ms / 1000;
        let negotiated =
            versioning::negotiate(req.accept().as_deref(), &self.vendor, AUTH_VERSION, false)?;
        let body = req.json_object()?.ok_or_else(|| {
            GatewayError::bad_request(
                "The request body is empty; send {\"username\": ..., \"password\": ...}.",
            )
        })?;
        let username = string_field(&body, "username")?;
        let password = string_field(&body, "password")?;

        // Both limits apply: the client's bucket first, so that a client refused here
        // costs no hash and counts against no username.
        let taken = self.take_login_token(req.client, now_ms).await?;
        let checked = self.check_password(&username, password, now).await;
        if !matches!(checked, Err(GatewayError::InvalidCredentials)) {
            self.give_back_login_token(taken, now_ms).await?;
        }
        let user = checked?;

        if self.lockout.is_some() {
            self.stores.lockouts.clear(&username).await?;
        }
        let issued = self.tokens.load().issue(&user.username, now).map_err(|e| {
            tracing::error!(error = %e, "cannot sign a token");
            GatewayError::Internal
        })?;
        tracing::info!(username = %user.username, jti = %issued.claims.jti, "login");
        let body = json!({
            "token": issued.token,
            "username": user.username,
            "permissions": user.grants.to_map(),
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

    /// The user, if `password` is theirs and their username is not locked out; every
    /// refusal is `InvalidCredentials`.
    async fn check_password(
        &self,
        username: &str,
        password: String,
        now: UnixTime,
    ) -> Result<Arc<User>, GatewayError> {
        let user = self.users.load().active(username).cloned();
        let admitted = match (&user, self.lockout) {
            (Some(_), Some(policy)) => self.admit(username, policy, now).await?,
            _ => true,
        };
        // A refused or unknown user is checked against a dummy hash: same cost, never a match.
        let hash = user
            .as_ref()
            .filter(|_| admitted)
            .map(|u| u.password_hash.clone());
        self.metrics.password_verified();
        let verified = self.passwords.verify(hash, password).await?;

        // `?username`: the name is the client's text, escaped so it cannot forge log lines.
        user.filter(|_| verified).ok_or_else(|| {
            tracing::info!(username = ?username, locked_out = !admitted, "login refused");
            GatewayError::InvalidCredentials
        })
    }

    /// Counts this attempt before the slow hash, so that concurrent attempts cannot all
    /// slip past the limit (a success clears the count). Once the count passes the
    /// policy's attempts, the username is locked and refused without checking its password.
    async fn admit(
        &self,
        username: &str,
        policy: LockoutPolicy,
        now: UnixTime,
    ) -> Result<bool, GatewayError> {
        let lockouts = &self.stores.lockouts;
        if lockouts.locked_until(username, now).await?.is_some() {
            return Ok(false);
        }
        let attempts = lockouts.record_failure(username, now).await?;
        if attempts < policy.attempts {
            return Ok(true);
        }
        // The last attempt allowed may still succeed; the lock holds if it does not.
        let until = now.saturating_add(policy.duration.as_secs());
        lockouts.lock(username, until).await?;
        if attempts == policy.attempts {
            self.metrics.lockout();
            tracing::warn!(username = ?username, attempts, lock_seconds = policy.duration.as_secs(), "user locked out after consecutive failed logins");
            return Ok(true);
        }
        Ok(false)
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
        let response = auth.login(&req, NOW_MS).await.unwrap();
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
                    auth.login(&req, NOW_MS).await,
                    Err(GatewayError::InvalidCredentials)
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
            assert!(auth.login(&attempt("bad"), NOW_MS).await.is_err());
        }
        assert!(matches!(
            auth.login(&attempt("pw"), NOW_MS + 1000).await,
            Err(GatewayError::InvalidCredentials)
        ));
        assert!(auth
            .login(&attempt("pw"), (NOW + LOCKOUT_SECONDS + 1) * 1000)
            .await
            .is_ok());
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
            assert!(auth.login(&attempt("bad"), NOW).await.is_err());
        }
        assert_eq!(lockouts().as_deref(), Some("0"));
        for _ in 0..3 {
            assert!(auth.login(&attempt("bad"), NOW).await.is_err());
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
                auth.login(&req, NOW_MS).await.is_err()
            });
        }
        while let Some(refused) = attempts.join_next().await {
            assert!(refused.unwrap());
        }
        let req = request(&headers, r#"{"username":"admin","password":"pw"}"#);
        assert!(matches!(
            auth.login(&req, NOW_MS).await,
            Err(GatewayError::InvalidCredentials)
        ));
    }

    /// The last attempt allowed may still succeed, and a success starts the count again.
    #[tokio::test]
    async fn a_success_resets_the_failure_count() {
        let auth = auth();
        let headers = post("application/vnd.ceph.api.v1.0+json");
        let attempt = |pw: &str| request(&headers, credentials("admin", pw));
        for _ in 0..2 {
            assert!(auth.login(&attempt("bad"), NOW_MS).await.is_err());
        }
        assert!(auth.login(&attempt("pw"), NOW_MS).await.is_ok());
        for _ in 0..2 {
            assert!(auth.login(&attempt("bad"), NOW_MS).await.is_err());
        }
        assert!(auth.login(&attempt("pw"), NOW_MS).await.is_ok());
    }

    #[tokio::test]
    async fn wrong_accept_is_415_before_the_body_is_looked_at() {
        let auth = auth();
        let headers = post("*/*");
        let req = request(&headers, "not json");
        assert_eq!(auth.login(&req, NOW_MS).await.unwrap_err().status(), 415);
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
            let err = auth.login(&req, NOW_MS).await.unwrap_err();
            assert!(
                matches!(err, GatewayError::BadRequest { .. }),
                "{body}: {err:?}"
            );
        }
    }
}
