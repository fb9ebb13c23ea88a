//! `clustergate keys create|list|revoke|rotate`: API keys managed through a running
//! gateway's HTTP API (`/api/clustergate/keys`), as a user of it: logged in with a gateway
//! token, or with a password (logged out at the end). `args` checks the arguments (clap's
//! value parsers), `gateway` makes the requests, `render` says what came back.
//!
//! What it prints is returned, not printed: a new key alone on standard output (so
//! `KEY=$(clustergate keys create ...)` holds just it), everything else on standard error.

pub mod args;
mod gateway;
mod render;

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::api_keys::PresentedKey;
use crate::auth::KEYS_PATH;
use crate::config::ProviderUrl;
use crate::dashboards::client::ClientError;
use gateway::Gateway;
use render::{CreatedKey, ListedKey};

/// The longest token or password file, or password line, read (a token is about 1 KB).
const MAX_SECRET_BYTES: u64 = 64 * 1024;

/// How the gateway's certificate is verified.
pub enum Trust {
    /// The system's roots.
    System,
    /// The certificates of this PEM file (the gateway's own, or its CA).
    CaFile(PathBuf),
    /// Not at all (`--insecure`; said on standard error).
    Insecure,
}

/// Who the command acts as.
pub enum Credentials {
    /// A gateway token (from `POST /api/auth`) in a file; it is not logged out.
    TokenFile(PathBuf),
    /// A user's password, from a file or else one line of standard input; logged in for
    /// the command and out at its end.
    Password {
        user: String,
        password_file: Option<PathBuf>,
    },
}

/// Where the gateway is, how it is trusted, who asks.
pub struct Connection {
    pub gateway: ProviderUrl,
    pub trust: Trust,
    pub credentials: Credentials,
}

/// The new key's settings (`keys create`).
pub struct NewKey {
    pub name: String,
    pub roles: Vec<String>,
    pub expires_in_seconds: u64,
    pub networks: Vec<ipnet::IpNet>,
    /// Another user's key (administrators only).
    pub owner: Option<String>,
}

pub enum KeysCommand {
    Create(NewKey),
    List {
        owner: Option<String>,
        json: bool,
    },
    Revoke {
        id: String,
    },
    Rotate {
        id: String,
        expires_in_seconds: Option<u64>,
    },
}

/// What to print: standard output (only a key, or the list) and standard error.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Printed {
    pub stdout: String,
    pub stderr: String,
}

