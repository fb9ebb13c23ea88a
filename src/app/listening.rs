//! Where the gateway listens: its two listeners opened before pingora starts (port 0
//! resolved to the port the kernel chose), and `state_dir/listening`, which names the
//! addresses for operators, tests and an upgrade's successor.
//!
//! An upgrade's successor with port 0 in its configuration keeps its predecessor's
//! addresses: the predecessor's `listening` file names them, and the sockets received under
//! them are taken over, so clients keep reaching the same port.

use std::fs;
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::edge::listen_table::ListenTable;

/// The file in `state_dir` that names the listeners' addresses.
pub const LISTENING_FILE: &str = "listening";

/// A listener that cannot be opened.
#[derive(Debug, thiserror::Error)]
#[error("{key}: cannot listen on {addr}: {source}")]
pub struct ListenError {
    key: &'static str,
    addr: SocketAddr,
    source: io::Error,
}

/// The addresses the gateway listens on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listening {
    /// `server.listen`'s.
    pub server: SocketAddr,
    /// `metrics.listen`'s.
    pub metrics: SocketAddr,
}

impl Listening {
    /// Opens the listeners configured as `wanted` into pingora's `table`. `upgrade`: the
    /// table holds the sockets the process being replaced handed over, and `state_dir` its
    /// `listening` file. Runs before pingora starts its services.
    pub fn open(
        table: &ListenTable,
        wanted: Listening,
        state_dir: &Path,
        upgrade: bool,
    ) -> Result<Listening, ListenError> {
        let had = if upgrade {
            predecessor(state_dir)
        } else {
            None
        };
        Ok(Listening {
            server: open_one(table, "server.listen", wanted.server, had.map(|h| h.server))?,
            metrics: open_one(
                table,
                "metrics.listen",
                wanted.metrics,
                had.map(|h| h.metrics),
            )?,
        })
    }

    /// Writes `state_dir/listening` (replaced at once, never seen half written), readable
    /// by all: it holds no secret.
    pub fn write(&self, state_dir: &Path) -> io::Result<()> {
        let path = state_dir.join(LISTENING_FILE);
        let partial = state_dir.join(format!("{LISTENING_FILE}.partial"));
        fs::write(&partial, self.to_text())?;
        fs::set_permissions(&partial, fs::Permissions::from_mode(0o644))?;
        fs::rename(&partial, &path)
    }

    /// The file's text: one line per listener, its key and its address.
    fn to_text(self) -> String {
        format!("server {}\nmetrics {}\n", self.server, self.metrics)
    }

    /// The file's text read back; `None` when a line is missing or malformed.
    fn from_text(text: &str) -> Option<Listening> {
        let mut server = None;
        let mut metrics = None;
        for line in text.lines() {
            let (key, addr) = line.split_once(' ')?;
            let addr: SocketAddr = addr.parse().ok()?;
            match key {
                "server" => server = Some(addr),
                "metrics" => metrics = Some(addr),
                _ => return None,
            }
        }
        Some(Listening {
            server: server?,
            metrics: metrics?,
        })
    }
}

/// The addresses the process being replaced listened on, from its `listening` file.
fn predecessor(state_dir: &Path) -> Option<Listening> {
    let path = state_dir.join(LISTENING_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            // A gateway older than the file wrote none; its addresses are then the
            // configured ones, which is all it could listen on.
            tracing::info!(file = %path.display(), error = %e, "no listening file of the process being replaced");
            return None;
        }
    };
    let had = Listening::from_text(&text);
    if had.is_none() {
        tracing::warn!(file = %path.display(), "the listening file of the process being replaced is malformed: listeners on port 0 get new ports");
    }
    had
}

