//! Password hashes as the users file holds them (argon2 PHC strings, or bcrypt as the
//! dashboard stores them), and verification on a bounded pool off the event loop.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use argon2::password_hash::{rand_core::OsRng, PasswordHash as Phc, SaltString};
use argon2::{Argon2, PasswordHasher, PasswordVerifier};
use tokio::sync::Semaphore;

/// A stored password hash, checked for form when the users file is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordHash {
    /// `$argon2id$...` (or argon2i/argon2d), parameters carried in the string.
    Argon2(String),
    /// `$2a$`/`$2b$`/`$2y$`, as `ceph dashboard ac-user-create` makes them.
    Bcrypt(String),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HashError {
    #[error(
        "not an argon2 PHC string or a bcrypt hash (make one with `clustergate hash-password`)"
    )]
    Unrecognised,
    #[error("malformed argon2 hash: {0}")]
    Argon2(String),
    #[error("malformed bcrypt hash: expected 60 characters like $2b$12$...")]
    Bcrypt,
    #[error("could not hash the password: {0}")]
    Hashing(String),
    #[error("too many logins waiting for the password hasher")]
    Busy,
}

impl PasswordHash {
    pub fn parse(text: &str) -> Result<PasswordHash, HashError> {
        if text.starts_with("$argon2") {
            let phc = Phc::new(text).map_err(|e| HashError::Argon2(e.to_string()))?;
            if !matches!(phc.algorithm.as_str(), "argon2id" | "argon2i" | "argon2d") {
                return Err(HashError::Argon2(format!(
                    "unknown algorithm {}",
                    phc.algorithm
                )));
            }
            if phc.salt.is_none() || phc.hash.is_none() {
                return Err(HashError::Argon2("salt or hash missing".into()));
            }
            argon2::Params::try_from(&phc).map_err(|e| HashError::Argon2(e.to_string()))?;
            Ok(PasswordHash::Argon2(text.to_string()))
        } else if ["$2a$", "$2b$", "$2y$"].iter().any(|p| text.starts_with(p)) {
            if text.len() != 60 || !text.is_ascii() {
                return Err(HashError::Bcrypt);
            }
            Ok(PasswordHash::Bcrypt(text.to_string()))
        } else {
            Err(HashError::Unrecognised)
        }
    }

    /// A new argon2id hash with the crate defaults, which are OWASP's recommendation
    /// (19 MiB, 2 passes, 1 lane).
    pub fn hash_new(password: &str) -> Result<PasswordHash, HashError> {
        let salt = SaltString::generate(&mut OsRng);
        let phc = Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map_err(|e| HashError::Hashing(e.to_string()))?
            .to_string();
        return_freed_memory();
        Ok(PasswordHash::Argon2(phc))
    }

    /// The hash's text, as a users file holds it.
    pub fn phc(&self) -> &str {
        match self {
            PasswordHash::Argon2(text) | PasswordHash::Bcrypt(text) => text,
        }
    }

    /// Slow on purpose: call through [`PasswordChecker`], never on the event loop.
    pub fn verify(&self, password: &str) -> bool {
        match self {
            PasswordHash::Argon2(text) => {
                let verified = Phc::new(text).is_ok_and(|phc| {
                    Argon2::default()
                        .verify_password(password.as_bytes(), &phc)
                        .is_ok()
                });
                return_freed_memory();
                verified
            }
            PasswordHash::Bcrypt(text) => bcrypt::verify(password, text).unwrap_or(false),
        }
    }
}

/// Runs password verification on tokio's blocking pool, at most `concurrency` at a time
/// and with at most `max_queued` waiting, so a login flood cannot starve token checks
/// and proxied requests of CPU.
pub struct PasswordChecker {
    permits: Semaphore,
    waiting: AtomicUsize,
    max_queued: usize,
    dummy: Arc<PasswordHash>,
}

impl PasswordChecker {
    pub fn new(concurrency: usize, max_queued: usize) -> Result<Self, HashError> {
        Ok(Self {
            permits: Semaphore::new(concurrency.max(1)),
            waiting: AtomicUsize::new(0),
            max_queued,
            dummy: Arc::new(PasswordHash::hash_new(&crate::secrets::random_text())?),
        })
    }

    /// A new argon2id hash of `password`, made on the same bounded pool.
    pub async fn hash(&self, password: String) -> Result<PasswordHash, HashError> {
        let _queued = QueueSlot::take(&self.waiting, self.max_queued)?;
        let _permit = self.permits.acquire().await.map_err(|_| HashError::Busy)?;
        tokio::task::spawn_blocking(move || {
            yield_cpu_to_requests();
            PasswordHash::hash_new(&password)
        })
        .await
        .map_err(|e| HashError::Hashing(e.to_string()))?
    }

