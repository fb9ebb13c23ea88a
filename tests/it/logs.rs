//! The access and audit logs of the real gateway in front of the real (shared) dashboard:
//! with `log.format = "json"` every line on standard error is JSON and each request has
//! one access line with every field; `log.audit_file` gets one line per login, failed
//! login, forwarded change and logout; no token or password is in either; and after
//! logrotate's move and a SIGHUP, audit lines go to a new file at the configured path, even
//! when the reload the SIGHUP starts is refused. Behind a trusted proxy both logs name the
//! client its `X-Forwarded-For` names, and a login refused by the client limit is audited. A
//! reload changes `log.level`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};

/// How long a line may take to reach its file (the log worker writes it after the answer).
const LINE_DEADLINE: Duration = Duration::from_secs(10);

const WRONG_PW: &str = "Wrong-Pass-Secret-7";
/// What the harmless change sends the dashboard to check (it answers 200, changes nothing).
const CHECKED_PW: &str = "Checked-Pass-Secret-9";

fn json_logs(dash: &Dashboard) -> Gateway {
    Gateway::with_dashboard_users()
        .upstream(dash)
        .extra_toml("log", "format = \"json\"")
        .extra_toml("log", "audit_file = \"audit/audit.log\"")
        .file("audit/README", "the audit log's folder\n")
}

fn audit_path(gw: &RunningGateway) -> PathBuf {
    gw.dir().join("audit/audit.log")
}

/// The lines of `text`, each of which must be JSON; a last line still being written (no
/// newline yet) is left for the next read.
fn json_lines(text: &str) -> Vec<Value> {
    text.split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The JSON lines of `path` (none while it does not exist).
fn json_lines_of(path: &Path) -> Vec<Value> {
    json_lines(&std::fs::read_to_string(path).unwrap_or_default())
}

/// Standard error, every line of which must be JSON.
fn stderr_lines(gw: &RunningGateway) -> Vec<Value> {
    json_lines(&gw.stderr())
}

/// Waits until `ready` holds for what `read` returns; panics with it after the deadline.
fn wait_for<T: std::fmt::Debug>(what: &str, read: impl Fn() -> T, ready: impl Fn(&T) -> bool) -> T {
    let deadline = Instant::now() + LINE_DEADLINE;
    loop {
        let got = read();
        if ready(&got) {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{what} after {LINE_DEADLINE:?}: {got:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn request_id(r: &Reply) -> String {
    r.header("x-request-id").expect("X-Request-Id")
}

/// The access line of the request with this id.
fn access_line<'a>(lines: &'a [Value], id: &str) -> &'a Value {
    let matching: Vec<&Value> = lines
        .iter()
        .filter(|l| l["target"] == "clustergate::access" && l["request_id"] == id)
        .collect();
    assert_eq!(matching.len(), 1, "access lines of {id}: {lines:#?}");
    matching[0]
}

/// What a request's access line must say, besides the fields every line has.
struct Expected<'a> {
    reply: &'a Reply,
    method: &'a str,
    operation: &'a str,
    path: &'a str,
    user: Option<&'a str>,
    backend: Option<&'a str>,
}

fn access<'a>(
    reply: &'a Reply,
    method: &'a str,
    operation: &'a str,
    path: &'a str,
    user: Option<&'a str>,
    backend: Option<&'a str>,
) -> Expected<'a> {
    Expected {
        reply,
        method,
        operation,
        path,
        user,
        backend,
    }
}

fn check_access_line(lines: &[Value], e: &Expected<'_>) {
    let line = access_line(lines, &request_id(e.reply));
    let what = format!("{} {}: {line}", e.method, e.path);
    for key in ["timestamp", "level", "duration_us"] {
        assert!(line.get(key).is_some(), "no {key} in {what}");
    }
    assert!(line["duration_us"].is_u64(), "{what}");
    assert_eq!(line["client"], "127.0.0.1", "{what}");
    assert_eq!(line["method"], e.method, "{what}");
    assert_eq!(line["operation"], e.operation, "{what}");
    assert_eq!(line["path"], e.path, "{what}");
    assert_eq!(line["status"], e.reply.status, "{what}");
    assert_eq!(line["bytes"], e.reply.body.len(), "{what}");
    assert_eq!(line.get("user").and_then(Value::as_str), e.user, "{what}");
    assert_eq!(
        line.get("backend").and_then(Value::as_str),
        e.backend,
        "{what}"
    );
}

