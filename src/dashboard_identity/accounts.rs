//! [`RoleAccounts`]: one dashboard account per distinct set of roles, which the gateway
//! makes and keeps in step through the dashboard's own user and role API with the service
//! account, and logs in lazily. One per set of roles, not per person: answers can be
//! shared between the users of the same roles (the answer cache keys them by account), the
//! accounts stay as few as the combinations in use (capped by `upstream.max_role_accounts`),
//! and the gateway's audit names the person on every request.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::admin_api::{AdminApi, ScopesPermissions};
use super::{password, DashboardIdentity, IdentityError};
use crate::config::LoginBackoff;
use crate::dashboards::credentials::{AccountStores, CredentialError, ServiceAccount};
use crate::dashboards::failover::{self, TokenRefusal};
use crate::dashboards::login::LoginError;
use crate::dashboards::{Backend, Upstreams};
use crate::observe::metrics::Metrics;
use crate::releases;
use crate::secrets::Secret;
use crate::state::{AccountTokens, AccountUse, DashboardAttempts, StateError, UnixTime};
use crate::users::{CustomRole, RoleEdition, User};

/// The accounts the gateway manages are named `cg-<digest of their roles>`: no name a
/// person or the cluster's own tools choose looks like it.
pub const ACCOUNT_PREFIX: &str = "cg-";
/// The roles file's roles are mirrored on the dashboard as `cg-role-<tag>-<name>`.
pub const ROLE_PREFIX: &str = "cg-role-";

/// Separate the names' uses of the deployment's key from the passwords'. Names are keyed
/// so that two deployments in front of one cluster (two keys) never share an account or a
/// mirrored role: each would set the other's password, or its own definition of a role of
/// the same name, over and over.
const ACCOUNT_NAME_CONTEXT: &[u8] = b"clustergate dashboard account name\0";
const ROLE_TAG_CONTEXT: &[u8] = b"clustergate dashboard role tag\0";

/// An account brought in step is checked again after this long: someone may have changed
/// it on the dashboard directly (the gateway refuses to change it through itself).
const RECHECK: Duration = Duration::from_secs(300);

/// An account's use is recorded at most this often (seconds) by each process: `accounts
/// prune` counts unused time in days.
const RECORD_EVERY: UnixTime = 600;

pub struct RoleAccounts {
    /// The administrator account that makes and mends the others.
    service: Arc<ServiceAccount>,
    /// The deployment's key the names and passwords are derived from.
    key: Secret,
    /// The deployment's part of its mirrored roles' names (6 hex digits).
    role_tag: String,
    logins: AccountLogins,
    metrics: Arc<Metrics>,
    /// `upstream.max_role_accounts`.
    max: usize,
    accounts: Mutex<HashMap<Arc<str>, Arc<RoleAccount>>>,
}

/// Whether an account is brought in step although this process did so lately.
#[derive(Clone, Copy)]
enum Force {
    /// No: only after [`RECHECK`].
    No,
    /// Yes, its login was refused after this many mends: unless another request has
    /// mended it since.
    Since(u64),
}

/// What the accounts' logins share with the service account's: where their tokens are kept,
/// the dashboard's count of consecutive failed logins (the accounts too are disabled at its
/// 10th), and the backoff after a refusal; and where their use is recorded.
pub struct AccountLogins {
    pub tokens: Arc<dyn AccountTokens>,
    pub attempts: Arc<dyn DashboardAttempts>,
    pub backoff: LoginBackoff,
    pub uses: Arc<dyn AccountUse>,
}

/// One managed account: the dashboard roles it holds, and its login.
struct RoleAccount {
    name: Arc<str>,
    /// The dashboard's names of its roles: the system roles', and the mirrored ones.
    roles: Vec<String>,
    custom: Vec<CustomRole>,
    password: Secret,
    login: ServiceAccount,
    /// When it was last brought in step by this process.
    in_step: tokio::sync::Mutex<Option<Instant>>,
    /// How many times this process has brought it in step: the requests whose login was
    /// refused while another request was mending it need not mend it again.
    mended: AtomicU64,
    /// When this process last recorded its use (0: not yet).
    recorded: AtomicU64,
}

