//! Where the gateway's log lines go and how they look: `tracing`'s lines as text or as one
//! JSON object each (`log.format`), filtered by `RUST_LOG` or else `log.level` (which a
//! reload changes: [`LogLevel`]) and never past INFO for libraries
//! ([`libraries_at_most_info`]), written to standard error by a worker thread so that no
//! request waits on the output. The access
//! log (`access_log`) formats its lines itself (JSON through [`json_line`]) and queues them
//! on the same worker ([`LogWriter`]); the audit log (`audit`) uses [`json_line`] and
//! writes apart.

use std::io::{BufWriter, IsTerminal, Write};

use serde::Serialize;
use tracing::{Level, Metadata, Subscriber};
use tracing_appender::non_blocking::{NonBlocking, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::filter::{filter_fn, FilterFn};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

use crate::config::{LogConfig, LogFormat};

/// Lines waiting for the worker thread; past this, lines are dropped and counted rather
/// than making requests wait (a few megabytes at a few hundred bytes a line).
const QUEUED_LINES: usize = 16 * 1024;

/// The worker writes what is queued in writes of at most this much (one syscall for many
/// lines under load). At most PIPE_BUF bytes, a pipe write is atomic, so an audit line
/// written to standard error at the same time never lands inside one of these lines.
const WRITE_BUFFER_BYTES: usize = 4096;

#[derive(Debug, thiserror::Error)]
#[error("cannot set up logging: {0}")]
pub struct LogError(String);

/// Keeps the worker thread running; dropping it writes out what is queued.
pub struct Logging {
    _worker: WorkerGuard,
    handles: LogHandles,
}

impl Logging {
    pub fn handles(&self) -> LogHandles {
        self.handles.clone()
    }
}

/// What the running gateway uses of the logger.
#[derive(Clone)]
pub struct LogHandles {
    /// Where access lines go.
    pub writer: LogWriter,
    /// Text lines are coloured (standard error is a terminal).
    pub ansi: bool,
    /// The filter a reload of `log.level` replaces.
    pub level: LogLevel,
}

/// The running logger's filter. `log.level` replaces it on a reload, unless `RUST_LOG` set
/// it: then `RUST_LOG` wins, as at start.
#[derive(Clone)]
pub struct LogLevel {
    handle: reload::Handle<EnvFilter, Registry>,
    set_by_env: bool,
}

impl LogLevel {
    /// The filter `level` (a validated `log.level`) asks for, for [`LogLevel::install`];
    /// `None` while `RUST_LOG` sets the filter.
    pub fn parse(&self, level: &str) -> Result<Option<EnvFilter>, LogError> {
        if self.set_by_env {
            return Ok(None);
        }
        EnvFilter::builder()
            .parse(level)
            .map(Some)
            .map_err(|e| LogError(e.to_string()))
    }

    /// Filters every line from now on with `filter`.
    pub fn install(&self, filter: EnvFilter) -> Result<(), LogError> {
        self.handle
            .reload(filter)
            .map_err(|e| LogError(e.to_string()))
    }
}

/// `filter` as a layer [`LogLevel`] can replace.
fn reloadable(
    filter: EnvFilter,
    set_by_env: bool,
) -> (reload::Layer<EnvFilter, Registry>, LogLevel) {
    let (layer, handle) = reload::Layer::new(filter);
    (layer, LogLevel { handle, set_by_env })
}

/// The worker thread's queue, for lines formatted elsewhere (the access lines).
#[derive(Debug, Clone)]
pub struct LogWriter(NonBlocking);

impl LogWriter {
    /// Queues one whole line; when the queue is full it is dropped, and counted.
    pub fn write_line(&self, line: &[u8]) {
        // Queueing fails only when full, which the writer counts itself.
        let _ = self.0.clone().write_all(line);
    }

    /// How many lines were dropped because standard error fell behind.
    pub fn dropped_lines(&self) -> u64 {
        u64::try_from(self.0.error_counter().dropped_lines()).unwrap_or(u64::MAX)
    }
}

/// Installs the process's logger. `RUST_LOG`, when set and valid, replaces `log.level`.
pub fn init(config: &LogConfig) -> Result<Logging, LogError> {
    let (filter, set_by_env) = match EnvFilter::try_from_default_env() {
        Ok(filter) => (filter, true),
        Err(_) => (
            EnvFilter::builder()
                .parse(&config.level)
                .map_err(|e| LogError(e.to_string()))?,
            false,
        ),
    };
    let (filter, level) = reloadable(filter, set_by_env);
    let (writer, worker) = NonBlockingBuilder::default()
        .buffered_lines_limit(QUEUED_LINES)
        .lossy(true)
        .thread_name("clustergate-log")
        .finish(BufWriter::with_capacity(
            WRITE_BUFFER_BYTES,
            std::io::stderr(),
        ));
    let ansi = config.format == LogFormat::Text && std::io::stderr().is_terminal();
    tracing_subscriber::registry()
        .with(filter)
        .with(libraries_at_most_info())
        .with(layer(config.format, writer.clone(), ansi))
        .try_init()
        .map_err(|e| LogError(e.to_string()))?;
    Ok(Logging {
        _worker: worker,
        handles: LogHandles {
            writer: LogWriter(writer),
            ansi,
            level,
        },
    })
}

/// Only the gateway's own lines pass INFO, whatever `RUST_LOG` or `log.level` ask: its
/// libraries' debug and trace lines carry what the gateway keeps out of its logs (pingora's
/// print whole request heads, with the Authorization header the gateway sets, the client's
/// cookies and query). Its own are written without secrets.
fn libraries_at_most_info() -> FilterFn<fn(&Metadata<'_>) -> bool> {
    filter_fn(|meta| *meta.level() <= Level::INFO || is_own(meta.target()))
}

/// A target of the gateway's own code (`clustergate`'s module paths).
fn is_own(target: &str) -> bool {
    target
        .strip_prefix("clustergate")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
}

/// A JSON line written without `tracing`'s formatter: `timestamp` (now, as the other JSON
/// lines write it), `level` INFO, `target`, then the keys of `fields`, and a newline. It
/// costs a third of the same line through `tracing`'s JSON formatter (measured: 8,000
/// instructions against 24,000), which re-validates every piece it writes as UTF-8.
pub(crate) fn json_line<T: Serialize>(target: &'static str, fields: &T) -> Vec<u8> {
    #[derive(Serialize)]
    struct Line<'a, T> {
        timestamp: String,
        level: &'static str,
        target: &'static str,
        #[serde(flatten)]
        fields: &'a T,
    }
    let mut timestamp = String::with_capacity(32);
    // Writing into a String cannot fail.
    let _ = SystemTime.format_time(&mut Writer::new(&mut timestamp));
    let line = Line {
        timestamp,
        level: "INFO",
        target,
        fields,
    };
    let mut out = Vec::with_capacity(384);
    // Our field types serialize without failing; a line that did not would be left empty.
    if serde_json::to_writer(&mut out, &line).is_err() {
        out.clear();
    }
    out.push(b'\n');
    out
}

