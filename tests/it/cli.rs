//! The command line: `check-config` (exit 64, one `FILE: KEY: message` line per problem),
//! `hash-password`, and `keys`' arguments, TLS and login (its work: tests of the key API).

use std::fs;
use std::process::Output;

use crate::common::*;
use argon2::{PasswordHash, PasswordVerifier};

/// check-config on the spec's files after `edit` rewrote the config text.
fn check_edited(spec: &Gateway, edit: impl Fn(String) -> String) -> (tempfile::TempDir, Output) {
    let dir = tempfile::tempdir().unwrap();
    let config = spec.write_files(dir.path(), free_port(), free_port());
    fs::write(&config, edit(fs::read_to_string(&config).unwrap())).unwrap();
    let out = cli(
        &["check-config", "--config", config.to_str().unwrap()],
        None,
    );
    (dir, out)
}

/// Replace the `[server]` listen address (the first `listen =` line).
fn bad_listen(text: String) -> String {
    text.replacen(
        "listen = \"127.0.0.1:",
        "listen = \"not-an-address\"\n# was ",
        1,
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exit 64, and a `FILE: KEY: message` line naming `file` that mentions every one of `words`.
fn assert_problem(out: &Output, file: &str, words: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(64), "exit status; stderr:\n{err}");
    let found = err
        .lines()
        .any(|l| l.contains(&format!("{file}: ")) && words.iter().all(|w| l.contains(w)));
    assert!(
        found,
        "no `{file}: KEY: message` line naming {words:?} in:\n{err}"
    );
}

#[test]
fn check_config_accepts_a_valid_config_with_exit_0() {
    let (_dir, out) = Gateway::with_admin_and_viewer()
        .user(User::new("b", "B-Pass-123", &["block-manager"]).bcrypt())
        .check_config();
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
}

#[test]
fn check_config_accepts_tls_and_a_known_secret() {
    let (_dir, out) = Gateway::new()
        .user(User::admin())
        .tls(true)
        .known_secret()
        .check_config();
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
}

#[test]
fn check_config_names_auth_lockout_seconds_when_zero_but_attempts_are_on() {
    let (_dir, out) = Gateway::new()
        .user(User::admin())
        .lockout(3, 0)
        .check_config();
    assert_problem(&out, "clustergate.toml", &["lockout_seconds"]);
}

#[test]
fn check_config_allows_lockout_seconds_zero_when_lockout_is_off() {
    let (_dir, out) = Gateway::new()
        .user(User::admin())
        .lockout(0, 0)
        .check_config();
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
}

#[test]
fn check_config_names_server_listen_for_a_bad_address() {
    let (_dir, out) = check_edited(&Gateway::new().user(User::admin()), bad_listen);
    assert_problem(&out, "clustergate.toml", &["listen"]);
}

#[test]
fn check_config_names_an_unknown_key() {
    let (_dir, out) = Gateway::new()
        .user(User::admin())
        .extra_toml("server", "bogus_key = 1")
        .check_config();
    assert_problem(&out, "clustergate.toml", &["bogus_key"]);
}

#[test]
fn check_config_reports_every_problem_of_a_config_at_once() {
    let spec = Gateway::new()
        .user(User::admin())
        .lockout(3, 0)
        .extra_toml("auth", "bogus_key = 1");
    let (_dir, out) = check_edited(&spec, bad_listen);
    assert_problem(&out, "clustergate.toml", &["lockout_seconds"]);
    assert_problem(&out, "clustergate.toml", &["listen"]);
    assert_problem(&out, "clustergate.toml", &["bogus_key"]);
}

#[test]
fn check_config_names_server_key_file_when_only_cert_file_is_set() {
    let spec = Gateway::new()
        .user(User::admin())
        .tls(true)
        .extra_toml("server", "cert_file = \"cert.pem\"");
    let (_dir, out) = spec.check_config();
    assert_problem(&out, "clustergate.toml", &["key_file"]);
}

#[test]
fn check_config_names_auth_token_ttl_seconds_when_zero() {
    let (_dir, out) = Gateway::new()
        .user(User::admin())
        .token_ttl(0)
        .check_config();
    assert_problem(&out, "clustergate.toml", &["token_ttl_seconds"]);
}

#[test]
fn check_config_names_metrics_listen_when_it_is_the_server_address() {
    let spec = Gateway::new().user(User::admin());
    let (_dir, out) = check_edited(&spec, |text| {
        let server = text
            .lines()
            .find(|l| l.starts_with("listen = "))
            .unwrap()
            .to_string();
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        let metrics = lines
            .iter()
            .rposition(|l| l.starts_with("listen = "))
            .unwrap();
        lines[metrics] = server;
        lines.join("\n")
    });
    assert_problem(&out, "clustergate.toml", &["metrics.listen"]);
}

#[test]
fn check_config_names_the_users_file_and_user_for_an_unknown_role() {
    let spec =
        Gateway::new()
            .user(User::admin())
            .user(User::new("eve", "Eve-Pass-123", &["overlord"]));
    let (_dir, out) = spec.check_config();
    assert_problem(&out, "users.toml", &["eve"]);
}

#[test]
fn check_config_names_the_users_file_and_user_for_a_duplicate_username() {
    let spec = Gateway::new()
        .user(User::admin())
        .user(User::viewer())
        .user(User::new(VIEWER, "Other-Pass-1", &["read-only"]));
    let (_dir, out) = spec.check_config();
    assert_problem(&out, "users.toml", &[VIEWER]);
}

#[test]
fn check_config_names_the_users_file_and_user_for_a_bad_hash() {
    let users = format!(
        "[[users]]\nusername = \"admin\"\npassword_hash = {:?}\nroles = [\"administrator\"]\n\n\
         [[users]]\nusername = \"mallory\"\npassword_hash = \"plaintext-password\"\nroles = [\"read-only\"]\n",
        argon2_hash(ADMIN_PW)
    );
    let (_dir, out) = Gateway::new().raw_users_file(&users).check_config();
    assert_problem(&out, "users.toml", &["mallory"]);
    assert!(
        !stderr(&out).contains("plaintext-password"),
        "the bad hash is echoed to stderr"
    );
}

#[test]
fn check_config_names_the_users_file_when_it_is_not_toml() {
    let (_dir, out) = Gateway::new()
        .raw_users_file("[[users]\nusername = ")
        .check_config();
    assert_problem(&out, "users.toml", &[]);
}

#[test]
fn check_config_exits_64_for_a_missing_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.toml");
    let out = cli(
        &["check-config", "--config", missing.to_str().unwrap()],
        None,
    );
    assert_eq!(out.status.code(), Some(64), "stderr:\n{}", stderr(&out));
    assert!(
        stderr(&out).contains("nope.toml"),
        "stderr:\n{}",
        stderr(&out)
    );
}

