//! The answer cache (`[answer_cache]`) in front of the real dashboard: identical requests
//! at once make one dashboard request (counted by the gateway's
//! `clustergate_upstream_requests_total`, which counts every answer a dashboard gave it),
//! for the users the dashboard sees as one account (of the same roles) and per user with
//! their own identity; an answer kept for one role is never another's; a write through the gateway drops the kept answers; a role that loses the
//! operation is refused at the edge while its answer is still kept; no answer is older than
//! its ttl; errors are not kept.

use std::time::{Duration, Instant};

use crate::common::*;
use reqwest::Method;

/// A ttl all of a test's requests fall within.
const LONG_MS: u64 = 60_000;

fn upstream_requests(metrics: &str) -> f64 {
    metric_sum(metrics, "clustergate_upstream_requests_total", &[])
}

fn cache_results(metrics: &str, result: &str) -> f64 {
    metric_sum(
        metrics,
        "clustergate_answer_cache_requests_total",
        &[("result", result)],
    )
}

/// How many answers the dashboard gave the gateway while `requests` ran.
async fn dashboard_requests_of<F: std::future::Future>(gw: &RunningGateway, requests: F) -> f64 {
    let before = upstream_requests(&gw.metrics().await);
    requests.await;
    upstream_requests(&gw.metrics().await) - before
}

/// GETs of `path` sent all at once, with `tokens` in turn: each one's status and body.
async fn at_once(
    gw: &RunningGateway,
    path: &str,
    tokens: &[String],
    n: usize,
) -> Vec<(u16, String)> {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let request = gw.client().get(gw.url(path)).header("Accept", V1).header(
                "Authorization",
                format!("Bearer {}", tokens[i % tokens.len()]),
            );
            tokio::spawn(async move {
                let reply = request.send().await.unwrap();
                (reply.status().as_u16(), reply.text().await.unwrap())
            })
        })
        .collect();
    let mut replies = Vec::new();
    for task in tasks {
        replies.push(task.await.unwrap());
    }
    replies
}

#[tokio::test]
async fn requests_at_once_of_users_of_the_same_roles_make_one_dashboard_request() {
    let dash = Dashboard::shared();
    let gw = Gateway::with_admin_and_viewer()
        .user(User::new("admin2", "Adm1n-Two-Pass", &["administrator"]))
        .upstream(dash)
        .answer_cache(&[("/api/summary", LONG_MS)])
        .start();
    // Two people the dashboard sees as one account (upstream.identity = "roles").
    let tokens = [
        gw.login(ADMIN, ADMIN_PW).await,
        gw.login("admin2", "Adm1n-Two-Pass").await,
    ];
    let mut replies = Vec::new();
    let asked = dashboard_requests_of(&gw, async {
        replies = at_once(&gw, "/api/summary", &tokens, 30).await;
    })
    .await;
    assert_eq!(asked, 1.0, "{}", gw.logs());
    assert!(
        replies.iter().all(|(status, _)| *status == 200),
        "{replies:?}"
    );
    assert!(replies.iter().all(|(_, body)| body == &replies[0].1));
    let metrics = gw.metrics().await;
    let coalesced = cache_results(&metrics, "coalesced");
    let hits = cache_results(&metrics, "hit");
    println!("30 at once: 1 dashboard request, {coalesced} waited for it, {hits} kept answers");
    assert_eq!(cache_results(&metrics, "miss"), 1.0, "{metrics}");
    assert_eq!(coalesced + hits, 29.0, "{metrics}");

    // A user of other roles is another account: never served the administrators' answer.
    let viewer = gw.login(VIEWER, VIEWER_PW).await;
    let asked = dashboard_requests_of(&gw, async {
        for _ in 0..2 {
            let reply = gw.api_get("/api/summary", Some(&viewer)).await;
            assert_eq!(reply.status, 200, "{}", reply.text());
        }
    })
    .await;
    assert_eq!(
        asked, 1.0,
        "the viewer's own answer, then kept for the viewer"
    );

    // Another operation, not configured, goes to the dashboard every time.
    let asked = dashboard_requests_of(&gw, async {
        for _ in 0..3 {
            assert_eq!(
                gw.api_get("/api/health/minimal", Some(&tokens[0]))
                    .await
                    .status,
                200
            );
        }
    })
    .await;
    assert_eq!(asked, 3.0);
}

