//! Protecting the manager from polling: identical concurrent GETs of a configured
//! operation share one dashboard request (`flight`), and its answer is kept for the
//! operation's `ttl` (`store`), for requests the edge has already admitted for that
//! operation and who would get the same answer from the dashboard (`key`).
//!
//! Only a complete `200` without `Set-Cookie`, without `Cache-Control: no-store` or
//! `private`, and no larger than `max_answer_bytes` is shared or kept. An answer is never
//! older than its ttl: its age counts from the moment its request was sent, and an answer
//! whose request overlapped a write through the gateway is shared with those waiting but
//! not kept. Every write (POST, PUT, PATCH, DELETE) forwarded drops every kept answer:
//! nearly every write shows in the overview answers the UI polls (summary's tasks, health),
//! so a narrower rule would keep stale answers there, and dropping costs at most one
//! dashboard request per key. A reload makes new keys (they name the table the request was
//! admitted by), so no answer kept under the old roles is served after it.
//!
//! The web UI's files (no user: one copy per language for every client, whatever the
//! query) are kept the same way, asked of the dashboard plain and gzipped here once, and
//! answered `304` to a client that holds them; the fetches of those to be kept are bounded
//! per minute (`ui_files`).
//!
//! Why not pingora's own cache (`pingora-cache`, its `CacheLock` for the shared flight):
//! its only in-memory storage, `MemCache`, says of itself "for testing only, not for
//! production use", so the store would be ours anyway, and so would the key (who may see
//! the answer) and the ttl per operation (set per answer in its `response_cache_filter`);
//! dropping every kept answer on a write, the rule above, has no counterpart in its purge
//! by key; and its hooks would add phases to every request, cached or not. What is kept
//! here is small (a few answers per account, bounded in bytes): the store, the flights
//! and the keys are a few hundred lines with their own tests.

mod flight;
mod key;
mod store;
mod ui_files;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::header::{
    CACHE_CONTROL, CONTENT_ENCODING, CONTENT_LENGTH, ETAG, LAST_MODIFIED, SET_COOKIE,
};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use crate::config::AnswerCacheConfig;
use crate::observe::metrics::{AnswerCacheMetrics, CacheResult};
use flight::{Flights, Joined, Lead, Waited};
pub use key::Key;
use store::Store;

/// The headers of an answer that are kept with it; the others (the date, the security
/// headers, the request id) are the gateway's to set on each answer.
const KEPT_HEADERS: [HeaderName; 5] = [
    http::header::CONTENT_TYPE,
    http::header::CONTENT_ENCODING,
    http::header::CONTENT_LANGUAGE,
    http::header::VARY,
    http::header::LAST_MODIFIED,
];

/// How many times a request joins a flight again after its leader gave up, at most.
const MAX_TURNS: usize = 8;

/// What is kept: an API answer, or one of the web UI's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Api,
    /// `immutable`: its name carries a content hash.
    UiFile {
        immutable: bool,
    },
}

/// A body as sent, with its validator.
#[derive(Debug, Clone)]
struct Variant {
    body: Bytes,
    etag: Option<HeaderValue>,
}

impl Variant {
    fn new(body: Bytes, suffix: &str) -> Variant {
        Variant {
            etag: ui_files::etag(&body, suffix),
            body,
        }
    }
}

/// An answer as kept and shared.
#[derive(Debug)]
pub struct Stored {
    headers: Vec<(HeaderName, HeaderValue)>,
    identity: Variant,
    /// A UI file's gzipped body, made once it was kept.
    gzip: Option<Variant>,
    /// When its request was sent.
    born: Instant,
}

/// What a request is answered from a kept answer.
pub struct Reply {
    pub status: StatusCode,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// `None`: no body (`304`).
    pub body: Option<Bytes>,
}

impl Stored {
    /// `OK`: only such answers are kept.
    pub const STATUS: StatusCode = StatusCode::OK;

