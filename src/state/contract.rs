//! The behaviour every state store must show; each backend runs these.

use super::{Lockouts, Revocations, UpstreamToken, UpstreamTokens};

pub async fn revocations(store: &dyn Revocations) {
    store.ready().await.unwrap();
    assert!(!store.is_revoked("t1", 100).await.unwrap());
    store.revoke("t1", 200, 100).await.unwrap();
    assert!(store.is_revoked("t1", 100).await.unwrap());
    assert!(store.is_revoked("t1", 200).await.unwrap());
    // Past its expiry the token is refused anyway; the store may forget it.
    assert!(!store.is_revoked("t1", 201).await.unwrap());
    // Revoking twice is harmless.
    store.revoke("t1", 200, 150).await.unwrap();
    assert!(store.is_revoked("t1", 150).await.unwrap());
    assert!(!store.is_revoked("t2", 150).await.unwrap());
}

pub async fn lockouts(store: &dyn Lockouts) {
    store.ready().await.unwrap();
    assert_eq!(store.locked_until("u", 0).await.unwrap(), None);
    assert_eq!(store.record_failure("u", 0).await.unwrap(), 1);
    assert_eq!(store.record_failure("u", 1).await.unwrap(), 2);
    assert_eq!(store.record_failure("other", 1).await.unwrap(), 1);
    store.lock("u", 100).await.unwrap();
    assert_eq!(store.locked_until("u", 50).await.unwrap(), Some(100));
    assert_eq!(store.locked_until("u", 100).await.unwrap(), None);
    // While locked, the count goes on; once the lock is over it starts again.
    assert_eq!(store.record_failure("u", 50).await.unwrap(), 3);
    assert_eq!(store.record_failure("u", 101).await.unwrap(), 1);
    store.clear("u").await.unwrap();
    assert_eq!(store.record_failure("u", 102).await.unwrap(), 1);
    assert_eq!(store.locked_until("u", 102).await.unwrap(), None);
}

pub async fn upstream_tokens(store: &dyn UpstreamTokens) {
    store.ready().await.unwrap();
    assert_eq!(store.current().await.unwrap(), None);
    let first = UpstreamToken {
        token: "a".into(),
        renew_at: Some(10),
    };
    store.store(first.clone()).await.unwrap();
    assert_eq!(store.current().await.unwrap(), Some(first.clone()));
    // Discarding a token that was already replaced keeps the newer one.
    let second = UpstreamToken {
        token: "b".into(),
        renew_at: None,
    };
    store.store(second.clone()).await.unwrap();
    store.discard("a").await.unwrap();
    assert_eq!(store.current().await.unwrap(), Some(second));
    store.discard("b").await.unwrap();
    assert_eq!(store.current().await.unwrap(), None);
}
