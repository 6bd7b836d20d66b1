//! The worker runtime: the path of a job, one file per step.
//!
//! - [`worker`] makes the [`startup`] checks, starts a worker's [`services`] in one order,
//!   runs its [`job_loop`] (which keeps the concurrency slots busy and decides when to stop),
//!   and stops the services in the reverse order, each through the one [`lifecycle`].
//! - [`fetcher`] reserves jobs from the queues in priority order (`pop.lua`); [`waker`] is
//!   the idle worker's blocking wait for a push or a due job.
//! - [`slot`] is one concurrency slot's task: it runs its job, then goes on with the jobs
//!   reserved ahead while its jobs have to wait; [`ahead`] holds those jobs, which the
//!   slots' tasks take as their jobs end.
//! - [`processor`] takes one reserved job through its steps: [`decode`] its payload,
//!   [`execute`] its handler under the attempt rules of [`rules`] (the one place a job's code
//!   runs), and has the [`settler`] settle the outcome in Redis; [`acker`] deletes finished
//!   jobs' reservations in batches; [`hooks`] runs failed jobs' `failed()` hooks, and those owed by dead workers.
//! - [`lease`] keeps the registry of reserved jobs (running, or waiting for a slot) and
//!   extends their reservations while it holds them; [`watchdog`] acts on a handler that
//!   blocks its thread past its timeout or its cancel grace; [`cancels`] follows cancel
//!   requests, firing running jobs' cancellations and keeping the requests for starting ones.
//! - [`control`] publishes the worker's heartbeat record and per-minute counters for
//!   operators, and obeys their pause and restart requests; [`waits`] writes its `--wait`
//!   thresholds at start; `outbox` makes the outbox relay a plugin (feature `postgres`).
//! - Shared by the steps above: [`reserved`] (the reserved job), [`deadline`] (a running
//!   handler's deadline), [`time`] (optional sleeps) and [`outage`] (riding out Redis
//!   outages). Why a worker stopped, [`Exit`](crate::Exit), is public, and lives at the
//!   crate's root.
//!
//! No two modules import each other, directly or through others: the imports form a tree
//! with [`worker`] at its root and the shared types at its leaves.

pub(crate) mod acker;
pub(crate) mod ahead;
pub(crate) mod cancelled;
pub(crate) mod cancels;
pub(crate) mod control;
pub(crate) mod deadline;
pub(crate) mod decode;
pub(crate) mod execute;
pub(crate) mod fetcher;
pub(crate) mod hooks;
pub(crate) mod job_loop;
pub(crate) mod lease;
pub(crate) mod lifecycle;
pub(crate) mod outage;
#[cfg(feature = "postgres")]
pub(crate) mod outbox;
pub(crate) mod processor;
pub(crate) mod reserved;
pub(crate) mod rules;
pub(crate) mod scheduler;
pub(crate) mod services;
pub(crate) mod settler;
pub(crate) mod slot;
pub(crate) mod startup;
pub(crate) mod time;
pub(crate) mod waits;
pub(crate) mod waker;
pub(crate) mod watchdog;
pub(crate) mod worker;
