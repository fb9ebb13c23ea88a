use std::collections::BTreeMap;

use prometheus::Registry;

use super::*;
use crate::observe::metrics::render_text;

struct Fixture {
    cache: Arc<AnswerCache>,
    registry: Registry,
}

fn fixture(max_answer_bytes: usize) -> Fixture {
    let registry = Registry::new();
    let config = AnswerCacheConfig {
        ttl: BTreeMap::from([("/api/summary".to_string(), Duration::from_millis(200))]),
        max_answer_bytes,
        ..AnswerCacheConfig::default()
    };
    let metrics = AnswerCacheMetrics::new(&registry).unwrap();
    Fixture {
        cache: AnswerCache::new(config, metrics),
        registry,
    }
}

impl Fixture {
    fn count(&self, result: &str) -> u64 {
        let text = render_text(&self.registry);
        let prefix = format!("clustergate_answer_cache_requests_total{{result=\"{result}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix)?.parse().ok())
            .unwrap_or(0)
    }
}

fn key() -> Key {
    Key::for_tests("/api/summary")
}

fn ttl() -> Duration {
    Duration::from_millis(200)
}

fn ok_head() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(http::header::DATE, HeaderValue::from_static("now"));
    headers
}

async fn lead(cache: &Arc<AnswerCache>) -> Capture {
    match cache.consult(key(), ttl(), Kind::Api).await {
        Consulted::Lead(capture) => capture,
        _ => panic!("expected to lead"),
    }
}

/// Leads, and answers `body` with `headers`.
async fn answer(cache: &Arc<AnswerCache>, headers: &HeaderMap, body: &'static [u8]) {
    let mut capture = lead(cache).await;
    if capture.head(200, headers) {
        capture.body(Some(&Bytes::from_static(body)), true);
    }
}

async fn served(cache: &Arc<AnswerCache>) -> Option<Arc<Stored>> {
    match cache.consult(key(), ttl(), Kind::Api).await {
        Consulted::Answer(answer) => Some(answer),
        _ => None,
    }
}

#[tokio::test]
async fn a_kept_answer_serves_the_next_requests_with_its_own_headers_only() {
    let f = fixture(1024);
    answer(&f.cache, &ok_head(), b"{}").await;
    let kept = served(&f.cache).await.expect("kept");
    assert_eq!(&kept.identity.body[..], b"{}");
    let names: Vec<_> = kept.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["content-type"]);
    assert_eq!((f.count("miss"), f.count("hit")), (1, 1));
}

#[tokio::test]
async fn no_answer_is_served_past_its_ttl() {
    let f = fixture(1024);
    answer(&f.cache, &ok_head(), b"{}").await;
    let kept = served(&f.cache).await.expect("kept");
    tokio::time::sleep(ttl()).await;
    assert!(
        served(&f.cache).await.is_none(),
        "{:?}",
        kept.born.elapsed()
    );
}

#[tokio::test]
async fn set_cookie_no_store_private_errors_and_large_answers_are_not_kept() {
    let mut cookie = ok_head();
    cookie.insert(SET_COOKIE, HeaderValue::from_static("a=b"));
    let mut no_store = ok_head();
    no_store.insert(
        CACHE_CONTROL,
        HeaderValue::from_static("max-age=5, No-Store"),
    );
    let mut private = ok_head();
    private.insert(CACHE_CONTROL, HeaderValue::from_static("private"));
    for head in [cookie, no_store, private] {
        let f = fixture(1024);
        answer(&f.cache, &head, b"{}").await;
        assert!(served(&f.cache).await.is_none(), "{head:?}");
    }
    // CherryPy's session cookie, on every 20.2 answer, is not kept and keeps nothing out.
    let f = fixture(1024);
    let mut session = ok_head();
    session.insert(
        SET_COOKIE,
        HeaderValue::from_static("session_id=ab12; Path=/"),
    );
    answer(&f.cache, &session, b"{}").await;
    let kept = served(&f.cache).await.expect("kept");
    assert!(kept.headers.iter().all(|(name, _)| *name != SET_COOKIE));
    let f = fixture(1024);
    let mut capture = lead(&f.cache).await;
    assert!(!capture.head(500, &ok_head()));
    drop(capture);
    assert!(served(&f.cache).await.is_none(), "an error");
    let f = fixture(4);
    let mut capture = lead(&f.cache).await;
    assert!(capture.head(200, &ok_head()));
    assert!(!capture.body(Some(&Bytes::from_static(b"12345")), true));
    drop(capture);
    assert!(served(&f.cache).await.is_none(), "too large");
}

#[tokio::test]
async fn a_write_drops_kept_answers_and_what_overlapped_it() {
    let f = fixture(1024);
    answer(&f.cache, &ok_head(), b"{}").await;
    f.cache.after_write();
    // The next one leads; a write while it is in flight: its answer is not kept.
    let mut capture = lead(&f.cache).await;
    f.cache.after_write();
    assert!(capture.head(200, &ok_head()));
    capture.body(Some(&Bytes::from_static(b"{}")), true);
    assert!(served(&f.cache).await.is_none());
}

