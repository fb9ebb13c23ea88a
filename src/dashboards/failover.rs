//! What a request learns about the managers while it is forwarded, between health checks:
//! a manager that closed its connection or answered as a standby is asked whether it is
//! still the active one and marked at once when not, and a service account login a
//! standby refuses marks it too. The request path (`proxy`) turns each outcome into a
//! retry or an answer.

use std::sync::Arc;

use super::credentials::{CredentialError, ServiceAccount};
use super::login::LoginError;
use super::{health, Backend, BackendState, Upstreams};
use crate::state::UnixTime;

/// Asks `backend`'s health path whether it is still the active manager; one that is not
/// is marked, so that no other request goes there.
pub async fn probe_and_mark(upstreams: &Upstreams, backend: &Backend) -> BackendState {
    let timeout = upstreams.timeouts.standby_probe;
    let state = health::probe(upstreams, backend, timeout).await;
    if state != BackendState::Active {
        health::record(backend, state);
    }
    state
}

/// Why no service token came.
#[derive(Debug)]
pub enum TokenRefusal {
    /// `backend` refused the login as a standby (with this status): it is marked, and the
    /// request can go to the next manager.
    Standby(u16),
    /// The login failed otherwise.
    Failed(CredentialError),
}

/// The service account's token, logging in through `backend` when needed.
pub async fn service_token(
    account: &ServiceAccount,
    upstreams: &Upstreams,
    backend: &Arc<Backend>,
    now: UnixTime,
) -> Result<Arc<str>, TokenRefusal> {
    match account.token(upstreams, backend, now).await {
        Ok(token) => Ok(token),
        Err(CredentialError::Login(LoginError::NotActive(status))) => {
            health::record(backend, BackendState::Standby);
            Err(TokenRefusal::Standby(status))
        }
        Err(e) => Err(TokenRefusal::Failed(e)),
    }
}

/// Whether a request refused with the service token `refused` is sent again with a new
/// one: the account decides. When its store fails the request is sent again anyway, as
/// before the account decided; the retry then meets the store's error or logs in.
pub async fn renews(account: Option<&ServiceAccount>, refused: &Arc<str>, now: UnixTime) -> bool {
    let Some(account) = account else {
        return false;
    };
    account.refused(refused, now).await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "cannot discard the refused service token");
        true
    })
}
