//! What a credential decides: an unknown user's login checks a password as a real one's does, so
//! timing does not tell which names exist; a token dies with the credential it was issued
//! for (another password hash or roles, the user disabled, removed, or removed and added
//! back), on every gateway sharing the state; and a gateway's memory, which holds them,
//! never lands in a core file.

use std::time::{Duration, Instant};

use crate::common::*;

/// The cost `ceph dashboard ac-user-create` (and so `users import`) gives bcrypt hashes.
const DASHBOARD_BCRYPT_COST: u32 = 12;

/// Every refused login costs one password check, an unknown user's too: it is checked
/// against a stand-in as costly as the costliest user's hash (unit-tested in `users`), so
/// timing does not tell which names exist. How long each takes is measured by
/// `bench/refusal_timing.py`, not asserted here.
#[tokio::test]
async fn an_unknown_users_refusal_checks_a_password_as_an_imported_bcrypt_users_does() {
    // A users file as `users import` writes it: the dashboard's own bcrypt hash.
    let hash = bcrypt::hash("Imp0rted-Pass", DASHBOARD_BCRYPT_COST).unwrap();
    let users = format!(
        "[[users]]\nusername = \"imported\"\npassword_hash = {hash:?}\nroles = [\"read-only\"]\n"
    );
    // No lockout and no per-client limit: every attempt is checked against a hash.
    let gw = Gateway::new()
        .raw_users_file(&users)
        .lockout(0, 300)
        .failed_logins_per_minute(0)
        .start();
    let checks = |text: &str| metric_sum(text, "clustergate_password_verifications_total", &[]);
    for user in [
        "imported",
        "nobody-by-this-name",
        "imported",
        "nobody-by-this-name",
    ] {
        let before = checks(&gw.metrics().await);
        let reply = gw.try_login(user, "not-the-password").await;
        assert_eq!(reply.status, 400, "{user}: {}", reply.text());
        let after = checks(&gw.metrics().await);
        assert_eq!(after - before, 1.0, "{user}: password checks");
    }
}

/// A user of the users file with a fixed hash: written twice, it is the same credential.
#[derive(Clone)]
struct Entry {
    name: &'static str,
    hash: String,
    role: &'static str,
    enabled: bool,
}

const PASSWORD: &str = "Cr3dential-Pass";

fn entry(name: &'static str) -> Entry {
    Entry {
        name,
        hash: argon2_hash(PASSWORD),
        role: "read-only",
        enabled: true,
    }
}

fn users_file(entries: &[Entry]) -> String {
    entries
        .iter()
        .map(|e| {
            format!(
                "[[users]]\nusername = {:?}\npassword_hash = {:?}\nroles = [{:?}]\nenabled = {}\n\n",
                e.name, e.hash, e.role, e.enabled
            )
        })
        .collect()
}

/// The users before, and after a reload that changes each but `same` the way its name says.
fn users_before_and_after() -> (Vec<Entry>, Vec<Entry>) {
    let before: Vec<Entry> = [
        "same", "rehashed", "reroled", "disabled", "removed", "readded",
    ]
    .into_iter()
    .map(entry)
    .collect();
    let after = before
        .iter()
        .filter(|e| !matches!(e.name, "removed" | "readded"))
        .cloned()
        .map(|mut e| {
            match e.name {
                "rehashed" => e.hash = argon2_hash(PASSWORD),
                "reroled" => e.role = "pool-manager",
                "disabled" => e.enabled = false,
                _ => {}
            }
            e
        })
        .collect();
    (before, after)
}

/// `before` with `disabled` enabled again and `readded` back, both exactly as they were.
fn users_back(before: &[Entry], after: &[Entry]) -> Vec<Entry> {
    let mut back: Vec<Entry> = after
        .iter()
        .filter(|e| e.name != "disabled")
        .cloned()
        .collect();
    back.extend(
        before
            .iter()
            .filter(|e| matches!(e.name, "disabled" | "readded"))
            .cloned(),
    );
    back
}

async fn reload_users(gw: &mut RunningGateway, entries: &[Entry]) {
    let text = users_file(entries);
    assert!(
        gw.reload(|spec| *spec = std::mem::take(spec).raw_users_file(&text))
            .await,
        "reload: {}",
        gw.logs()
    );
}

async fn accepts(gw: &RunningGateway, token: &str) -> bool {
    let reply = gw.check(token).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.json().get("username").is_some()
}

