//! Clusters that hold data (`deploy/ceph-dev/start-dashboard.sh --data`: a memstore OSD, a
//! radosgw known to the dashboard, a pool of size 1 with an RBD image, an RGW user), seen
//! through the gateway as an administrator, on 16.2 and 20.2: the pool with its stats, the
//! image, the RGW user and its keys.

use crate::common::*;
use reqwest::Method;
use serde_json::Value;

/// GET `path` through the gateway with API version `version`; the answer must be a 200.
async fn get(gw: &RunningGateway, token: &str, path: &str, version: &str) -> Value {
    let accept = format!("application/vnd.ceph.api.v{version}+json");
    let reply = gw
        .send(gw.request(Method::GET, path, Some(token), Some(&accept)))
        .await;
    assert_eq!(reply.status, 200, "GET {path}: {}", reply.text());
    reply.json()
}

async fn the_clusters_data_is_listed_through_the_gateway(release: &'static str) {
    let dash = Dashboard::with_data(release);
    let (pool, image, rgw_user) = (
        dash.get("CG_DATA_POOL"),
        dash.get("CG_DATA_IMAGE"),
        dash.get("CG_RGW_USER"),
    );
    let gw = Gateway::with_dashboard_users().upstream(&dash).start();
    let token = gw.login(ADMIN, ADMIN_PW).await;

    let pools = get(&gw, &token, "/api/pool?stats=true", "1.0").await;
    let listed = pools
        .as_array()
        .and_then(|pools| pools.iter().find(|p| p["pool_name"] == pool))
        .unwrap_or_else(|| panic!("Ceph {release}: no pool {pool} in {pools}"));
    assert_eq!(listed["size"], 1, "{listed}");
    assert!(
        listed["stats"]["max_avail"].is_object() || listed["stats"]["max_avail"].is_number(),
        "Ceph {release}: the pool's stats: {listed}"
    );

    // The image list is version 2.0 (paginated); each pool's images are its `value`.
    let images = get(&gw, &token, "/api/block/image", "2.0").await;
    let names: Vec<&str> = images
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["value"].as_array().into_iter().flatten())
        .filter_map(|i| i["name"].as_str())
        .collect();
    assert!(
        names.contains(&image),
        "Ceph {release}: no image {image}: {images}"
    );

    let users = get(&gw, &token, "/api/rgw/user", "1.0").await;
    assert!(
        users
            .as_array()
            .is_some_and(|u| u.iter().any(|u| u == rgw_user)),
        "Ceph {release}: no RGW user {rgw_user}: {users}"
    );
    let user = get(&gw, &token, &format!("/api/rgw/user/{rgw_user}"), "1.0").await;
    let keys = user["keys"].as_array().cloned().unwrap_or_default();
    assert!(
        keys.iter()
            .any(|k| k["access_key"] == dash.get("CG_RGW_ACCESS_KEY")),
        "Ceph {release}: the administrator sees {rgw_user}'s keys"
    );
}

#[tokio::test]
async fn ceph_16_2_pool_image_and_rgw_user_are_listed_through_the_gateway() {
    the_clusters_data_is_listed_through_the_gateway("16.2").await;
}

#[tokio::test]
async fn ceph_20_2_pool_image_and_rgw_user_are_listed_through_the_gateway() {
    the_clusters_data_is_listed_through_the_gateway("20.2").await;
}
