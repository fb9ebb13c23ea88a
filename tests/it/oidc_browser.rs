//! A browser's single sign-on (issue 25, item 2), step by step over HTTP with a cookie
//! jar, against the real provider (tests/oidc/provider.js; its login form accepts any
//! password for a configured account) and the real dashboard: the UI's token check points
//! at the gateway's login; the gateway sends the browser to the provider with PKCE, state
//! and nonce; the callback lands it on the UI with a gateway token and cookie carrying the
//! mapped roles; a forged or replayed state is refused; logout sends the browser to the
//! provider's end_session_endpoint. tests/it/ui_browser.rs does it in headless Chromium.

use crate::common::*;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use reqwest::redirect::Policy;
use serde_json::{json, Value};

/// A browser as far as these steps need one: no redirects followed, cookies kept per
/// host and port (without paths or expiry: each test's browser is fresh).
struct Browser {
    client: reqwest::Client,
    jar: Mutex<HashMap<String, HashMap<String, String>>>,
}

fn jar_client() -> Browser {
    Browser {
        client: reqwest::Client::builder()
            .redirect(Policy::none())
            .build()
            .unwrap(),
        jar: Mutex::new(HashMap::new()),
    }
}

fn origin(url: &str) -> String {
    url.split('/').take(3).collect::<Vec<_>>().join("/")
}

impl Browser {
    fn get(&self, url: &str) -> Step<'_> {
        Step {
            browser: self,
            url: url.to_string(),
            request: self.client.get(url),
        }
    }

    /// The cookie `name` the browser holds for `url`'s origin.
    fn cookie(&self, url: &str, name: &str) -> Option<String> {
        self.jar
            .lock()
            .unwrap()
            .get(&origin(url))?
            .get(name)
            .cloned()
    }

    /// Holds `name` = `value` for `url`'s origin again (as a browser whose earlier copy of
    /// the cookie came back, or an attacker who kept it).
    fn keep_cookie(&self, url: &str, name: &str, value: &str) {
        let mut jar = self.jar.lock().unwrap();
        jar.entry(origin(url))
            .or_default()
            .insert(name.to_string(), value.to_string());
    }

    fn post(&self, url: &str) -> Step<'_> {
        Step {
            browser: self,
            url: url.to_string(),
            request: self.client.post(url),
        }
    }
}

struct Step<'a> {
    browser: &'a Browser,
    url: String,
    request: reqwest::RequestBuilder,
}

impl Step<'_> {
    fn form(mut self, form: &[(&str, &str)]) -> Self {
        self.request = self.request.form(form);
        self
    }

    fn header(mut self, name: &str, value: &str) -> Self {
        self.request = self.request.header(name, value);
        self
    }

    async fn send(self) -> Result<reqwest::Response, reqwest::Error> {
        let key = origin(&self.url);
        let cookies = self.browser.jar.lock().unwrap().get(&key).map(|c| {
            c.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; ")
        });
        let mut request = self.request;
        if let Some(cookies) = cookies.filter(|c| !c.is_empty()) {
            request = request.header("cookie", cookies);
        }
        let reply = request.send().await?;
        let mut jar = self.browser.jar.lock().unwrap();
        let kept = jar.entry(key).or_default();
        for set in reply.headers().get_all("set-cookie") {
            let pair = set.to_str().unwrap().split(';').next().unwrap();
            if let Some((name, value)) = pair.split_once('=') {
                match value.is_empty() {
                    true => kept.remove(name),
                    false => kept.insert(name.to_string(), value.to_string()),
                };
            }
        }
        Ok(reply)
    }
}

fn location(reply: &reqwest::Response) -> String {
    reply.headers()["location"].to_str().unwrap().to_string()
}

