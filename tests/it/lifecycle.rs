//! Start-up, shutdown and restarts: where the gateway listens (port 0 and
//! `state_dir/listening`), the initial admin, SIGTERM, what persists in `state_dir`, and
//! users-file changes taking effect on tokens already issued.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use crate::common::*;

fn initial_password(gw: &RunningGateway) -> String {
    let path = gw.state_dir().join("initial-admin-password");
    fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}\n{}", path.display(), gw.logs()))
        .trim()
        .to_string()
}

#[tokio::test]
async fn first_start_without_a_users_file_creates_an_admin_with_an_owner_only_password_file() {
    let gw = Gateway::new().no_users_file().start();
    let path = gw.state_dir().join("initial-admin-password");
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{} mode {mode:o}", path.display());
    let password = initial_password(&gw);
    assert!(
        password.len() >= 16,
        "a weak initial password: {} chars",
        password.len()
    );
    let r = gw.try_login("admin", &password).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["permissions"], admin_permissions());
}

#[tokio::test]
async fn the_log_names_the_initial_password_file_but_never_the_password() {
    let gw = Gateway::new().no_users_file().start();
    let password = initial_password(&gw);
    let logs = gw.logs();
    assert!(
        logs.contains("initial-admin-password"),
        "the log does not say where the password is:\n{logs}"
    );
    assert!(!logs.contains(&password), "the password is in the log");
}

#[tokio::test]
async fn the_initial_admin_password_survives_a_restart() {
    let mut gw = Gateway::new().no_users_file().start();
    let password = initial_password(&gw);
    gw.restart(|_| {});
    assert_eq!(initial_password(&gw), password);
    gw.login("admin", &password).await;
}

#[tokio::test]
async fn a_users_file_without_an_enabled_user_also_gets_an_initial_admin() {
    let gw = Gateway::new()
        .user(User::new("bob", "Bob-Pass-123", &["read-only"]).disabled())
        .start();
    let password = initial_password(&gw);
    gw.login("admin", &password).await;
    assert_invalid_credentials(&gw.try_login("bob", "Bob-Pass-123").await);
}

#[tokio::test]
async fn an_enabled_user_means_no_initial_admin_is_created() {
    let gw = Gateway::new().user(User::viewer()).start();
    assert!(!gw.state_dir().join("initial-admin-password").exists());
    assert_invalid_credentials(&gw.try_login("admin", "").await);
}