impl RoleAccounts {
    pub fn new(
        service: Arc<ServiceAccount>,
        key: Secret,
        logins: AccountLogins,
        metrics: Arc<Metrics>,
        max: usize,
    ) -> RoleAccounts {
        RoleAccounts {
            service,
            role_tag: role_tag(&key),
            key,
            logins,
            metrics,
            max,
            accounts: Mutex::new(HashMap::new()),
        }
    }

    /// The account for `user`'s roles, known to this process from now on; refused past
    /// `max` distinct sets of roles. A reload that changed what a custom role grants makes
    /// a new entry for the same account, which brings the mirrored role in step.
    fn account_for(&self, user: &User) -> Result<Arc<RoleAccount>, IdentityError> {
        let roles = self.dashboard_roles(user);
        let name = self.account_name(&roles);
        let mut accounts = self.accounts.lock().unwrap_or_else(PoisonError::into_inner);
        match accounts.get(&name) {
            Some(account) if same_definitions(&account.custom, &user.custom_roles) => {
                return Ok(account.clone())
            }
            Some(_) => {}
            None if accounts.len() >= self.max => {
                self.metrics
                    .dashboard_accounts
                    .change("account", "over_limit");
                return Err(IdentityError::TooManyRoleSets(self.max));
            }
            None => {}
        }
        let password = password::derive(&self.key, &name);
        let login = ServiceAccount::new(
            name.to_string(),
            password.clone(),
            self.service.accept().to_string(),
            AccountStores {
                tokens: self.logins.tokens.of(&name),
                attempts: self.logins.attempts.clone(),
            },
            self.logins.backoff,
            self.metrics.clone(),
        )
        .role_account();
        let account = Arc::new(RoleAccount {
            roles,
            custom: sorted_custom(user),
            password,
            login,
            in_step: tokio::sync::Mutex::new(None),
            mended: AtomicU64::new(0),
            recorded: AtomicU64::new(0),
            name: name.clone(),
        });
        accounts.insert(name, account.clone());
        Ok(account)
    }

    /// Makes or mends `account` on `backend` unless this process did within [`RECHECK`];
    /// `Force::Since(n)`: now (its login was refused after `n` mends), unless another
    /// request mended it meanwhile. Custom roles first: the account names them.
    async fn keep_in_step(
        &self,
        account: &RoleAccount,
        upstreams: &Upstreams,
        backend: &Arc<Backend>,
        now: UnixTime,
        force: Force,
    ) -> Result<(), IdentityError> {
        let mut in_step = account.in_step.lock().await;
        let done_already = match force {
            Force::No => in_step.is_some_and(|at| at.elapsed() < RECHECK),
            Force::Since(seen) => account.mended.load(Ordering::Acquire) != seen,
        };
        if done_already {
            return Ok(());
        }
        let force = matches!(force, Force::Since(_));
        let token = self.service_token(upstreams, backend, now).await?;
        let done = self
            .bring_in_step(account, upstreams, backend, &token, force)
            .await;
        // The service token was refused (revoked, expired early): once with a new one.
        let service_refused = matches!(done, Err(IdentityError::Refused { status: 401, .. }));
        if service_refused && self.service.refused(&token, now).await.unwrap_or(true) {
            let token = self.service_token(upstreams, backend, now).await?;
            self.bring_in_step(account, upstreams, backend, &token, force)
                .await?;
        } else {
            done?;
        }
        *in_step = Some(Instant::now());
        account.mended.fetch_add(1, Ordering::Release);
        Ok(())
    }

    pub(super) async fn service_token(
        &self,
        upstreams: &Upstreams,
        backend: &Arc<Backend>,
        now: UnixTime,
    ) -> Result<Arc<str>, IdentityError> {
        match failover::service_token(&self.service, upstreams, backend, now).await {
            Ok(token) => Ok(token),
            Err(TokenRefusal::Standby(status)) => Err(IdentityError::Standby(status)),
            Err(TokenRefusal::Failed(e)) => Err(IdentityError::Service(e)),
        }
    }

