//! What the gateway tells about itself: Prometheus metrics (`metrics`), where log lines go
//! (`logs`), each request's access line (`access_log`) and the audit log of changes, logins,
//! logouts and lockouts (`audit`).

pub(crate) mod access_log;
pub(crate) mod audit;
pub mod logs;
pub(crate) mod metrics;