/// Follows the provider's redirects from `url` through its login form as `account`,
/// until it sends the browser to `callback`; returns that address.
async fn log_in_at_provider(
    browser: &Browser,
    url: &str,
    issuer: &str,
    account: &str,
    callback: &str,
) -> String {
    let mut url = url.to_string();
    for _ in 0..10 {
        if url.starts_with(callback) {
            return url;
        }
        let reply = browser.get(&url).send().await.unwrap();
        let status = reply.status().as_u16();
        if (300..400).contains(&status) {
            url = absolute(issuer, &location(&reply));
            continue;
        }
        let page = reply.text().await.unwrap();
        assert_eq!(status, 200, "{url}: {page}");
        // devInteractions' form: <form ... action="/interaction/UID" ...>
        let action = page
            .split("action=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("no form at {url}: {page}"));
        // The login form, or a consent form if the provider asks.
        let prompt = page
            .split("name=\"prompt\" value=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or("login");
        let form = browser
            .post(&absolute(issuer, action))
            .form(&[
                ("prompt", prompt),
                ("login", account),
                ("password", "anything"),
            ])
            .send()
            .await
            .unwrap();
        assert!(
            form.status().is_redirection(),
            "login form: {}",
            form.status()
        );
        url = absolute(issuer, &location(&form));
    }
    panic!("the provider never sent the browser back to {callback}");
}

fn absolute(base: &str, url: &str) -> String {
    if url.starts_with("http") {
        url.to_string()
    } else {
        format!("{base}{url}")
    }
}

fn query_value(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == name).then(|| percent_decode(v))
    })
}

fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

