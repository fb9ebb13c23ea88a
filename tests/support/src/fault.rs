//! A TCP relay in front of a real dashboard that resets the connection when a request
//! starts with a given line: the dashboard failing mid-request, as a manager does when its
//! process dies, without imitating any of its answers. Or, stalling, that request never
//! reaches the dashboard and is never answered: a dashboard operation that takes long. Or,
//! recording, that request is sent on and a copy kept: what the gateway sent the dashboard.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

/// What becomes of a request with the marked line.
#[derive(Clone, Copy)]
pub enum Fault {
    /// Its connection is reset (RST).
    Reset,
    /// It is not sent on, and the connection stays open, unanswered.
    Stall,
    /// It is sent on, and the bytes read with its line are kept in `recorded`.
    Record,
}

pub struct ResettingRelay {
    pub addr: SocketAddr,
    /// Connections reset (or stalled) so far.
    pub resets: Arc<AtomicUsize>,
    /// What `Fault::Record` kept, in the order read.
    pub recorded: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
}

impl ResettingRelay {
    /// Relays 127.0.0.1:<free port> to `backend`; a request whose bytes contain
    /// `request_line` gets its connection reset (RST) instead of an answer.
    pub fn start(backend: SocketAddr, request_line: &str) -> Self {
        Self::start_with(backend, request_line, Fault::Reset)
    }

    /// Relays to `backend`; a request whose bytes contain `request_line` meets `fault`.
    pub fn start_with(backend: SocketAddr, request_line: &str, fault: Fault) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let resets = Arc::new(AtomicUsize::new(0));
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (marker, counter, stopping) = (request_line.to_string(), resets.clone(), stop.clone());
        let record = recorded.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                if stopping.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(client) = client else { continue };
                let (marker, counter, record) = (marker.clone(), counter.clone(), record.clone());
                thread::spawn(move || relay(client, backend, &marker, (&counter, &record), fault));
            }
        });
        ResettingRelay {
            addr,
            resets,
            recorded,
            stop,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for ResettingRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop so that it sees the stop.
        let _ = TcpStream::connect(self.addr);
    }
}

/// What a relay counts (`resets`) and keeps (`recorded`).
type Seen<'a> = (&'a AtomicUsize, &'a Mutex<Vec<u8>>);

fn relay(client: TcpStream, backend: SocketAddr, marker: &str, seen: Seen, fault: Fault) {
    let (resets, recorded) = seen;
    let Ok(server) = TcpStream::connect(backend) else {
        return;
    };
    let (mut from_server, mut to_client) =
        (server.try_clone().unwrap(), client.try_clone().unwrap());
    thread::spawn(move || {
        let _ = std::io::copy(&mut from_server, &mut to_client);
        let _ = to_client.shutdown(Shutdown::Write);
    });
    let (mut from_client, mut to_server) = (client, server);
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from_client.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let marked = buf[..n]
            .windows(marker.len())
            .any(|w| w == marker.as_bytes());
        if marked && matches!(fault, Fault::Record) {
            recorded.lock().unwrap().extend_from_slice(&buf[..n]);
        } else if marked {
            resets.fetch_add(1, Ordering::Relaxed);
            if let Fault::Stall = fault {
                // Held open until the client gives up: what it sends is dropped.
                while matches!(from_client.read(&mut buf), Ok(n) if n > 0) {}
            }
            // SO_LINGER 0: closing sends RST, not FIN.
            let _ = socket_linger_zero(&from_client);
            let _ = to_server.shutdown(Shutdown::Both);
            return;
        }
        if to_server.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to_server.shutdown(Shutdown::Write);
}

fn socket_linger_zero(stream: &TcpStream) -> std::io::Result<()> {
    socket2::SockRef::from(stream).set_linger(Some(std::time::Duration::ZERO))
}
