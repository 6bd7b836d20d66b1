//! The scenarios, one file per family; `main.rs` picks one by its name.

pub(crate) mod drain;
pub(crate) mod enqueue;
pub(crate) mod fairness;
pub(crate) mod io;
pub(crate) mod latency;
pub(crate) mod migrate;
#[cfg(feature = "postgres")]
pub(crate) mod txn;
pub(crate) mod workflows;
