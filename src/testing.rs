//! What the integration tests reach of the gateway's internals, public only with the
//! `test-support` feature that they alone enable: reading what gateways sealed in Redis, with
//! the same code that sealed it.

pub use crate::state::open_sealed;