    /// The answer to `request`: gzipped when it takes gzip and a gzipped body was made;
    /// `304` when it holds that body already (`If-None-Match`).
    pub fn reply(&self, request: &HeaderMap) -> Reply {
        let gzip = self
            .gzip
            .as_ref()
            .filter(|_| ui_files::accepts_gzip(request));
        let variant = gzip.unwrap_or(&self.identity);
        let mut headers = self.headers.clone();
        if gzip.is_some() {
            headers.push((CONTENT_ENCODING, ui_files::GZIP));
        }
        if let Some(etag) = &variant.etag {
            headers.push((ETAG, etag.clone()));
        }
        if ui_files::not_modified(request, variant.etag.as_ref(), self.last_modified()) {
            return Reply {
                status: StatusCode::NOT_MODIFIED,
                headers,
                body: None,
            };
        }
        Reply {
            status: Stored::STATUS,
            headers,
            body: Some(variant.body.clone()),
        }
    }

    fn last_modified(&self) -> Option<&HeaderValue> {
        let (_, value) = self.headers.iter().find(|(n, _)| *n == LAST_MODIFIED)?;
        Some(value)
    }

    fn size(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|(n, v)| n.as_str().len() + v.len())
            .sum();
        let gzip = self.gzip.as_ref().map_or(0, |g| g.body.len());
        self.identity.body.len() + gzip + headers + 64
    }

    #[cfg(test)]
    fn for_tests(body: Vec<u8>) -> Stored {
        Stored {
            headers: Vec::new(),
            identity: Variant::new(body.into(), ""),
            gzip: None,
            born: Instant::now(),
        }
    }
}

/// What the cache made of a request.
pub enum Consulted {
    /// Answer with this (kept, or another request's, waited for).
    Answer(Arc<Stored>),
    /// Ask the dashboard and capture its answer for the others.
    Lead(Capture),
    /// Ask the dashboard; nothing to capture.
    Pass,
}

pub struct AnswerCache {
    config: AnswerCacheConfig,
    store: Mutex<Store>,
    flights: Arc<Flights>,
    /// Counts the writes forwarded: a capture that saw it change keeps nothing.
    writes: AtomicU64,
    /// The fetches of UI files to be kept (`ui_files`).
    ui_misses: ui_files::MissBudget,
    metrics: AnswerCacheMetrics,
}

impl AnswerCache {
    pub fn new(config: AnswerCacheConfig, metrics: AnswerCacheMetrics) -> Arc<AnswerCache> {
        Arc::new(AnswerCache {
            store: Mutex::new(Store::new(config.max_entries, config.max_bytes)),
            config,
            flights: Arc::default(),
            writes: AtomicU64::new(0),
            ui_misses: ui_files::MissBudget::new(Instant::now()),
            metrics,
        })
    }

    /// The languages a UI file is kept by, for a request with this forwarded `cd-lang`
    /// cookie or else this `Accept-Language`; `None`: not kept.
    pub fn ui_languages(cookie: Option<&[u8]>, accept_language: Option<&[u8]>) -> Option<String> {
        ui_files::language_preference(cookie, accept_language)
    }

    /// How long the answers of GET `template` are kept (zero: shared, not kept); `None`:
    /// the operation is not cached.
    pub fn ttl(&self, template: &str) -> Option<Duration> {
        if !self.config.enabled {
            return None;
        }
        self.config.ttl.get(template).copied()
    }

    /// How long the web UI's file at `path` is kept, and what kind it is; `None`: the UI's
    /// files are not kept.
    pub fn ui_file(&self, path: &str) -> Option<(Duration, Kind)> {
        if !self.config.enabled || !self.config.ui_files {
            return None;
        }
        let immutable = ui_files::is_hashed(path);
        let ttl = match immutable {
            true => self.config.ui_hashed_files_ttl,
            false => self.config.ui_files_ttl,
        };
        Some((ttl, Kind::UiFile { immutable }))
    }

