//! Where the gateway's log lines go and how they look: `tracing`'s lines as text or as one
//! JSON object each (`log.format`), filtered by `RUST_LOG` or else `log.level`, written to
//! standard error by a worker thread so that no request waits on the output. The access
//! log (`access_log`) is one of these lines; the audit log (`audit`) is written apart.

use std::io::{BufWriter, IsTerminal};

use tracing::Subscriber;
use tracing_appender::non_blocking::{ErrorCounter, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

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
    dropped: DroppedLines,
}

impl Logging {
    pub fn dropped_lines(&self) -> DroppedLines {
        self.dropped.clone()
    }
}

/// How many log lines were dropped because the output fell behind.
#[derive(Debug, Clone)]
pub struct DroppedLines(ErrorCounter);

impl DroppedLines {
    pub fn count(&self) -> u64 {
        u64::try_from(self.0.dropped_lines()).unwrap_or(u64::MAX)
    }
}

/// Installs the process's logger. `RUST_LOG`, when set and valid, replaces `log.level`.
pub fn init(config: &LogConfig) -> Result<Logging, LogError> {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::builder().parse(&config.level))
        .map_err(|e| LogError(e.to_string()))?;
    let (writer, worker) = NonBlockingBuilder::default()
        .buffered_lines_limit(QUEUED_LINES)
        .lossy(true)
        .thread_name("clustergate-log")
        .finish(BufWriter::with_capacity(
            WRITE_BUFFER_BYTES,
            std::io::stderr(),
        ));
    let dropped = DroppedLines(writer.error_counter());
    let ansi = config.format == LogFormat::Text && std::io::stderr().is_terminal();
    tracing_subscriber::registry()
        .with(filter)
        .with(layer(config.format, writer, ansi))
        .try_init()
        .map_err(|e| LogError(e.to_string()))?;
    Ok(Logging {
        _worker: worker,
        dropped,
    })
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

    /// What `emit` logs through the gateway's own layer in `format`, with `filter`.
    pub fn lines(format: LogFormat, filter: &str, emit: impl FnOnce()) -> String {
        let captured = Captured::default();
        let subscriber = Registry::default()
            .with(EnvFilter::new(filter))
            .with(super::layer(format, captured.clone(), false));
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = captured.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }
}
