//! The API keys' management, served by the gateway under `/api/clustergate/keys`: a
//! user lists, creates, rotates and revokes their own keys; an administrator (who may
//! change other users: the `user` scope's `update` permission, as on the dashboard) every
//! user's. Authenticated with a gateway token, never with a key: a leaked key cannot make
//! itself new keys. A key is granted nothing its creator and its owner are not both granted.

use http::Method;
use ipnet::IpNet;
use serde_json::{json, Map, Value};

use super::source::key_roles;
use super::{Auth, AuthError, AuthRequest, AuthSubject, AUTH_VERSION};
use crate::api_keys::{revocation_id, KeyRecord, NewKey, StoredKey};
use crate::edge::respond::LocalResponse;
use crate::observe::metrics::KeyChange;
use crate::state::UnixTime;
use crate::users::{Permission, Scope, User};
use crate::versioning;

/// Where the key API is.
pub const KEYS_PATH: &str = "/api/clustergate/keys";
/// The most roles and networks one key names.
const MAX_ROLES: usize = 64;
const MAX_NETWORKS: usize = 32;
const MAX_NAME: usize = 64;

/// How long keys may live and how many there may be (`[api_keys]`).
#[derive(Debug, Clone, Copy)]
pub struct KeyPolicy {
    pub max_lifetime_seconds: u64,
}

/// One request to the key API.
pub struct KeyApiRequest<'a> {
    pub method: &'a Method,
    /// Normalized; under [`KEYS_PATH`].
    pub path: &'a str,
    pub request: &'a AuthRequest<'a>,
}

/// Who called the key API.
struct Caller {
    user: std::sync::Arc<User>,
    /// May manage every user's keys.
    admin: bool,
}

