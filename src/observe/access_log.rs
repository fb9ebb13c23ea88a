//! The access log: one line per request, written by the `logging` hook once the answer is
//! sent, of target `clustergate::access` (so `RUST_LOG` and `log.level` turn it off or on
//! like any other line). Never a token, a password, a body or the query string (it may
//! carry a token): only what [`Served`] holds.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::time::Duration;

use http::Method;
use serde::Serialize;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};

use crate::api_keys::KeyLabel;
use crate::config::LogFormat;
use crate::decimal::{push_decimal, push_padded};
use crate::observe::logs::{self, LogWriter};
use crate::routes::Route;

/// One request as the logs record it, once answered.
#[derive(Debug, Clone)]
pub struct Served<'a> {
    pub request_id: &'a str,
    /// Who sent it (`client_addr`): the TCP peer, or the client a trusted proxy's
    /// `X-Forwarded-For` names; the address the login limit counts.
    pub client: Option<IpAddr>,
    /// The user the token named; for a login or logout that succeeded, its user.
    pub user: Option<&'a str>,
    pub method: &'a Method,
    pub route: Route,
    /// The scope table's template the path matched (`/api/pool/{pool_name}`), the name of
    /// the gateway's own route (`auth`, `auth_check`, `auth_logout`, `docs`), or
    /// `unmatched`.
    pub operation: &'a str,
    /// Normalized; as received when it could not be (a 400). Never the query.
    pub path: &'a str,
    /// 0: no answer was written (the client went away first).
    pub status: u16,
    /// Response body bytes sent to the client.
    pub bytes: usize,
    pub elapsed: Duration,
    /// The dashboard the request was last sent to, if it was forwarded.
    pub backend: Option<&'a str>,
    /// The API key it was sent with (`user` is then the key's owner).
    pub api_key: Option<&'a KeyLabel>,
}

/// The path a line shows: the normalized one, or the one received when it could not be
/// normalized (empty `normalized`); never the query.
pub fn logged_path<'a>(normalized: &'a str, uri: &'a http::Uri) -> &'a str {
    match normalized.is_empty() {
        true => uri.path(),
        false => normalized,
    }
}

const TARGET: &str = "clustergate::access";

/// Writes access lines in the configured format.
#[derive(Debug, Clone)]
pub struct AccessLog {
    format: LogFormat,
    /// Where the lines formatted here go.
    writer: LogWriter,
    /// Text lines in colour (standard error is a terminal) go through `tracing`'s
    /// formatter, which colours them; other lines are formatted here.
    ansi: bool,
}

/// The fields of a JSON access line, in order; what is not known is left out.
#[derive(Serialize)]
struct AccessFields<'a> {
    request_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    client: Option<IpAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
    method: &'a str,
    operation: &'a str,
    path: &'a str,
    status: u16,
    bytes: usize,
    duration_us: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    backend: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_key: Option<KeyFields<'a>>,
}

/// An API key as the access and audit lines name it: its id and name, never its secret.
#[derive(Serialize)]
pub(crate) struct KeyFields<'a> {
    id: &'a str,
    name: &'a str,
}

impl<'a> KeyFields<'a> {
    pub(crate) fn of(key: &'a KeyLabel) -> Self {
        KeyFields {
            id: &key.id,
            name: &key.name,
        }
    }
}

impl AccessLog {
    /// `ansi`: the logger colours its text lines (`LogHandles::ansi`).
    pub fn new(format: LogFormat, writer: LogWriter, ansi: bool) -> AccessLog {
        AccessLog {
            format,
            writer,
            ansi,
        }
    }

