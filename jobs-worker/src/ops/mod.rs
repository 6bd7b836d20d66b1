//! The operators' tools: the `jobsctl` command ([`main`]) and its web dashboard, built on
//! `jobs_core::admin`. Compiled with the `ops` feature (on by default).

mod cli;
pub mod dashboard;

pub use cli::main;
