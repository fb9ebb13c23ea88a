//! The behaviour every state store must show; each backend runs these. Times are seconds
//! after `T`, a moment in the future: a shared store's keys expire by the real clock.

use super::{
    AccountUse, ApiKeys, BucketRate, CredentialResets, DashboardAttempts, FailedLogins, Lockouts,
    Revocations, StateError, Take, UnixTime, UpstreamToken, UpstreamTokens, UsedTokens,
    UserSession, UserSessions,
};
use crate::api_keys::{KeyRecord, StoredKey};
use crate::client_addr::ClientNet;

/// 2027-01-15: later than any test runs, so nothing a test stores expires under it.
const T: UnixTime = 1_800_000_000;

pub async fn revocations(store: &dyn Revocations) {
    store.ready().await.unwrap();
    assert!(!store.is_revoked("t1", T + 100).await.unwrap());
    store.revoke("t1", T + 200, T + 100).await.unwrap();
    assert!(store.is_revoked("t1", T + 100).await.unwrap());
    assert!(store.is_revoked("t1", T + 200).await.unwrap());
    // Past its expiry the token is refused anyway; the store may forget it.
    assert!(!store.is_revoked("t1", T + 201).await.unwrap());
    // Revoking twice is harmless.
    store.revoke("t1", T + 200, T + 150).await.unwrap();
    assert!(store.is_revoked("t1", T + 150).await.unwrap());
    assert!(!store.is_revoked("t2", T + 150).await.unwrap());
}

pub async fn lockouts(store: &dyn Lockouts) {
    store.ready().await.unwrap();
    assert_eq!(store.locked_until("u", T).await.unwrap(), None);
    assert_eq!(store.record_failure("u", T).await.unwrap(), 1);
    assert_eq!(store.record_failure("u", T + 1).await.unwrap(), 2);
    assert_eq!(store.record_failure("other", T + 1).await.unwrap(), 1);
    store.lock("u", T + 100).await.unwrap();
    assert_eq!(
        store.locked_until("u", T + 50).await.unwrap(),
        Some(T + 100)
    );
    assert_eq!(store.locked_until("u", T + 100).await.unwrap(), None);
    // While locked, the count goes on; once the lock is over it starts again.
    assert_eq!(store.record_failure("u", T + 50).await.unwrap(), 3);
    assert_eq!(store.record_failure("u", T + 101).await.unwrap(), 1);
    store.clear("u").await.unwrap();
    assert_eq!(store.record_failure("u", T + 102).await.unwrap(), 1);
    assert_eq!(store.locked_until("u", T + 102).await.unwrap(), None);
}