/// What a key API request asks for.
enum Call<'a> {
    List,
    Create,
    Revoke(&'a str),
    Rotate(&'a str),
}

impl Auth {
    /// Answers a key API request; `subject` learns who made it, for the logs.
    pub async fn keys(
        &self,
        call: &KeyApiRequest<'_>,
        now: UnixTime,
        subject: &mut AuthSubject,
    ) -> Result<LocalResponse, AuthError> {
        let req = call.request;
        let negotiated =
            versioning::negotiate(req.accept().as_deref(), &self.vendor, AUTH_VERSION, true)?;
        let what = parse_call(call.method, call.path)?;
        let user = self.authenticate(req.headers, req.client, now).await?.user;
        subject.username = Some(user.username.clone());
        subject.of_user(Some(&user));
        let caller = Caller {
            admin: is_administrator(&user, req),
            user,
        };
        if caller.user.api_key.is_some() {
            return Err(AuthError::NotPermitted(
                "An API key cannot manage API keys: use a token from logging in.".into(),
            ));
        }
        let (status, body) = match what {
            Call::List => (200, self.list_keys(&caller, req, now).await?),
            Call::Create => (201, self.create_key(&caller, req, now).await?),
            Call::Revoke(id) => (204, self.revoke_key(&caller, id, now).await?),
            Call::Rotate(id) => (201, self.rotate_key(&caller, id, req, now).await?),
        };
        let body = if status == 204 {
            String::new()
        } else {
            body.to_string()
        };
        Ok(LocalResponse::json_text(
            status,
            self.content_type(negotiated),
            body,
        ))
    }

    async fn list_keys(
        &self,
        caller: &Caller,
        req: &AuthRequest<'_>,
        now: UnixTime,
    ) -> Result<Value, AuthError> {
        let owner = match caller.admin {
            true => req.query_param("owner").map(|o| o.into_owned()),
            false => Some(caller.user.username.clone()),
        };
        let keys = self.stores.api_keys.list(owner.as_deref(), now).await?;
        Ok(Value::Array(keys.iter().map(listed).collect()))
    }

    async fn create_key(
        &self,
        caller: &Caller,
        req: &AuthRequest<'_>,
        now: UnixTime,
    ) -> Result<Value, AuthError> {
        let body = req.json_object()?.unwrap_or_default();
        let owner = match optional_string(&body, "owner")? {
            Some(owner) if owner != caller.user.username => {
                if !caller.admin {
                    return Err(AuthError::NotPermitted(
                        "Only an administrator (the user scope's update permission) creates keys for other users.".into(),
                    ));
                }
                self.owner_named(&owner)?
            }
            _ => caller.user.username.clone(),
        };
        let template = KeyRecord {
            id: String::new(),
            name: key_name(&body)?,
            roles: self.grantable_roles(&caller.user, &owner, roles_of(&body)?)?,
            owner,
            created_by: caller.user.username.clone(),
            created_at: now,
            expires_at: now + self.lifetime(&body, None)?,
            networks: networks_of(&body)?,
            digest: String::new(),
        };
        let created = self.store_new_key(template).await?;
        self.metrics.api_keys.change(KeyChange::Created);
        Ok(created)
    }

    async fn revoke_key(
        &self,
        caller: &Caller,
        id: &str,
        now: UnixTime,
    ) -> Result<Value, AuthError> {
        let record = self.visible_key(caller, id, now).await?;
        self.end_key(&record, now).await?;
        self.metrics.api_keys.change(KeyChange::Revoked);
        tracing::info!(key = %record.id, name = %record.name, owner = %record.owner, by = %caller.user.username, "API key revoked");
        Ok(Value::Null)
    }

    /// A new key for the same name, owner, roles and networks; the old one revoked.
    async fn rotate_key(
        &self,
        caller: &Caller,
        id: &str,
        req: &AuthRequest<'_>,
        now: UnixTime,
    ) -> Result<Value, AuthError> {
        let old = self.visible_key(caller, id, now).await?;
        let body = req.json_object()?.unwrap_or_default();
        let lifetime = old.expires_at.saturating_sub(old.created_at);
        let template = KeyRecord {
            roles: self.grantable_roles(&caller.user, &old.owner, old.roles.clone())?,
            created_by: caller.user.username.clone(),
            created_at: now,
            expires_at: now + self.lifetime(&body, Some(lifetime))?,
            ..old.clone()
        };
        let created = self.store_new_key(template).await?;
        self.end_key(&old, now).await?;
        self.metrics.api_keys.change(KeyChange::Rotated);
        Ok(created)
    }

    /// Stores `template` under a fresh key: the answer that shows the key, once.
    async fn store_new_key(&self, template: KeyRecord) -> Result<Value, AuthError> {
        let key = NewKey::generate();
        let record = KeyRecord {
            id: key.id.clone(),
            digest: key.digest(),
            ..template
        };
        self.stores
            .api_keys
            .insert(&record, record.created_at)
            .await?;
        tracing::info!(key = %record.id, name = %record.name, owner = %record.owner, by = %record.created_by, "API key created");
        let mut shown = listed(&StoredKey {
            record,
            last_used: None,
        });
        if let Value::Object(fields) = &mut shown {
            fields.remove("last_used");
            fields.insert("key".into(), Value::String(key.text));
        }
        Ok(shown)
    }

    /// Revokes `record` (every gateway learns it through the revocation store) and
    /// forgets it, here at once.
    async fn end_key(&self, record: &KeyRecord, now: UnixTime) -> Result<(), AuthError> {
        let until = record.expires_at.max(now + 1);
        self.stores
            .revocations
            .revoke(&revocation_id(&record.id), until, now)
            .await?;
        self.stores.api_keys.remove(&record.id).await?;
        self.sources.keys().forget(&record.id);
        Ok(())
    }

    /// Key `id`, if the caller may see it (theirs, or any for an administrator); 404
    /// otherwise, as for a key that does not exist.
    async fn visible_key(
        &self,
        caller: &Caller,
        id: &str,
        now: UnixTime,
    ) -> Result<KeyRecord, AuthError> {
        let record = self.stores.api_keys.get(id, now).await?;
        record
            .filter(|r| caller.admin || r.owner == caller.user.username)
            .ok_or_else(|| AuthError::not_found(&format!("{KEYS_PATH}/{id}")))
    }

    /// The users-file user `owner`, who must exist and be enabled.
    fn owner_named(&self, owner: &str) -> Result<String, AuthError> {
        match self.users.load().active(owner) {
            Some(user) => Ok(user.username.clone()),
            None => Err(AuthError::bad_request(format!(
                "No enabled user '{owner}' in the users file to own the key."
            ))),
        }
    }

    /// `wanted`, when each names a system role or one of the owner's roles file's, and
    /// the creator and the owner are both granted all they grant: 403 otherwise.
    fn grantable_roles(
        &self,
        creator: &User,
        owner: &str,
        wanted: Vec<String>,
    ) -> Result<Vec<String>, AuthError> {
        let users = self.users.load();
        let owner_user = match owner == creator.username {
            true => Some(creator),
            false => users.active(owner).map(AsRef::as_ref),
        };
        let key = key_roles(&wanted, owner_user).map_err(|name| {
            AuthError::bad_request(format!(
                "No role '{name}': a key names system roles or roles its owner holds."
            ))
        })?;
        let within = |user: &User| key.grants.within(&user.grants);
        if !within(creator) || owner_user.is_some_and(|owner| !within(owner)) {
            return Err(AuthError::NotPermitted(format!(
                "A key is granted nothing its creator and its owner are not both granted: {} grant more.",
                wanted.join(", ")
            )));
        }
        Ok(wanted)
    }

    /// The body's `expires_in_seconds` (else `default`), from 1 to `api_keys.max_lifetime_days`.
    fn lifetime(&self, body: &Map<String, Value>, default: Option<u64>) -> Result<u64, AuthError> {
        let max = self.key_policy.max_lifetime_seconds;
        let seconds = match body.get("expires_in_seconds") {
            Some(value) => value.as_u64().ok_or_else(|| {
                AuthError::bad_request(
                    "Field 'expires_in_seconds' must be a whole number of seconds.",
                )
            })?,
            None => default.ok_or_else(|| {
                AuthError::bad_request("Missing field: expires_in_seconds (every key expires).")
            })?,
        };
        if seconds == 0 || seconds > max {
            return Err(AuthError::bad_request(format!(
                "Field 'expires_in_seconds' must be from 1 to {max} (api_keys.max_lifetime_days)."
            )));
        }
        Ok(seconds)
    }
}

/// What `method path` asks of the key API.
fn parse_call<'a>(method: &Method, path: &'a str) -> Result<Call<'a>, AuthError> {
    let rest = path.strip_prefix(KEYS_PATH).unwrap_or("/");
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let parts: Vec<&str> = rest.split('/').skip(1).collect();
    let (call, allow) = match parts.as_slice() {
        [] => match *method {
            Method::GET => (Some(Call::List), "GET, POST"),
            Method::POST => (Some(Call::Create), "GET, POST"),
            _ => (None, "GET, POST"),
        },
        [id] if *method == Method::DELETE => (Some(Call::Revoke(id)), "DELETE"),
        [_] => (None, "DELETE"),
        [id, "rotate"] if *method == Method::POST => (Some(Call::Rotate(id)), "POST"),
        [_, "rotate"] => (None, "POST"),
        _ => return Err(AuthError::not_found(path)),
    };
    call.ok_or(AuthError::MethodNotAllowed { allow })
}

