//! The key API and the key source together, as a client meets them: keys made through
//! the API, then presented as bearer tokens.

use std::net::IpAddr;
use std::sync::Arc;

use serde_json::{json, Value};

use super::super::testing::{auth, body_of, post, token_for, user_specs, NOW};
use super::*;
use crate::users::{Role, UserDb};

/// `method path` with `body`, sent with `credential` as the bearer token.
async fn call(
    auth: &Auth,
    credential: &str,
    method: Method,
    path: &str,
    body: Value,
) -> Result<LocalResponse, AuthError> {
    let (path, query) = path
        .split_once('?')
        .map_or((path, None), |(p, q)| (p, Some(q)));
    let mut headers = post("application/vnd.ceph.api.v1.0+json");
    let bearer = format!("Bearer {credential}");
    headers.insert(http::header::AUTHORIZATION, bearer.parse().unwrap());
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let req = AuthRequest {
        headers: &headers,
        query,
        body: body.into(),
        client: None,
        edition: crate::users::RoleEdition::Pacific,
    };
    let call = KeyApiRequest {
        method: &method,
        path,
        request: &req,
    };
    auth.keys(&call, NOW, &mut AuthSubject::default()).await
}

/// A key `username` made for themselves with `roles`: (id, key).
async fn create(auth: &Auth, username: &str, roles: &[&str]) -> (String, String) {
    let token = token_for(auth, username, NOW);
    let body = json!({"name": "ci", "roles": roles, "expires_in_seconds": 3600});
    let created = call(auth, &token, Method::POST, KEYS_PATH, body)
        .await
        .unwrap();
    assert_eq!(created.status, 201);
    let body = body_of(&created);
    let key = body["key"].as_str().unwrap().to_string();
    (body["id"].as_str().unwrap().to_string(), key)
}

/// Whom `key` authenticates from `client` at `now`.
async fn user_of(
    auth: &Auth,
    key: &str,
    client: Option<IpAddr>,
    now: UnixTime,
) -> Result<Arc<User>, AuthError> {
    let mut headers = http::HeaderMap::new();
    let bearer = format!("Bearer {key}");
    headers.insert(http::header::AUTHORIZATION, bearer.parse().unwrap());
    auth.authenticate(&headers, client, now)
        .await
        .map(|a| a.user)
}

#[tokio::test]
async fn a_key_acts_as_its_owner_with_its_roles_only() {
    let auth = auth();
    let (id, key) = create(&auth, "admin", &["read-only"]).await;
    assert!(key.starts_with("cgk_") && key.contains(&id));
    let user = user_of(&auth, &key, None, NOW).await.unwrap();
    assert_eq!(user.username, "admin");
    assert_eq!(
        user.roles,
        [Role::ReadOnly],
        "not the owner's administrator"
    );
    assert_eq!(user.auth_method(), "api_key");
    let label = user.api_key.as_deref().unwrap();
    assert_eq!(
        (label.id.as_str(), label.name.as_str()),
        (id.as_str(), "ci")
    );
}

