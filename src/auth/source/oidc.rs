//! Single sign-on (`[oidc]`): the OpenID Connect provider's access tokens are accepted as
//! bearer tokens, and the gateway tokens its browser logins got (`sso.rs`) carry the
//! provider identity; either maps the user's groups to roles by the role map in force now.
//! The provider's back-channel logout ends both. Provider users are shown apart from the
//! users file's (`display_name`). The provider checks passwords itself.

use std::sync::Arc;

use arc_swap::ArcSwap;
use async_trait::async_trait;

use super::{Bearer, CredentialSource, LoggedIn, LoginAttempt};
use crate::auth::{AuthError, AuthSubject, Authenticated, TokenRejection};
use crate::observe::metrics::Metrics;
use crate::oidc::{KeyError, OidcError, Provider};
use crate::state::{CredentialResets, StateError, UnixTime};
use crate::tokens::{Claims, ProviderIdentity};
use crate::users::{User, UserDb, PROVIDER_NAME_PREFIX};

/// Where the UI's login page sends the browser (relative, as the dashboard's SAML
/// `auth/saml2/login`), under `/auth/oidc/`.
pub const LOGIN_URL: &str = "auth/oidc/login";

pub struct OidcSource {
    provider: Arc<Provider>,
    /// The users file's names, which provider users are shown apart from.
    users: Arc<ArcSwap<UserDb>>,
    /// Where back-channel logouts are recorded.
    resets: Arc<dyn CredentialResets>,
    metrics: Arc<Metrics>,
}

#[async_trait]
impl CredentialSource for OidcSource {
    fn method(&self) -> &'static str {
        "oidc"
    }

    /// The provider checks passwords at its own login page: `POST /api/auth` is closed
    /// when this source answers it (`oidc.local_login = false`).
    async fn log_in(
        &self,
        _attempt: LoginAttempt<'_>,
        _subject: &mut AuthSubject,
    ) -> Result<LoggedIn, AuthError> {
        Err(AuthError::LocalLoginClosed)
    }

    fn issued(&self, claims: &Claims) -> bool {
        claims.idp.is_some()
    }

    /// A single sign-on session: the groups map to roles as the role map says now.
    async fn authenticate(
        &self,
        claims: &Claims,
        now: UnixTime,
    ) -> Result<Authenticated, TokenRejection> {
        let identity = claims.idp.as_ref().ok_or(TokenRejection::UnknownUser)?;
        // The provider's back-channel logout ended the user's sessions (any gateway).
        let ended = self.logout_at(identity, now).await?;
        if ended_by_logout(ended, Some(claims.iat)) {
            return Err(TokenRejection::Revoked);
        }
        // The users file has taken the name since the login: a new login shows the
        // user apart (`oidc:<name>`).
        if self.users.load().contains(&claims.username) {
            return Err(TokenRejection::UnknownUser);
        }
        let user = self.provider.user_for(claims.username.clone(), identity)?;
        Ok(Authenticated {
            user,
            upstream: None,
        })
    }

    /// The user of a provider access token (one that names the provider as its issuer),
    /// with the roles their groups map to; the service account acts for them upstream.
    async fn authenticate_bearer(
        &self,
        bearer: &Bearer<'_>,
    ) -> Option<Result<Authenticated, TokenRejection>> {
        if !self.provider.named_in(bearer.token) {
            return None;
        }
        let user = self.bearer_user(bearer.token, bearer.now).await;
        self.metrics.oidc.provider_token(bearer_result(&user));
        Some(user.map(|user| Authenticated {
            user,
            upstream: None,
        }))
    }

    /// RP-initiated logout at the provider, coming back to the UI.
    fn logout_url(&self, _claims: &Claims) -> Option<String> {
        let provider = &self.provider;
        provider.logout_url(&format!("{}/", provider.home))
    }

    fn login_url(&self) -> Option<&'static str> {
        Some(LOGIN_URL)
    }
}

impl OidcSource {
    pub fn new(
        provider: Arc<Provider>,
        users: Arc<ArcSwap<UserDb>>,
        resets: Arc<dyn CredentialResets>,
        metrics: Arc<Metrics>,
    ) -> OidcSource {
        OidcSource {
            provider,
            users,
            resets,
            metrics,
        }
    }

    pub fn provider(&self) -> &Provider {
        &self.provider
    }

    /// `oidc.local_login`: whether passwords are taken at `POST /api/auth` too.
    pub fn local_login(&self) -> bool {
        self.provider.local_login
    }

    /// A provider token is refused once the provider's back-channel logout ended the
    /// sessions of its user (or of its login session) after it was issued.
    async fn bearer_user(&self, token: &str, now: UnixTime) -> Result<Arc<User>, TokenRejection> {
        let token = self.provider.verify(token, now).await?;
        let ended = self.logout_at(&token.identity, now).await?;
        if ended_by_logout(ended, token.issued_at) {
            return Err(TokenRejection::Revoked);
        }
        let name = self.display_name(token.username);
        Ok(self.provider.user_for(name, &token.identity)?)
    }

    /// When a back-channel logout last ended `identity`'s sessions: by its `sub`, or by
    /// its login session's `sid`.
    async fn logout_at(
        &self,
        identity: &ProviderIdentity,
        now: UnixTime,
    ) -> Result<Option<UnixTime>, StateError> {
        let by_sub = self
            .resets
            .reset_at(&self.logout_key("sub", &identity.sub), now)
            .await?;
        let by_sid = match &identity.sid {
            Some(sid) => {
                self.resets
                    .reset_at(&self.logout_key("sid", sid), now)
                    .await?
            }
            None => None,
        };
        Ok(by_sub.max(by_sid))
    }

    /// The name a provider user is shown as everywhere (the token check, the audit,
    /// `X-Forwarded-User`, logs): `oidc:<name>` when the users file has a user `<name>`
    /// (enabled or not), or `<name>` starts with `oidc:` itself. Users-file names never
    /// start with `oidc:`, so a provider user is never shown as one of its users, while
    /// the others keep the names they have at the provider.
    pub fn display_name(&self, name: String) -> String {
        if name.starts_with(PROVIDER_NAME_PREFIX) || self.users.load().contains(&name) {
            format!("{PROVIDER_NAME_PREFIX}{name}")
        } else {
            name
        }
    }

    /// Where a back-channel logout of a provider's `sub` or `sid` is recorded among the
    /// users' resets, and its token's `jti` among the used tokens: a name no users-file
    /// user can have (control characters are refused there).
    pub fn logout_key(&self, kind: &str, value: &str) -> String {
        format!(
            "\u{1}oidc\u{1}{kind}\u{1}{}\u{1}{value}",
            self.provider.issuer.text
        )
    }
}

/// A provider token's `clustergate_oidc_provider_tokens_total` label.
fn bearer_result(user: &Result<Arc<User>, TokenRejection>) -> &'static str {
    match user {
        Ok(_) => "valid",
        Err(TokenRejection::Provider(e)) => match e {
            OidcError::Expired => "expired",
            OidcError::NoRole { .. } => "no_role",
            OidcError::Key(KeyError::Unavailable) => "keys_unavailable",
            OidcError::NotAccessToken(_) => "not_access_token",
            _ => "invalid",
        },
        Err(TokenRejection::Revoked) => "logged_out",
        Err(_) => "error",
    }
}

/// Whether a token issued at `issued_at` was ended by a logout at `ended`; one that does
/// not say when it was issued is.
fn ended_by_logout(ended: Option<UnixTime>, issued_at: Option<UnixTime>) -> bool {
    match (ended, issued_at) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(at), Some(iat)) => iat < at,
    }
}
