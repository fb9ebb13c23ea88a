//! Which Ceph release a manager runs, asked of the manager itself when it becomes the
//! active one: the dashboard's summary (`GET /api/summary`, any valid token) carries
//! `ceph version X.Y.Z (…)`. The access tables follow it (`access::ReleaseTables`).

use std::sync::Arc;

use serde_json::Value;

use super::credentials::{CredentialError, ServiceAccount};
use super::{Backend, ClientError, Upstreams};
use crate::ceph_release::CephRelease;
use crate::state::unix_now;

/// The summary is a few kilobytes; a cluster with many running tasks lists them all.
const MAX_SUMMARY: usize = 4 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    #[error(transparent)]
    Credentials(#[from] CredentialError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("the summary answered {0}")]
    Status(u16),
    #[error("the summary names no Ceph version")]
    NoVersion,
}

/// Asks `backend`'s dashboard which release it runs, as the service account.
pub async fn ask(
    upstreams: &Upstreams,
    account: &ServiceAccount,
    backend: &Arc<Backend>,
) -> Result<CephRelease, ReleaseError> {
    let token = account.token(upstreams, backend, unix_now()).await?;
    let mut req = upstreams.request(backend, "GET", "/api/summary")?;
    let header = |e: Box<pingora::Error>| ClientError::Protocol(e.to_string());
    req.insert_header("accept", account.accept())
        .map_err(header)?;
    req.insert_header("authorization", format!("Bearer {token}"))
        .map_err(header)?;
    let timeout = upstreams.timeouts.login_answer;
    let peer = upstreams.peer(backend, timeout);
    let reply = upstreams
        .client
        .send(&peer, req, None, MAX_SUMMARY, timeout)
        .await?;
    if reply.status() != 200 {
        return Err(ReleaseError::Status(reply.status()));
    }
    version_of(&reply.body).ok_or(ReleaseError::NoVersion)
}

fn version_of(summary: &[u8]) -> Option<CephRelease> {
    let summary: Value = serde_json::from_slice(summary).ok()?;
    CephRelease::from_version_line(summary.get("version")?.as_str()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_is_read_from_the_summarys_version() {
        let summary = br#"{"health_status": "HEALTH_OK", "mgr_id": "x", "have_mon_connection": true,
            "version": "ceph version 20.2.4 (7f793731f1b39eb4f465e960113d2363c311b964) tentacle (stable)"}"#;
        assert_eq!(
            version_of(summary).map(|r| r.to_string()),
            Some("20.2".into())
        );
        assert_eq!(version_of(br#"{"version": 18}"#), None);
        assert_eq!(version_of(b"<html>"), None);
    }
}