    /// A kept answer, the answer of an identical request in flight (waited for, within
    /// `max_wait`), or the lead of a new flight.
    pub async fn consult(self: &Arc<Self>, key: Key, ttl: Duration, kind: Kind) -> Consulted {
        let deadline = tokio::time::Instant::now() + self.config.max_wait;
        for _ in 0..MAX_TURNS {
            if let Some(answer) = self.kept(&key) {
                self.metrics.result(CacheResult::Hit);
                return Consulted::Answer(answer);
            }
            let follower = match self.flights.join(&key, self.config.max_followers) {
                Joined::Lead(lead) => {
                    if kind != Kind::Api && !self.ui_misses.take(Instant::now()) {
                        // (the lead, dropped, lets those who wait try again)
                        break;
                    }
                    self.metrics.result(CacheResult::Miss);
                    return Consulted::Lead(self.capture(key, ttl, kind, lead));
                }
                Joined::Full => break,
                Joined::Follow(follower) => follower,
            };
            match follower.wait(deadline).await {
                Waited::Answered(answer) => {
                    self.metrics.result(CacheResult::Coalesced);
                    return Consulted::Answer(answer);
                }
                Waited::TimedOut => break,
                Waited::Abandoned => continue,
            }
        }
        self.metrics.result(CacheResult::Passed);
        Consulted::Pass
    }

    /// A write was forwarded: every kept answer goes, and no answer whose request
    /// overlapped it is kept.
    pub fn after_write(&self) {
        self.writes.fetch_add(1, Ordering::SeqCst);
        let mut store = self.lock_store();
        store.clear();
        self.metrics.held(0, 0);
    }

    fn kept(&self, key: &Key) -> Option<Arc<Stored>> {
        let mut store = self.lock_store();
        let answer = store.get(key, Instant::now());
        if answer.is_none() {
            self.metrics.held(store.len(), store.bytes());
        }
        answer
    }

    fn capture(self: &Arc<Self>, key: Key, ttl: Duration, kind: Kind, lead: Lead) -> Capture {
        Capture {
            cache: Arc::clone(self),
            key,
            ttl,
            kind,
            lead: Some(lead),
            born: Instant::now(),
            writes: self.writes.load(Ordering::SeqCst),
            headers: Vec::new(),
            body: BytesMut::new(),
            compress: false,
        }
    }

    /// Keeps `answer` (born `born`) for `ttl`, unless a write overlapped its request or it
    /// is already as old as that.
    fn keep(&self, key: Key, answer: Arc<Stored>, ttl: Duration, writes: u64) {
        let now = Instant::now();
        let expires = answer.born + ttl;
        let mut store = self.lock_store();
        // (read under the store's lock, which `after_write` clears under after counting)
        if expires <= now || self.writes.load(Ordering::SeqCst) != writes {
            return;
        }
        let inserted = store.insert(key, answer, expires, now);
        self.metrics.evicted(inserted.evicted);
        self.metrics.held(store.len(), store.bytes());
    }

    fn lock_store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A leader's answer as it arrives. Dropped before the answer is complete and shareable,
/// it gives up its flight (`flight`): the followers join again.
pub struct Capture {
    cache: Arc<AnswerCache>,
    key: Key,
    ttl: Duration,
    kind: Kind,
    lead: Option<Lead>,
    born: Instant,
    writes: u64,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: BytesMut,
    /// A UI file worth gzipping.
    compress: bool,
}

impl Capture {
    /// The answer's head: whether it may be shared and kept (else drop the capture).
    pub fn head(&mut self, status: u16, headers: &HeaderMap) -> bool {
        if status != Stored::STATUS.as_u16() || !shareable(headers) {
            return false;
        }
        let length = headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
        if length.is_some_and(|l| l > self.cache.config.max_answer_bytes) {
            return false;
        }
        self.headers = KEPT_HEADERS
            .iter()
            .filter_map(|name| Some((name.clone(), headers.get(name)?.clone())))
            .collect();
        if let Some(control) = self.cache_control() {
            self.headers.push((CACHE_CONTROL, control));
            self.compress = ui_files::compressible(headers);
        }
        true
    }

