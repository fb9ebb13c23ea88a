//! The credential sources' one contract (common/source_contract.rs; issue 34, item 1) run
//! against each source through the real gateway: the users file, the dashboard's own
//! accounts on the shared real dashboard, and single sign-on with the real oidc-provider.

use crate::common::*;
use serde_json::{json, Value};

const VIEWERS: &str = "ceph-viewers";

/// A username nobody has, here or on the dashboard.
fn nobody() -> String {
    format!(
        "cg-nobody-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

fn audited(gw: Gateway) -> Gateway {
    gw.extra_toml("log", &format!("audit_file = {CONTRACT_AUDIT_FILE:?}"))
}

/// A password source: `user` logs in with `password` and out with `/api/auth/logout`.
struct PasswordLogin<'a> {
    user: &'a str,
    password: &'a str,
}

impl SourceUnderTest for PasswordLogin<'_> {
    async fn accepted(&self, gw: &RunningGateway) -> String {
        gw.login(self.user, self.password).await
    }

    async fn refused(&self, gw: &RunningGateway) -> [Reply; 2] {
        let wrong_password = gw.try_login(self.user, "not-the-Password-1").await;
        assert_invalid_credentials(&wrong_password);
        let unknown_user = gw.try_login(&nobody(), self.password).await;
        [wrong_password, unknown_user]
    }

    fn refusals_audited(&self) -> bool {
        true
    }

    async fn log_out(&self, gw: &RunningGateway, credential: &str) {
        let reply = gw.logout(credential).await;
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
}

#[tokio::test]
async fn the_users_file_keeps_the_contract() {
    let dash = Dashboard::shared();
    let gw = audited(Gateway::with_dashboard_users().upstream(dash)).start();
    let source = PasswordLogin {
        user: VIEWER,
        password: VIEWER_PW,
    };
    credential_source_contract(&source, &gw, &read_only_permissions()).await;
}

#[tokio::test]
async fn the_dashboards_accounts_keep_the_contract() {
    let dash = Dashboard::shared();
    let gw = audited(Gateway::new().dashboard_accounts(5).upstream(dash)).start();
    let source = PasswordLogin {
        user: VIEWER,
        password: dash.password(VIEWER),
    };
    // What the dashboard's own login grants the account.
    let own = dash
        .send(
            reqwest::Method::POST,
            "/api/auth",
            None,
            V1,
            Some(&json!({"username": VIEWER, "password": dash.password(VIEWER)})),
        )
        .await;
    assert_eq!(own.status, 201, "{}", own.text());
    credential_source_contract(&source, &gw, &own.json()["permissions"]).await;
}

/// Single sign-on: the provider's access token of `account` (in group [`VIEWERS`]), ended
/// by the provider's back-channel logout.
struct ProviderToken<'a> {
    idp: &'a OidcProvider,
    account: &'a str,
}

impl ProviderToken<'_> {
    fn signed(&self, kid: &str, claims: &Value) -> String {
        self.idp.sign(kid, claims)
    }
}

impl SourceUnderTest for ProviderToken<'_> {
    async fn accepted(&self, _gw: &RunningGateway) -> String {
        self.idp.token(self.account).await
    }

    async fn refused(&self, gw: &RunningGateway) -> [Reply; 2] {
        let claims = self.idp.claims(self.account, &[VIEWERS]);
        self.idp.foreign_key("k-foreign");
        let forged = self.signed("k-foreign", &claims);
        let mut old = claims.clone();
        old["iat"] = json!(now_secs() - 7200);
        old["exp"] = json!(now_secs() - 3600);
        let expired = self.signed("k1", &old);
        let mut replies = Vec::new();
        for token in [forged, expired] {
            replies.push(gw.api_get("/api/health/minimal", Some(&token)).await);
        }
        [replies.remove(0), replies.remove(0)]
    }

    fn refusals_audited(&self) -> bool {
        false
    }

    async fn log_out(&self, gw: &RunningGateway, _credential: &str) {
        let sub = format!("script-{}", self.account);
        let logout = self.idp.logout_token(Some(&sub), None, now_secs());
        let request = gw
            .client()
            .post(gw.url("/auth/oidc/backchannel-logout"))
            .form(&[("logout_token", logout)]);
        let reply = gw.send(request).await;
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
}

#[tokio::test]
async fn single_sign_on_keeps_the_contract() {
    let dash = Dashboard::shared();
    let idp = OidcProvider::start(&[("watcher", &[VIEWERS])]);
    let gw = audited(
        Gateway::with_dashboard_users()
            .upstream(dash)
            .oidc(&idp, &[(VIEWERS, &["read-only"])]),
    )
    .start();
    let source = ProviderToken {
        idp: &idp,
        account: "watcher",
    };
    credential_source_contract(&source, &gw, &read_only_permissions()).await;
}