pub async fn dashboard_attempts(store: &dyn DashboardAttempts) {
    store.ready().await.unwrap();
    let now = T * 1000;
    let hold = |at: u64| at + 30_000;
    assert_eq!(store.verifier("u").await.unwrap(), None);
    // Attempts in flight count against the ceiling before they fail.
    let a = store
        .reserve("u", 2, now, hold(now))
        .await
        .unwrap()
        .unwrap();
    let b = store
        .reserve("u", 2, now, hold(now))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(store.reserve("u", 2, now, hold(now)).await.unwrap(), None);
    // Another username has its own count.
    assert!(store
        .reserve("v", 2, now, hold(now))
        .await
        .unwrap()
        .is_some());
    assert_eq!(store.failed("u", &a).await.unwrap(), 1);
    assert_eq!(store.failed("u", &b).await.unwrap(), 2);
    // Settling twice counts once.
    assert_eq!(store.failed("u", &b).await.unwrap(), 2);
    assert_eq!(store.reserve("u", 2, now, hold(now)).await.unwrap(), None);
    // A cancelled hold (no password was checked) counts for nothing.
    let cancelled = store
        .reserve("u", 3, now, hold(now))
        .await
        .unwrap()
        .unwrap();
    store.cancel("u", &cancelled).await.unwrap();
    assert_eq!(store.failed("u", &cancelled).await.unwrap(), 2);
    // Time alone forgets nothing: only a higher ceiling lets an attempt through.
    let later = now + 7 * 24 * 3600 * 1000;
    assert_eq!(
        store.reserve("u", 2, later, hold(later)).await.unwrap(),
        None
    );
    let c = store
        .reserve("u", 3, later, hold(later))
        .await
        .unwrap()
        .unwrap();
    // A success forgets the failures and keeps the verifier.
    store
        .succeeded("u", &c, Some("$argon2id$verifier"))
        .await
        .unwrap();
    assert_eq!(
        store.verifier("u").await.unwrap().as_deref(),
        Some("$argon2id$verifier")
    );
    // A success without a new verifier keeps the last one.
    let d = store
        .reserve("u", 1, later, hold(later))
        .await
        .unwrap()
        .unwrap();
    store.succeeded("u", &d, None).await.unwrap();
    assert_eq!(
        store.verifier("u").await.unwrap().as_deref(),
        Some("$argon2id$verifier")
    );
    // A hold nobody settles (its gateway died) becomes a failure when it expires.
    let lost = store
        .reserve("u", 1, later, later + 1000)
        .await
        .unwrap()
        .unwrap();
    let in_flight = store
        .reserve("u", 2, later + 999, hold(later))
        .await
        .unwrap();
    assert!(
        in_flight.is_some(),
        "the lost hold is in flight until it expires"
    );
    // Expired: one failure, plus the hold still in flight.
    let after = later + 1000;
    assert_eq!(
        store.reserve("u", 2, after, hold(after)).await.unwrap(),
        None
    );
    // Settling the expired hold late adds nothing to the failure it became.
    assert_eq!(store.failed("u", &lost).await.unwrap(), 1);
    // An administrator's reset forgets the count and the verifier.
    store.forget("u").await.unwrap();
    assert_eq!(store.verifier("u").await.unwrap(), None);
    assert!(store
        .reserve("u", 1, after, hold(after))
        .await
        .unwrap()
        .is_some());
    store.forget("never-seen").await.unwrap();
}

pub async fn failed_logins(store: &dyn FailedLogins) {
    store.ready().await.unwrap();
    let rate = BucketRate {
        burst: 3,
        refill_ms: 1000,
    };
    let now = T * 1000;
    let a = ClientNet::of("192.0.2.1".parse().unwrap());
    let b = ClientNet::of("2001:db8::1".parse().unwrap());
    let take =
        |client: ClientNet, at: u64| async move { store.take(&client, rate, at).await.unwrap() };
    for _ in 0..3 {
        assert_eq!(take(a, now).await, Take::Taken);
    }
    assert_eq!(take(a, now).await, Take::Empty { retry_in_ms: 1000 });
    // Another client has its own bucket.
    assert_eq!(take(b, now).await, Take::Taken);
    // It refills continuously.
    assert_eq!(take(a, now + 400).await, Take::Empty { retry_in_ms: 600 });
    assert_eq!(take(a, now + 1000).await, Take::Taken);
    assert_eq!(take(a, now + 1000).await, Take::Empty { retry_in_ms: 1000 });
    // A token given back can be taken again; a full bucket gets no more than its burst.
    store.give_back(&a, rate, now + 1000).await.unwrap();
    assert_eq!(take(a, now + 1000).await, Take::Taken);
    store.give_back(&b, rate, now).await.unwrap();
    store.give_back(&b, rate, now).await.unwrap();
    for _ in 0..3 {
        assert_eq!(take(b, now).await, Take::Taken);
    }
    assert_eq!(take(b, now).await, Take::Empty { retry_in_ms: 1000 });
    // Left alone for burst x refill, an empty bucket is full: the burst again, no more.
    for _ in 0..3 {
        assert_eq!(take(a, now + 4000).await, Take::Taken);
    }
    assert_eq!(take(a, now + 4000).await, Take::Empty { retry_in_ms: 1000 });
}

