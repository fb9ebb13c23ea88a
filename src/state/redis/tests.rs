//! What holds across the Redis stores: every contract, deployments apart, tokens sealed,
//! and the shipped ACL user.

use super::*;
use crate::state::redis::test_support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stores_pass_the_contract() {
    let server = RedisServer::start();
    let gateway = gateway(&server, "contract:").await;
    every_contract(&gateway.stores).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_other_deployments_are_apart() {
    let server = RedisServer::start();
    let one = gateway(&server, "one:").await;
    let other = gateway(&server, "other:").await;
    let now = crate::state::unix_now();
    one.stores
        .revocations
        .revoke("t", now + 60, now)
        .await
        .unwrap();
    one.stores
        .lockouts
        .record_failure("admin", now)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!other.stores.revocations.is_revoked("t", now).await.unwrap());
    assert_eq!(
        other
            .stores
            .lockouts
            .record_failure("admin", now)
            .await
            .unwrap(),
        1
    );
}

/// Item 10: the Redis user of deploy/redis/clustergate.acl (as the book has operators
/// create it) can do all a gateway does: every store's contract, and a logout on one
/// gateway reaching another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_acl_user_can_do_all_a_gateway_does() {
    let server = RedisServer::start();
    // A replica to acknowledge the writes that wait for one (WAIT).
    let replica = RedisServer::start_replica_of(&server);
    replicating(&server, &replica).await;
    let password = std::fs::read(server.gateway_password_file()).unwrap();
    let key = crate::secrets::read_secret(&server.encryption_key_file()).unwrap();
    let acl_user = || RedisSettings {
        min_replicas: 1,
        // Room for a replica's acknowledgement on two busy cores.
        replication_timeout: BUSY_REPLICATION_TIMEOUT,
        username: Some(redis_server::GATEWAY_USER.into()),
        password: Some(Secret::new(password.clone())),
        encryption_keys: vec![EncryptionKey {
            kid: redis_server::ENCRYPTION_KID.into(),
            secret: key.clone(),
        }],
        ..settings(&server, redis_server::GATEWAY_PREFIX)
    };
    let a = gateway_with(acl_user()).await;
    every_contract(&a.stores).await;
    let b = gateway_with(acl_user()).await;
    let now = crate::state::unix_now();
    a.stores
        .revocations
        .revoke("logged-out", now + 60, now)
        .await
        .unwrap();
    until_revoked(&b.stores, "logged-out", now).await;
    // Redis refused none of the commands they sent (ignored ones included).
    let acl_log = || async {
        let log: Vec<redis::Value> = redis::cmd("ACL")
            .arg("LOG")
            .query_async(&mut raw(&server).await)
            .await
            .unwrap();
        log
    };
    let denied = acl_log().await;
    assert!(denied.is_empty(), "ACL LOG: {denied:?}");
    // The user reaches nothing outside the deployment's keys.
    let outside = RedisSettings {
        key_prefix: "elsewhere:".into(),
        ..acl_user()
    };
    let elsewhere = super::stores(outside, MAX_API_KEYS).unwrap();
    let refused = elsewhere.lockouts.record_failure("admin", now).await;
    assert!(
        matches!(refused, Err(StateError::Unavailable(_))),
        "{refused:?}"
    );
    assert_eq!(acl_log().await.len(), 1, "ACL LOG records what it refuses");
    assert_eq!(a.stores.health.errors(), 0, "a command the ACL refused");
    assert_eq!(b.stores.health.errors(), 0, "a command the ACL refused");
}