    /// The mirrored roles, then the account, with the service account's `token`.
    async fn bring_in_step(
        &self,
        account: &RoleAccount,
        upstreams: &Upstreams,
        backend: &Arc<Backend>,
        token: &str,
        reset: bool,
    ) -> Result<(), IdentityError> {
        let api = self.admin_api(upstreams, backend, token);
        let edition = releases::family(backend.release()).edition;
        for custom in &account.custom {
            self.mirror_role(&api, custom, edition).await?;
        }
        self.set_account(&api, account, reset).await
    }

    /// The dashboard role `cg-role-<tag>-<name>` granting what `custom` grants, made or set.
    async fn mirror_role(
        &self,
        api: &AdminApi<'_>,
        custom: &CustomRole,
        edition: RoleEdition,
    ) -> Result<(), IdentityError> {
        let name = self.mirrored_role(&custom.name);
        let wanted = scopes_permissions(custom, edition);
        let found = api.role(&name).await?;
        if found.as_ref() == Some(&wanted) {
            return Ok(());
        }
        let result = api.put_role(&name, &wanted, found.is_some()).await;
        self.count("role", &result);
        result
    }

    /// Creates the account, or sets it when it differs from the gateway's (other roles,
    /// disabled, a password change required) or `reset` (its login was refused: deleted,
    /// password changed or expired behind the gateway's back). Creating is idempotent
    /// between gateways: one that finds the account made meanwhile checks it as any account
    /// found, and sets it only where it differs.
    async fn set_account(
        &self,
        api: &AdminApi<'_>,
        account: &RoleAccount,
        reset: bool,
    ) -> Result<(), IdentityError> {
        let password = String::from_utf8_lossy(account.password.expose()).into_owned();
        let wanted: BTreeSet<String> = account.roles.iter().cloned().collect();
        let found = match api.account(&account.name).await? {
            Some(state) => Some(state),
            None => {
                let result = api
                    .create_account(&account.name, &password, &account.roles)
                    .await;
                self.count("create", &result);
                if result? {
                    tracing::info!(account = %account.name, roles = ?account.roles, "created the dashboard account these roles act as");
                    return Ok(());
                }
                // Made meanwhile by another gateway of this deployment (the name is keyed
                // by its key): checked as any account found, not set again, which would
                // end the tokens that gateway has just had.
                api.account(&account.name).await?
            }
        };
        let needs_setting = found.is_none_or(|state| {
            reset || state.roles != wanted || !state.enabled || state.update_required
        });
        if !needs_setting {
            return Ok(());
        }
        let result = api
            .set_account(&account.name, &password, &account.roles)
            .await;
        self.count("update", &result);
        result?;
        tracing::warn!(account = %account.name, roles = ?account.roles, "set the dashboard account these roles act as back to the gateway's roles and password");
        Ok(())
    }

    /// Records that `account` serves a request at `now`, unless this process did within
    /// [`RECORD_EVERY`]. A record that fails costs the request nothing.
    async fn record_use(&self, account: &RoleAccount, now: UnixTime) {
        let last = account.recorded.load(Ordering::Acquire);
        let due = now >= last.saturating_add(RECORD_EVERY);
        if !due
            || account
                .recorded
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return;
        }
        if let Err(e) = self.logins.uses.record(&account.name, now).await {
            tracing::warn!(account = %account.name, error = %e, "cannot record the dashboard account's use: `clustergate accounts prune` may remove it although in use (it is made again on its next request)");
        }
    }

    /// The dashboard's user and role API on `backend`, called with the service `token`.
    pub(super) fn admin_api<'a>(
        &'a self,
        upstreams: &'a Upstreams,
        backend: &'a Backend,
        token: &'a str,
    ) -> AdminApi<'a> {
        AdminApi {
            upstreams,
            backend,
            token,
            accept: self.service.accept(),
        }
    }

    pub(super) async fn recorded_uses(&self) -> Result<BTreeMap<String, UnixTime>, StateError> {
        self.logins.uses.last_uses().await
    }

    pub(super) async fn forget_uses(&self, accounts: &[String]) -> Result<(), StateError> {
        self.logins.uses.forget(accounts).await
    }

    fn count<T>(&self, action: &'static str, result: &Result<T, IdentityError>) {
        let outcome = match result {
            Ok(_) => "ok",
            Err(IdentityError::Refused { .. }) => "refused",
            Err(_) => "error",
        };
        self.metrics.dashboard_accounts.change(action, outcome);
    }

    /// The account's token: a login refused is met once by setting the account again.
    async fn log_in(
        &self,
        account: &RoleAccount,
        upstreams: &Upstreams,
        backend: &Arc<Backend>,
        now: UnixTime,
    ) -> Result<Arc<str>, IdentityError> {
        let seen = account.mended.load(Ordering::Acquire);
        match account.login.token(upstreams, backend, now).await {
            // Refused now, or by a login of another request (or gateway) a moment ago.
            Err(
                CredentialError::Login(LoginError::Refused(_)) | CredentialError::BackingOff { .. },
            ) => {}
            other => return other.map_err(login_error),
        }
        self.keep_in_step(account, upstreams, backend, now, Force::Since(seen))
            .await?;
        account
            .login
            .password_set_by_gateway()
            .await
            .map_err(CredentialError::Store)?;
        match account.login.token(upstreams, backend, now).await {
            Err(CredentialError::Login(LoginError::Refused(_))) => {
                Err(IdentityError::LoginStillRefused(account.name.to_string()))
            }
            other => other.map_err(login_error),
        }
    }
}

