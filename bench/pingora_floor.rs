//! The framework's floor, for bench/run.sh: pingora 0.9's own HTTP proxy as its examples
//! build one, on the same allocator and thread count as clustergate, with nothing of
//! clustergate's (no token, role, version or path checks, no header rewriting, metrics
//! or logs). It forwards every request to one backend over kept-alive connections, so
//! clustergate's cost above it is clustergate's own, and the rest is pingora's.
//!
//!   cargo build --release --example pingora-floor
//!   target/release/examples/pingora-floor LISTEN BACKEND [THREADS [steal|nosteal]]
//!
//! `steal` (the default) is pingora's default runtime, tokio's work-stealing one; `nosteal`
//! is `ServerConf { work_stealing: false, .. }`, one single-threaded runtime per thread.

use async_trait::async_trait;
use pingora::prelude::*;
use pingora::server::configuration::ServerConf;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Floor {
    backend: String,
}

#[async_trait]
impl ProxyHttp for Floor {
    type CTX = ();

    fn new_ctx(&self) {}

    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut ()) -> Result<Box<HttpPeer>> {
        Ok(Box::new(HttpPeer::new(
            self.backend.as_str(),
            false,
            String::new(),
        )))
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (listen, backend) = match args.as_slice() {
        [listen, backend] | [listen, backend, _] | [listen, backend, _, _] => {
            (listen.clone(), backend.clone())
        }
        _ => usage(),
    };
    let threads = match args.get(2).map(|t| t.parse::<usize>()) {
        None => 1,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => usage(),
    };
    let work_stealing = match args.get(3).map(String::as_str) {
        None | Some("steal") => true,
        Some("nosteal") => false,
        Some(_) => usage(),
    };
    // Stopped by the bench with SIGTERM: no 300 s graceful shutdown.
    let conf = ServerConf {
        threads,
        work_stealing,
        grace_period_seconds: Some(1),
        graceful_shutdown_timeout_seconds: Some(1),
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let mut proxy = http_proxy_service(&server.configuration, Floor { backend });
    proxy.add_tcp(&listen);
    server.add_service(proxy);
    server.run_forever();
}

fn usage() -> ! {
    eprintln!("usage: pingora-floor LISTEN_ADDR BACKEND_ADDR [THREADS [steal|nosteal]]");
    std::process::exit(2)
}
