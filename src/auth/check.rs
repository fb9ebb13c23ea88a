//! `POST /api/auth/check`: is this token still good? Always 200 with one of the
//! dashboard's two bodies, since clients (and load balancers) read the body, not the status.

use serde_json::{json, Value};

use super::AuthError;
use super::{Auth, AuthRequest, TokenRejection, AUTH_VERSION};
use crate::edge::respond::LocalResponse;
use crate::state::UnixTime;
use crate::users::{RoleEdition, User};
use crate::versioning;

impl Auth {
    /// `backend_available`: whether an active dashboard is known. Load balancers point
    /// their health checks here, so without one the answer is 503 (same body shape,
    /// `cluster_status: "UNAVAILABLE"`) to take this gateway out of rotation.
    pub async fn check(
        &self,
        req: &AuthRequest<'_>,
        now: UnixTime,
        backend_available: bool,
    ) -> Result<LocalResponse, AuthError> {
        // Load balancers call this without a vendor type; a vendor version we cannot serve is still 415.
        let negotiated =
            versioning::negotiate(req.accept().as_deref(), &self.vendor, AUTH_VERSION, true)?;
        // The body's token wins over the query's, as on the dashboard.
        let body_token = match req.json_object()? {
            Some(body) => match body.get("token") {
                Some(Value::String(token)) => Some(token.clone()),
                None | Some(Value::Null) => None,
                Some(_) => return Err(AuthError::bad_request("Field 'token' must be a string.")),
            },
            None => None,
        };
        let token = body_token.or_else(|| req.query_param("token").map(|t| t.into_owned()));
        let status = if backend_available { 200 } else { 503 };
        let body = match self.verify_token(token.as_deref(), req.client, now).await {
            Ok(authenticated) => valid_token_body(&authenticated.user, req.edition),
            Err(TokenRejection::Store(e)) => return Err(e.into()),
            Err(_) => {
                let cluster_status = if backend_available {
                    "POST_INSTALLED"
                } else {
                    "UNAVAILABLE"
                };
                // With single sign-on the UI's login page sends the browser to the provider.
                let login_url = self.sources.login_url().unwrap_or("#/login");
                json!({"login_url": login_url, "cluster_status": cluster_status}).to_string()
            }
        };
        Ok(LocalResponse::json_text(
            status,
            self.content_type(negotiated),
            body,
        ))
    }
}

/// The dashboard's answer for a good token, in its key order; the permissions object was
/// rendered when the users were loaded.
fn valid_token_body(user: &User, edition: RoleEdition) -> String {
    let username = Value::from(user.username.as_str());
    let sso = user.provider_subject.is_some();
    format!(
        r#"{{"username":{username},"permissions":{},"sso":{sso},"pwdUpdateRequired":false}}"#,
        user.grants.json(edition)
    )
}

#[cfg(test)]
mod tests {
    use super::super::testing::{auth, body_of, post, request, token_for, NOW};
    use super::*;

    fn login_url() -> Value {
        json!({"login_url": "#/login", "cluster_status": "POST_INSTALLED"})
    }

    #[tokio::test]
    async fn a_valid_token_gives_the_user_and_permissions() {
        let auth = auth();
        let token = token_for(&auth, "viewer", NOW);
        let headers = post("*/*");
        let req = request(&headers, format!(r#"{{"token":"{token}"}}"#));
        let response = auth.check(&req, NOW, true).await.unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.content_type, "application/json");
        let body = body_of(&response);
        assert_eq!(body["username"], "viewer");
        assert_eq!(body["permissions"]["pool"], json!(["read"]));
        assert_eq!(body.as_object().unwrap().len(), 4);
    }

    #[test]
    fn the_rendered_body_is_what_serde_json_writes_in_the_dashboards_key_order() {
        use crate::users::{Grants, Role};
        let roles = [Role::PoolManager, Role::ReadOnly];
        let user = User {
            username: "j\"ürgen\\ops".into(),
            password_hash: None,
            roles: roles.to_vec(),
            custom_roles: Vec::new(),
            grants: Grants::of(&roles),
            enabled: true,
            provider_subject: None,
            api_key: None,
        };
        let expected = json!({
            "username": user.username,
            "permissions": user.grants.to_map(crate::users::RoleEdition::Pacific),
            "sso": false,
            "pwdUpdateRequired": false,
        });
        assert_eq!(
            valid_token_body(&user, crate::users::RoleEdition::Pacific),
            expected.to_string()
        );
    }

    #[tokio::test]
    async fn bad_tokens_give_the_login_url_body() {
        let auth = auth();
        let expired = token_for(&auth, "admin", NOW - 9 * 3600);
        let disabled = token_for(&auth, "disabled", NOW);
        let headers = post("application/vnd.ceph.api.v1.0+json");
        for body in [
            String::new(),
            "{}".into(),
            r#"{"token":""}"#.into(),
            r#"{"token":"garbage"}"#.into(),
            format!(r#"{{"token":"{expired}"}}"#),
            format!(r#"{{"token":"{disabled}"}}"#),
        ] {
            let req = request(&headers, body.clone());
            let response = auth.check(&req, NOW, true).await.unwrap();
            assert_eq!(body_of(&response), login_url(), "{body}");
            assert_eq!(response.content_type, "application/vnd.ceph.api.v1.0+json");
        }
    }

    #[tokio::test]
    async fn the_body_token_wins_over_the_query() {
        let auth = auth();
        let token = token_for(&auth, "admin", NOW);
        let headers = post("*/*");
        let query = format!("token={token}");
        let only_query = AuthRequest {
            headers: &headers,
            query: Some(&query),
            body: "".into(),
            client: None,
            edition: crate::users::RoleEdition::Pacific,
        };
        assert_eq!(
            body_of(&auth.check(&only_query, NOW, true).await.unwrap())["username"],
            "admin"
        );
        let both = AuthRequest {
            headers: &headers,
            query: Some(&query),
            body: r#"{"token":"bad"}"#.into(),
            client: None,
            edition: crate::users::RoleEdition::Pacific,
        };
        assert_eq!(
            body_of(&auth.check(&both, NOW, true).await.unwrap()),
            login_url()
        );
    }

    #[tokio::test]
    async fn without_an_active_backend_the_answer_is_503_with_the_same_bodies() {
        let auth = auth();
        let headers = post("*/*");
        let req = request(&headers, "");
        let response = auth.check(&req, NOW, false).await.unwrap();
        assert_eq!(response.status, 503);
        assert_eq!(
            body_of(&response),
            json!({"login_url": "#/login", "cluster_status": "UNAVAILABLE"})
        );
        let token = token_for(&auth, "admin", NOW);
        let req = request(&headers, format!(r#"{{"token":"{token}"}}"#));
        let response = auth.check(&req, NOW, false).await.unwrap();
        assert_eq!(response.status, 503);
        assert_eq!(body_of(&response)["username"], "admin");
    }

    #[tokio::test]
    async fn a_vendor_version_it_cannot_serve_is_415() {
        let auth = auth();
        let headers = post("application/vnd.ceph.api.v9.9+json");
        let req = request(&headers, "");
        let refused = auth.check(&req, NOW, true).await.unwrap_err();
        assert!(matches!(refused, AuthError::Version(_)), "{refused}");
    }
}
