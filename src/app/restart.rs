//! Which changed settings a running process cannot take. Every section of the
//! configuration is destructured field by field (no `..`): a new setting does not compile
//! until it is classified here, as reloaded by SIGHUP (bound to `_`) or needing a restart.
//! Secrets are compared by value (`Secret`'s `PartialEq`), never through their `Debug`
//! text, which is the same for every secret.

use std::mem::discriminant;

use crate::config::{
    ApiConfig, ApiKeysConfig, AuthConfig, Config, LogConfig, MetricsConfig, OidcConfig,
    ServerConfig, UpstreamConfig,
};

/// The settings of `running` that `new` changes but only a restart applies, by key.
pub fn needs_restart(running: &Config, new: &Config) -> Vec<&'static str> {
    let mut changed = Changed(Vec::new());
    let Config {
        source: _,
        server,
        metrics,
        api,
        auth,
        users: _,
        upstream,
        oidc,
        access: _,
        state,
        log,
        answer_cache,
        api_keys,
    } = running;
    changed.server(server, &new.server);
    changed.metrics(metrics, &new.metrics);
    changed.api(api, &new.api);
    changed.auth(auth, &new.auth);
    changed.key("upstream.identity", running.identity() != new.identity());
    match (upstream, &new.upstream) {
        (Some(a), Some(b)) => changed.upstream(a, b),
        (a, b) => changed.key("upstream", a.is_some() != b.is_some()),
    }
    match (oidc, &new.oidc) {
        (Some(a), Some(b)) => changed.oidc(a, b),
        (a, b) => changed.key("oidc", a.is_some() != b.is_some()),
    }
    // Every store setting: the stores and their connections are made once.
    changed.key("state", *state != new.state);
    changed.log(log, &new.log);
    // The cache is made once, with its bounds; a reload drops what it holds (`answer_cache`).
    changed.key("answer_cache", *answer_cache != new.answer_cache);
    changed.api_keys(api_keys, &new.api_keys);
    changed.0
}