#[tokio::test]
async fn sigterm_stops_the_gateway_within_5_seconds() {
    let mut gw = Gateway::new().user(User::admin()).start();
    gw.login(ADMIN, ADMIN_PW).await;
    gw.sigterm();
    // A bound from the contract, not a speed measurement; 1 s slack for a busy 2-core machine.
    let deadline = Instant::now() + Duration::from_secs(6);
    let child = gw.child_mut();
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "still running 5 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
async fn sigterm_first_drains_then_stops() {
    let drain = Duration::from_secs(2);
    let mut gw = Gateway::new()
        .user(User::admin())
        .drain_seconds(drain.as_secs_f64())
        .start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    assert_eq!(gw.readyz(), 200);
    assert_eq!(gw.check(&token).await.status, 200);
    let signalled = Instant::now();
    gw.sigterm();
    // Balancers are told at once; everything else is still served meanwhile.
    while gw.readyz() != 503 {
        assert!(
            signalled.elapsed() < drain / 2,
            "/readyz not 503 while draining"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(gw.check(&token).await.status, 503);
    let body = gw
        .post_json("/api/auth/check", Some(V1), &serde_json::json!({}))
        .await;
    assert_eq!(
        body.status,
        503,
        "a balancer's check without a token: {}",
        body.text()
    );
    assert_eq!(gw.try_login(ADMIN, ADMIN_PW).await.status, 201);
    assert!(
        signalled.elapsed() < drain,
        "the checks above took the whole drain"
    );
    // Then it stops, as without draining (grace 1 s).
    let deadline = signalled + drain + Duration::from_secs(6);
    let child = gw.child_mut();
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "still running after the drain and the grace"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        signalled.elapsed() >= drain,
        "stopped before the drain was over"
    );
}

#[tokio::test]
async fn relative_paths_resolve_against_the_config_folder_not_the_working_directory() {
    let gw = Gateway::new().user(User::admin()).start();
    assert!(
        gw.state_dir().join("jwt-secret").exists(),
        "no state/jwt-secret beside the config"
    );
    let cwd: Vec<_> = fs::read_dir(gw.dir().join("cwd")).unwrap().collect();
    assert!(
        cwd.is_empty(),
        "files created in the working directory: {cwd:?}"
    );
}

#[tokio::test]
async fn tokens_and_the_signing_secret_survive_a_restart() {
    let mut gw = Gateway::with_admin_and_viewer().start();
    let secret = fs::read(gw.state_dir().join("jwt-secret")).unwrap();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    gw.restart(|_| {});
    assert_eq!(
        fs::read(gw.state_dir().join("jwt-secret")).unwrap(),
        secret,
        "jwt-secret regenerated"
    );
    assert_check_ok(&gw.check(&token).await, ADMIN, &admin_permissions());
    assert_not_found(&gw.api_get("/api/summary", Some(&token)).await);
}

#[tokio::test]
async fn disabling_a_user_invalidates_its_tokens_after_a_restart() {
    let mut gw = Gateway::with_admin_and_viewer().start();
    let token = gw.login(VIEWER, VIEWER_PW).await;
    let admin_token = gw.login(ADMIN, ADMIN_PW).await;
    gw.restart(|spec| spec.set_users(vec![User::admin(), User::viewer().disabled()]));
    assert_login_url(&gw.check(&token).await);
    assert_unauthorized(&gw.api_get("/api/summary", Some(&token)).await);
    assert_invalid_credentials(&gw.try_login(VIEWER, VIEWER_PW).await);
    assert_check_ok(&gw.check(&admin_token).await, ADMIN, &admin_permissions());
}

#[tokio::test]
async fn removing_a_user_invalidates_its_tokens_after_a_restart() {
    let mut gw = Gateway::with_admin_and_viewer().start();
    let token = gw.login(VIEWER, VIEWER_PW).await;
    gw.restart(|spec| spec.set_users(vec![User::admin()]));
    assert_login_url(&gw.check(&token).await);
    assert_unauthorized(&gw.api_get("/api/summary", Some(&token)).await);
}

#[tokio::test]
async fn changed_roles_refuse_tokens_issued_before_a_restart_and_a_new_login_has_them() {
    let mut gw = Gateway::with_admin_and_viewer().start();
    let token = gw.login(VIEWER, VIEWER_PW).await;
    gw.restart(|spec| {
        spec.set_users(vec![
            User::admin(),
            User::new(VIEWER, VIEWER_PW, &["administrator"]),
        ])
    });
    // As on the dashboard: a token dies with the roles it was issued for.
    assert_login_url(&gw.check(&token).await);
    let token = gw.login(VIEWER, VIEWER_PW).await;
    assert_check_ok(&gw.check(&token).await, VIEWER, &admin_permissions());
}

#[tokio::test]
async fn an_invalid_users_file_stops_start_up_naming_the_file_and_the_entry() {
    let spec =
        Gateway::new()
            .user(User::admin())
            .user(User::new("eve", "Eve-Pass-123", &["overlord"]));
    let (_dir, out) = spec.run_expecting_exit();
    assert!(!out.status.success(), "exit status {}", out.status);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("users.toml"))
        .unwrap_or_else(|| panic!("users file not named:\n{stderr}"));
    assert!(
        stderr.contains("eve"),
        "entry not named in {line:?}:\n{stderr}"
    );
}

/// `listen = "127.0.0.1:0"` on both listeners (the harness's default): the gateway takes the
/// ports the kernel chooses, names them in `state_dir/listening` and in its log, and
/// answers there.
#[tokio::test]
async fn on_port_0_the_gateway_names_its_addresses_in_the_listening_file_and_answers_there() {
    let gw = Gateway::with_admin_and_viewer().start();
    let config = fs::read_to_string(gw.dir().join("clustergate.toml")).unwrap();
    assert_eq!(
        config.matches("listen = \"127.0.0.1:0\"").count(),
        2,
        "{config}"
    );
    let [server, metrics] = gw.listening().expect("state_dir/listening");
    assert!(server.port() != 0 && metrics.port() != 0 && server != metrics);
    let file = fs::metadata(gw.state_dir().join("listening")).unwrap();
    assert_eq!(file.permissions().mode() & 0o777, 0o644);
    let logged = gw.logs().lines().any(|l| {
        l.contains("listening")
            && l.contains(&server.to_string())
            && l.contains(&metrics.to_string())
    });
    assert!(logged, "{}", gw.logs());
    let health = b"GET /healthz HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n";
    assert_eq!(try_raw_http(metrics, health).unwrap().status, 200);
    assert_eq!(
        gw.addr, server,
        "the harness's requests go to the file's address"
    );
    gw.login(ADMIN, ADMIN_PW).await;
}

#[tokio::test]
async fn on_fixed_ports_the_listening_file_names_them_too() {
    let gw = Gateway::new().fixed_ports().start();
    assert_eq!(gw.listening(), Some([gw.addr, gw.metrics_addr]));
}