/// Whether `user` may manage every user's keys: they may change other users on the
/// dashboard (the `user` scope's `update` permission).
fn is_administrator(user: &User, req: &AuthRequest<'_>) -> bool {
    user.grants
        .allows(req.edition, Scope::User, Permission::Update)
}

/// A key as the list shows it: never its secret or digest.
fn listed(key: &StoredKey) -> Value {
    let r = &key.record;
    json!({
        "id": r.id,
        "name": r.name,
        "owner": r.owner,
        "created_by": r.created_by,
        "roles": r.roles,
        "created_at": r.created_at,
        "expires_at": r.expires_at,
        "networks": r.networks.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "last_used": key.last_used,
    })
}

fn optional_string(body: &Map<String, Value>, field: &str) -> Result<Option<String>, AuthError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(AuthError::bad_request(format!(
            "Field '{field}' must be a string."
        ))),
    }
}

/// The body's `name`: 1 to 64 of `A-Za-z0-9._-`.
fn key_name(body: &Map<String, Value>) -> Result<String, AuthError> {
    let name = optional_string(body, "name")?
        .ok_or_else(|| AuthError::bad_request("Missing field: name."))?;
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(allowed) {
        return Err(AuthError::bad_request(
            "Field 'name' must be 1 to 64 of the characters A-Z a-z 0-9 . _ -.",
        ));
    }
    Ok(name)
}

/// A list of strings named `field` (at most `max`), empty when absent.
fn strings(body: &Map<String, Value>, field: &str, max: usize) -> Result<Vec<String>, AuthError> {
    let bad = || {
        AuthError::bad_request(format!(
            "Field '{field}' must be a list of at most {max} strings."
        ))
    };
    match body.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) if items.len() <= max => items
            .iter()
            .map(|item| item.as_str().map(str::to_string).ok_or_else(bad))
            .collect(),
        Some(_) => Err(bad()),
    }
}

fn roles_of(body: &Map<String, Value>) -> Result<Vec<String>, AuthError> {
    let mut roles = strings(body, "roles", MAX_ROLES)?;
    roles.sort();
    roles.dedup();
    if roles.is_empty() {
        return Err(AuthError::bad_request(
            "Field 'roles' must name at least one role the key acts with.",
        ));
    }
    Ok(roles)
}

fn networks_of(body: &Map<String, Value>) -> Result<Vec<IpNet>, AuthError> {
    strings(body, "networks", MAX_NETWORKS)?
        .iter()
        .map(|text| {
            text.parse::<IpNet>()
                .or_else(|_| text.parse::<std::net::IpAddr>().map(IpNet::from))
                .map(|net| net.trunc())
                .map_err(|_| {
                    AuthError::bad_request(format!(
                        "Field 'networks': '{text}' is not an address or a CIDR range (10.0.0.0/8)."
                    ))
                })
        })
        .collect()
}

#[cfg(test)]
mod tests;
