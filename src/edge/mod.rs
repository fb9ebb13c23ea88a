//! What touches the wire and pingora's internals: client connections before pingora
//! (`connections`), paths made canonical (`paths`), bodies read within bounds (`request`)
//! and one byte budget for all of them (`body_budget`), local answers (`respond`), heads
//! edited in place (`headers`) and the listening sockets handed to pingora
//! (`listen_table`). The decisions above them see plain values.

pub(crate) mod body_budget;
pub(crate) mod connections;
pub(crate) mod headers;
pub(crate) mod listen_table;
pub(crate) mod paths;
pub(crate) mod request;
pub(crate) mod respond;
