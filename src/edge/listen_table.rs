//! Listening sockets the gateway binds itself and hands to pingora through its table of
//! listening sockets (the table its graceful upgrade sends to a successor): a pingora listener
//! whose address is in the table listens on that socket instead of binding one. Binding here
//! lets the gateway learn the port the kernel chose for port 0, fail at once on an address in
//! use, and say where it listens before pingora starts; there is no bind-and-drop in between.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::IntoRawFd;

use pingora::server::{ListenFds, Server};

/// pingora's table of listening sockets, keyed by the address string a listener is given.
pub struct ListenTable(ListenFds);

impl ListenTable {
    /// The table of `server` (vendored pingora-core change 6). Take it after
    /// `Server::bootstrap`: on an upgrade, that replaces the table's contents with the
    /// sockets received from the process being replaced.
    pub fn of(server: &Server) -> Self {
        Self(server.listen_fds())
    }

    /// Whether the table holds a socket for `addr` (one received on an upgrade).
    pub fn holds(&self, addr: SocketAddr) -> bool {
        self.0.lock().get(&addr.to_string()).is_some()
    }

    /// Binds a listening socket on `addr` (port 0: a port the kernel chooses) and puts it in
    /// the table under the address it got, which it returns: a pingora listener given that
    /// address listens on this socket.
    pub fn bind(&self, addr: SocketAddr) -> io::Result<SocketAddr> {
        // std sets SO_REUSEADDR before binding, as pingora's own bind does; pingora sets its
        // backlog (65,535) again when it takes the socket over.
        let listener = TcpListener::bind(addr)?;
        // pingora accepts on it from its async runtime, as on the sockets it binds itself.
        listener.set_nonblocking(true)?;
        let bound = listener.local_addr()?;
        // The table owns the descriptor from here: pingora's listener closes it, and an
        // upgrade sends it on.
        self.0.lock().add(bound.to_string(), listener.into_raw_fd());
        Ok(bound)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::Arc;
    use std::time::Duration;

    use async_trait::async_trait;
    use http::Response;
    use pingora::apps::http_app::ServeHttp;
    use pingora::protocols::http::ServerSession;
    use pingora::server::{RunArgs, ShutdownSignal, ShutdownSignalWatch};
    use pingora::services::listening::Service;
    use tokio::sync::Notify;

    use super::*;

    struct Hello;

    #[async_trait]
    impl ServeHttp for Hello {
        async fn response(&self, _session: &mut ServerSession) -> Response<Vec<u8>> {
            Response::new(b"hello".to_vec())
        }
    }

    /// Stops the server when notified, instead of on a signal to the test process.
    struct StopWhenNotified(Arc<Notify>);

    #[async_trait]
    impl ShutdownSignalWatch for StopWhenNotified {
        async fn recv(&self) -> ShutdownSignal {
            self.0.notified().await;
            ShutdownSignal::FastShutdown
        }
    }

    /// What clustergate relies on in pingora (fails when an upgrade of pingora changes it):
    /// the server's table is reachable, and a listener whose address is in it answers on
    /// that socket. Were pingora to bind the address itself, the bind would fail (the socket
    /// here holds the port) and the request would wait in the socket's backlog unanswered.
    #[test]
    fn pingora_listens_on_the_socket_put_in_its_table() {
        let mut server = Server::new(None).unwrap();
        server.bootstrap();
        let addr = ListenTable::of(&server)
            .bind("127.0.0.1:0".parse().unwrap())
            .unwrap();
        assert_ne!(addr.port(), 0);
        let mut service = Service::new("hello".to_string(), Hello);
        service.add_tcp(&addr.to_string());
        server.add_service(service);
        let stop = Arc::new(Notify::new());
        let shutdown_signal = Box::new(StopWhenNotified(stop.clone()));
        let running = std::thread::spawn(move || server.run(RunArgs { shutdown_signal }));

        let mut client = TcpStream::connect(addr).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        let read = client.read_to_string(&mut answer);
        stop.notify_one();
        running.join().unwrap();
        read.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("hello"), "{answer}");
    }

    #[test]
    fn an_address_in_use_is_refused_at_once() {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let server = Server::new(None).unwrap();
        let table = ListenTable::of(&server);
        let refused = table.bind(held.local_addr().unwrap()).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::AddrInUse);
        assert!(!table.holds(held.local_addr().unwrap()));
    }
}
