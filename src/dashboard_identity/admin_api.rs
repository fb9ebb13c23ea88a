//! The dashboard's user and role API (`/api/user`, `/api/role`), as the service account
//! calls it to make and mend the accounts the gateway manages. Every call is bounded in
//! time (the login's) and in the size of the answer it reads.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::{json, Value};

use super::IdentityError;
use crate::dashboards::{Backend, ClientError, Upstreams};

/// An account or role answer is a few hundred bytes.
const MAX_REPLY: usize = 256 * 1024;
/// The lists of every account and role (the `accounts` command): a few hundred bytes each.
const MAX_LIST_REPLY: usize = 8 * 1024 * 1024;

/// Names are sent as one path segment: everything but these is escaped.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.');

/// What the dashboard keeps of an account, as far as the gateway sets it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct AccountState {
    pub roles: BTreeSet<String>,
    pub enabled: bool,
    pub update_required: bool,
}

/// An account as the dashboard lists it.
#[derive(Debug)]
pub(super) struct ListedAccount {
    pub name: String,
    pub state: AccountState,
}

/// A role's permissions as the dashboard lists them: scope to permissions.
pub(super) type ScopesPermissions = BTreeMap<String, BTreeSet<String>>;

/// The API of one backend, called with the service account's token.
pub(super) struct AdminApi<'a> {
    pub upstreams: &'a Upstreams,
    pub backend: &'a Backend,
    pub token: &'a str,
    /// The v1.0 media type, which every one of these operations serves.
    pub accept: &'a str,
}