/// What the dashboard gives a role inside an answer is that role's, whoever asked before:
/// the health report kept for an administrator is not served to a grafana reader, whose
/// account the dashboard hides the cluster's maps from.
#[tokio::test]
async fn an_answer_kept_for_one_role_is_never_served_to_another() {
    let dash = Dashboard::shared();
    let gw = Gateway::new()
        .user(User::admin())
        .user(User::new("grafana", "Gr4fana-Pass", &["grafana-reader"]))
        .file(
            "roles.toml",
            "[[roles]]\nname = \"grafana-reader\"\n[roles.scopes_permissions]\ngrafana = [\"read\"]\n",
        )
        .extra_toml("auth", "roles_file = \"roles.toml\"")
        .upstream(dash)
        .answer_cache(&[("/api/health/minimal", LONG_MS)])
        .start();
    let admin = gw.login(ADMIN, ADMIN_PW).await;
    let grafana = gw.login("grafana", "Gr4fana-Pass").await;
    let full = gw.api_get("/api/health/minimal", Some(&admin)).await;
    assert_eq!(full.status, 200, "{}", full.text());
    assert!(full.json().get("osd_map").is_some(), "{}", full.text());
    let filtered = gw.api_get("/api/health/minimal", Some(&grafana)).await;
    assert_eq!(filtered.status, 200, "{}", filtered.text());
    for hidden in ["osd_map", "mon_status", "mgr_map", "hosts"] {
        assert!(
            filtered.json().get(hidden).is_none(),
            "{hidden} served to a grafana reader: {}",
            filtered.text()
        );
    }
}

#[tokio::test]
async fn with_a_zero_ttl_only_requests_in_flight_share_an_answer() {
    let dash = Dashboard::shared();
    let gw = Gateway::with_admin_and_viewer()
        .upstream(dash)
        .answer_cache(&[("/api/summary", 0)])
        .start();
    let tokens = [gw.login(ADMIN, ADMIN_PW).await];
    let asked = dashboard_requests_of(&gw, async {
        let replies = at_once(&gw, "/api/summary", &tokens, 40).await;
        assert!(
            replies.iter().all(|(status, _)| *status == 200),
            "{replies:?}"
        );
    })
    .await;
    let coalesced = cache_results(&gw.metrics().await, "coalesced");
    println!("40 at once, nothing kept: {asked} dashboard requests, {coalesced} waited");
    assert!(asked < 40.0 && coalesced >= 1.0, "{asked} {coalesced}");
    assert_eq!(asked + coalesced, 40.0);
    let asked = dashboard_requests_of(&gw, async {
        gw.api_get("/api/summary", Some(&tokens[0])).await;
        gw.api_get("/api/summary", Some(&tokens[0])).await;
    })
    .await;
    assert_eq!(asked, 2.0, "nothing is kept with a zero ttl");
}

#[tokio::test]
async fn with_the_users_own_identity_users_do_not_share_answers() {
    let dash = Dashboard::shared();
    let gw = Gateway::new()
        .user(User::new(ADMIN, dash.password(ADMIN), &["administrator"]))
        .user(User::new(
            POOLMGR,
            dash.password(POOLMGR),
            &["pool-manager"],
        ))
        .user_identity()
        .upstream(dash)
        .answer_cache(&[("/api/summary", LONG_MS)])
        .start();
    let admin = gw.login(ADMIN, dash.password(ADMIN)).await;
    let poolmgr = gw.login(POOLMGR, dash.password(POOLMGR)).await;
    let each_once = || async {
        for token in [&admin, &poolmgr] {
            assert_eq!(gw.api_get("/api/summary", Some(token)).await.status, 200);
        }
    };
    assert_eq!(
        dashboard_requests_of(&gw, each_once()).await,
        2.0,
        "one per user"
    );
    assert_eq!(
        dashboard_requests_of(&gw, each_once()).await,
        0.0,
        "each kept its own"
    );
}