/// The audit line for the request with this id and event.
fn audit_line<'a>(lines: &'a [Value], reply: &Reply, event: &str) -> &'a Value {
    let id = request_id(reply);
    lines
        .iter()
        .find(|l| l["request_id"] == id.as_str() && l["event"] == event)
        .unwrap_or_else(|| panic!("no {event} line for {id}: {lines:#?}"))
}

#[tokio::test]
async fn json_access_lines_and_an_audit_file_that_logrotate_can_move() {
    let dash = Dashboard::shared();
    let mut gw = json_logs(dash).start();
    let backend = dash.url();

    let login = gw.try_login(ADMIN, ADMIN_PW).await;
    assert_eq!(login.status, 201, "{}", login.text());
    let token = login.json()["token"].as_str().unwrap().to_string();
    let failed = gw.try_login(ADMIN, WRONG_PW).await;
    assert_eq!(failed.status, 400);
    let read = gw.api(Method::GET, "/api/pool", Some(&token), None).await;
    assert_eq!(read.status, 200, "{}", read.text());
    // The token in the query (the dashboard's check reads it there) and in a cookie.
    let check = gw
        .send(
            gw.request(
                Method::POST,
                &format!("/api/auth/check?token={token}"),
                None,
                Some(V1),
            )
            .header("Cookie", format!("token={token}"))
            // Not from a trusted proxy (none is): the client stays the peer.
            .header("X-Forwarded-For", "192.0.2.99"),
        )
        .await;
    assert_eq!(check.status, 200, "{}", check.text());
    let change = gw
        .api(
            Method::POST,
            "/api/user/validate_password",
            Some(&token),
            Some(&json!({ "password": CHECKED_PW })),
        )
        .await;
    assert_eq!(
        change.status,
        200,
        "the dashboard's answer: {}",
        change.text()
    );
    let logout = gw.logout(&token).await;
    assert_eq!(logout.status, 200);

    let logout_id = request_id(&logout);
    let stderr = wait_for(
        "no access line for the logout",
        || stderr_lines(&gw),
        |lines| lines.iter().any(|l| l["request_id"] == logout_id.as_str()),
    );
    for expected in [
        access(&login, "POST", "auth", "/api/auth", Some(ADMIN), None),
        access(&failed, "POST", "auth", "/api/auth", None, None),
        access(
            &read,
            "GET",
            "/api/pool",
            "/api/pool",
            Some(ADMIN),
            Some(backend),
        ),
        access(&check, "POST", "auth_check", "/api/auth/check", None, None),
        access(
            &change,
            "POST",
            "/api/user/validate_password",
            "/api/user/validate_password",
            Some(ADMIN),
            Some(backend),
        ),
        access(
            &logout,
            "POST",
            "auth_logout",
            "/api/auth/logout",
            Some(ADMIN),
            None,
        ),
    ] {
        check_access_line(&stderr, &expected);
    }

    let audit = wait_for(
        "the audit file lacks the logout",
        || json_lines_of(&audit_path(&gw)),
        |lines| lines.iter().any(|l| l["event"] == "logout"),
    );
    let events: Vec<(&str, &str, u64)> = audit
        .iter()
        .map(|l| {
            let event = l["event"].as_str().unwrap();
            (
                event,
                l["user"].as_str().unwrap_or(""),
                l["result"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("login", ADMIN, 201),
            ("login", ADMIN, 400),
            ("call", ADMIN, 200),
            ("logout", ADMIN, 200)
        ],
        "{audit:#?}"
    );
    let call = audit_line(&audit, &change, "call");
    assert_eq!(call["method"], "POST", "{call}");
    assert_eq!(call["operation"], "/api/user/validate_password", "{call}");
    assert_eq!(call["backend"], backend, "{call}");
    assert_eq!(call["client"], "127.0.0.1", "{call}");
    assert!(call["timestamp"].is_string(), "{call}");
    audit_line(&audit, &failed, "login");

    let written = gw.stderr() + &std::fs::read_to_string(audit_path(&gw)).unwrap();
    for secret in [token.as_str(), ADMIN_PW, WRONG_PW, CHECKED_PW] {
        assert!(
            !written.contains(secret),
            "{secret:?} was logged:\n{written}"
        );
    }

    // logrotate moves the file away, then signals the gateway, whose configuration file
    // has a problem by now: the reload is refused, the audit file is reopened all the same.
    let rotated = gw.dir().join("audit/audit.log.1");
    std::fs::rename(audit_path(&gw), &rotated).unwrap();
    let misspelt = |g: &mut Gateway| *g = g.clone().extra_toml("log", "level = \"inf\"");
    assert!(!gw.reload(misspelt).await, "{}", gw.logs());
    assert!(
        gw.logs_come_to(|l| l.contains("log.level")).await,
        "{}",
        gw.logs()
    );
    assert!(audit_path(&gw).exists(), "no new audit file\n{}", gw.logs());
    let after = gw.try_login(VIEWER, WRONG_PW).await;
    assert_eq!(after.status, 400);
    let new_lines = wait_for(
        "the new audit file lacks the login after SIGHUP",
        || json_lines_of(&audit_path(&gw)),
        |lines| !lines.is_empty(),
    );
    assert_eq!(new_lines.len(), 1, "{new_lines:#?}");
    assert_eq!(new_lines[0]["user"], VIEWER);
    assert_eq!(new_lines[0]["request_id"], request_id(&after).as_str());
    assert_eq!(
        json_lines_of(&rotated).len(),
        4,
        "the moved file kept its lines"
    );
    assert_eq!(
        gw.readyz(),
        200,
        "SIGHUP stopped the gateway\n{}",
        gw.logs()
    );
}

/// Without `log.audit_file`, audit lines are JSON lines on standard error among the text
/// lines, and the text access line keeps its fields.
#[tokio::test]
async fn without_an_audit_file_audit_lines_go_to_standard_error() {
    let gw = Gateway::with_admin_and_viewer().start();
    let failed = gw.try_login(VIEWER, WRONG_PW).await;
    assert_eq!(failed.status, 400);
    let id = request_id(&failed);
    let stderr = wait_for(
        "no access line for the failed login",
        || gw.stderr(),
        |text| {
            text.lines()
                .any(|l| l.contains("clustergate::access") && l.contains(&id))
        },
    );
    let audit: Vec<Value> = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(audit.len(), 1, "{stderr}");
    assert_eq!(audit[0]["event"], "login");
    assert_eq!(audit[0]["user"], VIEWER);
    assert_eq!(audit[0]["result"], 400);
    let access = stderr
        .lines()
        .find(|l| l.contains("clustergate::access"))
        .unwrap();
    for field in [
        "method=POST",
        "path=\"/api/auth\"",
        "route=\"auth\"",
        "status=400",
        "micros=",
    ] {
        assert!(access.contains(field), "{field} in {access}");
    }
    assert!(!stderr.contains(WRONG_PW), "{stderr}");
}

/// Behind a trusted proxy, the access and audit lines name the client its `X-Forwarded-For`
/// names: the address the limit on failed logins counts. A login that limit refuses (429)
/// is audited as a failed login.
#[tokio::test]
async fn both_logs_name_the_client_the_login_limit_counts() {
    let gw = Gateway::with_admin_and_viewer()
        .trusted_proxies(&["127.0.0.1/32"])
        .failed_logins_per_minute(1)
        .extra_toml("log", "format = \"json\"")
        .extra_toml("log", "audit_file = \"audit/audit.log\"")
        .file("audit/README", "the audit log's folder\n")
        .start();
    let failed = gw.try_login_forwarded("192.0.2.7", VIEWER, WRONG_PW).await;
    assert_eq!(failed.status, 400);
    let limited = gw.try_login_forwarded("192.0.2.7", VIEWER, VIEWER_PW).await;
    assert_eq!(limited.status, 429, "{}", limited.text());
    let other = gw.try_login_forwarded("192.0.2.8", VIEWER, VIEWER_PW).await;
    assert_eq!(other.status, 201, "{}", other.text());

    let other_id = request_id(&other);
    let stderr = wait_for(
        "no access line for the last login",
        || stderr_lines(&gw),
        |lines| lines.iter().any(|l| l["request_id"] == other_id.as_str()),
    );
    let audit = wait_for(
        "the audit file lacks the last login",
        || json_lines_of(&audit_path(&gw)),
        |lines| lines.len() >= 3,
    );
    for (reply, client) in [
        (&failed, "192.0.2.7"),
        (&limited, "192.0.2.7"),
        (&other, "192.0.2.8"),
    ] {
        let line = access_line(&stderr, &request_id(reply));
        assert_eq!(line["client"], client, "{line}");
        assert_eq!(line["status"], reply.status, "{line}");
        let line = audit_line(&audit, reply, "login");
        assert_eq!(
            (&line["client"], &line["user"], &line["result"]),
            (&client.into(), &VIEWER.into(), &reply.status.into()),
            "{line}"
        );
    }
    assert_eq!(audit.len(), 3, "{audit:#?}");
}

/// The text access line of the request `reply` answered, if standard error has one.
fn text_access_line(gw: &RunningGateway, reply: &Reply) -> Option<String> {
    let id = request_id(reply);
    gw.stderr()
        .lines()
        .find(|l| l.contains("clustergate::access") && l.contains(&id))
        .map(str::to_string)
}

/// A reload changes `log.level` for the next lines (access lines off, then on again);
/// `log.format` and `log.audit_file` need a restart, and the reload says so.
#[tokio::test]
async fn a_reload_changes_the_log_level_and_names_the_log_settings_it_cannot_change() {
    let mut gw = Gateway::with_admin_and_viewer()
        .env_removed("RUST_LOG")
        .extra_toml("log", "level = \"info\"")
        .file("audit/README", "the audit log's folder\n")
        .start();
    let before = gw.try_login(VIEWER, WRONG_PW).await;
    wait_for(
        "no access line at level info",
        || text_access_line(&gw, &before),
        Option::is_some,
    );

    let quieter = |g: &mut Gateway| *g = g.clone().set_toml("log", "level", "level = \"warn\"");
    assert!(gw.reload(quieter).await, "{}", gw.logs());
    let quiet = gw.try_login(VIEWER, WRONG_PW).await;
    assert_eq!(quiet.status, 400);

    let louder_in_json = |g: &mut Gateway| {
        *g = g
            .clone()
            .set_toml("log", "level", "level = \"info\"")
            .extra_toml("log", "format = \"json\"")
            .extra_toml("log", "audit_file = \"audit/audit.log\"")
    };
    assert!(gw.reload(louder_in_json).await, "{}", gw.logs());
    let loud = gw.try_login(VIEWER, WRONG_PW).await;
    let line = wait_for(
        "no access line once the level is info again",
        || text_access_line(&gw, &loud),
        Option::is_some,
    )
    .unwrap_or_default();
    // One worker writes the lines in order: the quiet login's would be there by now.
    assert_eq!(text_access_line(&gw, &quiet), None, "{}", gw.stderr());
    assert!(line.contains("status=400"), "still text: {line:?}");
    let logs = gw.logs();
    for key in ["log.format", "log.audit_file"] {
        assert!(
            logs.lines()
                .any(|l| l.contains("needs a restart") && l.contains(key)),
            "{key}: {logs}"
        );
    }
    assert!(!audit_path(&gw).exists(), "the audit file needs a restart");
}
