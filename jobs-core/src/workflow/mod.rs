//! Workflows: chains of jobs, each link pushed in the step that acknowledges the one before it,
//! and batches of jobs, each counted in the step that settles it.
//!
//! Every step of a workflow happens in the script call that settles the job causing it: the
//! next link is pushed in the call that acknowledges a finished link, a chain's catch job in
//! the call that records a failed link, a batch's job counted (and the batch's callbacks pushed
//! when it is the last) in the call that settles it, and only if that job's reservation was
//! still held. So a worker that dies at any moment never pushes a link twice and never loses
//! one: the job it ran comes back after `retry_after` and takes the step then.
//!
//! A chain's links are built and signed when the chain is dispatched and kept in Redis, each
//! once ([`Link`]), so the bytes written grow linearly with the chain's length (Laravel
//! copies the whole remainder into every link). See `docs/workflows.md` in the repository.

//!
//! The workflow attaches to the layers below through their extension points: it reads each
//! attempt's chain and batch from the payload and settles them through an
//! [`AttemptHook`](crate::job::attempt::AttemptHook) (`attempt.rs`, `step.rs`), and a fake
//! queue takes its chains and batches through `offline.rs`.
//!
//! One file per role: `builder.rs` (what an application builds), `plan.rs` (sealed for
//! Redis), `start.rs` (pushed), `advance.rs` (a chain advanced), `count.rs` (a batch counted),
//! `effects.rs` (both as settling-script effects), `cluster.rs` (both on a cluster), `record.rs`
//! (a batch's keys and callbacks), `status.rs` (a batch's state for operators).

mod advance;
pub(crate) mod attempt;
mod builder;
mod cluster;
pub(crate) mod count;
mod effects;
mod link;
pub(crate) mod offline;
pub(crate) mod plan;
mod progress;
mod record;
mod start;
mod status;
mod step;

pub use attempt::{BatchEdits, ChainAdditions, ChainEdits};
pub use builder::{Batch, Chain};
pub use link::Link;
pub use progress::{BatchProgress, ChainProgress};
pub use status::BatchStatus;
