//! Secrets kept in `state_dir`: written owner-only, never printed.

use std::fmt;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use base64::Engine;
use rand::RngCore;

/// Bytes that must never reach a log: `Debug` prints `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(bytes: Vec<u8>) -> Self {
        Secret(bytes)
    }

    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Makes this process non-dumpable: no core file when it crashes and no ptrace attach by
/// another process of the same user, since its memory holds the signing keys, the service
/// account's password and token, and users' passwords during a login.
#[allow(unsafe_code)] // libc calls, each with its SAFETY note
pub fn forbid_core_dumps() -> std::io::Result<()> {
    // SAFETY: PR_SET_DUMPABLE takes plain integers and only changes this process's flag.
    let result = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    match result {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Whether a secret file is kept from everyone but this process: the owner's only (no bits
/// for group or others), or root's and readable by this process's own group alone (no write,
/// nothing for others) while the process is not root. The second is how Kubernetes mounts a
/// Secret (owner root, mode 0440, group the pod's `fsGroup`) and how Debian keeps keys for a
/// service (`root:ssl-cert 0640`); a root process gets no such allowance, as it needs none.
pub fn kept_from_others(metadata: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    let mode = metadata.mode() & 0o777;
    if mode & 0o077 == 0 {
        return true;
    }
    mode & 0o037 == 0 && metadata.uid() == 0 && !running_as_root() && in_own_groups(metadata.gid())
}

#[allow(unsafe_code)] // libc calls, each with its SAFETY note
fn running_as_root() -> bool {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Whether `gid` is this process's effective group or one of its supplementary groups.
#[allow(unsafe_code)] // libc calls, each with its SAFETY note
fn in_own_groups(gid: u32) -> bool {
    // SAFETY: getegid takes nothing and cannot fail.
    if unsafe { libc::getegid() } == gid {
        return true;
    }
    // Linux allows at most 65536 supplementary groups (NGROUPS_MAX).
    let mut groups = vec![0 as libc::gid_t; 65536];
    let capacity = libc::c_int::try_from(groups.len()).unwrap_or(libc::c_int::MAX);
    // SAFETY: the buffer holds `capacity` gid_t values; getgroups writes at most that many.
    let count = unsafe { libc::getgroups(capacity, groups.as_mut_ptr()) };
    usize::try_from(count).is_ok_and(|count| groups[..count.min(groups.len())].contains(&gid))
}

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: holds {len} bytes; a signing secret needs at least {min}")]
    TooShort {
        path: PathBuf,
        len: usize,
        min: usize,
    },
}

/// The shortest HS256 secret we accept (RFC 7518 §3.2: at least the hash size).
pub const MIN_SECRET_BYTES: usize = 32;

/// Random text safe to put in a file and type: 32 random bytes, base64url.
pub fn random_text() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Reads a secret file; surrounding whitespace is not part of the secret.
pub fn read_secret(path: &Path) -> Result<Secret, SecretError> {
    let text = fs::read(path).map_err(|source| SecretError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let trimmed = text.trim_ascii().to_vec();
    if trimmed.len() < MIN_SECRET_BYTES {
        return Err(SecretError::TooShort {
            path: path.to_path_buf(),
            len: trimmed.len(),
            min: MIN_SECRET_BYTES,
        });
    }
    Ok(Secret(trimmed))
}

/// Reads `path`, or creates it with fresh random text first (mode 0600).
pub fn read_or_create(path: &Path) -> Result<Secret, SecretError> {
    if !path.exists() {
        write_private(path, random_text().as_bytes())?;
    }
    read_secret(path)
}

/// Creates `dir` (mode 0700) and its parents if missing.
pub fn ensure_private_dir(dir: &Path) -> Result<(), SecretError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| SecretError::Io {
            path: dir.to_path_buf(),
            source,
        })
}

/// Writes `bytes` to `path` readable by the owner only, replacing it atomically.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), SecretError> {
    let io = |source| SecretError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        ensure_private_dir(dir)?;
    }
    let tmp = path.with_extension("tmp");
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.sync_all().map_err(io)?;
    fs::rename(&tmp, path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn secret_debug_never_shows_the_bytes() {
        assert_eq!(
            format!("{:?}", Secret::new(b"hunter2".to_vec())),
            "[redacted]"
        );
    }

    #[test]
    #[allow(unsafe_code)] // prctl(PR_GET_DUMPABLE) takes plain integers
    fn the_process_is_not_dumpable_once_it_forbids_core_dumps() {
        forbid_core_dumps().unwrap();
        // SAFETY: PR_GET_DUMPABLE takes no pointer.
        assert_eq!(unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) }, 0);
    }

    #[test]
    fn read_or_create_makes_an_owner_only_file_and_reuses_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/jwt-secret");
        let first = read_or_create(&path).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(read_or_create(&path).unwrap(), first);
    }

    #[test]
    fn read_secret_rejects_a_short_secret() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("short");
        fs::write(&path, "too short\n").unwrap();
        assert!(matches!(
            read_secret(&path),
            Err(SecretError::TooShort { len: 9, .. })
        ));
    }
}