/// Opens one listener: the socket received under its address when there is one (with port
/// 0, the address its predecessor had on the same IP), else a socket bound now.
fn open_one(
    table: &ListenTable,
    key: &'static str,
    wanted: SocketAddr,
    had: Option<SocketAddr>,
) -> Result<SocketAddr, ListenError> {
    let kept = match had {
        Some(had) if wanted.port() == 0 && had.ip() == wanted.ip() => had,
        _ => wanted,
    };
    if table.holds(kept) {
        return Ok(kept);
    }
    table.bind(wanted).map_err(|source| ListenError {
        key,
        addr: wanted,
        source,
    })
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use pingora::server::configuration::Opt;
    use pingora::server::Server;

    use super::*;

    fn any_port() -> Listening {
        Listening {
            server: "127.0.0.1:0".parse().unwrap(),
            metrics: "127.0.0.1:0".parse().unwrap(),
        }
    }

    fn table() -> (Server, ListenTable) {
        let server = Server::new(Some(Opt::default())).unwrap();
        let table = ListenTable::of(&server);
        (server, table)
    }

    #[test]
    fn port_0_gets_a_port_of_its_own_per_listener() {
        let (_server, table) = table();
        let dir = tempfile::tempdir().unwrap();
        let got = Listening::open(&table, any_port(), dir.path(), false).unwrap();
        assert_ne!(got.server.port(), 0);
        assert_ne!(got.metrics.port(), 0);
        assert_ne!(got.server, got.metrics);
        assert!(table.holds(got.server) && table.holds(got.metrics));
    }

    #[test]
    fn the_file_names_both_addresses_and_others_may_read_it() {
        let dir = tempfile::tempdir().unwrap();
        let listening = Listening {
            server: "127.0.0.1:43211".parse().unwrap(),
            metrics: "[::1]:43212".parse().unwrap(),
        };
        listening.write(dir.path()).unwrap();
        let path = dir.path().join(LISTENING_FILE);
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text, "server 127.0.0.1:43211\nmetrics [::1]:43212\n");
        assert_eq!(Listening::from_text(&text), Some(listening));
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
        assert!(!dir.path().join("listening.partial").exists());
    }

    #[test]
    fn a_malformed_file_reads_as_none() {
        for text in [
            "",
            "server 127.0.0.1:1\n",
            "server 127.0.0.1:1\nmetrics nowhere\n",
            "server 127.0.0.1:1\nmetrics 127.0.0.1:2\nadmin 127.0.0.1:3\n",
            "server127.0.0.1:1\nmetrics 127.0.0.1:2\n",
        ] {
            assert_eq!(Listening::from_text(text), None, "{text:?}");
        }
    }

    /// The upgrade's successor: a socket received under the predecessor's address is kept
    /// for port 0 on the same IP.
    #[test]
    fn port_0_keeps_the_predecessors_socket_on_an_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let (_old, handed_over) = table();
        let had = Listening::open(&handed_over, any_port(), dir.path(), false).unwrap();
        had.write(dir.path()).unwrap();
        // The successor's table holds the handed-over sockets under the same keys.
        let kept = Listening::open(&handed_over, any_port(), dir.path(), true).unwrap();
        assert_eq!(kept, had);
    }

    #[test]
    fn without_the_predecessors_socket_port_0_gets_a_new_port() {
        let dir = tempfile::tempdir().unwrap();
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let elsewhere = Listening {
            server: held.local_addr().unwrap(),
            metrics: "127.0.0.2:1".parse().unwrap(),
        };
        elsewhere.write(dir.path()).unwrap();
        let (_server, table) = table();
        let got = Listening::open(&table, any_port(), dir.path(), true).unwrap();
        assert_ne!(got.server, elsewhere.server);
        assert_ne!(got.server.port(), 0);
        assert_eq!(got.metrics.ip(), any_port().metrics.ip());
    }

    #[test]
    fn an_address_in_use_names_its_key() {
        let (_server, table) = table();
        let dir = tempfile::tempdir().unwrap();
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let wanted = Listening {
            server: "127.0.0.1:0".parse().unwrap(),
            metrics: held.local_addr().unwrap(),
        };
        let e = Listening::open(&table, wanted, dir.path(), false).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("metrics.listen: cannot listen on"),
            "{e}"
        );
    }
}