/// Each user's token, from a login on `gw`.
async fn tokens(gw: &RunningGateway, entries: &[Entry]) -> Vec<(&'static str, String)> {
    let mut tokens = Vec::new();
    for e in entries {
        tokens.push((e.name, gw.login(e.name, PASSWORD).await));
    }
    tokens
}

/// Which of `tokens` `gw` accepts, by user.
async fn accepted(gw: &RunningGateway, tokens: &[(&'static str, String)]) -> Vec<&'static str> {
    let mut accepted = Vec::new();
    for (name, token) in tokens {
        if accepts(gw, token).await {
            accepted.push(*name);
        }
    }
    accepted
}

#[tokio::test]
async fn tokens_die_with_the_credential_they_were_issued_for_at_a_reload() {
    let (before, after) = users_before_and_after();
    let mut gw = Gateway::new().raw_users_file(&users_file(&before)).start();
    let issued = tokens(&gw, &before).await;
    assert_eq!(accepted(&gw, &issued).await.len(), before.len());

    reload_users(&mut gw, &after).await;
    assert_eq!(accepted(&gw, &issued).await, ["same"]);
    // The users with a new credential log in again, and their new tokens are good.
    for name in ["rehashed", "reroled"] {
        let token = gw.login(name, PASSWORD).await;
        assert!(accepts(&gw, &token).await, "{name}'s new token");
    }

    // Enabled again and added back exactly as before: the old tokens stay dead.
    reload_users(&mut gw, &users_back(&before, &after)).await;
    assert_eq!(accepted(&gw, &issued).await, ["same"]);
    for name in ["disabled", "readded"] {
        let token = gw.login(name, PASSWORD).await;
        assert!(accepts(&gw, &token).await, "{name}'s new token");
    }
}

#[tokio::test]
async fn tokens_die_with_their_credential_on_every_gateway_sharing_redis() {
    let redis = RedisServer::start();
    let (before, after) = users_before_and_after();
    let spec = Gateway::new()
        .known_secret()
        .redis_state(&redis)
        .raw_users_file(&users_file(&before));
    let mut a = spec.clone().start();
    let mut b = spec.start();
    let issued = tokens(&a, &before).await;
    assert_eq!(accepted(&b, &issued).await.len(), before.len());

    // Both reload the change, except that `readded` is removed on A only: B never sees it
    // gone.
    reload_users(&mut a, &after).await;
    let mut after_on_b = after.clone();
    after_on_b.extend(before.iter().filter(|e| e.name == "readded").cloned());
    reload_users(&mut b, &after_on_b).await;
    assert_eq!(accepted(&a, &issued).await, ["same"]);
    // B refuses `readded`'s token too: A's reload reset it for every gateway.
    assert_eq!(accepted(&b, &issued).await, ["same"]);

    // Back on both exactly as before: the old tokens stay dead on both.
    let back = users_back(&before, &after);
    reload_users(&mut a, &back).await;
    reload_users(&mut b, &back).await;
    assert_eq!(accepted(&a, &issued).await, ["same"]);
    assert_eq!(accepted(&b, &issued).await, ["same"]);
    let token = a.login("readded", PASSWORD).await;
    assert!(accepts(&b, &token).await, "readded's new token on B");
}

#[tokio::test]
async fn a_gateway_that_crashes_leaves_no_core_dump() {
    use std::os::unix::process::ExitStatusExt;
    // Cores allowed up to the hard limit, as `ulimit -c unlimited` would: the gateway
    // inherits it, so only its own non-dumpable flag can keep the core away.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct passed, nothing else.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_CORE, &mut limit), 0);
    }
    let before = limit;
    limit.rlim_cur = limit.rlim_max;
    // SAFETY: as above.
    unsafe {
        assert_eq!(libc::setrlimit(libc::RLIMIT_CORE, &limit), 0);
    }
    assert!(
        limit.rlim_cur > 0,
        "core dumps are off for this test process"
    );
    let mut gw = Gateway::new().user(User::admin()).start();
    // The gateway keeps the limit it started with; the other tests of this process get
    // theirs back.
    // SAFETY: as above.
    unsafe {
        assert_eq!(libc::setrlimit(libc::RLIMIT_CORE, &before), 0);
    }
    gw.signal("ABRT");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = gw.child_mut().try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the gateway outlived SIGABRT");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}");
    assert!(!status.core_dumped(), "the gateway dumped core: {status:?}");
}