/// The keys found changed so far.
struct Changed(Vec<&'static str>);

impl Changed {
    fn key(&mut self, key: &'static str, differs: bool) {
        if differs {
            self.0.push(key);
        }
    }

    /// The store of keys is made once with its bound; the lifetime and the rate limits are
    /// read where the gateway is assembled, once, too.
    fn api_keys(&mut self, a: &ApiKeysConfig, b: &ApiKeysConfig) {
        let ApiKeysConfig {
            max_keys,
            max_lifetime,
            rate_per_second,
            burst,
        } = a;
        self.key("api_keys.max_keys", *max_keys != b.max_keys);
        self.key(
            "api_keys.max_lifetime_days",
            *max_lifetime != b.max_lifetime,
        );
        self.key(
            "api_keys.rate_per_second",
            *rate_per_second != b.rate_per_second,
        );
        self.key("api_keys.burst", *burst != b.burst);
    }

    fn server(&mut self, a: &ServerConfig, b: &ServerConfig) {
        let ServerConfig {
            listen,
            tls,
            state_dir,
            threads,
            work_stealing,
            shutdown_grace,
            drain,
            public_url,
            clients,
            body_budget,
            trusted_proxies,
        } = a;
        self.key("server.listen", *listen != b.listen);
        self.key("server.threads", *threads != b.threads);
        self.key("server.work_stealing", *work_stealing != b.work_stealing);
        // Off, generated or files: the listener is made for one. Other files are reloaded.
        self.key("server.tls", discriminant(tls) != discriminant(&b.tls));
        self.key("server.state_dir", *state_dir != b.state_dir);
        self.key(
            "server.shutdown_grace_seconds",
            *shutdown_grace != b.shutdown_grace,
        );
        self.key("server.drain_seconds", *drain != b.drain);
        self.key("server.public_url", *public_url != b.public_url);
        self.key("server (client limits)", *clients != b.clients);
        self.key("server.body_budget_bytes", *body_budget != b.body_budget);
        self.key(
            "server.trusted_proxies",
            *trusted_proxies != b.trusted_proxies,
        );
    }

    fn metrics(&mut self, a: &MetricsConfig, b: &MetricsConfig) {
        let MetricsConfig { listen } = a;
        self.key("metrics.listen", *listen != b.listen);
    }

    fn api(&mut self, a: &ApiConfig, b: &ApiConfig) {
        let ApiConfig { vendor } = a;
        self.key("api.vendor", *vendor != b.vendor);
    }

    fn auth(&mut self, a: &AuthConfig, b: &AuthConfig) {
        let AuthConfig {
            source,
            token_ttl: _,
            issuer: _,
            lockout,
            signing_keys: _,
            max_concurrent_hashes,
            max_queued_logins,
            failed_logins_per_client,
        } = a;
        self.key("auth.lockout_*", *lockout != b.lockout);
        self.key("auth.source", *source != b.source);
        self.key(
            "auth.max_failed_logins_per_ip_per_minute",
            *failed_logins_per_client != b.failed_logins_per_client,
        );
        self.key(
            "auth.max_concurrent_hashes, auth.max_queued_logins",
            (*max_concurrent_hashes, *max_queued_logins)
                != (b.max_concurrent_hashes, b.max_queued_logins),
        );
    }

    /// The group-to-role map is reloaded; the provider, the client and what a token must be
    /// are fixed for the process (its key set and its logins are built on them).
    fn oidc(&mut self, a: &OidcConfig, b: &OidcConfig) {
        let OidcConfig {
            issuer,
            client_id,
            client_secret,
            scopes,
            redirect_path,
            username_claim,
            roles_claim,
            role_map: _,
            algorithms,
            audience,
            clock_skew,
            access_token_types,
            local_login,
            ca_certificates,
            keys,
        } = a;
        self.key("oidc.issuer", *issuer != b.issuer);
        self.key(
            "oidc.client_id, oidc.client_secret_file, oidc.scopes, oidc.redirect_path",
            (client_id, client_secret, scopes, redirect_path)
                != (&b.client_id, &b.client_secret, &b.scopes, &b.redirect_path),
        );
        self.key(
            "oidc.username_claim, oidc.roles_claim",
            (username_claim, roles_claim) != (&b.username_claim, &b.roles_claim),
        );
        self.key(
            "oidc.algorithms, oidc.audience, oidc.clock_skew_seconds, oidc.access_token_types",
            (algorithms, audience, clock_skew, access_token_types)
                != (
                    &b.algorithms,
                    &b.audience,
                    &b.clock_skew,
                    &b.access_token_types,
                ),
        );
        self.key("oidc.local_login", *local_login != b.local_login);
        self.key(
            "oidc.ca_file, oidc.jwks_*",
            (ca_certificates, keys) != (&b.ca_certificates, &b.keys),
        );
    }

    fn upstream(&mut self, a: &UpstreamConfig, b: &UpstreamConfig) {
        let UpstreamConfig {
            servers: _,
            health_path,
            health_interval,
            username,
            // Reloaded: the service account logs in with the new password (`ServiceAccount`).
            password: _,
            // With auth.source, as `Config::identity` (classified by the caller).
            identity: _,
            role_accounts,
            trust,
            docs_path,
            docs_refresh,
            timeouts,
            max_body_bytes,
            max_open_body_bytes,
            in_flight,
            login_backoff,
            answer_buffers,
        } = a;
        self.key("upstream.health_path", *health_path != b.health_path);
        self.key(
            "upstream.health_interval_ms",
            *health_interval != b.health_interval,
        );
        self.key("upstream.username", *username != b.username);
        self.key(
            "upstream.max_role_accounts, upstream.accounts_key_file",
            *role_accounts != b.role_accounts,
        );
        self.key(
            "upstream.ca_file, upstream.insecure_skip_verify",
            *trust != b.trust,
        );
        self.key("upstream.docs_path", *docs_path != b.docs_path);
        self.key(
            "upstream.docs_refresh_seconds",
            *docs_refresh != b.docs_refresh,
        );
        self.key(
            "upstream.connect_timeout_ms, upstream.read_timeout_ms",
            *timeouts != b.timeouts,
        );
        self.key(
            "upstream.max_body_bytes, upstream.max_open_body_bytes",
            (max_body_bytes, max_open_body_bytes) != (&b.max_body_bytes, &b.max_open_body_bytes),
        );
        self.key(
            "upstream.max_in_flight, upstream.max_queued, upstream.queue_timeout_ms",
            *in_flight != b.in_flight,
        );
        self.key(
            "upstream.login_backoff_min_ms, upstream.login_backoff_max_ms",
            *login_backoff != b.login_backoff,
        );
        self.key(
            "upstream.answer_buffer_bytes, upstream.answer_buffers_total_bytes",
            *answer_buffers != b.answer_buffers,
        );
    }

    fn log(&mut self, a: &LogConfig, b: &LogConfig) {
        let LogConfig {
            format,
            level: _,
            audit_file,
        } = a;
        self.key("log.format", *format != b.format);
        self.key("log.audit_file", *audit_file != b.audit_file);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &std::path::Path, server: &str) -> Config {
        let text = format!("[server]\ntls = false\n{server}\n");
        Config::from_toml_str(&text, &dir.join("c.toml"), dir).unwrap()
    }

    #[test]
    fn only_settings_a_running_process_cannot_take_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let running = config(dir.path(), "listen = \"127.0.0.1:1\"\nthreads = 2");
        assert!(needs_restart(&running, &running.clone()).is_empty());
        let moved = config(dir.path(), "listen = \"127.0.0.1:2\"\nthreads = 3");
        assert_eq!(
            needs_restart(&running, &moved),
            ["server.listen", "server.threads"]
        );
    }

    #[test]
    fn the_log_format_and_audit_file_need_a_restart_but_not_the_level() {
        let dir = tempfile::tempdir().unwrap();
        let running = config(dir.path(), "");
        let relogged = config(
            dir.path(),
            "[log]\nformat = \"json\"\nlevel = \"warn\"\naudit_file = \"audit.log\"",
        );
        assert_eq!(
            needs_restart(&running, &relogged),
            ["log.format", "log.audit_file"]
        );
        let quieter = config(dir.path(), "[log]\nlevel = \"warn\"");
        assert!(needs_restart(&running, &quieter).is_empty());
    }

    #[test]
    fn the_login_source_and_the_upstream_identity_need_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        crate::secrets::write_private(&dir.path().join("upstream.pass"), b"stand-in").unwrap();
        let upstream = "[upstream]\nservers = [\"http://127.0.0.1:1\"]\n";
        let running = config(dir.path(), upstream);
        let as_users = config(dir.path(), &format!("{upstream}identity = \"user\""));
        assert_eq!(needs_restart(&running, &as_users), ["upstream.identity"]);
        let checked_there = config(
            dir.path(),
            &format!("[auth]\nsource = \"dashboard\"\nlockout_attempts = 8\n{upstream}"),
        );
        assert_eq!(
            needs_restart(&running, &checked_there),
            ["auth.lockout_*", "auth.source", "upstream.identity"]
        );
    }

    #[test]
    fn a_changed_redis_password_is_named_though_its_debug_text_is_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            crate::secrets::write_private(&dir.path().join(name), text.as_bytes()).unwrap()
        };
        write("redis.key", "a deployment's redis key, 32 bytes or more");
        let redis = |password: &str| {
            write("redis.pass", password);
            config(
                dir.path(),
                "[state]\nbackend = \"redis\"\n[state.redis]\nurl = \"redis://127.0.0.1:1\"\n\
                 username = \"gw\"\npassword_file = \"redis.pass\"\n\
                 encryption_keys = [{ kid = \"1\", secret_file = \"redis.key\" }]",
            )
        };
        let running = redis("the first password");
        let same = redis("the first password");
        let rotated = redis("the second password");
        assert_eq!(
            format!("{:?}", running.state),
            format!("{:?}", rotated.state)
        );
        assert!(needs_restart(&running, &same).is_empty());
        assert_eq!(needs_restart(&running, &rotated), ["state"]);
    }

    #[test]
    fn turning_tls_on_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let plain = config(dir.path(), &format!("state_dir = {:?}", dir.path()));
        let generated = Config::from_toml_str(
            &format!("[server]\nstate_dir = {:?}\n", dir.path()),
            &dir.path().join("c.toml"),
            dir.path(),
        )
        .unwrap();
        assert_eq!(needs_restart(&plain, &generated), ["server.tls"]);
    }
}