pub async fn upstream_tokens(store: &dyn UpstreamTokens) {
    store.ready().await.unwrap();
    assert_eq!(store.current(T).await.unwrap(), None);
    let first = UpstreamToken {
        token: "a".into(),
        renew_at: Some(T + 10),
    };
    store.store(first.clone()).await.unwrap();
    assert_eq!(store.current(T).await.unwrap(), Some(first.clone()));
    // Due for renewal: not handed out any more.
    assert_eq!(store.current(T + 10).await.unwrap(), None);
    // Discarding a token that was already replaced keeps the newer one.
    let second = UpstreamToken {
        token: "b".into(),
        renew_at: None,
    };
    store.store(second.clone()).await.unwrap();
    store.discard("a").await.unwrap();
    assert_eq!(store.current(T).await.unwrap(), Some(second));
    store.discard("b").await.unwrap();
    assert_eq!(store.current(T).await.unwrap(), None);
    // The login claim can be taken and given back.
    assert!(store
        .claim_login(std::time::Duration::from_secs(5))
        .await
        .unwrap());
    store.release_login().await.unwrap();
    // A refused login makes every gateway wait until the time set, and no longer.
    let now = T * 1000;
    assert_eq!(store.login_backoff(now).await.unwrap(), None);
    store.set_login_backoff(Some(now + 5000)).await.unwrap();
    assert_eq!(store.login_backoff(now).await.unwrap(), Some(now + 5000));
    assert_eq!(store.login_backoff(now + 5000).await.unwrap(), None);
    store.set_login_backoff(None).await.unwrap();
    assert_eq!(store.login_backoff(now).await.unwrap(), None);
}