/// Item 10: what Redis holds of a token does not show it; a sealed value moved to
/// another key opens nowhere (absent, no error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_in_redis_are_sealed_and_bound_to_their_key() {
    let server = RedisServer::start();
    let stores = stores(settings(&server, "cg:"), MAX_API_KEYS).unwrap();
    let now = crate::state::unix_now();
    let service = UpstreamToken {
        token: DASHBOARD_TOKEN.into(),
        renew_at: Some(now + 600),
    };
    stores.upstream_tokens.store(service.clone()).await.unwrap();
    stores
        .user_sessions
        .open("j1", &session(now + 600), now)
        .await
        .unwrap();
    let mut redis = raw(&server).await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(keys.len(), 2, "{keys:?}");
    for key in &keys {
        let stored = raw_get(&server, key).await;
        for part in DASHBOARD_TOKEN.split('.') {
            assert!(
                !stored.contains(part),
                "{key} holds the token in clear: {stored}"
            );
        }
    }
    // Another gateway reads them.
    let other = super::stores(settings(&server, "cg:"), MAX_API_KEYS).unwrap();
    assert_eq!(
        other.upstream_tokens.current(now).await.unwrap(),
        Some(service)
    );
    let found = other.user_sessions.find("j1", now).await.unwrap();
    assert_eq!(found, Some(session(now + 600)));
    // j1's session copied under j2: not j2's.
    let sealed = raw_get(&server, "cg:session:j1").await;
    redis::cmd("SET")
        .arg("cg:session:j2")
        .arg(&sealed)
        .query_async::<()>(&mut redis)
        .await
        .unwrap();
    assert_eq!(other.user_sessions.find("j2", now).await.unwrap(), None);
    // Written in clear (as before sealing): absent, not an error.
    redis::cmd("SET")
        .arg("cg:upstream:token")
        .arg(format!("0 {DASHBOARD_TOKEN}"))
        .query_async::<()>(&mut redis)
        .await
        .unwrap();
    let fresh = super::stores(settings(&server, "cg:"), MAX_API_KEYS).unwrap();
    assert_eq!(fresh.upstream_tokens.current(now).await.unwrap(), None);
}

/// Item 10: a key put first seals from then on; values and revocations of the old key
/// are still read while it is listed, and absent once it is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_sealed_with_an_old_key_is_read_after_a_new_key_is_put_first() {
    let server = RedisServer::start();
    let with_keys = |keys: &[(&str, &str)]| RedisSettings {
        encryption_keys: keys.iter().map(|(k, s)| encryption_key(k, s)).collect(),
        ..settings(&server, "cg:")
    };
    let old = ("old", "the old key of the deployment, 32 bytes or more");
    let new = ("new", "the new key of the deployment, 32 bytes or more");
    let now = crate::state::unix_now();
    let before = gateway_with(with_keys(&[old])).await;
    let token = UpstreamToken {
        token: "service-token".into(),
        renew_at: Some(now + 600),
    };
    let user = session(now + 600);
    let old_stores = &before.stores;
    old_stores
        .upstream_tokens
        .store(token.clone())
        .await
        .unwrap();
    old_stores
        .user_sessions
        .open("j1", &user, now)
        .await
        .unwrap();
    let revocations = &old_stores.revocations;
    revocations.revoke("gone", now + 600, now).await.unwrap();

    let rotated = gateway_with(with_keys(&[new, old])).await;
    let upstream = &rotated.stores.upstream_tokens;
    assert_eq!(upstream.current(now).await.unwrap(), Some(token));
    let found = rotated.stores.user_sessions.find("j1", now).await;
    assert_eq!(found.unwrap(), Some(user.clone()));
    let revocations = &rotated.stores.revocations;
    assert!(revocations.is_revoked("gone", now).await.unwrap());
    // What the rotated gateway writes is sealed with the new key...
    let sessions = &rotated.stores.user_sessions;
    sessions.open("j2", &user, now).await.unwrap();
    assert!(raw_get(&server, "cg:session:j2").await.starts_with("new:"));
    // ...and once the old key is off the list, what it sealed is absent: log in again.
    let after = gateway_with(with_keys(&[new])).await;
    assert_eq!(
        after.stores.user_sessions.find("j1", now).await.unwrap(),
        None
    );
    assert_eq!(
        after.stores.user_sessions.find("j2", now).await.unwrap(),
        Some(user)
    );
    assert_eq!(
        after.stores.upstream_tokens.current(now).await.unwrap(),
        None
    );
}
