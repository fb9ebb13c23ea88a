//! The audit log: one JSON line per forwarded mutating call (POST, PUT, PATCH, DELETE)
//! once its answer is known, and per login (success or failure), logout and lockout: when,
//! the request id, the event, who, from where, which operation on which backend, and the
//! result (the status). Never a body, a token or a password. Written to standard error
//! beside the other logs, or appended to `log.audit_file` (created 0600), which
//! [`Audit::reopen`] opens again at its path once logrotate has moved it away.
//!
//! Unlike access lines, audit lines are never dropped: they are few (logins and changes,
//! each far slower than its line), so each is written at once, in one `write`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use http::Method;
use serde::Serialize;

use crate::api_keys::KeyLabel;
use crate::observe::access_log::{KeyFields, Served};
use crate::observe::logs::json_line;
use crate::routes::Route;
use crate::users::User;

#[derive(Debug, thiserror::Error)]
#[error("cannot open the audit file {}: {source}", path.display())]
pub struct AuditError {
    path: PathBuf,
    source: std::io::Error,
}

/// What an audit line records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditEvent {
    /// A mutating call forwarded to a dashboard.
    Call,
    Login,
    Logout,
    /// A failed login locked its username (`auth.lockout_attempts`).
    Lockout,
}

impl AuditEvent {
    fn name(self) -> &'static str {
        match self {
            AuditEvent::Call => "call",
            AuditEvent::Login => "login",
            AuditEvent::Logout => "logout",
            AuditEvent::Lockout => "lockout",
        }
    }
}

/// Where audit lines go.
pub struct Audit {
    sink: Sink,
    /// Lines that could not be written (`clustergate_audit_write_errors_total`).
    write_errors: AtomicU64,
}

enum Sink {
    Stderr,
    File { path: PathBuf, file: Mutex<File> },
}

impl Audit {
    /// Audit lines to `file` (appended; created 0600), or to standard error.
    pub fn open(file: Option<&Path>) -> Result<Audit, AuditError> {
        let sink = match file {
            None => Sink::Stderr,
            Some(path) => Sink::File {
                path: path.to_path_buf(),
                file: Mutex::new(open_append(path)?),
            },
        };
        Ok(Audit {
            sink,
            write_errors: AtomicU64::new(0),
        })
    }

    /// Opens the audit file again at its path (after logrotate moved it away); lines go
    /// to the new file from now on. On failure the file in use stays. Nothing to do for
    /// standard error.
    pub fn reopen(&self) -> Result<(), AuditError> {
        if let Sink::File { path, file } = &self.sink {
            let reopened = open_append(path)?;
            *file.lock().unwrap_or_else(PoisonError::into_inner) = reopened;
        }
        Ok(())
    }

    pub fn write_errors(&self) -> u64 {
        self.write_errors.load(Ordering::Relaxed)
    }

    /// Writes the lines `served` calls for (see [`events`]).
    pub fn record(&self, served: &Served<'_>, subject: &AuthSubject) {
        for (event, user) in events(served, subject) {
            self.write(&line(served, event, user, subject));
        }
    }

    fn write(&self, line: &[u8]) {
        let written = match &self.sink {
            Sink::Stderr => std::io::stderr().lock().write_all(line),
            Sink::File { file, .. } => file
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .write_all(line),
        };
        if let Err(e) = written {
            self.write_errors.fetch_add(1, Ordering::Relaxed);
            tracing::error!(error = %e, "cannot write an audit line");
        }
    }
}

fn open_append(path: &Path) -> Result<File, AuditError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| AuditError {
            path: path.to_path_buf(),
            source,
        })
}