pub async fn user_sessions(store: &dyn UserSessions) {
    store.ready().await.unwrap();
    assert_eq!(store.find("j1", T).await.unwrap(), None);
    let session = UserSession {
        username: "jürgen".into(),
        dashboard_token: "header.payload.signature".into(),
        permissions: Some(r#"{"pool":["read"]}"#.into()),
        until: T + 100,
    };
    store.open("j1", &session, T).await.unwrap();
    assert_eq!(
        store.find("j1", T + 100).await.unwrap(),
        Some(session.clone())
    );
    // Ended: not handed out any more.
    assert_eq!(store.find("j1", T + 101).await.unwrap(), None);
    // A local user's session has no permissions of its own.
    let local = UserSession {
        permissions: None,
        ..session
    };
    store.open("j2", &local, T).await.unwrap();
    assert_eq!(store.find("j2", T).await.unwrap(), Some(local));
    store.close("j2").await.unwrap();
    assert_eq!(store.find("j2", T).await.unwrap(), None);
    // Closing what is not there is harmless.
    store.close("j2").await.unwrap();
}

pub async fn credential_resets(store: &dyn CredentialResets) {
    store.ready().await.unwrap();
    assert_eq!(store.reset_at("jürgen", T).await.unwrap(), None);
    store
        .reset("jürgen", T + 10, T + 100, T + 10)
        .await
        .unwrap();
    assert_eq!(
        store.reset_at("jürgen", T + 50).await.unwrap(),
        Some(T + 10)
    );
    assert_eq!(
        store.reset_at("jürgen", T + 100).await.unwrap(),
        Some(T + 10)
    );
    // An earlier reset (another gateway reloading the same change) keeps the later one.
    store.reset("jürgen", T + 5, T + 95, T + 10).await.unwrap();
    assert_eq!(
        store.reset_at("jürgen", T + 50).await.unwrap(),
        Some(T + 10)
    );
    store
        .reset("jürgen", T + 20, T + 110, T + 20)
        .await
        .unwrap();
    assert_eq!(
        store.reset_at("jürgen", T + 50).await.unwrap(),
        Some(T + 20)
    );
    assert_eq!(store.reset_at("jürgen:x", T + 50).await.unwrap(), None);
    assert_eq!(store.reset_at("other", T + 50).await.unwrap(), None);
}

/// A token id is good once until its token expires, then may be seen as new.
pub async fn used_tokens(store: &dyn UsedTokens) {
    store.ready().await.unwrap();
    assert!(store.first_use("jti-1", T + 100, T).await.unwrap());
    assert!(!store.first_use("jti-1", T + 100, T + 50).await.unwrap());
    assert!(!store.first_use("jti-1", T + 100, T + 100).await.unwrap());
    assert!(store.first_use("jti-2", T + 100, T + 50).await.unwrap());
}

pub async fn account_use(store: &dyn AccountUse) {
    assert!(store.last_uses().await.unwrap().is_empty());
    store.record("cg-a", T).await.unwrap();
    store.record("cg-b", T + 5).await.unwrap();
    store.record("cg-a", T + 10).await.unwrap();
    // Another gateway's earlier record does not move the last use back.
    store.record("cg-a", T + 3).await.unwrap();
    let uses = store.last_uses().await.unwrap();
    assert_eq!(uses.len(), 2);
    assert_eq!((uses["cg-a"], uses["cg-b"]), (T + 10, T + 5));
    store
        .forget(&["cg-a".into(), "cg-gone".into()])
        .await
        .unwrap();
    let uses = store.last_uses().await.unwrap();
    assert_eq!(
        uses.into_iter().collect::<Vec<_>>(),
        [("cg-b".into(), T + 5)]
    );
    store.forget(&[]).await.unwrap();
}

/// A key of `owner`, created at `created_at` and refused from `expires_at` on.
pub fn key_record(id: &str, owner: &str, created_at: UnixTime, expires_at: UnixTime) -> KeyRecord {
    KeyRecord {
        id: id.into(),
        name: format!("name-of-{id}"),
        owner: owner.into(),
        created_by: "admin".into(),
        roles: vec!["read-only".into()],
        created_at,
        expires_at,
        networks: vec!["10.0.0.0/8".parse().unwrap()],
        digest: format!("digest-of-{id}"),
    }
}

fn ids(keys: &[StoredKey]) -> Vec<&str> {
    keys.iter().map(|k| k.record.id.as_str()).collect()
}

/// `store` is empty and keeps at most `max_keys` (at least 3).
pub async fn api_keys(store: &dyn ApiKeys, max_keys: usize) {
    store.ready().await.unwrap();
    let now = T + 10;
    // Unknown ids: nothing found, nothing removed, a use of one ignored.
    assert_eq!(store.get("0000000000000000", now).await.unwrap(), None);
    assert!(!store.remove("0000000000000000").await.unwrap());
    store.touch("0000000000000000", now).await.unwrap();
    assert!(store.list(None, now).await.unwrap().is_empty());

    let a = key_record("aaaaaaaaaaaaaaaa", "alice", T + 2, T + 100);
    let b = key_record("bbbbbbbbbbbbbbbb", "bob", T + 1, T + 100);
    let c = key_record("0ccccccccccccccc", "alice", T + 2, T + 50);
    for key in [&a, &b, &c] {
        store.insert(key, now).await.unwrap();
    }
    assert_eq!(store.get(&a.id, now).await.unwrap(), Some(a.clone()));
    // Oldest first; the same second by id.
    let all = store.list(None, now).await.unwrap();
    assert_eq!(ids(&all), [&b.id, &c.id, &a.id]);
    assert_eq!(
        all[0],
        StoredKey {
            record: b.clone(),
            last_used: None
        }
    );
    let alices = store.list(Some("alice"), now).await.unwrap();
    assert_eq!(ids(&alices), [&c.id, &a.id]);
    assert!(store.list(Some("carol"), now).await.unwrap().is_empty());

    // A later use wins, whichever gateway records it last.
    store.touch(&a.id, T + 20).await.unwrap();
    store.touch(&a.id, T + 15).await.unwrap();
    let alices = store.list(Some("alice"), now).await.unwrap();
    assert_eq!(alices[1].last_used, Some(T + 20));
    assert_eq!(alices[0].last_used, None);

    // A key is refused from its expires_at on.
    assert_eq!(store.get(&c.id, T + 49).await.unwrap(), Some(c.clone()));
    assert_eq!(store.get(&c.id, T + 50).await.unwrap(), None);
    assert_eq!(
        ids(&store.list(None, T + 50).await.unwrap()),
        [&b.id, &a.id]
    );

    assert!(store.remove(&b.id).await.unwrap());
    assert!(!store.remove(&b.id).await.unwrap());
    assert_eq!(store.get(&b.id, now).await.unwrap(), None);

    // Full at the maximum of live keys; a key expired at `now` makes room.
    for n in 2..max_keys {
        let filler = key_record(&format!("{n:016x}"), "filler", T + 3, T + 100);
        store.insert(&filler, now).await.unwrap();
    }
    let one_more = key_record("eeeeeeeeeeeeeeee", "alice", T + 4, T + 100);
    assert!(matches!(
        store.insert(&one_more, now).await,
        Err(StateError::Full(n)) if n == max_keys
    ));
    store.insert(&one_more, T + 50).await.unwrap();
    assert_eq!(store.list(None, T + 50).await.unwrap().len(), max_keys);
    assert!(matches!(
        store.insert(&b, T + 50).await,
        Err(StateError::Full(_))
    ));
}
