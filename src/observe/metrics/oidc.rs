//! Single sign-on (`[oidc]`): the provider's keys (refreshes and their result, how many
//! are held, when they were last fetched) and the provider tokens checked, by result.

use prometheus::{IntCounterVec, IntGauge, Opts, Registry};

/// The `result` values of the key refreshes, exported from the start (at 0).
const REFRESH_RESULTS: [&str; 2] = ["success", "failure"];

/// The `result` values of provider tokens checked.
pub const PROVIDER_TOKEN_RESULTS: [&str; 8] = [
    "valid",
    "invalid",
    "expired",
    "no_role",
    "keys_unavailable",
    "not_access_token",
    "logged_out",
    "error",
];

/// The `result` values of browser logins through the provider.
pub const LOGIN_RESULTS: [&str; 7] = [
    "success",
    "unavailable",
    "bad_state",
    "bad_code",
    "refused",
    "error",
    "invalid",
];

pub struct OidcMetrics {
    logins: IntCounterVec,
    key_refreshes: IntCounterVec,
    keys_held: IntGauge,
    last_refresh: IntGauge,
    provider_tokens: IntCounterVec,
}

impl OidcMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let logins = IntCounterVec::new(
            Opts::new(
                "clustergate_oidc_logins_total",
                "Browser logins through the identity provider (authorization code flow), by result; password logins are clustergate_logins_total",
            ),
            &["result"],
        )?;
        for result in LOGIN_RESULTS {
            logins.with_label_values(&[result]);
        }
        let key_refreshes = IntCounterVec::new(
            Opts::new(
                "clustergate_oidc_key_refreshes_total",
                "Fetches of the identity provider's signing keys (JWKS), scheduled or for an unknown kid, by result",
            ),
            &["result"],
        )?;
        for result in REFRESH_RESULTS {
            key_refreshes.with_label_values(&[result]);
        }
        let keys_held = IntGauge::new(
            "clustergate_oidc_keys",
            "Signing keys of the identity provider held now (0: provider tokens are refused with 503)",
        )?;
        let last_refresh = IntGauge::new(
            "clustergate_oidc_keys_last_refresh_timestamp_seconds",
            "When the identity provider's keys were last fetched successfully (Unix seconds; 0: never)",
        )?;
        let provider_tokens = IntCounterVec::new(
            Opts::new(
                "clustergate_oidc_tokens_total",
                "Identity provider access tokens checked on API requests, by result",
            ),
            &["result"],
        )?;
        for result in PROVIDER_TOKEN_RESULTS {
            provider_tokens.with_label_values(&[result]);
        }
        registry.register(Box::new(logins.clone()))?;
        registry.register(Box::new(key_refreshes.clone()))?;
        registry.register(Box::new(keys_held.clone()))?;
        registry.register(Box::new(last_refresh.clone()))?;
        registry.register(Box::new(provider_tokens.clone()))?;
        Ok(OidcMetrics {
            logins,
            key_refreshes,
            keys_held,
            last_refresh,
            provider_tokens,
        })
    }

    /// A browser login; `result` one of [`LOGIN_RESULTS`].
    pub fn login(&self, result: &'static str) {
        self.logins.with_label_values(&[result]).inc();
    }

    /// A fetch of the keys: `held` keys at `now` when it succeeded.
    pub fn key_refresh(&self, held: Option<(usize, u64)>) {
        let result = REFRESH_RESULTS[usize::from(held.is_none())];
        self.key_refreshes.with_label_values(&[result]).inc();
        if let Some((held, now)) = held {
            self.keys_held.set(i64::try_from(held).unwrap_or(i64::MAX));
            self.last_refresh
                .set(i64::try_from(now).unwrap_or(i64::MAX));
        }
    }

    /// The set was dropped (past `jwks_max_stale_seconds`).
    pub fn keys_dropped(&self) {
        self.keys_held.set(0);
    }

    /// A provider token checked; `result` one of [`PROVIDER_TOKEN_RESULTS`].
    pub fn provider_token(&self, result: &'static str) {
        self.provider_tokens.with_label_values(&[result]).inc();
    }
}
