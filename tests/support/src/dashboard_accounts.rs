//! The cluster's own accounts in tests: the gateway's `auth.source = "dashboard"` and
//! `upstream.identity = "user"`, dashboard accounts and custom roles made with the `ceph`
//! CLI, and the dashboard's audit lines read back from the cluster log.

use std::fs;

use super::ceph_dev::output_text;
use super::{Dashboard, Gateway};

/// The deployment key of the role accounts' passwords that tests on the shared dashboards
/// use (one deployment: another key would set the same accounts' passwords anew).
pub const ROLE_ACCOUNTS_KEY: &str = "role-accounts-test-key-0123456789abcdef";

impl Gateway {
    /// Logins checked by the dashboard (no users file), with the gateway's lockout in
    /// front at `attempts` (the dashboard disables an account after 10).
    pub fn dashboard_accounts(mut self, attempts: u32) -> Self {
        self.lockout = (attempts, 300);
        self.no_users_file()
            .extra_toml("auth", "source = \"dashboard\"")
    }

    /// Local users act upstream as their own same-named dashboard accounts.
    pub fn user_identity(self) -> Self {
        self.extra_toml("upstream", "identity = \"user\"")
    }

    /// Users act upstream as accounts the gateway manages holding their roles, their
    /// passwords derived from `key` (the same key: the same deployment).
    pub fn role_identity(self, key: &str) -> Self {
        self.extra_toml("upstream", "identity = \"roles\"")
            .extra_toml("upstream", "accounts_key_file = \"accounts.key\"")
            .file("accounts.key", key)
    }
}

/// The account the gateway acts as for users holding `roles` (dashboard role names, the
/// roles file's as [`mirrored_role_name`]) in the deployment of accounts key `key`: README
/// "What the dashboard sees".
pub fn role_account_name(key: &str, roles: &[&str]) -> String {
    let mut sorted = roles.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let digest = keyed_digest(key, "clustergate dashboard account name", &sorted);
    format!("cg-{}", hex(&digest[..8]))
}

/// The dashboard's name of the roles file's role `role` in the deployment of key `key`.
pub fn mirrored_role_name(key: &str, role: &str) -> String {
    let digest = keyed_digest(key, "clustergate dashboard role tag", &[]);
    format!("cg-role-{}-{role}", hex(&digest[..3]))
}

/// HMAC-SHA256 under `key` of `context`, then each part, each followed by a 0 byte.
fn keyed_digest(key: &str, context: &str, parts: &[&str]) -> Vec<u8> {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key.as_bytes());
    let mut input = Vec::new();
    for part in std::iter::once(context).chain(parts.iter().copied()) {
        input.extend_from_slice(part.as_bytes());
        input.push(0);
    }
    ring::hmac::sign(&key, &input).as_ref().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Dashboard {
    /// A custom role granting `scopes` (scope, permissions), made with the `ceph` CLI.
    pub fn create_role(&self, role: &str, scopes: &[(&str, &[&str])]) {
        self.ceph_ok(&[
            "dashboard",
            "ac-role-create",
            role,
            "a clustergate test role",
        ]);
        for (scope, permissions) in scopes {
            let mut args = vec!["dashboard", "ac-role-add-scope-perms", role, scope];
            args.extend_from_slice(permissions);
            self.ceph_ok(&args);
        }
    }

    /// A dashboard account holding `roles`, its password given in a file as the CLI wants.
    pub fn create_user(&self, user: &str, password: &str, roles: &[&str]) {
        let file = self.dir.join(format!(".cg-test-password-{user}"));
        fs::write(&file, password).unwrap();
        let file_arg = file.to_string_lossy().into_owned();
        let mut args = vec!["dashboard", "ac-user-create", user, "-i", &file_arg];
        args.extend_from_slice(roles);
        let out = self.ceph(&args);
        let _ = fs::remove_file(&file);
        assert!(
            out.status.success(),
            "ac-user-create {user}: {}",
            output_text(&out)
        );
    }

    /// Sets `user`'s password (the policy not applied; to the same one, say): the dashboard
    /// then refuses every token it issued that user in an earlier second.
    pub fn set_password(&self, user: &str, password: &str) {
        let file = self.dir.join(format!(".cg-test-password-{user}"));
        fs::write(&file, password).unwrap();
        let file_arg = file.to_string_lossy().into_owned();
        let out = self.ceph(&[
            "dashboard",
            "ac-user-set-password",
            user,
            "-i",
            &file_arg,
            "--force-password",
        ]);
        let _ = fs::remove_file(&file);
        assert!(
            out.status.success(),
            "ac-user-set-password {user}: {}",
            output_text(&out)
        );
    }

    /// Whether the dashboard account `user` is enabled (`ac-user-show`).
    pub fn user_enabled(&self, user: &str) -> bool {
        let shown: serde_json::Value =
            serde_json::from_str(&self.ceph_ok(&["dashboard", "ac-user-show", user])).unwrap();
        shown["enabled"].as_bool().unwrap()
    }

    /// The dashboard's `[DASHBOARD]` audit lines (`ceph dashboard set-audit-api-enabled
    /// true`) among the cluster log's last 200 audit entries.
    pub fn audit_lines(&self) -> Vec<String> {
        self.ceph_ok(&["log", "last", "200", "info", "audit"])
            .lines()
            .filter(|l| l.contains("[DASHBOARD]"))
            .map(String::from)
            .collect()
    }
}