/// The audit events of a served request, each with the user it names: a login names the
/// username tried, and a second line says when its failure locked that username; a logout
/// names the token's user; a mutating call names its user, and counts only once forwarded.
pub(crate) fn events<'a>(
    served: &Served<'a>,
    subject: &'a AuthSubject,
) -> impl Iterator<Item = (AuditEvent, Option<&'a str>)> {
    let tried = subject.username.as_deref();
    let mutating = matches!(
        *served.method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    let (first, second) = match served.route {
        Route::Login => (
            Some((AuditEvent::Login, tried)),
            subject.locked.then_some((AuditEvent::Lockout, tried)),
        ),
        Route::Logout => (Some((AuditEvent::Logout, tried)), None),
        // A browser's login through the provider, once the provider named the user.
        Route::Sso => (tried.map(|user| (AuditEvent::Login, Some(user))), None),
        Route::Api | Route::Other if mutating && served.backend.is_some() => {
            (Some((AuditEvent::Call, served.user)), None)
        }
        // A key created, rotated or revoked (or the attempt), by whom.
        Route::Keys if mutating => (Some((AuditEvent::Call, tried)), None),
        _ => (None, None),
    };
    first.into_iter().chain(second)
}

/// One audit line, in the shape of the JSON log lines (`timestamp`, `level`, `target`,
/// then these fields), ending in a newline.
pub(crate) fn line(
    served: &Served<'_>,
    event: AuditEvent,
    user: Option<&str>,
    subject: &AuthSubject,
) -> Vec<u8> {
    let fields = AuditFields {
        event: event.name(),
        request_id: served.request_id,
        user,
        auth: subject.method,
        subject: subject.provider_subject.as_deref(),
        api_key: subject.api_key.as_deref().map(KeyFields::of),
        client: served.client,
        method: served.method.as_str(),
        operation: served.operation,
        path: served.path,
        backend: served.backend,
        result: served.status,
    };
    json_line("clustergate::audit", &fields)
}

/// Every key is always there (`null` when unknown), so that an audit line reads the same
/// whatever it records.
#[derive(Serialize)]
struct AuditFields<'a> {
    event: &'static str,
    request_id: &'a str,
    user: Option<&'a str>,
    /// How the user authenticated: `local` (the users file), `dashboard` (its accounts),
    /// `oidc` (the identity provider).
    auth: Option<&'static str>,
    /// A single sign-on user's `sub` at the identity provider.
    subject: Option<&'a str>,
    /// The API key the call was made with (`user` is its owner).
    api_key: Option<KeyFields<'a>>,
    client: Option<IpAddr>,
    method: &'a str,
    operation: &'a str,
    path: &'a str,
    backend: Option<&'a str>,
    /// The status answered; 0 when the client went away before an answer.
    result: u16,
}

/// Whom an auth endpoint's request was about, for the logs: the username a login tried
/// (the client's text, whether or not such a user exists) or the user whose token logged
/// out; and whether this login's failure locked the username.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AuthSubject {
    pub username: Option<String>,
    pub locked: bool,
    /// How the user authenticated (a login's source, or a forwarded call's token).
    pub method: Option<&'static str>,
    /// A single sign-on user's `sub` at the identity provider.
    pub provider_subject: Option<String>,
    /// The API key a forwarded call was made with.
    pub api_key: Option<Arc<KeyLabel>>,
}

