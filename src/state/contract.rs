//! The behaviour every state store must show; each backend runs these.

use super::{Lockouts, Revocations};

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
    // A lock starts the count again.
    assert_eq!(store.record_failure("u", 101).await.unwrap(), 1);
    store.clear("u").await.unwrap();
    assert_eq!(store.record_failure("u", 102).await.unwrap(), 1);
    assert_eq!(store.locked_until("u", 102).await.unwrap(), None);
}