    /// Verifies `password` against `hash`, or against a dummy hash of the same cost when
    /// there is no hash to check (unknown or locked user), so every refusal takes as long.
    pub async fn verify(
        &self,
        hash: Option<Arc<PasswordHash>>,
        password: String,
    ) -> Result<bool, HashError> {
        let real = hash.is_some();
        let hash = hash.unwrap_or_else(|| self.dummy.clone());
        let _queued = QueueSlot::take(&self.waiting, self.max_queued)?;
        let _permit = self.permits.acquire().await.map_err(|_| HashError::Busy)?;
        let verified = tokio::task::spawn_blocking(move || {
            yield_cpu_to_requests();
            hash.verify(&password)
        })
        .await
        .map_err(|e| HashError::Hashing(e.to_string()))?;
        Ok(real && verified)
    }
}

/// The nice value of a thread that hashes: under a login flood the CPU goes to proxied
/// requests and token checks first, and the logins wait (bench/run.sh: proxied p99 during
/// a flood of wrong passwords).
const HASHING_NICE: libc::c_int = 10;

/// Lowers the calling thread's CPU priority, once (Linux keeps a nice value per thread; a
/// blocking-pool thread keeps it for the next hash). Best effort: a failure leaves it as is.
fn yield_cpu_to_requests() {
    thread_local! {
        static LOWERED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if !LOWERED.get() {
        // SAFETY: gettid and setpriority take plain integers; they only change this thread.
        unsafe {
            let thread = libc::gettid() as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, thread, HASHING_NICE);
        }
        LOWERED.set(true);
    }
}

/// Each argon2 hash allocates and frees a 19 MiB block, often on a thread that then
/// sleeps, so the allocator would keep it cached (measured: 36 MB resident at start-up,
/// 44 MB after a login). Give the thread's freed memory back to the OS now.
fn return_freed_memory() {
    // SAFETY: mi_collect only releases memory that is already freed; it takes no pointers.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

/// One place in the bounded queue of logins waiting for the hasher.
struct QueueSlot<'a>(&'a AtomicUsize);

impl<'a> QueueSlot<'a> {
    fn take(counter: &'a AtomicUsize, max: usize) -> Result<Self, HashError> {
        let before = counter.fetch_add(1, Ordering::AcqRel);
        let slot = QueueSlot(counter);
        if before >= max {
            return Err(HashError::Busy);
        }
        Ok(slot)
    }
}

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hashing_thread_runs_at_a_lower_priority_than_the_others() {
        // SAFETY: getpriority and gettid take plain integers.
        let nice =
            || unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        let before = nice();
        let after = std::thread::spawn(move || {
            yield_cpu_to_requests();
            yield_cpu_to_requests();
            nice()
        })
        .join()
        .unwrap();
        assert_eq!(after, (before + HASHING_NICE).min(19));
        assert_eq!(nice(), before, "only the hashing thread is lowered");
    }

    #[test]
    fn new_hashes_are_argon2id_and_verify() {
        let hash = PasswordHash::hash_new("s3cret").unwrap();
        let PasswordHash::Argon2(text) = &hash else {
            panic!("not argon2")
        };
        assert!(text.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert!(hash.verify("s3cret"));
        assert!(!hash.verify("S3cret"));
    }

    #[test]
    fn bcrypt_hashes_as_the_dashboard_makes_them_verify() {
        let text = bcrypt::hash("Adm1n-Ceph-Pass", 4).unwrap();
        let hash = PasswordHash::parse(&text).unwrap();
        assert!(hash.verify("Adm1n-Ceph-Pass"));
        assert!(!hash.verify("wrong"));
    }

    #[test]
    fn parse_rejects_what_is_not_a_hash() {
        assert_eq!(
            PasswordHash::parse("plaintext"),
            Err(HashError::Unrecognised)
        );
        assert_eq!(PasswordHash::parse("$2b$12$short"), Err(HashError::Bcrypt));
        assert!(matches!(
            PasswordHash::parse("$argon2id$garbage"),
            Err(HashError::Argon2(_))
        ));
    }

    #[tokio::test]
    async fn checker_refuses_without_a_hash_even_for_the_dummy_password() {
        let checker = PasswordChecker::new(1, 4).unwrap();
        assert!(!checker.verify(None, "anything".into()).await.unwrap());
        let hash = Arc::new(PasswordHash::hash_new("pw").unwrap());
        assert!(checker.verify(Some(hash), "pw".into()).await.unwrap());
    }

    #[test]
    fn queue_slots_are_bounded_and_released() {
        let counter = AtomicUsize::new(0);
        let a = QueueSlot::take(&counter, 2).unwrap();
        let _b = QueueSlot::take(&counter, 2).unwrap();
        assert!(QueueSlot::take(&counter, 2).is_err());
        drop(a);
        assert!(QueueSlot::take(&counter, 2).is_ok());
    }
}
