//! Password hashes as the users file holds them (argon2 PHC strings, or bcrypt as the
//! dashboard stores them), the stand-in hash an unknown user is checked against, and
//! verification on a bounded pool off the event loop.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use argon2::password_hash::{rand_core::OsRng, PasswordHash as Phc, SaltString};
use argon2::{Argon2, PasswordHasher, PasswordVerifier};
use tokio::sync::Semaphore;

use crate::queue_slot::QueueSlot;

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

    /// A hash of a random password that costs what the slowest of `hashes` costs, for the
    /// logins of unknown (or locked) users: a refusal must not tell a user that exists from
    /// one that does not. Any bcrypt hash makes it bcrypt at the highest cost among them
    /// (`users import` keeps the dashboard's bcrypt, 0.3 s at cost 12, far slower than
    /// argon2's defaults); otherwise argon2id with the parameters of the costliest argon2
    /// hash (memory x passes), or the crate defaults when there is none.
    pub fn stand_in<'a>(
        hashes: impl IntoIterator<Item = &'a PasswordHash>,
    ) -> Result<PasswordHash, HashError> {
        let mut bcrypt_cost = None;
        let mut argon2_params: Option<argon2::Params> = None;
        for hash in hashes {
            match hash {
                PasswordHash::Bcrypt(text) => {
                    let cost = bcrypt_cost_of(text)?;
                    bcrypt_cost = bcrypt_cost.max(Some(cost));
                }
                PasswordHash::Argon2(text) => {
                    let phc = Phc::new(text).map_err(|e| HashError::Argon2(e.to_string()))?;
                    let params = argon2::Params::try_from(&phc)
                        .map_err(|e| HashError::Argon2(e.to_string()))?;
                    let work = |p: &argon2::Params| u64::from(p.m_cost()) * u64::from(p.t_cost());
                    if argon2_params
                        .as_ref()
                        .is_none_or(|max| work(&params) > work(max))
                    {
                        argon2_params = Some(params);
                    }
                }
            }
        }
        let password = crate::secrets::random_text();
        if let Some(cost) = bcrypt_cost {
            let text =
                bcrypt::hash(password, cost).map_err(|e| HashError::Hashing(e.to_string()))?;
            return Ok(PasswordHash::Bcrypt(text));
        }
        let argon = Argon2::new(
            argon2::Algorithm::Argon2id,
            argon2::Version::V0x13,
            argon2_params.unwrap_or_default(),
        );
        let salt = SaltString::generate(&mut OsRng);
        let phc = argon
            .hash_password(password.as_bytes(), &salt)
            .map_err(|e| HashError::Hashing(e.to_string()))?
            .to_string();
        return_freed_memory();
        Ok(PasswordHash::Argon2(phc))
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

/// The cost of a bcrypt hash `parse` accepted: the two digits after `$2b$`.
fn bcrypt_cost_of(text: &str) -> Result<u32, HashError> {
    text.get(4..6)
        .and_then(|digits| digits.parse().ok())
        .ok_or(HashError::Bcrypt)
}

/// Runs password verification on tokio's blocking pool, at most `concurrency` at a time
/// and with at most `max_queued` waiting, so a login flood cannot starve token checks
/// and proxied requests of CPU.
pub struct PasswordChecker {
    permits: Semaphore,
    waiting: AtomicUsize,
    max_queued: usize,
}

impl PasswordChecker {
    pub fn new(concurrency: usize, max_queued: usize) -> Self {
        Self {
            permits: Semaphore::new(concurrency.max(1)),
            waiting: AtomicUsize::new(0),
            max_queued,
        }
    }

    /// A new argon2id hash of `password`, made on the same bounded pool.
    pub async fn hash(&self, password: String) -> Result<PasswordHash, HashError> {
        let _queued = QueueSlot::take(&self.waiting, self.max_queued).ok_or(HashError::Busy)?;
        let _permit = self.permits.acquire().await.map_err(|_| HashError::Busy)?;
        tokio::task::spawn_blocking(move || {
            yield_cpu_to_requests();
            PasswordHash::hash_new(&password)
        })
        .await
        .map_err(|e| HashError::Hashing(e.to_string()))?
    }

    /// Verifies `password` against `hash`, or against `stand_in` (the users file's
    /// [`PasswordHash::stand_in`]) when there is no hash to check (unknown or locked user),
    /// so every refusal takes as long. A stand-in never matches.
    pub async fn verify(
        &self,
        hash: Option<Arc<PasswordHash>>,
        stand_in: &Arc<PasswordHash>,
        password: String,
    ) -> Result<bool, HashError> {
        let real = hash.is_some();
        let verified = self
            .check(hash.unwrap_or_else(|| stand_in.clone()), password)
            .await?;
        Ok(real && verified)
    }

    /// Whether `password` matches `hash`, computed on the bounded pool.
    pub async fn check(
        &self,
        hash: Arc<PasswordHash>,
        password: String,
    ) -> Result<bool, HashError> {
        let _queued = QueueSlot::take(&self.waiting, self.max_queued).ok_or(HashError::Busy)?;
        let _permit = self.permits.acquire().await.map_err(|_| HashError::Busy)?;
        tokio::task::spawn_blocking(move || {
            yield_cpu_to_requests();
            hash.verify(&password)
        })
        .await
        .map_err(|e| HashError::Hashing(e.to_string()))
    }
}

/// The nice value of a thread that hashes: under a login flood the CPU goes to proxied
/// requests and token checks first, and the logins wait (bench/run.sh: proxied p99 during
/// a flood of wrong passwords).
const HASHING_NICE: libc::c_int = 10;

/// Lowers the calling thread's CPU priority, once (Linux keeps a nice value per thread; a
/// blocking-pool thread keeps it for the next hash). Best effort: a failure leaves it as is.
#[allow(unsafe_code)] // libc calls, each with its SAFETY note
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
#[allow(unsafe_code)] // libc calls, each with its SAFETY note
fn return_freed_memory() {
    // SAFETY: mi_collect only releases memory that is already freed; it takes no pointers.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(unsafe_code)] // libc calls, each with its SAFETY note
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
    async fn checker_refuses_without_a_hash_even_for_the_stand_ins_password() {
        let checker = PasswordChecker::new(1, 4);
        let hash = Arc::new(PasswordHash::hash_new("pw").unwrap());
        assert!(!checker.verify(None, &hash, "pw".into()).await.unwrap());
        assert!(checker
            .verify(Some(hash.clone()), &hash, "pw".into())
            .await
            .unwrap());
    }

    #[test]
    fn the_stand_in_is_bcrypt_at_the_highest_cost_when_any_hash_is_bcrypt() {
        let argon = PasswordHash::hash_new("a").unwrap();
        let cheap = PasswordHash::parse(&bcrypt::hash("b", 4).unwrap()).unwrap();
        let dearer = PasswordHash::parse(&bcrypt::hash("c", 6).unwrap()).unwrap();
        let stand_in = PasswordHash::stand_in([&cheap, &argon, &dearer, &cheap]).unwrap();
        let PasswordHash::Bcrypt(text) = &stand_in else {
            panic!("not bcrypt: {stand_in:?}")
        };
        assert!(text.starts_with("$2b$06$"), "{text}");
        for password in ["a", "b", "c", ""] {
            assert!(!stand_in.verify(password));
        }
    }

    #[test]
    fn without_bcrypt_the_stand_in_is_argon2id_with_the_costliest_parameters() {
        let with = |m, t| {
            let params = argon2::Params::new(m, t, 1, None).unwrap();
            let argon = Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
            let salt = SaltString::generate(&mut OsRng);
            let phc = argon.hash_password(b"pw", &salt).unwrap().to_string();
            PasswordHash::parse(&phc).unwrap()
        };
        let stand_in =
            PasswordHash::stand_in([&with(1024, 3), &with(4096, 1), &with(2048, 1)]).unwrap();
        let PasswordHash::Argon2(text) = &stand_in else {
            panic!("not argon2: {stand_in:?}")
        };
        assert!(text.starts_with("$argon2id$v=19$m=4096,t=1,p=1$"), "{text}");
        let none = PasswordHash::stand_in([]).unwrap();
        let PasswordHash::Argon2(text) = &none else {
            panic!("not argon2: {none:?}")
        };
        assert!(
            text.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{text}"
        );
    }
}
