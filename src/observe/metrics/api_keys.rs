//! API keys (`auth::source::api_keys`): each presented key's result, and the keys
//! created, rotated and revoked through the gateway's key API.

use prometheus::{IntCounterVec, Opts, Registry};

use super::registered;

/// What became of a request that presented an API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyResult {
    Accepted,
    /// Not of the key format.
    Malformed,
    /// No key has its id, or its secret is not the key's.
    Unknown,
    Expired,
    Revoked,
    /// Its owner is no longer an enabled user, or holds none of its roles.
    Owner,
    /// From an address outside the key's networks.
    Address,
    RateLimited,
    /// The store could not answer.
    Error,
}

impl KeyResult {
    const ALL: [Self; 9] = [
        Self::Accepted,
        Self::Malformed,
        Self::Unknown,
        Self::Expired,
        Self::Revoked,
        Self::Owner,
        Self::Address,
        Self::RateLimited,
        Self::Error,
    ];

    fn label(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Malformed => "malformed",
            Self::Unknown => "unknown",
            Self::Expired => "expired",
            Self::Revoked => "revoked",
            Self::Owner => "owner",
            Self::Address => "address",
            Self::RateLimited => "rate_limited",
            Self::Error => "error",
        }
    }
}

/// A change made through the key API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyChange {
    Created,
    Rotated,
    Revoked,
}

impl KeyChange {
    const ALL: [Self; 3] = [Self::Created, Self::Rotated, Self::Revoked];

    fn label(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Rotated => "rotated",
            Self::Revoked => "revoked",
        }
    }
}

pub struct ApiKeyMetrics {
    requests: IntCounterVec,
    changes: IntCounterVec,
}

impl ApiKeyMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let requests = IntCounterVec::new(
            Opts::new(
                "clustergate_api_key_requests_total",
                "Requests that presented an API key, by result",
            ),
            &["result"],
        )?;
        let changes = IntCounterVec::new(
            Opts::new(
                "clustergate_api_key_changes_total",
                "API keys created, rotated and revoked through the gateway, by change",
            ),
            &["change"],
        )?;
        // Every label from the start (at 0), for `increase()` and alert rules.
        for result in KeyResult::ALL {
            requests.with_label_values(&[result.label()]);
        }
        for change in KeyChange::ALL {
            changes.with_label_values(&[change.label()]);
        }
        Ok(ApiKeyMetrics {
            requests: registered(registry, requests)?,
            changes: registered(registry, changes)?,
        })
    }

    pub fn request(&self, result: KeyResult) {
        self.requests.with_label_values(&[result.label()]).inc();
    }

    pub fn change(&self, change: KeyChange) {
        self.changes.with_label_values(&[change.label()]).inc();
    }
}
