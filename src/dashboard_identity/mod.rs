//! Who the dashboard sees on a user's request. The gateway checks each operation at the
//! edge, but the dashboard decides inside some answers by its caller's permissions (an
//! RGW user's keys, the health report's sections, the summary's tasks): behind the gateway
//! that caller must hold the user's roles, never the service account's.
//!
//! [`DashboardIdentity`] is the one seam between a forwarded request and the dashboard
//! account it acts as; its first resident is [`RoleAccounts`] (`upstream.identity =
//! "roles"`): one account the gateway manages per distinct set of roles. With
//! `upstream.identity = "user"` (and `auth.source = "dashboard"`) the user's own dashboard
//! session is carried instead, and with `"service"` the service account (`proxy`).

mod accounts;
mod admin_api;
mod inventory;
mod password;

use std::sync::Arc;

use async_trait::async_trait;

pub use accounts::{is_managed_account, is_mirrored_role, AccountLogins, RoleAccounts};
pub use inventory::{Inventory, ManagedAccount, Pruned};

use crate::dashboards::credentials::CredentialError;
use crate::dashboards::{Backend, ClientError, Upstreams};
use crate::state::{StateError, UnixTime};
use crate::users::User;

/// The dashboard account a user's forwarded requests act as.
#[async_trait]
pub trait DashboardIdentity: Send + Sync {
    /// The name of the account the dashboard sees for `user`: requests of users it names
    /// alike may share an answer.
    fn seen_as(&self, user: &User) -> Arc<str>;

    /// The dashboard token `user`'s request carries to `backend`, making or mending the
    /// account first when needed.
    async fn token(
        &self,
        user: &User,
        upstreams: &Upstreams,
        backend: &Arc<Backend>,
        now: UnixTime,
    ) -> Result<Arc<str>, IdentityError>;

    /// The dashboard refused `refused` on `user`'s request: whether it is sent again with
    /// a new token (at most once per request, as the service token).
    async fn refused(&self, user: &User, refused: &Arc<str>, now: UnixTime) -> bool;
}

/// Why a request has no token of the account it acts as.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// `upstream.max_role_accounts` distinct sets of roles have accounts already.
    #[error("the gateway acts for at most {0} distinct sets of roles")]
    TooManyRoleSets(usize),
    /// The dashboard refused to make or change an account or role (its policy, a service
    /// account without the user scope, a read-only cluster).
    #[error("the dashboard refused to {action} {name} (status {status}): {detail}")]
    Refused {
        action: &'static str,
        name: String,
        status: u16,
        detail: String,
    },
    /// The account was brought in step, and the dashboard still refuses its login.
    #[error("the dashboard refuses the login of {0} although the gateway has just set it")]
    LoginStillRefused(String),
    /// The backend answered as a standby: the request goes to the next manager.
    #[error("the backend is not the active manager (status {0})")]
    Standby(u16),
    #[error("no service account token: {0}")]
    Service(CredentialError),
    #[error(transparent)]
    Login(#[from] CredentialError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("unexpected answer of the dashboard's {0}")]
    BadReply(&'static str),
    /// The record of the accounts' uses (the `accounts` command).
    #[error("the accounts' uses: {0}")]
    Uses(StateError),
}
