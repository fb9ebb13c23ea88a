//! The dashboard sees only the credential the gateway chose. It prefers a `token` cookie to
//! the `Authorization` header, and Python's cookie parser also splits on spaces: a client
//! cookie `a=1 token=X` forwarded as it came would make the dashboard act as whoever `X`
//! belongs to, and a bogus one would have every request refused and the service account
//! log in again each time. Against the real (shared) dashboard.

use crate::common::*;
use reqwest::Method;

/// Allowed to the dashboard's administrator, refused (403) to its read-only user.
const ADMIN_ONLY_READ: &str = "/api/settings";

/// Requests with a bogus smuggled cookie, sent this many at a time.
const REQUESTS: usize = 100;
const WAVE: usize = 20;

/// Cookie headers that smuggle `token` past a split on `;`.
fn smuggling(token: &str) -> [String; 3] {
    [
        format!("a=1 token={token}"),
        format!("cd-lang=en token={token}"),
        format!("a=1, token={token}"),
    ]
}

async fn get_with_cookie(gw: &RunningGateway, token: &str, cookie: &str) -> Reply {
    let req = gw
        .request(Method::GET, ADMIN_ONLY_READ, Some(token), Some(V1))
        .header("Cookie", cookie);
    gw.send(req).await
}

#[tokio::test]
async fn a_smuggled_viewer_cookie_does_not_change_whom_the_dashboard_serves() {
    let dash = Dashboard::shared();
    let gw = Gateway::with_dashboard_users().upstream(dash).start();
    // The premise: the dashboard tells its administrator from its read-only user here.
    let viewer_dashboard_token = dash.login(VIEWER).await;
    let direct = dash
        .send(
            Method::GET,
            ADMIN_ONLY_READ,
            Some(&viewer_dashboard_token),
            V1,
            None,
        )
        .await;
    assert_eq!(direct.status, 403, "viewer (direct): {}", direct.text());

    let admin = gw.login(ADMIN, ADMIN_PW).await;
    let plain = gw
        .api(Method::GET, ADMIN_ONLY_READ, Some(&admin), None)
        .await;
    assert_eq!(plain.status, 200, "admin: {}", plain.text());
    for cookie in smuggling(&viewer_dashboard_token) {
        let r = get_with_cookie(&gw, &admin, &cookie).await;
        assert_eq!(
            r.status,
            200,
            "admin with the cookie {:?}: the dashboard served someone else: {}",
            cookie.replace(&viewer_dashboard_token, "<viewer's dashboard token>"),
            r.text()
        );
    }
}

#[tokio::test]
async fn a_hundred_requests_with_a_bogus_smuggled_cookie_cost_at_most_one_service_login() {
    let dash = Dashboard::shared();
    let gw = Gateway::with_dashboard_users().upstream(dash).start();
    let admin = gw.login(ADMIN, ADMIN_PW).await;
    // The service account logs in on the first forwarded request.
    let first = gw
        .api(Method::GET, ADMIN_ONLY_READ, Some(&admin), None)
        .await;
    assert_eq!(first.status, 200, "{}", first.text());
    let logins = || gw.metric("clustergate_upstream_logins_total", &[]);
    let before = logins().await;

    // In waves of concurrent requests: refused together, they would renew the token together.
    let bogus = smuggling("bogus");
    let mut statuses = std::collections::BTreeMap::new();
    for wave in 0..REQUESTS / WAVE {
        let mut requests = tokio::task::JoinSet::new();
        for i in 0..WAVE {
            let cookie = &bogus[(wave * WAVE + i) % bogus.len()];
            let req = gw
                .request(Method::GET, ADMIN_ONLY_READ, Some(&admin), Some(V1))
                .header("Cookie", cookie);
            requests.spawn(async move { req.send().await.map(|r| r.status().as_u16()) });
        }
        while let Some(status) = requests.join_next().await {
            *statuses.entry(status.unwrap().unwrap()).or_insert(0) += 1;
        }
    }
    let new_logins = logins().await - before;
    assert!(
        new_logins <= 1.0,
        "{REQUESTS} requests made {new_logins} service logins (statuses {statuses:?})"
    );
    assert_eq!(
        statuses.get(&200),
        Some(&REQUESTS),
        "every request served as the admin it was checked as: {statuses:?}"
    );
}