#[async_trait]
impl DashboardIdentity for RoleAccounts {
    fn seen_as(&self, user: &User) -> Arc<str> {
        self.account_name(&self.dashboard_roles(user))
    }

    async fn token(
        &self,
        user: &User,
        upstreams: &Upstreams,
        backend: &Arc<Backend>,
        now: UnixTime,
    ) -> Result<Arc<str>, IdentityError> {
        let account = self.account_for(user)?;
        self.keep_in_step(&account, upstreams, backend, now, Force::No)
            .await?;
        let token = Box::pin(self.log_in(&account, upstreams, backend, now)).await?;
        self.record_use(&account, now).await;
        Ok(token)
    }

    async fn refused(&self, user: &User, refused: &Arc<str>, now: UnixTime) -> bool {
        let Ok(account) = self.account_for(user) else {
            return false;
        };
        account
            .login
            .refused(refused, now)
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot discard the refused account token");
                true
            })
    }
}

fn login_error(e: CredentialError) -> IdentityError {
    match e {
        CredentialError::Login(LoginError::NotActive(status)) => IdentityError::Standby(status),
        e => IdentityError::Login(e),
    }
}

impl RoleAccounts {
    /// `cg-` and 16 hex digits of a keyed digest of the account's dashboard `roles`
    /// (sorted): users holding the same roles act as the same account. 64 bits: no two
    /// sets of roles in use meet.
    fn account_name(&self, roles: &[String]) -> Arc<str> {
        let digest = password::keyed_digest(
            &self.key,
            ACCOUNT_NAME_CONTEXT,
            roles.iter().map(String::as_str),
        );
        let text = base16(&digest.as_ref()[..8]);
        Arc::from(format!("{ACCOUNT_PREFIX}{text}"))
    }

    /// Whether this deployment names the account holding `roles` `name`.
    pub(super) fn names_account(&self, name: &str, roles: &BTreeSet<String>) -> bool {
        let roles: Vec<String> = roles.iter().cloned().collect();
        *self.account_name(&roles) == *name
    }

    /// Whether `name` is one of this deployment's mirrored roles.
    pub(super) fn is_own_role(&self, name: &str) -> bool {
        is_mirrored_role(name) && name.starts_with(&self.mirrored_role(""))
    }

    /// The dashboard's name of the roles file's role `name`.
    fn mirrored_role(&self, name: &str) -> String {
        format!("{ROLE_PREFIX}{}-{name}", self.role_tag)
    }

    /// The roles the account holds on the dashboard, sorted: the user's system roles as
    /// they are (the dashboard applies its own release's definitions), its custom roles
    /// mirrored.
    fn dashboard_roles(&self, user: &User) -> Vec<String> {
        let system = user.roles.iter().map(|r| r.name().to_string());
        let custom = user
            .custom_roles
            .iter()
            .map(|c| self.mirrored_role(&c.name));
        let roles: BTreeSet<String> = system.chain(custom).collect();
        roles.into_iter().collect()
    }
}