/// The layer that formats every line for `writer`. In JSON, an event's fields are
/// top-level keys beside `timestamp`, `level` and `target`, and a line written inside a
/// request carries its `span` (with the `request_id`).
pub(crate) fn layer<S, W>(
    format: LogFormat,
    writer: W,
    ansi: bool,
) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let fmt = tracing_subscriber::fmt::layer().with_writer(writer);
    match format {
        LogFormat::Text => fmt.with_ansi(ansi).boxed(),
        LogFormat::Json => fmt
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .boxed(),
    }
}

/// Log lines written in memory, for unit tests of their format.
#[cfg(test)]
pub(crate) mod capture {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::{EnvFilter, Registry};

    use super::LogLevel;
    use crate::config::LogFormat;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    /// A [`super::LogWriter`] whose lines `emit` writes, read back once its worker is done.
    pub fn written(emit: impl FnOnce(&super::LogWriter)) -> String {
        let captured = Captured::default();
        let (writer, worker) = tracing_appender::non_blocking(captured.clone());
        emit(&super::LogWriter(writer));
        drop(worker);
        let bytes = captured.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    /// What `emit` logs through the gateway's own layer in `format`, with `filter`.
    pub fn lines(format: LogFormat, filter: &str, emit: impl FnOnce()) -> String {
        lines_with_level(format, filter, |_| emit())
    }

    /// As [`lines`], `emit` given the [`LogLevel`] that replaces `filter`.
    pub fn lines_with_level(
        format: LogFormat,
        filter: &str,
        emit: impl FnOnce(&LogLevel),
    ) -> String {
        let captured = Captured::default();
        let (filter, level) = super::reloadable(EnvFilter::new(filter), false);
        let subscriber = Registry::default()
            .with(filter)
            .with(super::libraries_at_most_info())
            .with(super::layer(format, captured.clone(), false));
        tracing::subscriber::with_default(subscriber, || emit(&level));
        let bytes = captured.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_level_filters_the_next_lines() {
        let text = capture::lines_with_level(LogFormat::Text, "warn", |level| {
            tracing::info!("before the reload");
            level
                .install(level.parse("info").unwrap().unwrap())
                .unwrap();
            tracing::info!("after the reload");
        });
        assert!(!text.contains("before the reload"), "{text}");
        assert!(text.contains("after the reload"), "{text}");
    }

    #[test]
    fn libraries_never_write_past_info() {
        let text = capture::lines(LogFormat::Text, "trace", || {
            tracing::debug!(target: "pingora_core::protocols::http::v1::client", "library debug");
            tracing::trace!(target: "clustergate_other", "library trace");
            tracing::info!(target: "pingora_proxy", "library info");
            tracing::trace!(target: "clustergate::proxy", "own trace");
            tracing::debug!("own debug");
        });
        assert!(!text.contains("library debug"), "{text}");
        assert!(!text.contains("library trace"), "{text}");
        for line in ["library info", "own trace", "own debug"] {
            assert!(text.contains(line), "{line}: {text}");
        }
    }

    #[test]
    fn rust_log_wins_over_a_new_level() {
        let (_, level) = reloadable(EnvFilter::new("warn"), true);
        assert!(level.parse("info").unwrap().is_none());
    }
}