    /// Writes `served`'s line, once the filter said access lines are on: when they are
    /// off, nothing is formatted. Text keeps the line of earlier releases (inside the
    /// request's span); JSON has every field at the top level. Both are
    /// formatted here (`text_line`, `logs::json_line`) at a third of the cost of
    /// `tracing`'s formatters, and queued on the log worker.
    pub fn record(&self, served: &Served<'_>, span: &tracing::Span) {
        let micros = u64::try_from(served.elapsed.as_micros()).unwrap_or(u64::MAX);
        let enabled = || tracing::enabled!(target: TARGET, tracing::Level::INFO);
        match self.format {
            LogFormat::Text if !self.ansi => {
                if enabled() {
                    let line = text_line(served, micros, !span.is_disabled());
                    self.writer.write_line(line.as_bytes());
                }
            }
            LogFormat::Text => tracing::info!(
                target: TARGET,
                parent: span,
                method = %served.method,
                path = served.path,
                route = served.route.label(),
                status = served.status,
                backend = served.backend.unwrap_or(""),
                micros,
                api_key = served.api_key.map(|key| key.id.as_str()),
            ),
            LogFormat::Json if enabled() => {
                let fields = AccessFields {
                    request_id: served.request_id,
                    client: served.client,
                    user: served.user,
                    method: served.method.as_str(),
                    operation: served.operation,
                    path: served.path,
                    status: served.status,
                    bytes: served.bytes,
                    duration_us: micros,
                    backend: served.backend,
                    api_key: served.api_key.map(KeyFields::of),
                };
                self.writer.write_line(&logs::json_line(TARGET, &fields));
            }
            LogFormat::Json => {}
        }
    }
}

/// The text line `tracing`'s formatter writes for the access event (without colour),
/// byte for byte: timestamp, level, the request's span when it is on (`RequestCtx::span`:
/// `request{request_id=<id>}`), target, fields. Written piece by piece (`format_args!`
/// and `{:?}` cost three times as much on every logged request).
fn text_line(served: &Served<'_>, micros: u64, in_span: bool) -> String {
    let mut line = String::with_capacity(256);
    push_timestamp(&mut line, std::time::SystemTime::now());
    line.push_str("  INFO ");
    if in_span {
        line.push_str("request{request_id=");
        line.push_str(served.request_id);
        line.push_str("}: ");
    }
    line.push_str(TARGET);
    line.push_str(": method=");
    line.push_str(served.method.as_str());
    line.push_str(" path=");
    push_debug_str(&mut line, served.path);
    line.push_str(" route=");
    push_debug_str(&mut line, served.route.label());
    line.push_str(" status=");
    push_decimal(&mut line, served.status);
    line.push_str(" backend=");
    push_debug_str(&mut line, served.backend.unwrap_or(""));
    line.push_str(" micros=");
    push_decimal(&mut line, micros);
    if let Some(key) = served.api_key {
        line.push_str(" api_key=");
        push_debug_str(&mut line, &key.id);
    }
    line.push('\n');
    line
}

thread_local! {
    /// The second last written (since the epoch) and its text up to the fraction: one
    /// calendar computation a second per thread instead of one a line.
    static SECOND: std::cell::RefCell<(u64, String)> = const {
        std::cell::RefCell::new((u64::MAX, String::new()))
    };
}

/// `now` as `tracing`'s `SystemTime` timer writes it: `2026-11-24T18:53:00.123456Z`.
fn push_timestamp(line: &mut String, now: std::time::SystemTime) {
    let Ok(since_epoch) = now.duration_since(std::time::UNIX_EPOCH) else {
        return push_timestamp_by_tracing(line);
    };
    let secs = since_epoch.as_secs();
    let pushed = SECOND.with_borrow_mut(|(cached, text)| {
        if *cached != secs {
            *text = second_text(secs)?;
            *cached = secs;
        }
        line.push_str(text);
        Some(())
    });
    if pushed.is_none() {
        return push_timestamp_by_tracing(line);
    }
    let micros = since_epoch.subsec_micros();
    push_padded(line, micros, 6);
    line.push('Z');
}

/// The time now through `tracing`'s own formatter, for times outside the years 1970-9999
/// (writing to a String cannot fail).
fn push_timestamp_by_tracing(line: &mut String) {
    let _ = SystemTime.format_time(&mut Writer::new(line));
}

