//! `clustergate users import` against a real dashboard: a custom role and users made with
//! the `ceph` CLI are imported, then served by the gateway with `source` local from the
//! imported files. Every enabled user logs in with its dashboard password, the disabled
//! one cannot, the custom role's permissions and 403s are the dashboard's own, the import
//! is byte-identical when run again, refuses to replace files without --force, and never
//! prints a hash.

use std::fs;
use std::path::Path;
use std::process::Output;

use crate::common::*;
use serde_json::Value;

const ROLE: &str = "pool-auditor";
const AUDITOR: (&str, &str) = ("auditor", "Aud1tor-Import-Pass");
const LEAVER: (&str, &str) = ("leaver", "Le4ver-Import-Pass");
/// Must change its password first (`--pwd-update-required`).
const MUST_CHANGE: (&str, &str) = ("mustchange", "Must-Change-Pass1");
/// Its password expires seconds after it is made.
const EXPIRED: (&str, &str) = ("expired", "Exp1red-Import-Pass");

/// `ceph dashboard ac-user-create NAME -i FILE ARGS` (the password through a file).
fn create_user(dash: &Dashboard, (name, password): (&str, &str), args: &[&str]) {
    let file = dash.dir.join(format!(".cg-test-{name}-password"));
    fs::write(&file, password).unwrap();
    let file_arg = file.to_string_lossy().into_owned();
    let create = ["dashboard", "ac-user-create", name, "-i", &file_arg];
    dash.ceph_ok(&[&create[..], args].concat());
    fs::remove_file(&file).unwrap();
}

