//! Ceph 20.2's multi-cluster management through the gateway: a hub (a 20.2 cluster of its
//! own) adds a second real 20.2 cluster (the shared one) whose dashboard stands behind a
//! gateway, given the gateway's URL. The hub logs in there (with `ttl`) and makes its later
//! calls through the gateway with the token it keeps, which is the gateway's own: a logout
//! at the gateway ends it. The hub needs an orchestrator to add a cluster (it lists its
//! hosts for the remote's CORS setting): Ceph's own `test_orchestrator` module.

use std::time::Duration;

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};

/// The hub's stored entry for `alias`.
fn entry<'a>(config: &'a Value, alias: &str) -> &'a Value {
    config["config"]
        .as_object()
        .expect("the hub's configuration")
        .values()
        .flat_map(|clusters| clusters.as_array().expect("a cluster list"))
        .find(|c| c["cluster_alias"] == alias)
        .unwrap_or_else(|| panic!("no cluster {alias:?} in {config}"))
}

#[tokio::test]
async fn a_hub_manages_a_cluster_through_its_gateway_with_the_gateways_token() {
    let hub = Dashboard::dedicated(DashboardOptions {
        release: Some("20.2"),
        ..Default::default()
    });
    hub.ceph_ok(&["mgr", "module", "enable", "test_orchestrator"]);
    // (the module loads in the background)
    eventually(
        "the hub's orchestrator",
        Duration::from_secs(1),
        Duration::from_secs(60),
        || async {
            hub.ceph(&["orch", "set", "backend", "test_orchestrator"])
                .status
                .success()
        },
    )
    .await;
    let remote = Dashboard::shared_release("20.2");
    // Managed by no hub yet (the shared cluster may have been added by an earlier run).
    let remote_admin = remote.login(ADMIN).await;
    let unmanaged = json!({"value": []});
    let path = "/api/settings/MANAGED_BY_CLUSTERS";
    let reset = remote
        .send(Method::PUT, path, Some(&remote_admin), V1, Some(&unmanaged))
        .await;
    assert!((200..300).contains(&reset.status), "{}", reset.text());
    let gw = Gateway::with_admin_and_viewer().upstream(remote).start();
    let hub_admin = hub.login(ADMIN).await;
    let gateway_url = gw.url("").trim_end_matches('/').to_string();

    let before = gw.upstream_requests().await;
    let body = json!({
        "url": gateway_url,
        "cluster_alias": "behind-the-gateway",
        "username": ADMIN,
        "password": ADMIN_PW,
        "hub_url": hub.url(),
        "ttl": 2,
    });
    let added = hub
        .send(
            Method::POST,
            "/api/multi-cluster/auth",
            Some(&hub_admin),
            V1,
            Some(&body),
        )
        .await;
    assert!(
        (200..300).contains(&added.status),
        "the hub could not add the cluster: {} {}\n{}",
        added.status,
        added.text(),
        gw.logs()
    );
    // Its calls went through the gateway to the remote dashboard.
    assert!(gw.upstream_requests().await > before, "{}", gw.logs());
    for call in [
        "/api/health/get_cluster_fsid",
        "/ui-api/multi-cluster/set_cors_endpoint",
        "/api/settings/MANAGED_BY_CLUSTERS",
        "/api/user/admin",
    ] {
        assert!(
            gw.logs().contains(call),
            "the hub's {call} is not in the gateway's access log:\n{}",
            gw.logs()
        );
    }

    let config = hub
        .send(
            Method::GET,
            "/api/multi-cluster/get_config",
            Some(&hub_admin),
            V1,
            None,
        )
        .await;
    assert_eq!(config.status, 200, "{}", config.text());
    let config = config.json();
    let kept = entry(&config, "behind-the-gateway");
    assert_eq!(
        kept["url"].as_str().unwrap().trim_end_matches('/'),
        gateway_url
    );
    let token = kept["token"]
        .as_str()
        .expect("the hub keeps a token")
        .to_string();
    let claims = jwt_payload(&token);
    assert_ne!(
        claims["iss"], "ceph-dashboard",
        "not the gateway's token: {claims}"
    );
    assert!(
        claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap() <= 2 * 3600,
        "ttl not honoured: {claims}"
    );

    // The hub's token works at the gateway, until the gateway logs it out.
    assert_eq!(gw.check(&token).await.json()["username"], ADMIN);
    let fsid = || {
        gw.api(
            Method::GET,
            "/api/health/get_cluster_fsid",
            Some(&token),
            None,
        )
    };
    let served = fsid().await;
    assert_eq!(served.status, 200, "{}", served.text());
    assert_eq!(gw.logout(&token).await.status, 200);
    let refused = fsid().await;
    assert_eq!(refused.status, 401, "{}", refused.text());
}