fn hash_password(password: &str) -> String {
    let out = cli(&["hash-password"], Some(&format!("{password}\n")));
    assert!(
        out.status.success(),
        "hash-password failed:\n{}",
        stderr(&out)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn hash_password_prints_an_argon2id_hash_of_the_line_without_its_newline() {
    let hash = hash_password("S3cret-Pass word");
    assert!(hash.starts_with("$argon2id$"), "{hash}");
    let parsed = PasswordHash::new(&hash).unwrap();
    let argon = argon2::Argon2::default();
    assert!(argon.verify_password(b"S3cret-Pass word", &parsed).is_ok());
    assert!(argon
        .verify_password(b"S3cret-Pass word\n", &parsed)
        .is_err());
    assert!(argon.verify_password(b"other", &parsed).is_err());
}

#[test]
fn hash_password_salts_every_hash() {
    assert_ne!(
        hash_password("same-password"),
        hash_password("same-password")
    );
}

#[tokio::test]
async fn a_hash_password_output_logs_in() {
    let hash = hash_password("Fr0m-The-Cli");
    let users = format!(
        "[[users]]\nusername = \"ops\"\npassword_hash = {hash:?}\nroles = [\"administrator\"]\n"
    );
    let gw = Gateway::new().raw_users_file(&users).start();
    assert_invalid_credentials(&gw.try_login("ops", "fr0m-the-cli").await);
    let token = gw.login("ops", "Fr0m-The-Cli").await;
    assert_eq!(jwt_payload(&token)["username"], "ops");
}

#[test]
fn check_config_counts_custom_roles_and_names_a_bad_ones_key() {
    let roles =
        "[[roles]]\nname = \"pool-auditor\"\n[roles.scopes_permissions]\npool = [\"read\"]\n";
    let spec = Gateway::new()
        .user(User::new("auditor", "Aud1tor-Pass", &["pool-auditor"]))
        .file("roles.toml", roles)
        .extra_toml("auth", "roles_file = \"roles.toml\"");
    let (_dir, out) = spec.check_config();
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr(&out));
    assert!(printed.contains("1 custom roles in"), "{printed}");

    let (_dir, out) = spec
        .file("roles.toml", &roles.replace("pool = ", "pools = "))
        .check_config();
    assert_problem(
        &out,
        "roles.toml",
        &[
            "roles[0] (\"pool-auditor\").scopes_permissions.pools",
            "unknown scope",
        ],
    );
}

#[test]
fn users_import_without_a_working_ceph_exits_69_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.toml");
    let roles = dir.path().join("roles.toml");
    let out = cli(
        &[
            "users",
            "import",
            "--users-file",
            users.to_str().unwrap(),
            "--roles-file",
            roles.to_str().unwrap(),
            "--ceph",
            "/nonexistent/ceph",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(69), "stderr:\n{}", stderr(&out));
    assert!(
        stderr(&out).contains("/nonexistent/ceph"),
        "{}",
        stderr(&out)
    );
    assert!(!users.exists() && !roles.exists());
}

/// `clustergate keys ARGS` against `gw` (TLS), with `stdin`.
fn keys(gw: &RunningGateway, args: &[&str], stdin: Option<&str>) -> Output {
    let gateway = gw.url("");
    let mut all = vec![args[0], args[1], "--gateway", &gateway];
    all.extend_from_slice(&args[2..]);
    cli(&all, stdin)
}

#[test]
fn keys_verifies_the_gateway_against_its_ca_and_exits_1_with_the_gateways_refusal() {
    let gw = Gateway::new().user(User::admin()).tls(true).start();
    let ca = gw.state_dir().join("tls/ca.pem");
    let ca = ca.to_str().unwrap();
    let user = ["--user", ADMIN];

    let out = keys(
        &gw,
        &[&["keys", "list", "--ca-file", ca][..], &user].concat(),
        Some("wrong\n"),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{err}");
    assert!(
        err.contains("the gateway answered 400: Invalid credentials"),
        "{err}"
    );
    assert!(out.stdout.is_empty());

    // The password from a file, as from standard input.
    let dir = tempfile::tempdir().unwrap();
    let password_file = dir.path().join("password");
    fs::write(&password_file, "wrong\n").unwrap();
    let from_file = ["--password-file", password_file.to_str().unwrap()];
    let args = [&["keys", "list", "--ca-file", ca][..], &user, &from_file].concat();
    let out = keys(&gw, &args, None);
    assert!(
        stderr(&out).contains("the gateway answered 400: Invalid credentials"),
        "{}",
        stderr(&out)
    );

    // The system's roots do not hold the gateway's generated CA: nothing is sent.
    let out = keys(
        &gw,
        &[&["keys", "list"][..], &user].concat(),
        Some("wrong\n"),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{err}");
    assert!(
        err.contains("cannot reach") && !err.contains("answered"),
        "{err}"
    );

    // --insecure reaches it, and says so.
    let out = keys(
        &gw,
        &[&["keys", "list", "--insecure"][..], &user].concat(),
        Some("wrong\n"),
    );
    let err = stderr(&out);
    assert!(err.starts_with("warning: --insecure"), "{err}");
    assert!(
        err.contains("the gateway answered 400: Invalid credentials"),
        "{err}"
    );
}

#[test]
fn keys_exits_2_for_bad_arguments_before_anything_is_read_or_sent() {
    let create = ["keys", "create", "--user", "u", "--roles", "read-only"];
    let cases: &[&[&str]] = &[
        &[&create[..], &["--name", "ci", "--expires-in", "30"]].concat(),
        &[&create[..], &["--name", "ci", "--expires-in", "0d"]].concat(),
        &[
            &create[..],
            &[
                "--name",
                "ci",
                "--expires-in",
                "30d",
                "--network",
                "10.0.0.0/33",
            ],
        ]
        .concat(),
        &[&create[..], &["--name", "a b", "--expires-in", "30d"]].concat(),
        &[
            "keys",
            "create",
            "--user",
            "u",
            "--name",
            "ci",
            "--expires-in",
            "30d",
        ],
        &["keys", "list"],
        &["keys", "list", "--user", "u", "--token-file", "t"],
        &["keys", "list", "--token-file", "t", "--password-file", "p"],
        &[
            "keys",
            "list",
            "--user",
            "u",
            "--ca-file",
            "c",
            "--insecure",
        ],
        &[
            "keys",
            "list",
            "--user",
            "u",
            "--gateway",
            "http://gw.example:8443",
        ],
        &["keys", "revoke", "--user", "u", "cgk_0123456789abcdef"],
        &[
            "keys",
            "rotate",
            "--user",
            "u",
            "0123456789abcdef",
            "--expires-in",
            "1y",
        ],
    ];
    for args in cases {
        let out = cli(args, Some("password\n"));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
    // Good arguments get past the checks: exit 1, as nothing listens at the address.
    let port = free_port().to_string();
    let gateway = format!("http://127.0.0.1:{port}");
    let good = [
        &create[..],
        &["--name", "ci", "--expires-in", "30d", "--gateway", &gateway],
    ]
    .concat();
    let out = cli(&good, Some("password\n"));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot reach"), "{err}");
}

/// A key id no gateway has: 404 before and after the key API exists.
const NO_SUCH_KEY: &str = "0123456789abcdef";

#[tokio::test]
async fn keys_logs_in_for_the_command_and_out_at_its_end_even_when_refused() {
    let gw = Gateway::new().user(User::admin()).tls(true).start();
    let ca = gw.state_dir().join("tls/ca.pem");
    let args = [
        "keys",
        "revoke",
        "--ca-file",
        ca.to_str().unwrap(),
        "--user",
        ADMIN,
        NO_SUCH_KEY,
    ];
    let out = keys(&gw, &args, Some(&format!("{ADMIN_PW}\n")));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the gateway answered 404: "), "{err}");
    let audited = |logs: &str, event: &str, result: &str| {
        logs.lines().any(|l| {
            [
                &format!(r#""event":"{event}""#),
                r#""user":"admin""#,
                result,
            ]
            .iter()
            .all(|part| l.contains(part))
        })
    };
    let logged_out = gw
        .logs_come_to(|logs| audited(logs, "logout", r#""result":200"#))
        .await;
    assert!(
        logged_out,
        "no logout of the command's login:\n{}",
        gw.logs()
    );
    assert!(audited(&gw.logs(), "login", r#""result":201"#));
    assert!(
        !gw.logs().contains(ADMIN_PW),
        "the password in the gateway's logs"
    );
}

/// What a script does: an operator makes it a key (the password typed once, on standard
/// input), the script calls the API with the key alone, the key is listed without its
/// secret, rotated, and the old and then the new one stop working when revoked.
#[tokio::test]
async fn keys_makes_a_key_a_script_uses_without_any_password_then_rotates_and_revokes_it() {
    let gw = Gateway::new()
        .user(User::admin())
        .user(User::viewer())
        .tls(true)
        .upstream(Dashboard::shared())
        .start();
    let ca = gw.state_dir().join("tls/ca.pem");
    let ca = ca.to_str().unwrap();
    let as_viewer = ["--ca-file", ca, "--user", VIEWER];
    let password = Some(format!("{VIEWER_PW}\n"));
    let run = |args: &[&str]| {
        let args = [&args[..2], &as_viewer[..], &args[2..]].concat();
        let out = keys(&gw, &args, password.as_deref());
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let create = [
        "keys",
        "create",
        "--name",
        "exporter",
        "--roles",
        "read-only",
    ];
    let key = run(&[&create[..], &["--expires-in", "1h"]].concat());
    assert!(key.starts_with("cgk_") && key.len() == 64, "{key}");
    // The script: the key, nothing else.
    assert_eq!(gw.api_get("/api/summary", Some(&key)).await.status, 200);
    let listed = run(&["keys", "list", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed[0]["id"], key[4..20], "{listed}");
    assert_eq!(listed[0]["owner"], VIEWER, "{listed}");
    assert!(
        !listed.to_string().contains(&key[21..]),
        "the list shows the secret"
    );
    let rotated = run(&["keys", "rotate", &key[4..20]]);
    assert_ne!(rotated, key);
    assert_eq!(gw.api_get("/api/summary", Some(&key)).await.status, 401);
    assert_eq!(gw.api_get("/api/summary", Some(&rotated)).await.status, 200);
    run(&["keys", "revoke", &rotated[4..20]]);
    assert_eq!(gw.api_get("/api/summary", Some(&rotated)).await.status, 401);
    assert!(!gw.logs().contains(&key[21..]) && !gw.logs().contains(VIEWER_PW));
}