/// Whether `name` has the shape of the accounts the gateway makes: `cg-` and 16 lower-case
/// hex digits.
pub fn is_managed_account(name: &str) -> bool {
    name.strip_prefix(ACCOUNT_PREFIX)
        .is_some_and(|digits| digits.len() == 16 && is_lower_hex(digits))
}

/// Whether `name` has the shape of the roles the gateway mirrors: `cg-role-`, 6 lower-case
/// hex digits, `-` and a name.
pub fn is_mirrored_role(name: &str) -> bool {
    name.strip_prefix(ROLE_PREFIX)
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(tag, role)| tag.len() == 6 && is_lower_hex(tag) && !role.is_empty())
}

fn is_lower_hex(text: &str) -> bool {
    text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// 6 hex digits of a digest of the deployment's key.
fn role_tag(key: &Secret) -> String {
    let digest = password::keyed_digest(key, ROLE_TAG_CONTEXT, []);
    base16(&digest.as_ref()[..3])
}

fn base16(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `kept` (sorted, without duplicates) defines the same roles as `held`.
fn same_definitions(kept: &[CustomRole], held: &[CustomRole]) -> bool {
    held.iter().all(|c| kept.contains(c)) && kept.iter().all(|c| held.contains(c))
}

fn sorted_custom(user: &User) -> Vec<CustomRole> {
    let mut custom = user.custom_roles.clone();
    custom.sort_by(|a, b| a.name.cmp(&b.name));
    custom.dedup_by(|a, b| a.name == b.name);
    custom
}

/// What `custom` grants, as the dashboard of `edition` lists a role's permissions.
fn scopes_permissions(custom: &CustomRole, edition: RoleEdition) -> ScopesPermissions {
    let known = |scope: &&str| {
        let unknown = releases::answers(edition).unknown_scopes;
        !unknown.iter().any(|s| s.name() == *scope)
    };
    custom
        .grants
        .to_map(edition)
        .into_iter()
        .filter(|(scope, _)| known(scope))
        .map(|(scope, permissions)| {
            let permissions = permissions.into_iter().map(str::to_string).collect();
            (scope.to_string(), permissions)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::MemoryAccountTokens;
    use crate::users::{Grants, Role};

    fn custom(name: &str, scopes: &[(&str, &[&str])]) -> CustomRole {
        let owned: Vec<(String, Vec<String>)> = scopes
            .iter()
            .map(|(s, p)| (s.to_string(), p.iter().map(|p| p.to_string()).collect()))
            .collect();
        let (grants, _) =
            Grants::from_permissions(owned.iter().map(|(s, p)| (s.as_str(), p.as_slice())));
        CustomRole {
            name: name.into(),
            grants,
        }
    }

    fn user(name: &str, roles: &[Role], custom_roles: Vec<CustomRole>) -> User {
        let grants = custom_roles
            .iter()
            .fold(Grants::of(roles), |all, c| all.union(&c.grants));
        User {
            username: name.into(),
            password_hash: None,
            roles: roles.to_vec(),
            custom_roles,
            grants,
            enabled: true,
            provider_subject: None,
            api_key: None,
        }
    }

    fn accounts(max: usize) -> RoleAccounts {
        accounts_with_key(max, vec![7; 32])
    }

    fn accounts_with_key(max: usize, key: Vec<u8>) -> RoleAccounts {
        let metrics = Metrics::new(&prometheus::Registry::new()).unwrap();
        let attempts: Arc<dyn DashboardAttempts> =
            Arc::new(crate::state::MemoryDashboardAttempts::new(10));
        let backoff = LoginBackoff {
            min: Duration::from_secs(1),
            max: Duration::from_secs(60),
        };
        let service = Arc::new(ServiceAccount::new(
            "clustergate".into(),
            Secret::new(b"pw".to_vec()),
            "application/vnd.ceph.api.v1.0+json".into(),
            AccountStores {
                tokens: Arc::new(crate::state::MemoryUpstreamTokens::default()),
                attempts: attempts.clone(),
            },
            backoff,
            metrics.clone(),
        ));
        let key = Secret::new(key);
        let logins = AccountLogins {
            tokens: Arc::new(MemoryAccountTokens),
            attempts,
            backoff,
            uses: Arc::new(crate::state::LocalAccountUse::open("/nonexistent".into()).unwrap()),
        };
        RoleAccounts::new(service, key, logins, metrics, max)
    }

    #[test]
    fn users_of_the_same_roles_act_as_one_account_and_others_as_another() {
        let accounts = accounts(4);
        let name = |user: &User| accounts.seen_as(user);
        let grafana = custom("grafana-viewer", &[("grafana", &["read"])]);
        let a = user("a", &[Role::ReadOnly, Role::PoolManager], vec![]);
        let b = user("b", &[Role::PoolManager, Role::ReadOnly], vec![]);
        let c = user("c", &[Role::ReadOnly], vec![]);
        let d = user("d", &[Role::ReadOnly], vec![grafana]);
        assert_eq!(name(&a), name(&b));
        assert_ne!(name(&a), name(&c));
        assert_ne!(name(&c), name(&d));
        assert!(name(&a).starts_with(ACCOUNT_PREFIX));
        assert_eq!(name(&a).len(), ACCOUNT_PREFIX.len() + 16);
        assert!(is_managed_account(&name(&a)));
        assert!(is_mirrored_role(&accounts.mirrored_role("grafana-viewer")));
        let tag = &accounts.role_tag;
        assert_eq!(tag.len(), 6);
        assert_eq!(
            accounts.dashboard_roles(&d),
            [format!("cg-role-{tag}-grafana-viewer"), "read-only".into()]
        );
    }

    #[test]
    fn two_deployments_never_name_an_account_or_a_mirrored_role_alike() {
        let one = accounts(4);
        let other = accounts_with_key(4, vec![8; 32]);
        let grafana = custom("grafana-viewer", &[("grafana", &["read"])]);
        let reader = user("a", &[Role::ReadOnly], vec![grafana]);
        assert_ne!(one.seen_as(&reader), other.seen_as(&reader));
        assert_ne!(one.mirrored_role("x"), other.mirrored_role("x"));
    }

    #[test]
    fn a_mirrored_role_names_no_scope_the_managers_release_does_not_know() {
        let role = custom(
            "storage",
            &[("pool", &["read", "update"]), ("nvme-of", &["read"])],
        );
        let pacific = scopes_permissions(&role, RoleEdition::Pacific);
        assert_eq!(pacific.keys().collect::<Vec<_>>(), ["pool"]);
        assert_eq!(
            pacific["pool"].iter().collect::<Vec<_>>(),
            ["read", "update"]
        );
        let tentacle = scopes_permissions(&role, RoleEdition::Tentacle);
        assert_eq!(tentacle.keys().collect::<Vec<_>>(), ["nvme-of", "pool"]);
    }

    #[test]
    fn past_the_limit_a_new_set_of_roles_is_refused_and_known_ones_still_served() {
        let accounts = accounts(2);
        let first = user("a", &[Role::ReadOnly], vec![]);
        let second = user("b", &[Role::PoolManager], vec![]);
        let third = user("c", &[Role::BlockManager], vec![]);
        accounts.account_for(&first).unwrap();
        accounts.account_for(&second).unwrap();
        assert!(matches!(
            accounts.account_for(&third),
            Err(IdentityError::TooManyRoleSets(2))
        ));
        let again = user("a2", &[Role::ReadOnly], vec![]);
        assert!(Arc::ptr_eq(
            &accounts.account_for(&again).unwrap(),
            &accounts.account_for(&first).unwrap()
        ));
    }

    #[test]
    fn a_changed_definition_of_a_custom_role_makes_the_account_come_in_step_again() {
        let accounts = accounts(1);
        let before = user("a", &[], vec![custom("r", &[("pool", &["read"])])]);
        let after = user("a", &[], vec![custom("r", &[("osd", &["read"])])]);
        let first = accounts.account_for(&before).unwrap();
        let second = accounts.account_for(&after).unwrap();
        assert_eq!(first.name, second.name, "the same account");
        assert!(
            !Arc::ptr_eq(&first, &second),
            "a new entry, not yet in step"
        );
        assert_eq!(second.custom, after.custom_roles);
    }
}