/// `2026-11-24T18:53:00.` for `secs` since the epoch; `None` past the four-digit years.
fn second_text(secs: u64) -> Option<String> {
    let at = time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).ok()?).ok()?;
    if at.year() > 9999 {
        return None;
    }
    Some(format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    ))
}

/// `text` as `{:?}` writes it; without a byte to escape, without the formatter.
fn push_debug_str(line: &mut String, text: &str) {
    if text
        .bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        line.push('"');
        line.push_str(text);
        line.push('"');
    } else {
        let _ = write!(line, "{text:?}");
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::observe::logs::capture;

    pub(crate) fn forwarded_call(method: &Method) -> Served<'_> {
        Served {
            request_id: "6f1c2d9e-0000-4000-8000-000000000001",
            client: Some(IpAddr::from([192, 0, 2, 7])),
            user: Some("admin"),
            method,
            route: Route::Api,
            operation: "/api/pool/{pool_name}",
            path: "/api/pool/rbd",
            status: 200,
            bytes: 1234,
            elapsed: Duration::from_micros(5678),
            backend: Some("http://10.0.0.1:8080"),
            api_key: None,
        }
    }

    /// What `AccessLog::record` writes in `format` under `filter`.
    pub(crate) fn access_lines(format: LogFormat, filter: &str, served: &Served<'_>) -> String {
        lines_of(format, false, filter, served)
    }

    /// As [`access_lines`], through `tracing`'s formatter when `ansi` (the capture has no
    /// colours).
    fn lines_of(format: LogFormat, ansi: bool, filter: &str, served: &Served<'_>) -> String {
        let mut traced = String::new();
        let written = capture::written(|writer| {
            traced = capture::lines(format, filter, || {
                // as `RequestCtx::span`
                let span = tracing::info_span!("request", request_id = %served.request_id);
                AccessLog::new(format, writer.clone(), ansi).record(served, &span)
            });
        });
        traced + &written
    }

    /// A line without its timestamp (the first word).
    fn untimed(line: &str) -> &str {
        line.split_once(' ').map_or("", |(_, rest)| rest)
    }

    #[test]
    fn a_text_access_line_is_the_line_tracing_writes() {
        let unknown = Served {
            user: None,
            backend: None,
            path: "/api/\"quoted\"/ü",
            ..forwarded_call(&Method::DELETE)
        };
        for served in [forwarded_call(&Method::GET), unknown] {
            for filter in ["info", "warn,clustergate::access=info"] {
                let ours = access_lines(LogFormat::Text, filter, &served);
                let traced = lines_of(LogFormat::Text, true, filter, &served);
                assert_eq!(ours.lines().count(), 1, "{ours}");
                assert_eq!(untimed(&ours), untimed(&traced), "{filter}");
            }
        }
    }

    #[test]
    fn timestamps_are_written_as_tracing_writes_them() {
        // tracing's timer reads the clock itself: compare within one second, to the second.
        for _ in 0..100 {
            let before = std::time::SystemTime::now();
            let mut traced = String::new();
            SystemTime
                .format_time(&mut Writer::new(&mut traced))
                .unwrap();
            let mut ours = String::new();
            push_timestamp(&mut ours, before);
            let second = |t: std::time::SystemTime| {
                t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
            };
            if second(before) == second(std::time::SystemTime::now()) {
                assert_eq!(ours.len(), traced.len(), "{ours} {traced}");
                assert_eq!(ours[..20], traced[..20]);
                assert!(ours.ends_with('Z'));
                return;
            }
        }
        panic!("no two clock readings within one second");
    }

    #[test]
    fn timestamps_of_chosen_times() {
        let at = |secs: u64, micros: u64| {
            let mut text = String::new();
            let t = std::time::UNIX_EPOCH + Duration::from_micros(secs * 1_000_000 + micros);
            push_timestamp(&mut text, t);
            text
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(at(1_795_545_180, 7), "2026-11-24T18:33:00.000007Z");
        assert_eq!(at(1_795_545_180, 123_456), "2026-11-24T18:33:00.123456Z");
        assert_eq!(at(951_782_399, 999_999), "2000-02-28T23:59:59.999999Z");
        assert_eq!(at(951_868_800, 0), "2000-03-01T00:00:00.000000Z");
    }

    #[test]
    fn debug_strings_as_the_formatter_writes_them() {
        for s in ["", "/api/pool/rbd", "a\"b", "back\\slash", "ü", "tab\t"] {
            let mut text = String::new();
            push_debug_str(&mut text, s);
            assert_eq!(text, format!("{s:?}"));
        }
    }

    #[test]
    fn a_text_access_line_outside_the_request_span_has_no_span() {
        let served = forwarded_call(&Method::GET);
        let text = capture::written(|writer| {
            capture::lines(LogFormat::Text, "info", || {
                AccessLog::new(LogFormat::Text, writer.clone(), false)
                    .record(&served, &tracing::Span::none())
            });
        });
        assert!(
            untimed(&text).starts_with(" INFO clustergate::access: method=GET "),
            "{text}"
        );
    }

    fn json_line(served: &Served<'_>) -> serde_json::Value {
        let text = access_lines(LogFormat::Json, "info", served);
        assert_eq!(text.lines().count(), 1, "{text}");
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn a_json_access_line_has_every_field_at_the_top_level() {
        let line = json_line(&forwarded_call(&Method::PUT));
        let expected = serde_json::json!({
            "level": "INFO",
            "target": "clustergate::access",
            "request_id": "6f1c2d9e-0000-4000-8000-000000000001",
            "client": "192.0.2.7",
            "user": "admin",
            "method": "PUT",
            "operation": "/api/pool/{pool_name}",
            "path": "/api/pool/rbd",
            "status": 200,
            "bytes": 1234,
            "duration_us": 5678,
            "backend": "http://10.0.0.1:8080",
        });
        for (key, value) in expected.as_object().unwrap() {
            assert_eq!(&line[key], value, "{key} in {line}");
        }
        let timestamp = line["timestamp"].as_str().unwrap();
        assert!(
            timestamp.ends_with('Z') && timestamp.contains('T'),
            "{timestamp}"
        );
        assert_eq!(
            line.as_object().unwrap().len(),
            expected.as_object().unwrap().len() + 1
        );
    }

    #[test]
    fn a_json_access_line_leaves_out_the_user_and_backend_it_does_not_know() {
        let served = Served {
            user: None,
            backend: None,
            route: Route::Login,
            operation: "auth",
            ..forwarded_call(&Method::POST)
        };
        let line = json_line(&served);
        assert!(
            line.get("user").is_none() && line.get("backend").is_none(),
            "{line}"
        );
        assert_eq!(line["operation"], "auth");
    }

    #[test]
    fn a_text_access_line_keeps_the_fields_of_earlier_releases_in_the_request_span() {
        let text = access_lines(LogFormat::Text, "info", &forwarded_call(&Method::GET));
        for field in [
            "request{request_id=6f1c2d9e-0000-4000-8000-000000000001}",
            "clustergate::access",
            "method=GET",
            "path=\"/api/pool/rbd\"",
            "route=\"proxy\"",
            "status=200",
            "backend=\"http://10.0.0.1:8080\"",
            "micros=5678",
        ] {
            assert!(text.contains(field), "{field} in {text}");
        }
    }

    #[test]
    fn access_lines_follow_the_filter() {
        let served = forwarded_call(&Method::GET);
        for format in [LogFormat::Text, LogFormat::Json] {
            for filter in ["info,clustergate::access=off", "warn"] {
                let text = access_lines(format, filter, &served);
                assert_eq!(text, "", "{format:?} {filter}");
            }
            assert_ne!(
                access_lines(format, "warn,clustergate::access=info", &served),
                ""
            );
        }
    }

    #[test]
    fn the_logged_path_is_never_the_query() {
        let uri: http::Uri = "/api/pool/%72bd?token=secret".parse().unwrap();
        assert_eq!(logged_path("/api/pool/rbd", &uri), "/api/pool/rbd");
        assert_eq!(logged_path("", &uri), "/api/pool/%72bd");
    }
}
