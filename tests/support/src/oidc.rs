//! A real OpenID Connect provider for the single sign-on tests: panva's `oidc-provider`
//! (OpenID Certified; pinned in tests/oidc/package.json, installed by
//! `deploy/install-deps.sh --test`) run by tests/oidc/provider.js on 127.0.0.1, stopped by
//! pid. Each account has groups; each account's script has a client whose
//! client_credentials tokens are JWTs carrying the account's `preferred_username` and
//! `groups`, for the resource [`RESOURCE`] (their audience). Keys are RSA, generated per
//! provider; rotating one restarts the provider with the new key first.

use std::fs;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{free_port, now_secs, Gateway};

/// The audience of the provider's access tokens (its resource indicator).
pub const RESOURCE: &str = "https://clustergate.test";
/// The gateway's client id at the provider (browser logins).
pub const BROWSER_CLIENT: &str = "clustergate";
/// The secret of every client.
const CLIENT_SECRET: &str = "script-client-secret-0123456789";
const START_DEADLINE: Duration = Duration::from_secs(20);

pub struct OidcProvider {
    dir: tempfile::TempDir,
    pub port: u16,
    pub issuer: String,
    /// Key ids, the signing one first.
    kids: Vec<String>,
    accounts: Vec<(String, Vec<String>)>,
    /// The gateways as one browser client: their callbacks, where logout returns, and
    /// where the provider sends back-channel logouts.
    browser_client: Option<(Vec<String>, String, Option<String>)>,
    child: Option<Child>,
    runs: u32,
}

fn provider_dir() -> PathBuf {
    let dir = Path::new(crate::REPO_ROOT).join("tests/oidc");
    assert!(
        dir.join("node_modules/oidc-provider/package.json").exists(),
        "oidc-provider is not installed in {}: run deploy/install-deps.sh --test",
        dir.display()
    );
    dir
}

impl OidcProvider {
    /// Starts a provider whose `accounts` hold the given groups, with one key, "k1".
    pub fn start(accounts: &[(&str, &[&str])]) -> OidcProvider {
        let port = free_port();
        let mut provider = OidcProvider {
            dir: tempfile::tempdir().unwrap(),
            port,
            issuer: format!("http://127.0.0.1:{port}"),
            kids: Vec::new(),
            accounts: accounts
                .iter()
                .map(|(name, groups)| {
                    (
                        name.to_string(),
                        groups.iter().map(|g| g.to_string()).collect(),
                    )
                })
                .collect(),
            browser_client: None,
            child: None,
            runs: 0,
        };
        provider.genkey("k1");
        provider.kids.push("k1".into());
        provider.launch();
        provider
    }

    /// An RSA key `kid` (bounded in time: a test never waits on it for long).
    fn genkey(&self, kid: &str) {
        let output = Command::new("timeout")
            .arg("30")
            .arg("node")
            .arg(provider_dir().join("provider.js"))
            .args(["genkey", self.key_prefix(kid).to_str().unwrap(), kid])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(output.status.success(), "provider.js genkey: {output:?}");
    }

    fn key_prefix(&self, kid: &str) -> PathBuf {
        self.dir.path().join(kid)
    }

    fn write_config(&self) -> PathBuf {
        let accounts: serde_json::Map<String, Value> = self
            .accounts
            .iter()
            .map(|(name, groups)| (name.clone(), json!({ "groups": groups })))
            .collect();
        let mut clients: Vec<Value> = self
            .accounts
            .iter()
            .map(|(name, _)| {
                json!({
                    "client_id": format!("script-{name}"), "client_secret": CLIENT_SECRET,
                    "grant_types": ["client_credentials"], "response_types": [],
                    "redirect_uris": [], "account": name,
                })
            })
            .collect();
        if let Some((callbacks, home, backchannel)) = &self.browser_client {
            let mut client = json!({
                "client_id": BROWSER_CLIENT, "client_secret": CLIENT_SECRET,
                "grant_types": ["authorization_code"], "response_types": ["code"],
                "redirect_uris": callbacks, "post_logout_redirect_uris": [home],
            });
            if let Some(uri) = backchannel {
                client["backchannel_logout_uri"] = json!(uri);
                // Its ID tokens and logout tokens then name the login session (`sid`).
                client["backchannel_logout_session_required"] = json!(true);
            }
            clients.push(client);
        }
        let keys: Vec<String> = self
            .kids
            .iter()
            .map(|kid| format!("{}.jwk.json", self.key_prefix(kid).display()))
            .collect();
        let config = json!({
            "port": self.port, "issuer": self.issuer, "resource": RESOURCE,
            "keys": keys, "accounts": accounts, "clients": clients,
        });
        let path = self.dir.path().join("provider.json");
        fs::write(&path, config.to_string()).unwrap();
        path
    }

