//! The assembly: `parts` turns a validated `Config` into the running parts (the same code
//! at start-up and at reload), `server` hands them to pingora as services, `reload`
//! replaces the reloadable ones on SIGHUP, `upgrade` hands the sockets to a new binary,
//! `listening` opens the listeners and says where they are, and `admin` is the metrics
//! and health listener; `accounts` is the command that lists and prunes the dashboard
//! accounts the gateway manages. Nothing below imports from here.

pub mod accounts;
pub(crate) mod admin;
mod dashboards;
mod listening;
mod parts;
mod reload;
mod restart;
pub mod server;
mod upgrade;
