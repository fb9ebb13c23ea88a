//! Every error the gateway answers itself, and the one place that maps each to a status
//! and the dashboard's JSON shape: `{"status", "detail", "request_id"}` for 4xx/5xx
//! raised by the framework, `{"detail", "code", "component"}` for 400s about the request.

use serde_json::{json, Value};

use crate::versioning::VersionError;

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The request body is not what the endpoint takes.
    #[error("{detail}")]
    BadRequest { detail: String },
    /// A request path that cannot be normalized safely.
    #[error("{detail}")]
    InvalidPath { detail: String },
    /// Wrong password, unknown, disabled or locked user: one answer for all.
    #[error("Invalid credentials")]
    InvalidCredentials,
    #[error("You are not authorized to access that resource")]
    Unauthorized,
    #[error("You don't have permissions to access that resource")]
    Forbidden,
    /// Refused whoever asks: it would act on the gateway's own dashboard account.
    #[error("This operation is not offered through the gateway: it would act on the gateway's own dashboard account.")]
    NotOffered,
    #[error("The path '{path}' was not found.")]
    NotFound { path: String },
    #[error("The method is not allowed for the requested URL.")]
    MethodNotAllowed { allow: &'static str },
    #[error("The request body is larger than {limit} bytes.")]
    PayloadTooLarge { limit: usize },
    #[error("A request body over {limit} bytes needs a Content-Length.")]
    LengthRequired { limit: usize },
    #[error("Expected an entity of content type application/json, text/javascript")]
    NotJson,
    #[error(transparent)]
    Version(#[from] VersionError),
    #[error("Too many requests; try again later.")]
    TooManyRequests,
    #[error("{detail}")]
    BadGateway { detail: String },
    #[error("{detail}")]
    Unavailable { detail: String },
    #[error("The dashboard backend did not answer in time.")]
    GatewayTimeout,
    #[error("The server encountered an unexpected condition which prevented it from fulfilling the request.")]
    Internal,
}

impl GatewayError {
    pub fn bad_request(detail: impl Into<String>) -> Self {
        GatewayError::BadRequest {
            detail: detail.into(),
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            GatewayError::BadRequest { .. }
            | GatewayError::InvalidPath { .. }
            | GatewayError::InvalidCredentials => 400,
            GatewayError::Unauthorized => 401,
            GatewayError::Forbidden | GatewayError::NotOffered => 403,
            GatewayError::NotFound { .. } => 404,
            GatewayError::MethodNotAllowed { .. } => 405,
            GatewayError::LengthRequired { .. } => 411,
            GatewayError::PayloadTooLarge { .. } => 413,
            GatewayError::NotJson | GatewayError::Version(_) => 415,
            GatewayError::TooManyRequests => 429,
            GatewayError::BadGateway { .. } => 502,
            GatewayError::Unavailable { .. } => 503,
            GatewayError::GatewayTimeout => 504,
            GatewayError::Internal => 500,
        }
    }

    /// Extra response headers this error needs.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        match self {
            GatewayError::MethodNotAllowed { allow } => vec![("allow", allow.to_string())],
            GatewayError::TooManyRequests | GatewayError::Unavailable { .. } => {
                vec![("retry-after", "1".to_string())]
            }
            _ => Vec::new(),
        }
    }

    /// The JSON body, in the shape the dashboard uses for this kind of error.
    pub fn body(&self, request_id: &str) -> Value {
        match self {
            GatewayError::InvalidCredentials => json!({
                "detail": self.to_string(), "code": "invalid_credentials", "component": "auth",
            }),
            GatewayError::BadRequest { detail } => json!({
                "detail": detail, "code": "invalid_request", "component": "auth",
            }),
            GatewayError::InvalidPath { detail } => json!({
                "detail": detail, "code": "invalid_path", "component": "gateway",
            }),
            _ => json!({
                "status": status_line(self.status()),
                "detail": self.to_string(),
                "request_id": request_id,
            }),
        }
    }
}

/// CherryPy's status text, e.g. "401 Unauthorized".
pub fn status_line(status: u16) -> String {
    let reason = http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error");
    format!("{status} {reason}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unauthorized_has_the_dashboard_body() {
        let body = GatewayError::Unauthorized.body("rid");
        assert_eq!(
            body,
            json!({"status": "401 Unauthorized", "detail": "You are not authorized to access that resource", "request_id": "rid"})
        );
    }

    #[test]
    fn invalid_credentials_has_the_dashboard_body() {
        let e = GatewayError::InvalidCredentials;
        assert_eq!(e.status(), 400);
        assert_eq!(
            e.body("rid"),
            json!({"detail": "Invalid credentials", "code": "invalid_credentials", "component": "auth"})
        );
    }

    #[test]
    fn version_errors_are_415_with_the_dashboard_detail() {
        let e = GatewayError::from(VersionError::Missing);
        assert_eq!(e.status(), 415);
        assert_eq!(
            e.body("r")["detail"],
            "Unable to find version in request header"
        );
        assert_eq!(e.body("r")["status"], "415 Unsupported Media Type");
    }

    #[test]
    fn payload_too_large_is_413_in_the_status_shape() {
        let e = GatewayError::PayloadTooLarge { limit: 10 };
        assert_eq!(e.status(), 413);
        assert_eq!(e.body("r")["status"], "413 Payload Too Large");
    }
}