#[tokio::test]
async fn a_write_through_the_gateway_drops_the_kept_answers() {
    let dash = Dashboard::shared();
    let gw = Gateway::with_admin_and_viewer()
        .upstream(dash)
        .answer_cache(&[("/api/pool", LONG_MS), ("/api/summary", LONG_MS)])
        .start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let read_both = || async {
        for path in ["/api/pool", "/api/summary"] {
            assert_eq!(gw.api_get(path, Some(&token)).await.status, 200);
        }
    };
    assert_eq!(dashboard_requests_of(&gw, read_both()).await, 2.0);
    assert_eq!(dashboard_requests_of(&gw, read_both()).await, 0.0);
    // The delete of a pool that does not exist changes nothing (Ceph answers it as done,
    // 204), but the gateway cannot know what a write changed.
    let write = gw
        .api(
            Method::DELETE,
            "/api/pool/cg-no-such-pool",
            Some(&token),
            None,
        )
        .await;
    assert!(write.status < 500, "{}", write.status);
    assert_eq!(
        dashboard_requests_of(&gw, read_both()).await,
        2.0,
        "both dropped"
    );
}

/// A roles file whose one role grants `pool` on the pool scope.
fn roles_file(pool: &str) -> String {
    format!("[[roles]]\nname = \"pool-auditor\"\n[roles.scopes_permissions]\n{pool}\n")
}

#[tokio::test]
async fn a_user_whose_role_loses_the_operation_is_never_served_its_kept_answer() {
    let dash = Dashboard::shared();
    let mut gw = Gateway::new()
        .user(User::admin())
        .user(User::new("auditor", "Aud1tor-Pass", &["pool-auditor"]))
        .file("roles.toml", &roles_file("pool = [\"read\"]"))
        .extra_toml("auth", "roles_file = \"roles.toml\"")
        .upstream(dash)
        .answer_cache(&[("/api/pool", LONG_MS)])
        .start();
    let auditor = gw.login("auditor", "Aud1tor-Pass").await;
    assert_eq!(pool_status(&gw, &auditor).await, 200);
    let again = dashboard_requests_of(&gw, async {
        assert_eq!(pool_status(&gw, &auditor).await, 200);
    });
    assert_eq!(again.await, 0.0, "kept");
    // The role now grants another scope, not the pool's: the same token is refused at the
    // edge, though the answer it was given is kept for a minute.
    let other_scope = roles_file("rbd-image = [\"read\"]");
    assert!(
        gw.reload(|spec| *spec = spec.clone().file("roles.toml", &other_scope))
            .await
    );
    let refused = gw.api_get("/api/pool", Some(&auditor)).await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    // Who may still read it is asked of the dashboard again (the reload made new keys).
    let admin = gw.login(ADMIN, ADMIN_PW).await;
    let asked = dashboard_requests_of(&gw, async {
        assert_eq!(pool_status(&gw, &admin).await, 200);
    });
    assert_eq!(asked.await, 1.0);
}

async fn pool_status(gw: &RunningGateway, token: &str) -> u16 {
    gw.api_get("/api/pool", Some(token)).await.status
}

#[tokio::test]
async fn errors_are_not_kept() {
    let dash = Dashboard::shared();
    let gw = Gateway::with_admin_and_viewer()
        .upstream(dash)
        .answer_cache(&[("/api/pool/{pool_name}", LONG_MS)])
        .start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let asked = dashboard_requests_of(&gw, async {
        for _ in 0..3 {
            let reply = gw.api_get("/api/pool/cg-no-such-pool", Some(&token)).await;
            assert!(reply.status >= 400, "{}", reply.status);
        }
    })
    .await;
    assert_eq!(asked, 3.0);
}

/// The value of a numeric `ceph config` option as `GET /api/cluster_conf/{name}` shows it
/// (`"700123.000000"`).
fn shown_value(body: &str) -> Option<u64> {
    let json: serde_json::Value = serde_json::from_str(body).ok()?;
    let values = json["value"].as_array()?;
    let text = values.iter().find_map(|v| v["value"].as_str())?;
    Some(text.parse::<f64>().ok()? as u64)
}