#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error("cannot read {what} {path}: {reason}")]
    Read {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("the password is empty")]
    EmptyPassword,
    #[error("--ca-file: {0}")]
    CaFile(String),
    #[error("cannot resolve the gateway's host {0}")]
    Resolve(String),
    #[error("{0}")]
    Client(#[from] ClientError),
    #[error("the gateway answered {status}: {detail}{}", request_id.as_ref().map(|id| format!(" (request_id {id})")).unwrap_or_default())]
    Refused {
        status: u16,
        detail: String,
        request_id: Option<String>,
    },
    #[error("the gateway's answer to {0} is not what this command knows: {1}")]
    Answer(&'static str, String),
    #[error("cannot start the command's runtime: {0}")]
    Runtime(std::io::Error),
}

/// Runs `command` against the gateway of `connection`: what to print, and how it ended
/// (what is printed holds the warnings of a command that failed too).
pub fn run(connection: Connection, command: KeysCommand) -> (Printed, Result<(), KeysError>) {
    let mut printed = Printed::default();
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(KeysError::Runtime)
        .and_then(|runtime| runtime.block_on(run_async(connection, command, &mut printed)));
    (printed, result)
}

async fn run_async(
    connection: Connection,
    command: KeysCommand,
    printed: &mut Printed,
) -> Result<(), KeysError> {
    if matches!(connection.trust, Trust::Insecure) {
        printed.stderr += "warning: --insecure: the gateway's certificate is not verified; anyone on the way can read the credentials and keys\n";
    }
    let gateway = Gateway::new(connection.gateway, &connection.trust)?;
    let session = Session::open(&gateway, &connection.credentials).await?;
    let result = command_run(&gateway, &session.token, &command, printed).await;
    if let Err(e) = session.close(&gateway).await {
        // Said, not failed: the command's own work is done (a new key must be printed).
        printed.stderr +=
            &format!("warning: the logout failed (the token stays valid until it expires): {e}\n");
    }
    result
}

async fn command_run(
    gateway: &Gateway,
    token: &str,
    command: &KeysCommand,
    printed: &mut Printed,
) -> Result<(), KeysError> {
    match command {
        KeysCommand::Create(new) => {
            let answer = gateway
                .call("POST", KEYS_PATH, Some(token), Some(&create_body(new)), 201)
                .await?;
            print_created(&answer, "Created", printed)
        }
        KeysCommand::List { owner, json } => {
            let answer = gateway
                .call("GET", &list_path(owner.as_deref()), Some(token), None, 200)
                .await?;
            let keys: Vec<ListedKey> = serde_json::from_slice(&answer)
                .map_err(|e| KeysError::Answer("the list", e.to_string()))?;
            printed.stdout = match json {
                true => format!("{}\n", String::from_utf8_lossy(&answer).trim_end()),
                false => render::table(&keys, crate::state::unix_now()),
            };
            Ok(())
        }
        KeysCommand::Revoke { id } => {
            let path = format!("{KEYS_PATH}/{id}");
            gateway
                .call("DELETE", &path, Some(token), None, 204)
                .await?;
            printed.stderr += &format!("Revoked API key {id}: refused at once by this gateway, by the others within the revocation feed's bound\n");
            Ok(())
        }
        KeysCommand::Rotate {
            id,
            expires_in_seconds,
        } => {
            let path = format!("{KEYS_PATH}/{id}/rotate");
            let body = rotate_body(*expires_in_seconds);
            let answer = gateway
                .call("POST", &path, Some(token), Some(&body), 201)
                .await?;
            print_created(
                &answer,
                &format!("Rotated {id} (now revoked) into"),
                printed,
            )
        }
    }
}

/// A new key alone on standard output, once its form is checked (a script's
/// `KEY=$(...)` must not hold anything else), and what it is on standard error.
fn print_created(answer: &[u8], verb: &str, printed: &mut Printed) -> Result<(), KeysError> {
    let unexpected = |reason: String| KeysError::Answer("the creation", reason);
    let created: CreatedKey =
        serde_json::from_slice(answer).map_err(|e| unexpected(e.to_string()))?;
    let key = PresentedKey::parse(&created.key).map_err(|e| unexpected(e.to_string()))?;
    if key.id != created.id {
        return Err(unexpected(format!("a key whose id is not {}", created.id)));
    }
    printed.stderr.push_str(&render::created(&created, verb));
    printed.stdout = format!("{}\n", created.key);
    Ok(())
}

/// `POST /api/clustergate/keys`' body; `networks` and `owner` only when given.
fn create_body(new: &NewKey) -> Value {
    let mut body = json!({
        "name": new.name,
        "roles": new.roles,
        "expires_in_seconds": new.expires_in_seconds,
    });
    if !new.networks.is_empty() {
        let networks: Vec<String> = new.networks.iter().map(ToString::to_string).collect();
        body["networks"] = json!(networks);
    }
    if let Some(owner) = &new.owner {
        body["owner"] = json!(owner);
    }
    body
}

/// A rotation's body: without a lifetime, the new key gets the old key's.
fn rotate_body(expires_in_seconds: Option<u64>) -> Value {
    match expires_in_seconds {
        Some(seconds) => json!({ "expires_in_seconds": seconds }),
        None => json!({}),
    }
}

/// The list's path, filtered by owner (percent-encoded) when asked.
fn list_path(owner: Option<&str>) -> String {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    match owner {
        Some(owner) => format!(
            "{KEYS_PATH}?owner={}",
            utf8_percent_encode(owner, NON_ALPHANUMERIC)
        ),
        None => KEYS_PATH.to_string(),
    }
}

/// The gateway token the command acts with, and whether it logged in for it.
struct Session {
    token: String,
    logged_in: bool,
}

impl Session {
    async fn open(gateway: &Gateway, credentials: &Credentials) -> Result<Session, KeysError> {
        match credentials {
            Credentials::TokenFile(path) => Ok(Session {
                token: read_secret(path, "the token file")?.trim().to_string(),
                logged_in: false,
            }),
            Credentials::Password {
                user,
                password_file,
            } => {
                let password = match password_file {
                    Some(path) => first_line(read_secret(path, "the password file")?.as_bytes())?,
                    None => {
                        prompt_on_a_terminal(user);
                        first_line(std::io::stdin().lock())?
                    }
                };
                let body = json!({ "username": user, "password": password });
                let answer = gateway
                    .call("POST", "/api/auth", None, Some(&body), 201)
                    .await?;
                Ok(Session {
                    token: login_token(&answer)?,
                    logged_in: true,
                })
            }
        }
    }

    /// Logs out a token the command logged in for (a token file's is left as it is).
    async fn close(self, gateway: &Gateway) -> Result<(), KeysError> {
        if self.logged_in {
            let body = json!({});
            gateway
                .call(
                    "POST",
                    "/api/auth/logout",
                    Some(&self.token),
                    Some(&body),
                    200,
                )
                .await?;
        }
        Ok(())
    }
}

/// Asks for the password when a person is typing it (a pipe or a file gets no prompt).
fn prompt_on_a_terminal(user: &str) {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        eprint!("password for {user} (shown as typed; --password-file avoids that): ");
    }
}

/// The token of `POST /api/auth`'s answer.
fn login_token(answer: &[u8]) -> Result<String, KeysError> {
    #[derive(serde::Deserialize)]
    struct Login {
        token: String,
    }
    serde_json::from_slice::<Login>(answer)
        .map(|login| login.token)
        .map_err(|e| KeysError::Answer("the login", e.to_string()))
}

/// A secret file's text, at most [`MAX_SECRET_BYTES`].
fn read_secret(path: &Path, what: &'static str) -> Result<String, KeysError> {
    let failed = |reason: String| KeysError::Read {
        what,
        path: path.to_path_buf(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|e| failed(e.to_string()))?;
    let mut text = String::new();
    file.take(MAX_SECRET_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| failed(e.to_string()))?;
    Ok(text)
}

/// The first line of `input` without its line end (at most [`MAX_SECRET_BYTES`]): a
/// password, which may hold spaces at either end.
fn first_line(input: impl BufRead) -> Result<String, KeysError> {
    let mut line = String::new();
    input
        .take(MAX_SECRET_BYTES)
        .read_line(&mut line)
        .map_err(|e| KeysError::Read {
            what: "the password from",
            path: PathBuf::from("standard input"),
            reason: e.to_string(),
        })?;
    let password = line.trim_end_matches(['\n', '\r']);
    match password.is_empty() {
        true => Err(KeysError::EmptyPassword),
        false => Ok(password.to_string()),
    }
}

#[cfg(test)]
mod tests;