#[tokio::test]
async fn a_key_gets_no_role_its_creator_or_owner_lacks() {
    let auth = auth();
    let viewer = token_for(&auth, "viewer", NOW);
    let more = json!({"name": "x", "roles": ["administrator"], "expires_in_seconds": 60});
    let refused = call(&auth, &viewer, Method::POST, KEYS_PATH, more).await;
    assert!(
        matches!(refused, Err(AuthError::NotPermitted(_))),
        "{refused:?}"
    );
    // An administrator makes one for the viewer: still not more than the viewer holds.
    let admin = token_for(&auth, "admin", NOW);
    let for_viewer = |role: &str| json!({"name": "x", "roles": [role], "owner": "viewer", "expires_in_seconds": 60});
    let refused = call(
        &auth,
        &admin,
        Method::POST,
        KEYS_PATH,
        for_viewer("administrator"),
    )
    .await;
    assert!(
        matches!(refused, Err(AuthError::NotPermitted(_))),
        "{refused:?}"
    );
    let made = call(
        &auth,
        &admin,
        Method::POST,
        KEYS_PATH,
        for_viewer("read-only"),
    )
    .await;
    assert_eq!(body_of(&made.unwrap())["owner"], "viewer");
    // And a user makes none for another.
    let theirs =
        json!({"name": "x", "roles": ["read-only"], "owner": "admin", "expires_in_seconds": 60});
    let refused = call(&auth, &viewer, Method::POST, KEYS_PATH, theirs).await;
    assert!(
        matches!(refused, Err(AuthError::NotPermitted(_))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_key_cannot_manage_keys() {
    let auth = auth();
    let (_, key) = create(&auth, "admin", &["administrator"]).await;
    let listed = call(&auth, &key, Method::GET, KEYS_PATH, Value::Null).await;
    assert!(
        matches!(listed, Err(AuthError::NotPermitted(_))),
        "{listed:?}"
    );
}

#[tokio::test]
async fn every_key_expires_within_the_bound() {
    let auth = auth();
    let admin = token_for(&auth, "admin", NOW);
    for body in [
        json!({"name": "x", "roles": ["read-only"]}),
        json!({"name": "x", "roles": ["read-only"], "expires_in_seconds": 0}),
        json!({"name": "x", "roles": ["read-only"], "expires_in_seconds": 91 * 86_400}),
        json!({"name": "x", "roles": ["read-only"], "expires_in_seconds": "1d"}),
        json!({"name": "", "roles": ["read-only"], "expires_in_seconds": 60}),
        json!({"name": "a b", "roles": ["read-only"], "expires_in_seconds": 60}),
        json!({"name": "x", "roles": [], "expires_in_seconds": 60}),
        json!({"name": "x", "roles": ["no-such-role"], "expires_in_seconds": 60}),
        json!({"name": "x", "roles": ["read-only"], "expires_in_seconds": 60, "networks": ["10.0.0.0/33"]}),
    ] {
        let refused = call(&auth, &admin, Method::POST, KEYS_PATH, body.clone()).await;
        assert!(
            matches!(refused, Err(AuthError::BadRequest(_))),
            "{body}: {refused:?}"
        );
    }
}

#[tokio::test]
async fn an_expired_or_revoked_key_is_refused() {
    let auth = auth();
    let (id, key) = create(&auth, "viewer", &["read-only"]).await;
    assert!(user_of(&auth, &key, None, NOW + 3599).await.is_ok());
    let expired = user_of(&auth, &key, None, NOW + 3600).await;
    assert!(
        matches!(expired, Err(AuthError::Unauthorized)),
        "{expired:?}"
    );
    let viewer = token_for(&auth, "viewer", NOW);
    let path = format!("{KEYS_PATH}/{id}");
    let revoked = call(&auth, &viewer, Method::DELETE, &path, Value::Null)
        .await
        .unwrap();
    assert_eq!((revoked.status, revoked.body.len()), (204, 0));
    let refused = user_of(&auth, &key, None, NOW).await;
    assert!(
        matches!(refused, Err(AuthError::Unauthorized)),
        "{refused:?}"
    );
    let again = call(&auth, &viewer, Method::DELETE, &path, Value::Null).await;
    assert!(
        matches!(again, Err(AuthError::NotFound { .. })),
        "{again:?}"
    );
}

#[tokio::test]
async fn a_user_sees_and_revokes_only_their_own_keys_an_administrator_all() {
    let auth = auth();
    let (admins, _) = create(&auth, "admin", &["read-only"]).await;
    let (viewers, _) = create(&auth, "viewer", &["read-only"]).await;
    let ids = |response: LocalResponse| -> Vec<String> {
        let body = body_of(&response);
        for key in body.as_array().unwrap() {
            assert!(
                key.get("key").is_none() && key.get("digest").is_none(),
                "{key}"
            );
        }
        body.as_array()
            .unwrap()
            .iter()
            .map(|k| k["id"].as_str().unwrap().into())
            .collect()
    };
    let viewer = token_for(&auth, "viewer", NOW);
    let admin = token_for(&auth, "admin", NOW);
    let list = |token: String, path: &'static str| {
        let auth = auth.clone();
        async move {
            call(&auth, &token, Method::GET, path, Value::Null)
                .await
                .unwrap()
        }
    };
    assert_eq!(
        ids(list(viewer.clone(), KEYS_PATH).await),
        std::slice::from_ref(&viewers)
    );
    assert_eq!(ids(list(admin.clone(), KEYS_PATH).await).len(), 2);
    let only_viewers = "/api/clustergate/keys?owner=viewer";
    assert_eq!(
        ids(list(admin.clone(), only_viewers).await),
        std::slice::from_ref(&viewers)
    );
    let not_theirs = format!("{KEYS_PATH}/{admins}");
    let refused = call(&auth, &viewer, Method::DELETE, &not_theirs, Value::Null).await;
    assert!(
        matches!(refused, Err(AuthError::NotFound { .. })),
        "{refused:?}"
    );
    let theirs = format!("{KEYS_PATH}/{viewers}");
    let revoked = call(&auth, &admin, Method::DELETE, &theirs, Value::Null).await;
    assert_eq!(revoked.unwrap().status, 204);
}

#[tokio::test]
async fn a_key_limited_to_networks_is_refused_elsewhere() {
    let auth = auth();
    let admin = token_for(&auth, "admin", NOW);
    let body = json!({"name": "exporter", "roles": ["read-only"], "expires_in_seconds": 60,
                      "networks": ["10.1.0.0/16", "192.0.2.7"]});
    let created = call(&auth, &admin, Method::POST, KEYS_PATH, body)
        .await
        .unwrap();
    let created = body_of(&created);
    assert_eq!(created["networks"], json!(["10.1.0.0/16", "192.0.2.7/32"]));
    let key = created["key"].as_str().unwrap();
    let from = |ip: &str| Some(ip.parse::<IpAddr>().unwrap());
    assert!(user_of(&auth, key, from("10.1.2.3"), NOW).await.is_ok());
    assert!(user_of(&auth, key, from("192.0.2.7"), NOW).await.is_ok());
    let elsewhere = user_of(&auth, key, from("10.2.0.1"), NOW).await;
    assert!(
        matches!(elsewhere, Err(AuthError::Unauthorized)),
        "{elsewhere:?}"
    );
    let unknown = user_of(&auth, key, None, NOW).await;
    assert!(
        matches!(unknown, Err(AuthError::Unauthorized)),
        "{unknown:?}"
    );
}

#[tokio::test]
async fn each_key_is_limited_to_its_rate_with_retry_after() {
    let auth = auth();
    let (_, key) = create(&auth, "viewer", &["read-only"]).await;
    let (_, other) = create(&auth, "admin", &["read-only"]).await;
    for _ in 0..super::super::testing::KEY_RATE.burst {
        assert!(user_of(&auth, &key, None, NOW).await.is_ok());
    }
    let limited = user_of(&auth, &key, None, NOW).await;
    assert!(
        matches!(limited, Err(AuthError::KeyRateLimited { retry_after }) if (1..=60).contains(&retry_after)),
        "{limited:?}"
    );
    assert!(
        user_of(&auth, &other, None, NOW).await.is_ok(),
        "another key's own bucket"
    );
}

#[tokio::test]
async fn rotating_gives_a_new_key_and_ends_the_old() {
    let auth = auth();
    let (id, old) = create(&auth, "viewer", &["read-only"]).await;
    let viewer = token_for(&auth, "viewer", NOW);
    let path = format!("{KEYS_PATH}/{id}/rotate");
    let rotated = call(&auth, &viewer, Method::POST, &path, Value::Null)
        .await
        .unwrap();
    let rotated = body_of(&rotated);
    assert_eq!(
        (rotated["name"].as_str(), rotated["expires_at"].as_u64()),
        (Some("ci"), Some(NOW + 3600))
    );
    assert_ne!(rotated["id"], json!(id));
    let new = rotated["key"].as_str().unwrap();
    assert!(user_of(&auth, new, None, NOW).await.is_ok());
    assert!(matches!(
        user_of(&auth, &old, None, NOW).await,
        Err(AuthError::Unauthorized)
    ));
}

#[tokio::test]
async fn an_owner_disabled_or_no_longer_granted_what_the_key_grants_ends_the_key() {
    let auth = auth();
    let (_, key) = create(&auth, "admin", &["administrator"]).await;
    let (_, read_only) = create(&auth, "admin", &["read-only"]).await;
    let (_, viewers) = create(&auth, "viewer", &["read-only"]).await;
    let mut specs = user_specs();
    specs[0].roles = vec![Role::ReadOnly];
    specs[1].enabled = false;
    auth.users.store(Arc::new(UserDb::new(specs).unwrap()));
    let more = user_of(&auth, &key, None, NOW).await;
    assert!(matches!(more, Err(AuthError::Unauthorized)), "{more:?}");
    let user = user_of(&auth, &read_only, None, NOW).await.unwrap();
    assert_eq!(user.roles, [Role::ReadOnly]);
    let disabled = user_of(&auth, &viewers, None, NOW).await;
    assert!(
        matches!(disabled, Err(AuthError::Unauthorized)),
        "{disabled:?}"
    );
}

#[tokio::test]
async fn text_that_is_not_a_key_or_not_ours_is_refused_alike() {
    let auth = auth();
    let (_, key) = create(&auth, "viewer", &["read-only"]).await;
    let wrong_secret = format!(
        "{}{}",
        &key[..key.len() - 1],
        if key.ends_with('A') { 'B' } else { 'A' }
    );
    let unknown_id = format!("cgk_{}{}", "0".repeat(16), &key[20..]);
    for text in [
        "cgk_",
        "cgk_short",
        wrong_secret.as_str(),
        unknown_id.as_str(),
    ] {
        let refused = user_of(&auth, text, None, NOW).await;
        assert!(
            matches!(refused, Err(AuthError::Unauthorized)),
            "{text}: {refused:?}"
        );
    }
}

#[tokio::test]
async fn the_key_api_answers_unknown_paths_and_methods_as_the_dashboard() {
    let auth = auth();
    let admin = token_for(&auth, "admin", NOW);
    let put = call(&auth, &admin, Method::PUT, KEYS_PATH, Value::Null).await;
    assert!(
        matches!(put, Err(AuthError::MethodNotAllowed { allow: "GET, POST" })),
        "{put:?}"
    );
    let deep = format!("{KEYS_PATH}/a/b/c");
    let missing = call(&auth, &admin, Method::GET, &deep, Value::Null).await;
    assert!(
        matches!(missing, Err(AuthError::NotFound { .. })),
        "{missing:?}"
    );
    let anonymous = call(&auth, "", Method::GET, KEYS_PATH, Value::Null).await;
    assert!(
        matches!(anonymous, Err(AuthError::Unauthorized)),
        "{anonymous:?}"
    );
}