#[tokio::test]
async fn no_answer_is_older_than_its_ttl() {
    const TTL: Duration = Duration::from_millis(1000);
    const EVERY: Duration = Duration::from_millis(50);
    // A setting nothing else reads, changed behind the gateway's back (the ceph CLI): only
    // the ttl makes the gateway's answer fresh again.
    const OPTION: &str = "osd_deep_scrub_interval";
    let dash = Dashboard::shared();
    let gw = Gateway::with_admin_and_viewer()
        .upstream(dash)
        .answer_cache(&[("/api/cluster_conf/{name}", TTL.as_millis() as u64)])
        .start();
    let token = gw.login(ADMIN, ADMIN_PW).await;
    let direct_token = dash.login(ADMIN).await;
    let path = format!("/api/cluster_conf/{OPTION}");
    // How late the gateway may show a change: its TTL, plus the polling rounds that saw it
    // and the one before, measured (a loaded machine makes each request slower).
    let (mut worst, mut allowed) = (Duration::ZERO, Duration::ZERO);
    for round in 0..3 {
        let value = 700_000 + round * 1000 + u64::from(std::process::id() % 1000);
        dash.ceph_ok(&["config", "set", "osd", OPTION, &value.to_string()]);
        let started = Instant::now();
        let (mut direct_saw, mut gateway_saw) = (None, None);
        let mut rounds = [Duration::ZERO; 2];
        while gateway_saw.is_none() && started.elapsed() < Duration::from_secs(30) {
            let polled = Instant::now();
            let direct = dash
                .send(Method::GET, &path, Some(&direct_token), V1, None)
                .await;
            if direct_saw.is_none() && shown_value(&direct.text()) == Some(value) {
                direct_saw = Some(Instant::now());
            }
            let through = gw.api_get(&path, Some(&token)).await;
            assert_eq!(through.status, 200, "{}", through.text());
            if shown_value(&through.text()) == Some(value) {
                gateway_saw = Some(Instant::now());
            }
            tokio::time::sleep(EVERY).await;
            rounds = [rounds[1], polled.elapsed()];
        }
        let (Some(direct), Some(gateway)) = (direct_saw, gateway_saw) else {
            panic!("round {round}: the new value never showed: {direct_saw:?} {gateway_saw:?}");
        };
        let late = gateway.saturating_duration_since(direct);
        let bound = TTL + rounds[0] + rounds[1];
        println!("round {round}: the gateway showed the change {late:?} after the dashboard (at most {bound:?})");
        assert!(
            late <= bound,
            "round {round}: {late:?} late, more than {bound:?}"
        );
        (worst, allowed) = (worst.max(late), allowed.max(bound));
    }
    dash.ceph_ok(&["config", "rm", "osd", OPTION]);
    println!("worst {worst:?} of {allowed:?} allowed");
    // The answers are kept at all: two requests at once are at most one answer of the
    // dashboard (however slow the machine, the second finds the first's in flight or kept;
    // none when the last round's is still kept).
    let pair = futures_util::future::join(
        gw.api_get(&path, Some(&token)),
        gw.api_get(&path, Some(&token)),
    );
    let asked = Box::pin(dashboard_requests_of(&gw, pair)).await;
    assert!(
        asked < 2.0,
        "the answers were not kept: {asked} answers for 2 requests"
    );
}

/// GET of a web UI file through the gateway with these request headers.
async fn ui_get(gw: &RunningGateway, path: &str, headers: &[(&str, &str)]) -> Reply {
    let mut request = gw.client().get(gw.url(path));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    gw.send(request).await
}

fn header<'a>(reply: &'a Reply, name: &str) -> &'a str {
    reply
        .headers
        .get(name)
        .map_or("", |v| v.to_str().unwrap_or_default())
}

