//! What `clustergate accounts list|prune` sees and removes: the dashboard accounts and
//! mirrored roles this deployment made, each account's last recorded use. An account is
//! this deployment's when its key names the roles it holds as the account is named (so
//! one whose roles were changed on the dashboard, or another deployment's, is left alone);
//! a mirrored role is when its name carries this deployment's tag. Removing an account
//! still in use costs nothing lasting: the gateway makes it again on its next request.

use std::sync::Arc;

use super::accounts::{is_managed_account, RoleAccounts};
use super::admin_api::ListedAccount;
use super::IdentityError;
use crate::dashboards::{Backend, Upstreams};
use crate::state::UnixTime;

/// The accounts and mirrored roles on one dashboard.
#[derive(Debug)]
pub struct Inventory {
    /// This deployment's accounts.
    pub accounts: Vec<ManagedAccount>,
    /// Accounts named like managed ones that this deployment's key does not name for the
    /// roles they hold: another deployment's, or changed on the dashboard.
    pub others: Vec<String>,
    /// This deployment's mirrored roles.
    pub roles: Vec<MirroredRole>,
}

#[derive(Debug)]
pub struct ManagedAccount {
    pub name: String,
    pub roles: Vec<String>,
    pub enabled: bool,
    /// Its last recorded use; `None`: none recorded (made before uses were recorded, or
    /// the record was lost).
    pub last_use: Option<UnixTime>,
}

#[derive(Debug)]
pub struct MirroredRole {
    pub name: String,
    /// How many accounts on the dashboard hold it.
    pub held_by: usize,
}

/// What `prune` removed (or, dry, would remove).
#[derive(Debug)]
pub struct Pruned {
    pub accounts: Vec<String>,
    pub roles: Vec<String>,
}

impl RoleAccounts {
    /// The accounts and mirrored roles on `backend` (the active manager).
    pub async fn inventory(
        &self,
        upstreams: &Upstreams,
        backend: &Arc<Backend>,
        now: UnixTime,
    ) -> Result<Inventory, IdentityError> {
        let token = self.service_token(upstreams, backend, now).await?;
        let api = self.admin_api(upstreams, backend, &token);
        let listed = api.accounts().await?;
        let role_names = api.role_names().await?;
        let uses = self.recorded_uses().await.map_err(IdentityError::Uses)?;
        let (ours, others): (Vec<&ListedAccount>, Vec<&ListedAccount>) = listed
            .iter()
            .filter(|a| is_managed_account(&a.name))
            .partition(|a| self.names_account(&a.name, &a.state.roles));
        let accounts = ours
            .into_iter()
            .map(|a| ManagedAccount {
                name: a.name.clone(),
                roles: a.state.roles.iter().cloned().collect(),
                enabled: a.state.enabled,
                last_use: uses.get(&a.name).copied(),
            })
            .collect();
        let roles = role_names
            .into_iter()
            .filter(|name| self.is_own_role(name))
            .map(|name| MirroredRole {
                held_by: listed
                    .iter()
                    .filter(|a| a.state.roles.contains(&name))
                    .count(),
                name,
            })
            .collect();
        let others = others.into_iter().map(|a| a.name.clone()).collect();
        Ok(Inventory {
            accounts,
            others,
            roles,
        })
    }

    /// Removes this deployment's accounts not used since `unused_since` (or with no use
    /// recorded), then its mirrored roles no account holds any more, and forgets the
    /// removed accounts' records; `dry`: only says what it would remove.
    pub async fn prune(
        &self,
        upstreams: &Upstreams,
        backend: &Arc<Backend>,
        now: UnixTime,
        unused_since: UnixTime,
        dry: bool,
    ) -> Result<Pruned, IdentityError> {
        let inventory = self.inventory(upstreams, backend, now).await?;
        let unused = |a: &&ManagedAccount| a.last_use.is_none_or(|at| at < unused_since);
        let gone: Vec<&ManagedAccount> = inventory.accounts.iter().filter(unused).collect();
        // Held by an account that stays (this deployment's or not): kept.
        let held_after = |r: &&MirroredRole| {
            let by_gone = gone.iter().filter(|a| a.roles.contains(&r.name)).count();
            r.held_by > by_gone
        };
        let pruned = Pruned {
            accounts: gone.iter().map(|a| a.name.clone()).collect(),
            roles: (inventory.roles.iter())
                .filter(|r| !held_after(r))
                .map(|r| r.name.clone())
                .collect(),
        };
        if !dry {
            self.remove(upstreams, backend, now, &pruned).await?;
        }
        Ok(pruned)
    }

    async fn remove(
        &self,
        upstreams: &Upstreams,
        backend: &Arc<Backend>,
        now: UnixTime,
        pruned: &Pruned,
    ) -> Result<(), IdentityError> {
        let token = self.service_token(upstreams, backend, now).await?;
        let api = self.admin_api(upstreams, backend, &token);
        for account in &pruned.accounts {
            api.delete_account(account).await?;
            tracing::info!(account = %account, "removed the unused dashboard account");
        }
        let forgotten = self.forget_uses(&pruned.accounts).await;
        forgotten.map_err(IdentityError::Uses)?;
        for role in &pruned.roles {
            api.delete_role(role).await?;
            tracing::info!(role = %role, "removed the mirrored role no account holds");
        }
        Ok(())
    }
}