#[tokio::test]
async fn a_browser_logs_in_at_the_provider_and_lands_on_the_dashboard_with_its_mapped_roles() {
    let dash = Dashboard::shared();
    let mut idp = OidcProvider::start(&[("poolops", &["ceph-pools"]), ("drifter", &["staff"])]);
    let gw = Gateway::new()
        .upstream(dash)
        .oidc(&idp, &[("ceph-pools", &["pool-manager"])])
        .extra_toml("log", "audit_file = \"audit.log\"")
        .start();
    let callback = gw.url("/auth/oidc/callback");
    idp.register_gateway(&callback, &gw.url("/"));

    // The UI's login page asks the token check, which points it at the gateway's login.
    let check = gw
        .post_json("/api/auth/check", Some(V1), &json!({"token": null}))
        .await;
    assert_eq!(
        check.json()["login_url"],
        "auth/oidc/login",
        "{}",
        check.text()
    );

    let browser = jar_client();
    let start = browser
        .get(&gw.url("/auth/oidc/login"))
        .send()
        .await
        .unwrap();
    assert_eq!(start.status(), 302);
    let to_provider = location(&start);
    assert!(
        to_provider.starts_with(&format!("{}/auth?", idp.issuer)),
        "{to_provider}"
    );
    for (name, value) in [
        ("response_type", "code"),
        ("code_challenge_method", "S256"),
        ("client_id", BROWSER_CLIENT),
    ] {
        assert_eq!(
            query_value(&to_provider, name).as_deref(),
            Some(value),
            "{to_provider}"
        );
    }
    for name in ["state", "nonce", "code_challenge"] {
        assert!(
            query_value(&to_provider, name).is_some_and(|v| v.len() >= 43),
            "{name}: {to_provider}"
        );
    }
    let back = log_in_at_provider(&browser, &to_provider, &idp.issuer, "poolops", &callback).await;

    // A state that is not this login's is refused, and so is the code without the cookie.
    let forged = back.replace(&query_value(&back, "state").unwrap(), "forged-state");
    let reply = browser.get(&forged).send().await.unwrap();
    assert_eq!(reply.status(), 400);
    let reply = jar_client().get(&back).send().await.unwrap();
    assert_eq!(reply.status(), 400);

    let landed = browser.get(&back).send().await.unwrap();
    assert_eq!(landed.status(), 302, "{}", gw.logs());
    let home = location(&landed);
    let token = home
        .strip_prefix(&format!(
            "{}/#/login?access_token=",
            gw.url("").trim_end_matches('/')
        ))
        .unwrap_or_else(|| panic!("landed on {home}"))
        .to_string();
    let cookies: Vec<String> = landed
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    assert!(
        cookies
            .iter()
            .any(|c| c.starts_with(&format!("token={token};")) && c.contains("HttpOnly")),
        "{cookies:?}"
    );

    // What the UI then asks: the user, the mapped roles' permissions, sso.
    let check = gw.check(&token).await.json();
    assert_eq!(check["username"], "poolops", "{check}");
    assert_eq!(check["sso"], true);
    assert_eq!(
        check["permissions"]["pool"],
        json!(["create", "delete", "read", "update"])
    );
    assert!(check["permissions"].get("hosts").is_none(), "{check}");
    // The gateway's token (and the cookie) goes through the per-operation check.
    assert_eq!(gw.api_get("/api/pool", Some(&token)).await.status, 200);
    assert_eq!(gw.api_get("/api/host", Some(&token)).await.status, 403);
    let by_cookie = browser
        .get(&gw.url("/api/pool"))
        .header("Accept", V1)
        .send()
        .await
        .unwrap();
    assert_eq!(by_cookie.status(), 200);

    // Logout ends the gateway's session and sends the browser to the provider.
    let logout = browser
        .post(&gw.url("/api/auth/logout"))
        .header("Accept", V1)
        .header("Authorization", &format!("Bearer {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(logout.status(), 200);
    let logout: Value = logout.json().await.unwrap();
    let redirect = logout["redirect_url"].as_str().unwrap().to_string();
    assert!(
        redirect.starts_with(&format!("{}/session/end?", idp.issuer)),
        "{redirect}"
    );
    assert_eq!(
        query_value(&redirect, "post_logout_redirect_uri").as_deref(),
        Some(gw.url("/").as_str())
    );
    assert_eq!(gw.api_get("/api/pool", Some(&token)).await.status, 401);
    // The web UI may send the browser to the login page before it follows redirect_url
    // (its requests in flight meet 401s): the login then goes to the provider's logout,
    // once, rather than logging the user in again on the provider's standing session.
    let login_url = gw.url("/auth/oidc/login");
    let first = location(&browser.get(&login_url).send().await.unwrap());
    assert!(
        first.starts_with(&format!("{}/session/end?", idp.issuer)),
        "{first}"
    );
    let next = location(&browser.get(&login_url).send().await.unwrap());
    assert!(!next.contains("/session/end"), "{next}");

    let audit = std::fs::read_to_string(gw.dir().join("audit.log")).unwrap();
    let login: Value = audit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["event"] == "login")
        .unwrap_or_else(|| panic!("no login in\n{audit}"));
    assert_eq!(
        (
            login["user"].as_str(),
            login["auth"].as_str(),
            login["subject"].as_str()
        ),
        (Some("poolops"), Some("oidc"), Some("poolops")),
        "{login}"
    );
    assert_eq!(
        gw.metric("clustergate_oidc_logins_total", &[("result", "success")])
            .await,
        1.0
    );
    assert_eq!(
        gw.metric("clustergate_oidc_logins_total", &[("result", "bad_state")])
            .await,
        2.0
    );

    // No code, state, nonce or token reaches a log line (the access log never logs queries).
    let logs = gw.logs() + &audit;
    for (what, secret) in [
        ("code", query_value(&back, "code").unwrap()),
        ("state", query_value(&back, "state").unwrap()),
        ("nonce", query_value(&to_provider, "nonce").unwrap()),
        ("token", token.clone()),
    ] {
        assert!(
            !logs.contains(&secret),
            "the {what} is in the logs:\n{logs}"
        );
    }

    // A user whose groups map to no role is refused at the callback.
    let browser = jar_client();
    let start = browser
        .get(&gw.url("/auth/oidc/login"))
        .send()
        .await
        .unwrap();
    let back = log_in_at_provider(
        &browser,
        &location(&start),
        &idp.issuer,
        "drifter",
        &callback,
    )
    .await;
    assert_eq!(browser.get(&back).send().await.unwrap().status(), 403);
}

/// Logs `account` in through `gw` in a fresh browser; the gateway's token and the browser.
async fn sso_login(gw: &RunningGateway, idp: &OidcProvider, account: &str) -> (String, Browser) {
    let browser = jar_client();
    let start = browser
        .get(&gw.url("/auth/oidc/login"))
        .send()
        .await
        .unwrap();
    let callback = gw.url("/auth/oidc/callback");
    let back =
        log_in_at_provider(&browser, &location(&start), &idp.issuer, account, &callback).await;
    let landed = browser.get(&back).send().await.unwrap();
    assert_eq!(landed.status(), 302, "{}", gw.logs());
    let home = location(&landed);
    let token = home.rsplit("access_token=").next().unwrap().to_string();
    (token, browser)
}

#[tokio::test]
async fn the_providers_back_channel_logout_ends_the_users_sessions_on_every_gateway() {
    let dash = Dashboard::shared();
    let redis = RedisServer::start();
    let mut idp = OidcProvider::start(&[("poolops", &["ceph-pools"])]);
    let gateway = || {
        Gateway::new()
            .upstream(dash)
            .known_secret()
            .redis_state(&redis)
            .oidc(&idp, &[("ceph-pools", &["pool-manager"])])
    };
    let first = gateway().start();
    let second = gateway().start();
    let backchannel = first.url("/auth/oidc/backchannel-logout");
    idp.register_gateways(
        &[
            &first.url("/auth/oidc/callback"),
            &second.url("/auth/oidc/callback"),
        ],
        &first.url("/"),
        Some(&backchannel),
    );
    // Two browsers of the same user, one through each gateway.
    let (here, browser) = sso_login(&first, &idp, "poolops").await;
    let (there, _) = sso_login(&second, &idp, "poolops").await;
    for (gw, token) in [
        (&first, &here),
        (&second, &there),
        (&first, &there),
        (&second, &here),
    ] {
        assert_eq!(gw.api_get("/api/pool", Some(token)).await.status, 200);
    }
    // The first browser logs out at the gateway, then at the provider (its confirmation
    // form), which tells the gateway by the back channel.
    let redirect = first.logout(&here).await.json()["redirect_url"]
        .as_str()
        .unwrap()
        .to_string();
    let page = browser
        .get(&redirect)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let xsrf = page
        .split("name=\"xsrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no logout form: {page}"));
    let confirmed = browser
        .post(&format!("{}/session/end/confirm", idp.issuer))
        .form(&[("xsrf", xsrf), ("logout", "yes")])
        .send()
        .await
        .unwrap();
    assert!(
        confirmed.status().is_redirection(),
        "{}\n{}",
        confirmed.status(),
        idp.logs()
    );
    // The other browser's session, on the other gateway, has ended too (through Redis).
    eventually(
        "the back-channel logout",
        Duration::from_millis(100),
        Duration::from_secs(5),
        || async { second.api_get("/api/pool", Some(&there)).await.status == 401 },
    )
    .await;
    // A logout token not signed by the provider is refused.
    let forged = first
        .send(
            first
                .client()
                .post(&backchannel)
                .form(&[("logout_token", "e30.e30.x")]),
        )
        .await;
    assert_eq!(forged.status, 400);
    // A new login works again, from the next second on (token times are whole seconds).
    next_wall_clock_second().await;
    let (again, _) = sso_login(&second, &idp, "poolops").await;
    assert_eq!(second.api_get("/api/pool", Some(&again)).await.status, 200);
}

