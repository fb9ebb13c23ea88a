//! What makes two requests the same question to the dashboard: the scope table they were
//! admitted by, the operation, the normalized path and query, the negotiated media type,
//! the accepted encodings, and whom the dashboard sees (the service account, the account
//! holding the user's roles with `upstream.identity = "roles"`, or the user with
//! `upstream.identity = "user"`).

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::access::Admission;
use crate::forward::Forward;

/// A longer `Accept-Encoding` or `Accept-Language` is not worth a key: such requests are
/// passed on.
const MAX_ENCODING_BYTES: usize = 128;

#[derive(Clone)]
pub struct Key {
    /// The table the request was admitted by. Held, so that its address is not reused
    /// while a key names it: after a reload (new roles, new table) no old answer matches.
    admission: Option<Arc<Admission>>,
    /// Operation, identity, media type, encodings and path, one field per line.
    text: Arc<str>,
}

impl Key {
    /// The key of an admitted GET of `template`; `None` when the request has no key
    /// (no user: the web UI's files; an encoding list too long to be worth one).
    pub fn of(
        admission: &Arc<Admission>,
        template: &str,
        forward: &Forward,
        accept_encoding: Option<&[u8]>,
    ) -> Option<Key> {
        let user = forward.user.as_ref()?;
        let encoding = accept_encoding.unwrap_or_default();
        if encoding.len() > MAX_ENCODING_BYTES {
            return None;
        }
        let encoding = std::str::from_utf8(encoding).ok()?;
        // With the service account every admitted user gets the same answer; with an
        // account holding their roles, those of the same roles; with their own dashboard
        // session, only they do.
        let identity = match (&forward.user_token, &forward.seen_as) {
            (Some(_), _) => user.username.as_str(),
            (None, Some(account)) => account,
            (None, None) => "",
        };
        let accept = forward.accept.as_deref().unwrap_or_default();
        let text = [
            template,
            identity,
            accept,
            encoding,
            &forward.path_and_query,
        ]
        .join("\n");
        Some(Key {
            admission: Some(Arc::clone(admission)),
            text: text.into(),
        })
    }

    /// The key of a web UI file: no user (the dashboard serves them without one), no
    /// query (the dashboard reads none); they differ by the languages the dashboard picks
    /// their directory by (`ui_files::language_preference`). `None`: a language list too
    /// long to be worth a key.
    pub fn ui_file(path: &str, languages: &str) -> Option<Key> {
        if languages.len() > MAX_ENCODING_BYTES {
            return None;
        }
        let text = ["ui", languages, path].join("\n");
        Some(Key {
            admission: None,
            text: text.into(),
        })
    }

    /// What the key costs the store, roughly.
    pub fn size(&self) -> usize {
        self.text.len() + 64
    }

    #[cfg(test)]
    pub fn for_tests(text: &str) -> Key {
        Key {
            admission: None,
            text: text.into(),
        }
    }
}

fn table_address(admission: &Option<Arc<Admission>>) -> usize {
    admission.as_ref().map_or(0, |a| Arc::as_ptr(a) as usize)
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        table_address(&self.admission) == table_address(&other.admission) && self.text == other.text
    }
}

impl Eq for Key {}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        table_address(&self.admission).hash(state);
        self.text.hash(state);
    }
}
