//! What a credential decides: an unknown user's login costs what a real one's does, so
//! timing does not tell which names exist.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;

/// The cost `ceph dashboard ac-user-create` (and so `users import`) gives bcrypt hashes.
const DASHBOARD_BCRYPT_COST: u32 = 12;
/// Logins of each kind, interleaved.
const TIMED_LOGINS: usize = 15;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

async fn timed_login(gw: &RunningGateway, user: &str) -> Duration {
    let started = Instant::now();
    let reply = gw.try_login(user, "not-the-password").await;
    let took = started.elapsed();
    assert_eq!(reply.status, 400, "{user}: {}", reply.text());
    took
}

#[tokio::test]
async fn an_unknown_users_refusal_takes_as_long_as_an_imported_bcrypt_users() {
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
    let (mut known, mut unknown) = (Vec::new(), Vec::new());
    for _ in 0..TIMED_LOGINS {
        known.push(timed_login(&gw, "imported").await);
        unknown.push(timed_login(&gw, "nobody-by-this-name").await);
    }
    let (known, unknown) = (median(known), median(unknown));
    let ratio = unknown.as_secs_f64() / known.as_secs_f64();
    eprintln!("median refusal: imported bcrypt user {known:?}, unknown user {unknown:?}");
    assert!(
        (0.9..=1.1).contains(&ratio),
        "median refusal: imported bcrypt user {known:?}, unknown user {unknown:?} (ratio {ratio:.2})"
    );
}