/// Issue 33, item 11: an authorization code used already (a replayed callback, with the
/// login's own state and cookie) is the client's 400 in the dashboard's shape, counted as
/// `bad_code`; before, 502 "the identity provider's token endpoint: answered 400", counted
/// as the gateway's error.
#[tokio::test]
async fn a_replayed_callback_is_the_clients_400_never_a_5xx() {
    let dash = Dashboard::shared();
    let mut idp = OidcProvider::start(&[("poolops", &["ceph-pools"])]);
    let gw = Gateway::new()
        .upstream(dash)
        .oidc(&idp, &[("ceph-pools", &["pool-manager"])])
        .start();
    let callback = gw.url("/auth/oidc/callback");
    idp.register_gateway(&callback, &gw.url("/"));
    let browser = jar_client();
    let start = browser
        .get(&gw.url("/auth/oidc/login"))
        .send()
        .await
        .unwrap();
    let back = log_in_at_provider(
        &browser,
        &location(&start),
        &idp.issuer,
        "poolops",
        &callback,
    )
    .await;
    let pending = browser.cookie(&callback, "cg_oidc_login").unwrap();
    assert_eq!(browser.get(&back).send().await.unwrap().status(), 302);
    browser.keep_cookie(&callback, "cg_oidc_login", &pending);
    let replayed = browser.get(&back).send().await.unwrap();
    assert_eq!(replayed.status(), 400, "{}", gw.logs());
    let body: Value = replayed.json().await.unwrap();
    // The dashboard's own answer to a bad auth request.
    assert_eq!(body["code"], "invalid_request", "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("refused the authorization code"),
        "{body}"
    );
    // No 5xx for the error-rate alert (clustergate_requests_total{status=~"5.."}).
    let metrics = gw.metrics().await;
    assert!(
        !metrics
            .lines()
            .any(|l| l.starts_with("clustergate_requests_total") && l.contains("status=\"5")),
        "{metrics}"
    );
    for (result, count) in [("bad_code", 1.0), ("error", 0.0), ("success", 1.0)] {
        assert_eq!(
            gw.metric("clustergate_oidc_logins_total", &[("result", result)])
                .await,
            count,
            "{result}"
        );
    }
}

