//! The contract every credential source (src/auth/source/) keeps, run through the real
//! gateway against each one (`credential_sources.rs`): the users file, the dashboard's own
//! accounts (on the shared dashboard) and single sign-on (the real oidc-provider). What a
//! source must show, whoever checks the credential:
//! - two refusals for different reasons (a wrong password and an unknown user; a forged
//!   and an expired provider token) answer the same, and are audited the same;
//! - a refusal hands out no token;
//! - an accepted credential yields the permissions of the roles configured for it;
//! - the source's logout makes the credential fail.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{assert_no_token_cookie, Reply, RunningGateway};

/// Where the gateways of the contract write their audit lines (`log.audit_file`).
pub const CONTRACT_AUDIT_FILE: &str = "audit.log";

/// How long an audit line may take to reach the file.
const AUDIT_DEADLINE: Duration = Duration::from_secs(5);

/// A credential source as the contract drives it.
// Only the tests' own single-threaded awaits call it: no caller needs its futures `Send`.
#[allow(async_fn_in_trait)]
pub trait SourceUnderTest {
    /// A credential the source accepts, as a client then presents it (a bearer token).
    async fn accepted(&self, gw: &RunningGateway) -> String;
    /// Two attempts the source refuses for different reasons.
    async fn refused(&self, gw: &RunningGateway) -> [Reply; 2];
    /// Whether a refusal is an audit event (a refused login is; a refused bearer token on
    /// a read is not).
    fn refusals_audited(&self) -> bool;
    /// Ends `credential` the way this source's users log out.
    async fn log_out(&self, gw: &RunningGateway, credential: &str);
}

/// Runs the whole contract; `permissions`: what the roles configured for the accepted
/// credential grant (`/api/auth/check`'s `permissions`).
pub async fn credential_source_contract(
    source: &impl SourceUnderTest,
    gw: &RunningGateway,
    permissions: &Value,
) {
    refusals_answer_and_audit_alike_and_hand_out_no_token(source, gw).await;
    let credential = source.accepted(gw).await;
    the_accepted_credential_carries_the_configured_roles(gw, &credential, permissions).await;
    source.log_out(gw, &credential).await;
    the_credential_fails_after_its_logout(gw, &credential).await;
}

async fn refusals_answer_and_audit_alike_and_hand_out_no_token(
    source: &impl SourceUnderTest,
    gw: &RunningGateway,
) {
    let [first, second] = source.refused(gw).await;
    assert!(
        first.status >= 400,
        "accepted: {} {}",
        first.status,
        first.text()
    );
    assert_eq!(
        first.status,
        second.status,
        "{} / {}",
        first.text(),
        second.text()
    );
    assert_eq!(answer(&first), answer(&second));
    for reply in [&first, &second] {
        assert_no_token_cookie(reply, "a refused credential");
        let body = reply.json();
        assert!(body.get("token").is_none(), "a token in a refusal: {body}");
    }
    let audit = gw.dir().join(CONTRACT_AUDIT_FILE);
    let first_lines = audited(&audit, &first);
    assert_eq!(
        first_lines.is_empty(),
        !source.refusals_audited(),
        "{first_lines:?}"
    );
    assert_eq!(
        first_lines,
        audited(&audit, &second),
        "the two refusals are audited apart"
    );
}

async fn the_accepted_credential_carries_the_configured_roles(
    gw: &RunningGateway,
    credential: &str,
    permissions: &Value,
) {
    let check = gw.check(credential).await;
    assert_eq!(check.status, 200, "{}", check.text());
    assert_eq!(
        permission_sets(&check.json()["permissions"]),
        permission_sets(permissions),
        "{}",
        check.text()
    );
    let call = gw.api_get("/api/health/minimal", Some(credential)).await;
    assert_eq!(call.status, 200, "{}", call.text());
}

async fn the_credential_fails_after_its_logout(gw: &RunningGateway, credential: &str) {
    let check = gw.check(credential).await;
    assert!(check.json().get("login_url").is_some(), "{}", check.text());
    let call = gw.api_get("/api/health/minimal", Some(credential)).await;
    assert_eq!(call.status, 401, "{}", call.text());
}

/// A permissions object as sets, so that the order of lists does not matter.
fn permission_sets(permissions: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let scopes = permissions.as_object().expect("a permissions object");
    let names = |list: &Value| -> BTreeSet<String> {
        let list = list.as_array().expect("a list of permissions");
        list.iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect()
    };
    scopes
        .iter()
        .map(|(scope, list)| (scope.clone(), names(list)))
        .collect()
}

/// The answer's body without what differs per request.
fn answer(reply: &Reply) -> Value {
    let mut body = reply.json();
    if let Some(fields) = body.as_object_mut() {
        fields.remove("request_id");
    }
    body
}

/// The audit lines of `reply`'s request without what differs per request or user (none
/// when it is not audited, once the deadline has passed).
fn audited(path: &Path, reply: &Reply) -> Vec<Value> {
    let Some(id) = reply.header("x-request-id") else {
        return Vec::new();
    };
    let deadline = Instant::now() + AUDIT_DEADLINE;
    loop {
        let lines = audit_lines(path, &id);
        if !lines.is_empty() || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn audit_lines(path: &Path, request_id: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["request_id"] == request_id)
        .map(|mut line| {
            if let Some(fields) = line.as_object_mut() {
                for varying in ["request_id", "timestamp", "time", "user", "duration_ms"] {
                    fields.remove(varying);
                }
            }
            line
        })
        .collect()
}
