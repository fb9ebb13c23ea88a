//! Label values: each from a closed set, so that no client can grow the number of series.

/// Why a client was refused before its request was parsed, as the `reason` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionRefusal {
    HeaderTooLarge,
    TooManyHeaderLines,
    HeaderTimeout,
    TooManyConnections,
}

impl ConnectionRefusal {
    pub(super) const ALL: [Self; 4] = [
        Self::HeaderTooLarge,
        Self::TooManyHeaderLines,
        Self::HeaderTimeout,
        Self::TooManyConnections,
    ];

    pub(super) fn label(self) -> &'static str {
        match self {
            Self::HeaderTooLarge => "header_too_large",
            Self::TooManyHeaderLines => "too_many_header_lines",
            Self::HeaderTimeout => "header_timeout",
            Self::TooManyConnections => "too_many_connections",
        }
    }
}

/// How a login ended, as the `result` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginResult {
    Success,
    InvalidCredentials,
    BadRequest,
    Busy,
    /// The client's bucket of failed logins was empty.
    RateLimited,
    Error,
}

impl LoginResult {
    pub(super) const ALL: [Self; 6] = [
        Self::Success,
        Self::InvalidCredentials,
        Self::BadRequest,
        Self::Busy,
        Self::RateLimited,
        Self::Error,
    ];

    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::InvalidCredentials => "invalid_credentials",
            Self::BadRequest => "bad_request",
            Self::Busy => "busy",
            Self::RateLimited => "rate_limited",
            Self::Error => "error",
        }
    }
}

/// How a token check ended, as the `result` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenCheckResult {
    Valid,
    Missing,
    Invalid,
    Expired,
    Revoked,
    UnknownUser,
    Error,
}

impl TokenCheckResult {
    pub(super) const ALL: [Self; 7] = [
        Self::Valid,
        Self::Missing,
        Self::Invalid,
        Self::Expired,
        Self::Revoked,
        Self::UnknownUser,
        Self::Error,
    ];

    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Valid => "valid",
            Self::Missing => "missing",
            Self::Invalid => "invalid",
            Self::Expired => "expired",
            Self::Revoked => "revoked",
            Self::UnknownUser => "unknown_user",
            Self::Error => "error",
        }
    }
}

/// A status as its label: three digits (`000` when no answer was written). Made once per
/// label value (the children are kept), so the formatter's cost does not matter.
pub(super) fn status_label(status: u16) -> String {
    format!("{:03}", status.min(999))
}

/// The `method` label's values: methods outside the standard set share the last one, so
/// clients cannot grow the series.
pub(super) const METHOD_LABELS: [&str; 8] = [
    "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "other",
];

/// `method`'s place in [`METHOD_LABELS`].
pub(super) fn method_index(method: &http::Method) -> usize {
    match *method {
        http::Method::GET => 0,
        http::Method::POST => 1,
        http::Method::PUT => 2,
        http::Method::DELETE => 3,
        http::Method::PATCH => 4,
        http::Method::HEAD => 5,
        http::Method::OPTIONS => 6,
        _ => 7,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_digits() {
        assert_eq!(status_label(201), "201");
        assert_eq!(status_label(0), "000");
    }

    #[test]
    fn method_labels() {
        assert_eq!(METHOD_LABELS[method_index(&http::Method::DELETE)], "DELETE");
        let custom = http::Method::from_bytes(b"PROPFIND").unwrap();
        assert_eq!(METHOD_LABELS[method_index(&custom)], "other");
    }
}