/// The gateway token's claims (its payload, not checked here).
fn payload(token: &str) -> Value {
    let payload = token.split('.').nth(1).unwrap();
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    serde_json::from_slice(&base64::Engine::decode(&engine, payload).unwrap()).unwrap()
}

/// Issue 33, INFO of item 12: a logout token naming only the provider's login session
/// (`sid`) ends the gateway sessions of that login and no other (before: refused 400,
/// ending nothing).
#[tokio::test]
async fn a_logout_token_naming_only_sid_ends_that_login_session() {
    let dash = Dashboard::shared();
    let mut idp = OidcProvider::start(&[("poolops", &["ceph-pools"])]);
    let gw = Gateway::new()
        .upstream(dash)
        .oidc(&idp, &[("ceph-pools", &["pool-manager"])])
        .start();
    let backchannel = gw.url("/auth/oidc/backchannel-logout");
    idp.register_gateways(
        &[&gw.url("/auth/oidc/callback")],
        &gw.url("/"),
        Some(&backchannel),
    );
    let (one, _) = sso_login(&gw, &idp, "poolops").await;
    let (other, _) = sso_login(&gw, &idp, "poolops").await;
    let sid = payload(&one)["idp"]["sid"]
        .as_str()
        .unwrap_or_else(|| panic!("no sid in {}", payload(&one)))
        .to_string();
    assert_ne!(payload(&other)["idp"]["sid"], json!(sid));
    let logout = idp.logout_token(None, Some(&sid), now_secs());
    let reply = gw
        .send(
            gw.client()
                .post(&backchannel)
                .form(&[("logout_token", logout.as_str())]),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(gw.api_get("/api/pool", Some(&one)).await.status, 401);
    assert_eq!(gw.api_get("/api/pool", Some(&other)).await.status, 200);
}

#[test]
fn in_chromium_the_dashboards_own_ui_logs_in_at_the_provider_and_lands_on_its_landing_page() {
    sso_in_chromium("16.2");
}

#[test]
fn ceph_20_2_in_chromium_the_dashboards_own_ui_logs_in_at_the_provider() {
    sso_in_chromium("20.2");
}

fn sso_in_chromium(release: &'static str) {
    let ui = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui");
    assert!(
        ui.join("node_modules/playwright-core/package.json")
            .exists()
            && std::path::Path::new("/usr/bin/chromium").exists(),
        "playwright-core or chromium is missing: run deploy/install-deps.sh --test"
    );
    let dash = Dashboard::shared_release(release);
    let mut idp = OidcProvider::start(&[("poolops", &["ceph-admins"])]);
    let gw = Gateway::new()
        .upstream(dash)
        .oidc(&idp, &[("ceph-admins", &["administrator"])])
        .start();
    idp.register_gateway(&gw.url("/auth/oidc/callback"), &gw.url("/"));
    let shots = tempfile::tempdir().unwrap();
    let output = std::process::Command::new("timeout")
        .arg("180")
        .arg("node")
        .arg(ui.join("../oidc/ui.js"))
        .env("CG_SSO_URL", gw.url(""))
        .env("CG_SSO_ISSUER", &idp.issuer)
        .env("CG_SSO_ACCOUNT", "poolops")
        .env("CG_SSO_OUT", shots.path())
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{printed}");
    assert!(
        output.status.success(),
        "tests/oidc/ui.js:\n{printed}\n{}",
        gw.logs()
    );
}