    /// How browsers may keep a UI file (`None`: an API answer, whose caching is the
    /// dashboard's).
    pub fn cache_control(&self) -> Option<HeaderValue> {
        match self.kind {
            Kind::UiFile { immutable: true } => Some(ui_files::IMMUTABLE),
            Kind::UiFile { immutable: false } => Some(ui_files::REVALIDATE),
            Kind::Api => None,
        }
    }

    /// Whether this capture is of a UI file (its request goes out without the client's
    /// encodings and validators: the gateway keeps the whole plain body).
    pub fn is_ui_file(&self) -> bool {
        matches!(self.kind, Kind::UiFile { .. })
    }

    /// A piece of the body: `false` once the answer is larger than may be kept (drop the
    /// capture). At the end, the answer goes to the followers and into the store.
    pub fn body(&mut self, chunk: Option<&Bytes>, end: bool) -> bool {
        if let Some(chunk) = chunk {
            if self.body.len() + chunk.len() > self.cache.config.max_answer_bytes {
                return false;
            }
            self.body.extend_from_slice(chunk);
        }
        if end {
            self.finish();
        }
        true
    }

    fn finish(&mut self) {
        let Some(lead) = self.lead.take() else {
            return;
        };
        let answer = Arc::new(Stored {
            headers: std::mem::take(&mut self.headers),
            identity: Variant::new(std::mem::take(&mut self.body).freeze(), ""),
            gzip: None,
            born: self.born,
        });
        let key = self.key.clone();
        self.cache
            .keep(key.clone(), Arc::clone(&answer), self.ttl, self.writes);
        if self.compress {
            self.cache
                .compress_later(key, Arc::clone(&answer), self.ttl, self.writes);
        }
        lead.answer(answer);
    }
}

impl AnswerCache {
    /// Gzips a kept UI file off the event loop (the main script takes about 100 ms), then
    /// keeps it with both bodies, for the time it had left.
    fn compress_later(self: &Arc<Self>, key: Key, answer: Arc<Stored>, ttl: Duration, writes: u64) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let cache = Arc::clone(self);
        runtime.spawn_blocking(move || {
            let Some(gzip) = ui_files::gzip(&answer.identity.body) else {
                return;
            };
            let both = Stored {
                headers: answer.headers.clone(),
                identity: answer.identity.clone(),
                gzip: Some(Variant::new(gzip, "-gzip")),
                born: answer.born,
            };
            cache.keep(key, Arc::new(both), ttl, writes);
        });
    }
}

/// The session cookie CherryPy sets on every answer of the 20.2 dashboard, whoever asks;
/// the gateway's clients have no use for it (issue 23 drops it), and a kept answer never
/// carries a `Set-Cookie` (`KEPT_HEADERS`): it does not make an answer personal.
const CHERRYPY_SESSION: &[u8] = b"session_id=";

/// An answer the dashboard meant for more than this one request: no cookie set (but
/// CherryPy's session cookie), not marked `no-store` or `private`.
fn shareable(headers: &HeaderMap) -> bool {
    let personal = |cookie: &HeaderValue| !cookie.as_bytes().starts_with(CHERRYPY_SESSION);
    if headers.get_all(SET_COOKIE).iter().any(personal) {
        return false;
    }
    !headers.get_all(CACHE_CONTROL).iter().any(|value| {
        value.as_bytes().split(|b| *b == b',').any(|directive| {
            let name = directive.split(|b| *b == b'=').next().unwrap_or_default();
            let name = name.trim_ascii();
            name.eq_ignore_ascii_case(b"no-store") || name.eq_ignore_ascii_case(b"private")
        })
    })
}

#[cfg(test)]
mod tests;