    fn launch(&mut self) {
        let config = self.write_config();
        self.runs += 1;
        let log =
            fs::File::create(self.dir.path().join(format!("provider.{}.log", self.runs))).unwrap();
        let child = Command::new("node")
            .arg(provider_dir().join("provider.js"))
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + START_DEADLINE;
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the provider did not start:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn logs(&self) -> String {
        fs::read_to_string(self.dir.path().join(format!("provider.{}.log", self.runs)))
            .unwrap_or_default()
    }

    /// Stops the provider (SIGTERM by pid, then SIGKILL), as an outage.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again after `stop`, on the same port and with the same keys.
    pub fn start_again(&mut self) {
        self.launch();
    }

    /// Registers the gateway as the browser client [`BROWSER_CLIENT`] (its callback and
    /// its home), restarting the provider (same port, same keys).
    pub fn register_gateway(&mut self, callback: &str, home: &str) {
        self.register_gateways(&[callback], home, None);
    }

    /// Several gateways as one client (their callbacks), with a back-channel logout URI.
    pub fn register_gateways(&mut self, callbacks: &[&str], home: &str, backchannel: Option<&str>) {
        let callbacks = callbacks.iter().map(|c| c.to_string()).collect();
        self.browser_client = Some((callbacks, home.into(), backchannel.map(str::to_string)));
        self.stop();
        self.launch();
    }

    /// A new key `kid` signs from now on; the old ones are still published.
    pub fn rotate(&mut self, kid: &str) {
        self.genkey(kid);
        self.kids.insert(0, kid.into());
        self.stop();
        self.launch();
    }

    /// A fresh access token of `account`'s script (client_credentials).
    pub async fn token(&self, account: &str) -> String {
        let reply = reqwest::Client::new()
            .post(format!("{}/token", self.issuer))
            .basic_auth(format!("script-{account}"), Some(CLIENT_SECRET))
            .form(&[("grant_type", "client_credentials"), ("scope", "api")])
            .send()
            .await
            .unwrap();
        let status = reply.status();
        let body: Value = reply.json().await.unwrap();
        assert_eq!(status, 200, "token for {account}: {body}\n{}", self.logs());
        body["access_token"].as_str().unwrap().to_string()
    }

    /// Claims as the provider's access tokens carry them, for `account`.
    pub fn claims(&self, account: &str, groups: &[&str]) -> Value {
        let now = now_secs();
        json!({
            "iss": self.issuer, "aud": RESOURCE, "sub": format!("script-{account}"),
            "preferred_username": account, "groups": groups, "client_id": format!("script-{account}"),
            "jti": format!("forged-{}", rand::random::<u64>()), "iat": now, "exp": now + 600,
            "scope": "api",
        })
    }

    /// `claims` signed RS256 with the provider's own private key `kid` (as only the
    /// provider can), to forge everything but the signature; typed `at+jwt`, as the
    /// provider's access tokens are.
    pub fn sign(&self, kid: &str, claims: &Value) -> String {
        self.sign_typed(kid, Some("at+jwt"), claims)
    }

    /// [`OidcProvider::sign`] with the header's `typ` (`None`: no `typ`), for the
    /// provider's other tokens (ID tokens, logout tokens).
    pub fn sign_typed(&self, kid: &str, typ: Option<&str>, claims: &Value) -> String {
        use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
        let der = fs::read(format!("{}.der", self.key_prefix(kid).display())).unwrap();
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(kid.into());
        header.typ = typ.map(str::to_string);
        encode(&header, claims, &EncodingKey::from_rsa_der(&der)).unwrap()
    }

    /// A back-channel logout token of this provider for the browser client, naming `sub`
    /// and/or `sid`, issued at `iat` (OpenID Connect Back-Channel Logout 1.0, 2.4).
    pub fn logout_token(&self, sub: Option<&str>, sid: Option<&str>, iat: i64) -> String {
        let mut claims = json!({
            "iss": self.issuer, "aud": BROWSER_CLIENT, "iat": iat, "exp": iat + 120,
            "jti": format!("logout-{}", rand::random::<u64>()),
            "events": { "http://schemas.openid.net/event/backchannel-logout": {} },
        });
        if let Some(sub) = sub {
            claims["sub"] = json!(sub);
        }
        if let Some(sid) = sid {
            claims["sid"] = json!(sid);
        }
        self.sign_typed(self.kids[0].as_str(), Some("logout+jwt"), &claims)
    }

    /// The public key `kid` as PEM, which anyone can fetch from the JWKS.
    pub fn public_pem(&self, kid: &str) -> String {
        fs::read_to_string(format!("{}.pub.pem", self.key_prefix(kid).display())).unwrap()
    }

    /// A key the provider never published, for a token naming an unknown `kid`.
    pub fn foreign_key(&self, kid: &str) {
        self.genkey(kid);
    }
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Gateway {
    /// Single sign-on with `provider`: its tokens for [`RESOURCE`], groups in `groups`,
    /// mapped by `role_map` (`"group" = ["role", ...]` lines); unknown kids fetched again
    /// after a second at most.
    pub fn oidc(self, provider: &OidcProvider, role_map: &[(&str, &[&str])]) -> Gateway {
        self.oidc_for(provider, RESOURCE, role_map)
    }

    /// [`Gateway::oidc`] with access tokens for `audience` (the client id: `oidc.audience`'s
    /// default, which the provider's ID and logout tokens carry too).
    pub fn oidc_for(
        self,
        provider: &OidcProvider,
        audience: &str,
        role_map: &[(&str, &[&str])],
    ) -> Gateway {
        let mut gw = self
            .file("oidc-client.secret", CLIENT_SECRET)
            .public_url("http://127.0.0.1:{PORT}")
            .extra_toml("oidc", &format!("issuer = {:?}", provider.issuer))
            .extra_toml("oidc", &format!("client_id = {BROWSER_CLIENT:?}"))
            .extra_toml("oidc", "client_secret_file = \"oidc-client.secret\"")
            .extra_toml(
                "oidc",
                "scopes = [\"openid\", \"profile\", \"groups\", \"api\"]",
            )
            .extra_toml("oidc", &format!("audience = {audience:?}"))
            .extra_toml("oidc", "jwks_min_refresh_seconds = 1");
        for (group, roles) in role_map {
            gw = gw.extra_toml("oidc.role_map", &format!("{group:?} = {roles:?}"));
        }
        gw
    }
}