/// The custom role (pool read; osd read and update) and its user, a disabled user, one who
/// must change its password, and one whose password has expired.
fn create_accounts(dash: &Dashboard) {
    let ceph = |args: &[&str]| dash.ceph_ok(&[&["dashboard"], args].concat());
    ceph(&["ac-role-create", ROLE, "reads pools, tunes OSDs"]);
    ceph(&["ac-role-add-scope-perms", ROLE, "pool", "read"]);
    ceph(&["ac-role-add-scope-perms", ROLE, "osd", "read", "update"]);
    create_user(dash, AUDITOR, &[ROLE, "--force-password"]);
    create_user(dash, LEAVER, &["read-only", "--force-password"]);
    // `ac-user-disable` prints the user, hash included: its output is not kept.
    ceph(&["ac-user-disable", LEAVER.0]);
    let must_change = ["read-only", "--force-password", "--pwd-update-required"];
    create_user(dash, MUST_CHANGE, &must_change);
    // A date in the past is refused: one a moment ahead, then waited out.
    let expires = unix_now() + 2;
    let expires_arg = expires.to_string();
    let expiring = [
        "read-only",
        "--force-password",
        "--pwd_expiration_date",
        &expires_arg,
    ];
    create_user(dash, EXPIRED, &expiring);
    while unix_now() <= expires {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `clustergate users import` into `dir`'s users.toml and roles.toml.
fn import(dash: &Dashboard, dir: &Path, extra: &[&str]) -> Output {
    let conf = dash.dir.join("ceph.conf");
    let users = dir.join("users.toml");
    let roles = dir.join("roles.toml");
    let mut args = vec![
        "users",
        "import",
        "--users-file",
        users.to_str().unwrap(),
        "--roles-file",
        roles.to_str().unwrap(),
        "--ceph-conf",
        conf.to_str().unwrap(),
    ];
    args.extend(extra);
    cli(&args, None)
}

fn printed(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every user's bcrypt hash, as the dashboard holds it.
fn dashboard_hashes(dash: &Dashboard) -> Vec<String> {
    let names: Vec<String> =
        serde_json::from_str(&dash.ceph_ok(&["dashboard", "ac-user-show"])).unwrap();
    names
        .iter()
        .map(|name| {
            let user: Value =
                serde_json::from_str(&dash.ceph_ok(&["dashboard", "ac-user-show", name])).unwrap();
            user["password"].as_str().unwrap().to_string()
        })
        .collect()
}

/// `POST /api/auth` on the dashboard itself, whatever it answers.
async fn dashboard_login(dash: &Dashboard, (user, password): (&str, &str)) -> Reply {
    let body = serde_json::json!({"username": user, "password": password});
    dash.send(reqwest::Method::POST, "/api/auth", None, V1, Some(&body))
        .await
}

/// A `permissions` object with each scope's list sorted (the dashboard's order varies).
fn normalized(permissions: &Value) -> Value {
    let mut map = permissions.as_object().unwrap().clone();
    for list in map.values_mut() {
        let mut names: Vec<String> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap().to_string())
            .collect();
        names.sort();
        *list = names.into();
    }
    Value::Object(map)
}

#[tokio::test]
async fn imported_users_log_in_with_their_dashboard_passwords_and_their_custom_roles_match() {
    let dash = Dashboard::dedicated(DashboardOptions::default());
    create_accounts(&dash);

    let first = tempfile::tempdir().unwrap();
    let out = import(&dash, first.path(), &[]);
    let text = printed(&out);
    assert!(out.status.success(), "import: {text}");
    assert!(text.contains("1 custom roles"), "{text}");
    for (user, why) in [
        (LEAVER.0, "disabled on the dashboard"),
        (MUST_CHANGE.0, "pwdUpdateRequired"),
        (EXPIRED.0, "expired"),
    ] {
        let noted = text
            .lines()
            .any(|l| l.contains(&format!("user {user:?}")) && l.contains(why));
        assert!(noted, "no note on {user}: {text}");
    }
    for hash in dashboard_hashes(&dash) {
        assert!(!text.contains(&hash[7..]), "a hash was printed: {text}");
    }
    assert!(!text.contains("$2b$"), "{text}");

    // Run again: the same bytes. Over existing files without --force: refused, untouched.
    let second = tempfile::tempdir().unwrap();
    assert!(import(&dash, second.path(), &[]).status.success());
    let users_text = fs::read_to_string(first.path().join("users.toml")).unwrap();
    let roles_text = fs::read_to_string(first.path().join("roles.toml")).unwrap();
    for name in ["users.toml", "roles.toml"] {
        assert_eq!(
            fs::read(first.path().join(name)).unwrap(),
            fs::read(second.path().join(name)).unwrap(),
            "{name} differs between two imports"
        );
    }
    let refused = import(&dash, first.path(), &[]);
    assert_eq!(refused.status.code(), Some(73), "{}", printed(&refused));
    assert!(
        printed(&refused).contains("--force"),
        "{}",
        printed(&refused)
    );
    assert_eq!(
        fs::read_to_string(first.path().join("users.toml")).unwrap(),
        users_text
    );
    assert!(import(&dash, first.path(), &["--force"]).status.success());

    let gw = Gateway::new()
        .raw_users_file(&users_text)
        .file("roles.toml", &roles_text)
        .extra_toml("auth", "roles_file = \"roles.toml\"")
        .upstream(&dash)
        .start();
    let service = dash.service_password();
    let passwords = [
        ("admin", dash.password("admin")),
        ("viewer", dash.password("viewer")),
        ("poolmgr", dash.password("poolmgr")),
        ("clustergate", service.as_str()),
        AUDITOR,
    ];
    for (user, password) in passwords {
        gw.login(user, password).await;
    }
    // What the dashboard refuses (a disabled user, an expired password) or lets log in but
    // refuses every request of (a required password change), the gateway refuses at login.
    for (user, password) in [LEAVER, MUST_CHANGE, EXPIRED] {
        assert_invalid_credentials(&gw.try_login(user, password).await);
    }
    assert_eq!(dashboard_login(&dash, EXPIRED).await.status, 400);
    let must_change = dashboard_login(&dash, MUST_CHANGE).await;
    assert_eq!(must_change.status, 201, "{}", must_change.text());
    assert_eq!(must_change.json()["pwdUpdateRequired"], true);

    let login = gw.try_login(AUDITOR.0, AUDITOR.1).await;
    let gateway_token = login.json()["token"].as_str().unwrap().to_string();
    let dash_login = dashboard_login(&dash, AUDITOR).await;
    assert_eq!(dash_login.status, 201, "{}", dash_login.text());
    let expected = normalized(&dash_login.json()["permissions"]);
    assert_eq!(normalized(&login.json()["permissions"]), expected);
    let check = gw.check(&gateway_token).await;
    assert_check_ok(&check, AUDITOR.0, &expected);

    let subjects = [Subject {
        name: AUDITOR.0.to_string(),
        gateway_token,
        dashboard_token: dash_login.json()["token"].as_str().unwrap().to_string(),
    }];
    let outcome = probe_scopes(&gw, &dash, &subjects).await;
    let summary = outcome.summary();
    println!("{summary}");
    assert!(
        outcome.refused[0] > 0,
        "the dashboard refused nothing: {summary}"
    );
    assert!(
        outcome.mismatches.is_empty(),
        "{summary}\n{}",
        outcome.mismatches.join("\n")
    );
}
