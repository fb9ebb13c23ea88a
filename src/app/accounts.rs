//! `clustergate accounts list|prune`: the dashboard accounts the gateway manages
//! (`upstream.identity = "roles"`), read and removed through the active manager with the
//! service account, the way a starting gateway reaches them (`server`'s own builders).

use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

use super::dashboards::{role_accounts, service_side};
use super::server::StartError;
use crate::config::{Config, UpstreamIdentity};
use crate::dashboard_identity::{IdentityError, Inventory, ManagedAccount, Pruned};
use crate::dashboards::health::HealthChecker;
use crate::dashboards::Backend;
use crate::observe::metrics::Metrics;
use crate::state::{unix_now, StateError, UnixTime};

pub enum AccountsCommand {
    List,
    Prune {
        /// Accounts with no use recorded for this many days go.
        unused_for_days: u64,
        /// Only say what would go.
        dry_run: bool,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum AccountsError {
    #[error("upstream.identity is not \"roles\": the gateway manages no dashboard accounts")]
    NotManaged,
    #[error("{0}")]
    Start(#[from] StartError),
    #[error("{0}")]
    State(#[from] StateError),
    #[error("no manager of upstream.servers answers as the active one: start the cluster's managers, or check upstream.servers")]
    NoActiveManager,
    #[error("{0}")]
    Dashboard(#[from] IdentityError),
    #[error("cannot start the command's runtime: {0}")]
    Runtime(std::io::Error),
}

/// Runs `command` against the active manager of `config`'s dashboards; the text to print.
pub fn run(config: Config, command: AccountsCommand) -> Result<String, AccountsError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(AccountsError::Runtime)?;
    runtime.block_on(run_async(config, command))
}

async fn run_async(config: Config, command: AccountsCommand) -> Result<String, AccountsError> {
    let upstream = match (&config.upstream, config.identity()) {
        (Some(upstream), UpstreamIdentity::Roles) => upstream,
        _ => return Err(AccountsError::NotManaged),
    };
    let state_dir = &config.server.state_dir;
    let stores = config
        .state
        .clone()
        .build(state_dir, config.api_keys.max_keys)?;
    // The command's own registry: nothing scrapes it.
    let metrics = Metrics::new(&prometheus::Registry::new()).map_err(StartError::from)?;
    let (upstreams, service) = service_side(upstream, &config.api.vendor, &stores, &metrics)?;
    let accounts = role_accounts(upstream, &service, &stores, &metrics, state_dir)?;
    let checker = HealthChecker {
        upstreams: upstreams.clone(),
        account: service,
        interval: Duration::ZERO,
        release_learned: Box::new(|_, _| {}),
    };
    checker.check_all().await;
    let active = upstreams.active().ok_or(AccountsError::NoActiveManager)?;
    let now = unix_now();
    match command {
        AccountsCommand::List => {
            let inventory = accounts.inventory(&upstreams, &active, now).await?;
            Ok(listing(&inventory, &active, now))
        }
        AccountsCommand::Prune {
            unused_for_days,
            dry_run,
        } => {
            let unused_since = now.saturating_sub(unused_for_days.saturating_mul(86_400));
            let pruned = accounts
                .prune(&upstreams, &active, now, unused_since, dry_run)
                .await?;
            Ok(pruning(&pruned, unused_for_days, dry_run))
        }
    }
}

fn listing(inventory: &Inventory, active: &Arc<Backend>, now: UnixTime) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Dashboard accounts of this deployment on {} (the active manager):",
        active.base
    );
    if inventory.accounts.is_empty() {
        out.push_str("  none\n");
    }
    for account in &inventory.accounts {
        let _ = writeln!(
            out,
            "  {}  {:<22}  {:<8}  {}",
            account.name,
            last_use(account, now),
            state(account),
            account.roles.join(", ")
        );
    }
    if !inventory.roles.is_empty() {
        out.push_str("Mirrored roles of this deployment:\n");
    }
    for role in &inventory.roles {
        let _ = writeln!(out, "  {}  held by {} account(s)", role.name, role.held_by);
    }
    if !inventory.others.is_empty() {
        out.push_str("Accounts named like managed ones that this deployment's key does not name for the roles they hold (another deployment's, or changed on the dashboard; left alone):\n");
    }
    for name in &inventory.others {
        let _ = writeln!(out, "  {name}");
    }
    out
}

fn last_use(account: &ManagedAccount, now: UnixTime) -> String {
    match account.last_use {
        None => "no use recorded".into(),
        Some(at) => format!("used {} ago", age(now.saturating_sub(at))),
    }
}

fn state(account: &ManagedAccount) -> &'static str {
    match account.enabled {
        true => "enabled",
        false => "disabled",
    }
}

/// `seconds` as the largest whole unit: `40 s`, `12 min`, `3 h`, `5 d`.
fn age(seconds: u64) -> String {
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3_600 => format!("{} min", seconds / 60),
        3_600..86_400 => format!("{} h", seconds / 3_600),
        _ => format!("{} d", seconds / 86_400),
    }
}

fn pruning(pruned: &Pruned, days: u64, dry_run: bool) -> String {
    let verb = if dry_run { "Would remove" } else { "Removed" };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{verb} {} account(s) with no use recorded in the last {days} day(s){}",
        pruned.accounts.len(),
        names(&pruned.accounts)
    );
    let _ = writeln!(
        out,
        "{verb} {} mirrored role(s) no account holds any more{}",
        pruned.roles.len(),
        names(&pruned.roles)
    );
    if !dry_run && !pruned.accounts.is_empty() {
        out.push_str("An account removed while still in use is made again on its next request.\n");
    }
    out
}

fn names(names: &[String]) -> String {
    match names.is_empty() {
        true => String::new(),
        false => format!(": {}", names.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_age_is_told_in_its_largest_whole_unit() {
        assert_eq!(age(59), "59 s");
        assert_eq!(age(60), "1 min");
        assert_eq!(age(7_199), "1 h");
        assert_eq!(age(86_400 * 30 + 5), "30 d");
    }
}
