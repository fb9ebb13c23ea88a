//! The admin listener, for Prometheus and the orchestrator's probes: `/metrics`
//! (Prometheus' text format), `/healthz` (the process serves), `/readyz` (it can do its
//! work: an active manager is known, or none is configured, and every state store answers).

use std::sync::Arc;

use arc_swap::ArcSwap;
use async_trait::async_trait;
use http::{Response, StatusCode};
use pingora::apps::http_app::ServeHttp;
use pingora::protocols::http::ServerSession;

use crate::access::Admission;
use crate::dashboards::Upstreams;
use crate::observe::audit::Audit;
use crate::observe::logs::LogWriter;
use crate::observe::metrics::Metrics;
use crate::readiness::Readiness;
use crate::state::Stores;

/// The admin listener's application.
pub struct AdminApp {
    pub metrics: Arc<Metrics>,
    /// Which table each manager's release gets (for the release gauge).
    pub admission: Arc<ArcSwap<Admission>>,
    pub upstreams: Arc<Upstreams>,
    pub readiness: Arc<Readiness>,
    pub stores: Stores,
    /// Counts the log lines it dropped.
    pub log_writer: LogWriter,
    pub audit: Arc<Audit>,
}

/// A plain-text answer.
struct Answer {
    status: StatusCode,
    content_type: &'static str,
    body: Vec<u8>,
}

impl Answer {
    fn text(status: StatusCode, body: &str) -> Answer {
        Answer {
            status,
            content_type: "text/plain",
            body: body.as_bytes().to_vec(),
        }
    }
}

impl AdminApp {
    fn metrics(&self) -> Answer {
        self.metrics.state.observe(&self.stores.health);
        let admission = self.admission.load();
        let table_of = |release| {
            let table = admission.table_for(Some(release)).release;
            table.map_or("custom".to_string(), |r| r.to_string())
        };
        self.upstreams.observe(&self.metrics, &table_of);
        self.metrics
            .logs
            .observe(self.log_writer.dropped_lines(), self.audit.write_errors());
        match self.metrics.render() {
            Ok(body) => Answer {
                status: StatusCode::OK,
                content_type: "text/plain; version=0.0.4",
                body,
            },
            Err(e) => {
                tracing::error!(error = %e, "cannot render metrics");
                Answer::text(StatusCode::INTERNAL_SERVER_ERROR, "cannot render metrics\n")
            }
        }
    }

    async fn readiness(&self) -> Answer {
        if let Err(not_ready) = self.readiness.check() {
            let body = format!("{not_ready}\n");
            return Answer::text(StatusCode::SERVICE_UNAVAILABLE, &body);
        }
        if let Err(e) = self.stores.ready().await {
            tracing::warn!(error = %e, "not ready: a state store does not answer");
            return Answer::text(
                StatusCode::SERVICE_UNAVAILABLE,
                "session store unavailable\n",
            );
        }
        Answer::text(StatusCode::OK, "ready\n")
    }
}

#[async_trait]
impl ServeHttp for AdminApp {
    async fn response(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let answer = match session.req_header().uri.path() {
            "/metrics" => self.metrics(),
            "/healthz" => Answer::text(StatusCode::OK, "ok\n"),
            "/readyz" => self.readiness().await,
            _ => Answer::text(StatusCode::NOT_FOUND, "not found\n"),
        };
        let length = answer.body.len();
        let mut response = Response::new(answer.body);
        *response.status_mut() = answer.status;
        let headers = response.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(answer.content_type),
        );
        headers.insert(
            http::header::CONTENT_LENGTH,
            http::HeaderValue::from(length),
        );
        response
    }
}

#[cfg(test)]
mod tests {
    use pingora::protocols::http::ServerSession;
    use pingora::protocols::l4::stream::Stream;
    use tokio::io::AsyncWriteExt;

    /// pingora logs this summary at ERROR when the admin listener cannot answer a request
    /// (vendored pingora-core change 5): a query string may carry a secret.
    #[tokio::test]
    async fn pingoras_summary_of_a_request_names_no_query() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        client
            .write_all(b"GET /metrics?token=s3cr3t HTTP/1.1\r\nHost: gw\r\n\r\n")
            .await
            .unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        let mut session = ServerSession::new_http1(Box::new(Stream::from(accepted)));
        assert!(session.read_request().await.unwrap());
        let summary = session.request_summary();
        assert!(summary.starts_with("GET /metrics,"), "{summary}");
        assert!(!summary.contains("s3cr3t"), "{summary}");
    }
}