impl AuthSubject {
    /// A forwarded call's user: how they authenticated, and their provider subject.
    pub fn of_user(&mut self, user: Option<&User>) {
        if let Some(user) = user {
            self.method = Some(user.auth_method());
            self.provider_subject.clone_from(&user.provider_subject);
            self.api_key.clone_from(&user.api_key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::access_log::tests::forwarded_call;

    fn subject(username: &str, locked: bool) -> AuthSubject {
        AuthSubject {
            username: Some(username.into()),
            locked,
            ..AuthSubject::default()
        }
    }

    fn kinds(served: &Served<'_>, subject: &AuthSubject) -> Vec<(AuditEvent, Option<String>)> {
        events(served, subject)
            .map(|(event, user)| (event, user.map(str::to_string)))
            .collect()
    }

    #[test]
    fn which_requests_are_audited_and_whom_each_line_names() {
        use AuditEvent::*;
        let some = |name: &str| Some(name.to_string());
        let none = AuthSubject::default();
        let put = forwarded_call(&Method::PUT);
        assert_eq!(kinds(&put, &none), [(Call, some("admin"))]);
        for method in [Method::POST, Method::PATCH, Method::DELETE] {
            assert_eq!(kinds(&forwarded_call(&method), &none).len(), 1, "{method}");
        }
        for method in [Method::GET, Method::HEAD] {
            assert!(
                kinds(&forwarded_call(&method), &none).is_empty(),
                "{method}"
            );
        }
        let refused = Served {
            backend: None,
            status: 403,
            ..put.clone()
        };
        assert!(kinds(&refused, &none).is_empty(), "never forwarded");

        let login = Served {
            route: Route::Login,
            backend: None,
            user: None,
            ..forwarded_call(&Method::POST)
        };
        assert_eq!(
            kinds(&login, &subject("eve", false)),
            [(Login, some("eve"))]
        );
        assert_eq!(
            kinds(&login, &subject("eve", true)),
            [(Login, some("eve")), (Lockout, some("eve"))]
        );
        assert_eq!(
            kinds(&login, &none),
            [(Login, None)],
            "a body without a username"
        );
        let logout = Served {
            route: Route::Logout,
            ..login.clone()
        };
        assert_eq!(
            kinds(&logout, &subject("admin", false)),
            [(Logout, some("admin"))]
        );
        let check = Served {
            route: Route::TokenCheck,
            ..login.clone()
        };
        assert!(kinds(&check, &none).is_empty());
    }

    #[test]
    fn an_audit_line_has_every_field() {
        let subject = AuthSubject {
            method: Some("oidc"),
            provider_subject: Some("f3a1".into()),
            ..AuthSubject::default()
        };
        let text = line(
            &forwarded_call(&Method::DELETE),
            AuditEvent::Call,
            Some("admin"),
            &subject,
        );
        assert!(text.ends_with(b"\n") && text.iter().filter(|b| **b == b'\n').count() == 1);
        let line: serde_json::Value = serde_json::from_slice(&text).unwrap();
        let expected = serde_json::json!({
            "level": "INFO",
            "target": "clustergate::audit",
            "event": "call",
            "request_id": "6f1c2d9e-0000-4000-8000-000000000001",
            "user": "admin",
            "auth": "oidc",
            "subject": "f3a1",
            "client": "192.0.2.7",
            "method": "DELETE",
            "operation": "/api/pool/{pool_name}",
            "path": "/api/pool/rbd",
            "backend": "http://10.0.0.1:8080",
            "result": 200,
        });
        for (key, value) in expected.as_object().unwrap() {
            assert_eq!(&line[key], value, "{key} in {line}");
        }
        assert!(line["timestamp"].as_str().unwrap().ends_with('Z'), "{line}");
    }

    #[test]
    fn the_audit_file_is_created_private_and_reopened_after_it_was_moved() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let audit = Audit::open(Some(&path)).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let call = forwarded_call(&Method::POST);
        audit.record(&call, &AuthSubject::default());
        std::fs::rename(&path, dir.path().join("audit.log.1")).unwrap();
        audit.record(&call, &AuthSubject::default());
        audit.reopen().unwrap();
        audit.record(&call, &AuthSubject::default());
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert_eq!(read("audit.log.1").lines().count(), 2, "until reopened");
        assert_eq!(read("audit.log").lines().count(), 1, "after");
        assert_eq!(audit.write_errors(), 0);
    }

    #[test]
    fn an_audit_file_that_cannot_be_opened_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone/audit.log");
        let e = Audit::open(Some(&path)).err().unwrap();
        assert!(e.to_string().contains("gone/audit.log"), "{e}");
    }
}