#[tokio::test]
async fn concurrent_requests_share_the_leaders_answer() {
    let f = fixture(1024);
    let mut capture = lead(&f.cache).await;
    let followers: Vec<_> = (0..20)
        .map(|_| {
            let cache = Arc::clone(&f.cache);
            tokio::spawn(async move { served(&cache).await.map(|a| a.identity.body.clone()) })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(capture.head(200, &ok_head()));
    capture.body(Some(&Bytes::from_static(b"{\"a\":1}")), true);
    for follower in followers {
        assert_eq!(follower.await.unwrap().as_deref(), Some(&b"{\"a\":1}"[..]));
    }
    assert_eq!(
        (f.count("miss"), f.count("coalesced") + f.count("hit")),
        (1, 20)
    );
}

#[tokio::test]
async fn a_failed_leader_hands_over_to_one_follower() {
    let f = fixture(1024);
    let capture = lead(&f.cache).await;
    let followers: Vec<_> = (0..5)
        .map(|_| {
            let cache = Arc::clone(&f.cache);
            tokio::spawn(async move { cache.consult(key(), ttl(), Kind::Api).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(capture);
    // One follower leads the next try; the others wait for it.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(f.count("miss"), 2);
    let mut results = Vec::new();
    for follower in followers {
        results.push(follower);
    }
    let mut leaders = 0;
    let mut waiting = Vec::new();
    for handle in results {
        if handle.is_finished() {
            match handle.await.unwrap() {
                Consulted::Lead(mut capture) => {
                    leaders += 1;
                    assert!(capture.head(200, &ok_head()));
                    capture.body(Some(&Bytes::from_static(b"{}")), true);
                }
                _ => panic!("a follower did not wait"),
            }
        } else {
            waiting.push(handle);
        }
    }
    assert_eq!((leaders, waiting.len()), (1, 4));
    for handle in waiting {
        assert!(matches!(handle.await.unwrap(), Consulted::Answer(_)));
    }
}

#[tokio::test]
async fn operations_not_configured_are_not_cached() {
    let f = fixture(1024);
    assert_eq!(f.cache.ttl("/api/summary"), Some(ttl()));
    assert_eq!(f.cache.ttl("/api/pool"), None);
}

#[test]
fn a_kept_file_is_sent_as_the_client_takes_it_or_not_at_all() {
    let plain = Bytes::from("x".repeat(4096));
    let stored = Stored {
        headers: Vec::new(),
        identity: Variant::new(plain.clone(), ""),
        gzip: ui_files::gzip(&plain).map(|g| Variant::new(g, "-gzip")),
        born: Instant::now(),
    };
    let request = |pairs: &[(http::HeaderName, &str)]| {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        map
    };
    let header = |reply: &Reply, name: http::HeaderName| {
        reply
            .headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    };
    let whole = stored.reply(&request(&[]));
    assert_eq!(whole.body.as_ref(), Some(&plain));
    assert_eq!(header(&whole, CONTENT_ENCODING), None);
    let zipped = stored.reply(&request(&[(http::header::ACCEPT_ENCODING, "gzip, br")]));
    assert_eq!(header(&zipped, CONTENT_ENCODING), Some(ui_files::GZIP));
    assert!(zipped.body.as_ref().unwrap().len() < 100);
    let etag = header(&zipped, ETAG).unwrap();
    assert_ne!(Some(etag.clone()), header(&whole, ETAG));
    let again = stored.reply(&request(&[
        (http::header::ACCEPT_ENCODING, "gzip"),
        (http::header::IF_NONE_MATCH, etag.to_str().unwrap()),
    ]));
    assert_eq!((again.status, again.body), (StatusCode::NOT_MODIFIED, None));
    // The plain body's validator does not match the gzipped one.
    let other = stored.reply(&request(&[(
        http::header::IF_NONE_MATCH,
        etag.to_str().unwrap(),
    )]));
    assert_eq!(other.status, StatusCode::OK);
}

#[tokio::test]
async fn ui_files_fetched_to_be_kept_are_bounded_per_minute() {
    let f = fixture(1024);
    let kind = Kind::UiFile { immutable: true };
    let mut leads = 0;
    for i in 0..ui_files::MAX_MISSES_PER_MINUTE + 5 {
        let key = Key::ui_file("/main.0123456789abcdef.js", &format!("x-{i}")).unwrap();
        if let Consulted::Lead(_) = f.cache.consult(key, ttl(), kind).await {
            leads += 1;
        }
    }
    assert_eq!(leads, ui_files::MAX_MISSES_PER_MINUTE);
    assert_eq!(f.count("passed"), 5);
    // API answers are not counted against it.
    assert!(matches!(
        f.cache.consult(key(), ttl(), Kind::Api).await,
        Consulted::Lead(_)
    ));
}