#[tokio::test]
async fn the_web_uis_files_are_kept_compressed_and_validated_at_the_edge() {
    let dash = Dashboard::shared();
    let gw = Gateway::with_admin_and_viewer()
        .upstream(dash)
        .answer_cache(&[])
        .start();
    // The landing page names its hashed scripts.
    let script = gw.main_script().await;
    let direct = client_builder()
        .build()
        .unwrap()
        .get(format!("{}{script}", dash.url()))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    let gzip = [("Accept-Encoding", "gzip, deflate, br")];

    // Fetched once; then kept, gzipped (off the event loop: eventually).
    let mut zipped = ui_get(&gw, &script, &gzip).await;
    assert_eq!(zipped.status, 200);
    eventually(
        "the gzipped script",
        Duration::from_millis(100),
        Duration::from_secs(20),
        || {
            let gw = &gw;
            let script = script.clone();
            async move { header(&ui_get(gw, &script, &gzip).await, "content-encoding") == "gzip" }
        },
    )
    .await;
    let asked = dashboard_requests_of(&gw, async {
        zipped = ui_get(&gw, &script, &gzip).await;
    })
    .await;
    assert_eq!(asked, 0.0, "kept");
    assert_eq!(header(&zipped, "content-encoding"), "gzip");
    assert_eq!(
        header(&zipped, "cache-control"),
        "public, max-age=31536000, immutable"
    );
    let mut plain = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(&zipped.body[..]),
        &mut plain,
    )
    .unwrap();
    assert_eq!(plain, direct, "the dashboard's own script, byte for byte");
    println!(
        "{script}: {} bytes, gzipped {}",
        direct.len(),
        zipped.body.len()
    );
    // A client without gzip gets it whole.
    let whole = ui_get(&gw, &script, &[]).await;
    assert_eq!(
        (header(&whole, "content-encoding"), &whole.body),
        ("", &direct)
    );

    // Held already: 304, without the dashboard.
    let etag = header(&zipped, "etag").to_string();
    assert!(etag.starts_with('"'), "{etag}");
    let asked = dashboard_requests_of(&gw, async {
        let revalidated = ui_get(&gw, &script, &[gzip[0], ("If-None-Match", &etag)]).await;
        assert_eq!(revalidated.status, 304);
        assert!(revalidated.body.is_empty());
        assert_eq!(header(&revalidated, "etag"), etag);
    })
    .await;
    assert_eq!(asked, 0.0);
    // A browser that got the file from the dashboard itself revalidates by its date.
    let date = header(&zipped, "last-modified").to_string();
    let by_date = ui_get(&gw, &script, &[("If-Modified-Since", &date)]).await;
    assert_eq!(by_date.status, 304, "{date}");

    // index.html is not hashed: revalidated on every load, never immutable.
    let again = ui_get(&gw, "/", &gzip).await;
    assert_eq!(header(&again, "cache-control"), "no-cache");
}

/// A UI file is kept by what selects it at the dashboard (issue 33, finding 6): its path,
/// not its query, and the language list the dashboard reads, not how the client spelled
/// it. Distinct queries and spellings of the main script cost one dashboard fetch.
#[tokio::test]
async fn a_query_or_a_spelling_of_the_languages_never_costs_a_ui_fetch() {
    let dash = Dashboard::shared();
    let gw = Gateway::with_admin_and_viewer()
        .upstream(dash)
        .answer_cache(&[])
        .start();
    let script = gw.main_script().await;
    let spellings = [
        "de;q=0.9, fr",
        "fr, de;q=0.9",
        "FR,de;q=0.90",
        "fr;q=1.0,de;q=0.9,fr",
    ];
    let asked = dashboard_requests_of(&gw, async {
        for i in 0..40 {
            let path = format!("{script}?cache-buster={i}");
            let language = [("Accept-Language", spellings[i % spellings.len()])];
            let reply = ui_get(&gw, &path, &language).await;
            assert_eq!(reply.status, 200, "{path}");
            assert!(
                reply.body.len() > 100_000,
                "{path}: {} bytes",
                reply.body.len()
            );
        }
    })
    .await;
    assert!(asked <= 1.0, "{asked} dashboard fetches for one file");
}

/// Language lists made up to miss the UI store fetch at most
/// `ui_files::MAX_MISSES_PER_MINUTE` files to be kept a minute; past that each request is
/// passed to the dashboard, unkept, and still answered.
#[tokio::test]
async fn made_up_language_lists_are_kept_a_bounded_number_of_times() {
    let dash = Dashboard::shared();
    let gw = Gateway::with_admin_and_viewer()
        .upstream(dash)
        .answer_cache(&[])
        .start();
    let before = gw.metrics().await;
    for i in 0..70 {
        let language = format!("x-{i}");
        let reply = ui_get(&gw, "/", &[("Accept-Language", language.as_str())]).await;
        assert_eq!(reply.status, 200, "{language}: {}", reply.text());
    }
    let after = gw.metrics().await;
    let results = |result| cache_results(&after, result) - cache_results(&before, result);
    assert_eq!(results("miss"), 60.0, "{after}");
    assert_eq!(results("passed"), 10.0, "{after}");
}