impl AdminApi<'_> {
    /// The account `name`; `None` when the dashboard has none.
    pub async fn account(&self, name: &str) -> Result<Option<AccountState>, IdentityError> {
        let (status, body) = self.call("GET", &user_path(name), None, MAX_REPLY).await?;
        match status {
            200 => account_state(&body).map(Some),
            404 => Ok(None),
            _ => Err(refused("read", name, status, &body)),
        }
    }

    /// Creates the account; `false`: it exists already (another gateway made it meanwhile).
    pub async fn create_account(
        &self,
        name: &str,
        password: &str,
        roles: &[String],
    ) -> Result<bool, IdentityError> {
        let mut body = account_body(password, roles);
        body["username"] = json!(name);
        let (status, answer) = self
            .call("POST", "/api/user", Some(body), MAX_REPLY)
            .await?;
        match status {
            200 | 201 => Ok(true),
            // Made by another gateway meanwhile? (a 400 of its policy otherwise)
            400 if self.account(name).await?.is_some() => Ok(false),
            _ => Err(refused("create the account", name, status, &answer)),
        }
    }

    /// Sets the account's password, roles and state to the gateway's.
    pub async fn set_account(
        &self,
        name: &str,
        password: &str,
        roles: &[String],
    ) -> Result<(), IdentityError> {
        let body = account_body(password, roles);
        let (status, answer) = self
            .call("PUT", &user_path(name), Some(body), MAX_REPLY)
            .await?;
        match status {
            200 | 201 => Ok(()),
            _ => Err(refused("update the account", name, status, &answer)),
        }
    }

    /// The role `name`'s permissions; `None` when the dashboard has no such role.
    pub async fn role(&self, name: &str) -> Result<Option<ScopesPermissions>, IdentityError> {
        let (status, body) = self.call("GET", &role_path(name), None, MAX_REPLY).await?;
        match status {
            200 => serde_json::from_value(body["scopes_permissions"].clone())
                .map(Some)
                .map_err(|_| IdentityError::BadReply("GET /api/role")),
            404 => Ok(None),
            _ => Err(refused("read the role", name, status, &body)),
        }
    }

    /// Creates the role, or sets its permissions when it exists (`exists`).
    pub async fn put_role(
        &self,
        name: &str,
        permissions: &ScopesPermissions,
        exists: bool,
    ) -> Result<(), IdentityError> {
        let description = "mirrored by clustergate from its roles file; change it there";
        let (method, path, body) = match exists {
            false => (
                "POST",
                "/api/role".to_string(),
                json!({"name": name, "description": description, "scopes_permissions": permissions}),
            ),
            true => (
                "PUT",
                role_path(name),
                json!({"description": description, "scopes_permissions": permissions}),
            ),
        };
        let (status, answer) = self.call(method, &path, Some(body), MAX_REPLY).await?;
        match status {
            200 | 201 => Ok(()),
            // Made by another gateway meanwhile: set it.
            400 if !exists && self.role(name).await?.is_some() => {
                Box::pin(self.put_role(name, permissions, true)).await
            }
            _ => Err(refused("set the role", name, status, &answer)),
        }
    }

    /// Every account on the dashboard.
    pub async fn accounts(&self) -> Result<Vec<ListedAccount>, IdentityError> {
        let bad = || IdentityError::BadReply("/api/user");
        let listed = self.list("/api/user", "list the accounts").await?;
        listed
            .iter()
            .map(|account| {
                Ok(ListedAccount {
                    name: account["username"].as_str().ok_or_else(bad)?.to_string(),
                    state: account_state(account)?,
                })
            })
            .collect()
    }

    /// The name of every role on the dashboard, the system roles' included.
    pub async fn role_names(&self) -> Result<Vec<String>, IdentityError> {
        let bad = || IdentityError::BadReply("/api/role");
        let listed = self.list("/api/role", "list the roles").await?;
        listed
            .iter()
            .map(|role| role["name"].as_str().map(str::to_string).ok_or_else(bad))
            .collect()
    }

    /// The JSON array `GET path` answers (a list of every account or role).
    async fn list(
        &self,
        path: &'static str,
        action: &'static str,
    ) -> Result<Vec<Value>, IdentityError> {
        let (status, body) = self.call("GET", path, None, MAX_LIST_REPLY).await?;
        match (status, body) {
            (200, Value::Array(listed)) => Ok(listed),
            (200, _) => Err(IdentityError::BadReply(path)),
            (status, body) => Err(refused(action, path, status, &body)),
        }
    }

    /// Removes the account `name` (none by that name: nothing to do).
    pub async fn delete_account(&self, name: &str) -> Result<(), IdentityError> {
        self.delete(&user_path(name), "remove the account", name)
            .await
    }

    /// Removes the role `name`; the dashboard refuses while an account holds it.
    pub async fn delete_role(&self, name: &str) -> Result<(), IdentityError> {
        self.delete(&role_path(name), "remove the role", name).await
    }

    async fn delete(
        &self,
        path: &str,
        action: &'static str,
        name: &str,
    ) -> Result<(), IdentityError> {
        let (status, answer) = self.call("DELETE", path, None, MAX_REPLY).await?;
        match status {
            200..=299 | 404 => Ok(()),
            _ => Err(refused(action, name, status, &answer)),
        }
    }

    /// One exchange, reading at most `max` bytes of answer: its status and its body as
    /// JSON (`null` when it is none). A standby answers 303, or an error status with no
    /// dashboard behind it.
    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        max: usize,
    ) -> Result<(u16, Value), IdentityError> {
        let upstreams = self.upstreams;
        let mut req = upstreams.request(self.backend, method, path)?;
        let body = body.map(|b| Bytes::from(b.to_string()));
        let header = |e: Box<pingora::Error>| ClientError::Protocol(e.to_string());
        req.insert_header("accept", self.accept).map_err(header)?;
        req.insert_header("authorization", format!("Bearer {}", self.token))
            .map_err(header)?;
        let length = body.as_ref().map_or(0, Bytes::len);
        req.insert_header("content-length", length.to_string())
            .map_err(header)?;
        if body.is_some() {
            req.insert_header("content-type", "application/json")
                .map_err(header)?;
        }
        let timeouts = upstreams.timeouts;
        let peer = upstreams.peer(self.backend, timeouts.login_answer);
        let reply = upstreams
            .client
            .send(&peer, req, body, max, timeouts.login)
            .await?;
        let status = reply.status();
        if status == 303 || status == 502 || status == 503 {
            return Err(IdentityError::Standby(status));
        }
        let body = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
        Ok((status, body))
    }
}

/// An account as the gateway keeps it: its password and roles, enabled, and no password
/// change due (the dashboard's default, true, would refuse the account every scope).
fn account_body(password: &str, roles: &[String]) -> Value {
    json!({
        "password": password,
        "roles": roles,
        "name": "clustergate",
        "email": null,
        "enabled": true,
        "pwdUpdateRequired": false,
    })
}

fn user_path(name: &str) -> String {
    format!("/api/user/{}", utf8_percent_encode(name, SEGMENT))
}

fn role_path(name: &str) -> String {
    format!("/api/role/{}", utf8_percent_encode(name, SEGMENT))
}

fn refused(action: &'static str, name: &str, status: u16, answer: &Value) -> IdentityError {
    let detail = answer
        .get("detail")
        .and_then(Value::as_str)
        .unwrap_or("no detail")
        .chars()
        .take(200)
        .collect();
    IdentityError::Refused {
        action,
        name: name.to_string(),
        status,
        detail,
    }
}

fn account_state(body: &Value) -> Result<AccountState, IdentityError> {
    let bad = || IdentityError::BadReply("GET /api/user");
    let roles = body["roles"]
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|r| r.as_str().map(str::to_string).ok_or_else(bad))
        .collect::<Result<_, _>>()?;
    Ok(AccountState {
        roles,
        enabled: body["enabled"].as_bool().ok_or_else(bad)?,
        update_required: body["pwdUpdateRequired"].as_bool().unwrap_or(false),
    })
}
