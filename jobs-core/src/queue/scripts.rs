//! The Lua scripts behind every multi-step change, loaded once and called by SHA.
//!
//! Each script lives in its own file under `src/scripts/`, headed by what its KEYS and ARGV
//! are. Snippets several scripts share live under `src/scripts/lib/` and are put in front of
//! the scripts that use them at compile time: `time.lua` (Redis's clock in each precision the
//! keys use), `forget_failed.lua` (deleting failed-job records by age), `retake_unique.lua` (a
//! retried unique job's lock), `holds.lua` (freeing what a settled job held), `due.lua` (a
//! delayed job's due time, and scheduling a run of delayed jobs), `push_job.lua` (pushing one
//! job, ready or delayed), `lists.lua` (appending many values to a list), `effects.lua`
//! (reading the effects a settling script applies), `chain.lua` (a chain's steps), `batch.lua`
//! (a batch's counts and callbacks), `status.lua` (a job's status record and its queue's
//! events), `fields.lua` (a payload's attempts, uuid and job name, read without decoding it) and
//! `groups.lua` (a queue's groups and their rotation). `redis::Script` sends `EVALSHA` and
//! loads the script on a `NOSCRIPT` reply.
//!
//! Every call of a script defines its libraries' functions again, which costs several µs. A
//! script that can often answer without them marks the line below its first part with
//! `-- @libraries`: the libraries go there instead of in front (`complete_batch.lua`).

use redis::Script;
use std::sync::LazyLock;

macro_rules! script {
    ($(#[$doc:meta])* $name:ident, $file:literal $(, uses $($lib:literal),+)?) => {
        $(#[$doc])*
        pub(crate) static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(&assemble(
                include_str!(concat!("scripts/", $file)),
                concat!($($(include_str!(concat!("scripts/lib/", $lib)), "\n",)+)?),
            ))
        });
    };
}

/// The line where a script wants its libraries, when not in front of it.
const LIBRARIES_MARK: &str = "-- @libraries\n";

/// The script `body` with its `libraries`: at its `-- @libraries` line, or in front.
fn assemble(body: &str, libraries: &str) -> String {
    let (first, rest) = body.split_once(LIBRARIES_MARK).unwrap_or(("", body));
    [first, libraries, rest].concat()
}

script!(
    /// Does nothing: whether this user may load and run scripts (`check.lua`).
    CHECK, "check.lua"
);
script!(
    /// Push ready jobs and their wake-up tokens (`push.lua`).
    PUSH, "push.lua", uses "lists.lua"
);
script!(
    /// Schedule delayed jobs at server time + delay (`later.lua`).
    LATER, "later.lua", uses "time.lua", "due.lua"
);
script!(
    /// Push ready or delayed jobs into a group, and bring it into the rotation or the due set
    /// (`group_push.lua`).
    GROUP_PUSH, "group_push.lua", uses "time.lua", "due.lua", "lists.lua", "groups.lua"
);
script!(
    /// Take a unique job's lock and push the job, or return the lock's holder
    /// (`push_unique.lua`).
    PUSH_UNIQUE, "push_unique.lua", uses "time.lua", "due.lua", "push_job.lua"
);
script!(
    /// Push a debounced job, replacing the one still waiting under its id (`debounce.lua`).
    DEBOUNCE, "debounce.lua", uses "time.lua"
);
script!(
    /// Push a chain's first job and keep its other links and its catch job (`chain.lua`).
    CHAIN, "chain.lua", uses "time.lua", "due.lua", "push_job.lua"
);
script!(
    /// Create a batch or add jobs to one, pushing them (`batch.lua`).
    BATCH, "batch.lua", uses "time.lua", "due.lua", "lists.lua", "push_job.lua", "effects.lua", "chain.lua", "batch.lua"
);
script!(
    /// Cancel a batch (`cancel_batch.lua`).
    CANCEL_BATCH, "cancel_batch.lua", uses "time.lua"
);
script!(
    /// Push a job built ahead of time unless it was pushed already (`push_once.lua`).
    PUSH_ONCE, "push_once.lua", uses "time.lua", "due.lua", "push_job.lua"
);
script!(
    /// Push a unique job built ahead of time with its lock, unless it was pushed already
    /// (`push_unique_once.lua`): an outbox relay's.
    #[cfg(feature = "postgres")]
    PUSH_UNIQUE_ONCE, "push_unique_once.lua", uses "time.lua", "due.lua", "push_job.lua"
);
script!(
    /// Take a chain's step for a settled link, once per link, on a cluster (`chain_step.lua`).
    CHAIN_STEP, "chain_step.lua", uses "effects.lua"
);
script!(
    /// Count settled jobs in their batch, once each, on a cluster (`batch_settle.lua`).
    BATCH_SETTLE, "batch_settle.lua", uses "time.lua", "due.lua", "push_job.lua", "effects.lua", "chain.lua", "batch.lua"
);
script!(
    /// Claim a schedule's tick and push its job (`schedule_fire.lua`).
    SCHEDULE_FIRE, "schedule_fire.lua", uses "time.lua", "due.lua", "push_job.lua"
);
script!(
    /// Migrate due jobs, reserve ready ones, balance wake-up tokens (`pop.lua`).
    POP, "pop.lua", uses "time.lua", "fields.lua", "status.lua", "lists.lua", "groups.lua"
);
script!(
    /// Move a reserved job (or a replacement of it) back to the delayed set and free what it
    /// held while it ran (`release.lua`).
    RELEASE, "release.lua", uses "time.lua", "effects.lua", "holds.lua", "status.lua", "lists.lua", "groups.lua"
);
script!(
    /// Acknowledge a finished job, free what it held and push its chain's next link
    /// (`complete.lua`).
    COMPLETE, "complete.lua", uses "time.lua", "due.lua", "push_job.lua", "effects.lua", "holds.lua", "chain.lua", "batch.lua", "status.lua", "lists.lua", "groups.lua", "checkpoint.lua"
);
script!(
    /// Acknowledge finished jobs of one batch and count them there (`complete_batch.lua`).
    COMPLETE_BATCH, "complete_batch.lua", uses "time.lua", "due.lua", "push_job.lua", "effects.lua", "chain.lua", "batch.lua"
);
script!(
    /// Record a failed job, free what it held, push its chain's catch job, and prune the
    /// failed-job store (`fail.lua`).
    FAIL, "fail.lua", uses "time.lua", "due.lua", "forget_failed.lua", "push_job.lua", "effects.lua", "holds.lua", "chain.lua", "batch.lua", "status.lua", "lists.lua", "groups.lua", "checkpoint.lua"
);
script!(
    /// Start a tracked job's status record as it is pushed (`track.lua`).
    TRACK, "track.lua", uses "time.lua", "due.lua", "push_job.lua"
);
script!(
    /// Record that an attempt of a tracked job started (`running.lua`).
    RUNNING, "running.lua", uses "time.lua", "status.lua"
);
script!(
    /// Record a running job's progress (`progress.lua`).
    PROGRESS, "progress.lua", uses "time.lua", "status.lua"
);
script!(
    /// Append events to a queue's events stream (`event.lua`).
    EVENT, "event.lua", uses "status.lua"
);
script!(
    /// Ask for a job to stop (`cancel.lua`).
    CANCEL, "cancel.lua", uses "time.lua", "status.lua"
);
script!(
    /// Take the failed() hooks their worker did not report done in time (`claim_hooks.lua`).
    CLAIM_HOOKS, "claim_hooks.lua", uses "time.lua"
);
script!(
    /// Renew or free the holds of running jobs (`leases.lua`).
    LEASES, "leases.lua", uses "time.lua", "holds.lua"
);
script!(
    /// Admit a job under its rate limits, all or none (`limit.lua`).
    LIMIT, "limit.lua"
);
script!(
    /// Take a slot of a concurrency limit (`funnel.lua`).
    FUNNEL, "funnel.lua", uses "time.lua"
);
script!(
    /// Take a lock against overlapping runs (`overlap.lua`).
    OVERLAP, "overlap.lua"
);
script!(
    /// Check, count or clear an exception throttle (`breaker.lua`).
    BREAKER, "breaker.lua"
);
script!(
    /// Save a running job's checkpoint with its reservation's extension (`checkpoint.lua`).
    CHECKPOINT, "checkpoint.lua", uses "time.lua", "checkpoint.lua"
);
script!(
    /// Push back the expiry of reservations still held (`extend.lua`).
    EXTEND, "extend.lua", uses "time.lua"
);
script!(
    /// Delete every job of a queue and return how many there were (`clear.lua`).
    CLEAR, "clear.lua"
);

script!(
    /// Push a failed job back onto its queue and remove its record (`retry.lua`).
    RETRY, "retry.lua", uses "retake_unique.lua"
);
script!(
    /// One bounded step of a listing or search of the failed-job store (`failed_page.lua`).
    FAILED_PAGE, "failed_page.lua", uses "time.lua"
);
script!(
    /// On a cluster, push a failed job back onto its queue once per record, the first step of
    /// a retry (`retry_push.lua`).
    RETRY_PUSH, "retry_push.lua", uses "retake_unique.lua"
);
script!(
    /// Remove a failed job's record if it is still the one read, the last step of a retry on
    /// a cluster (`forget_unchanged.lua`).
    FORGET_UNCHANGED, "forget_unchanged.lua"
);
script!(
    /// Delete failed-job records older than an age, a bounded number per call
    /// (`prune_failed.lua`).
    PRUNE_FAILED, "prune_failed.lua", uses "time.lua", "forget_failed.lua"
);
script!(
    /// Record a restart request at Redis's time (`restart.lua`).
    RESTART, "restart.lua", uses "time.lua"
);
script!(
    /// Bring the groups jobs were pushed into into the rotation (`group_touch.lua`).
    GROUP_TOUCH, "group_touch.lua", uses "lists.lua", "groups.lua"
);
script!(
    /// Bring groups whose jobs ended back from the blocked set (`group_ended.lua`).
    GROUP_ENDED, "group_ended.lua", uses "lists.lua", "groups.lua"
);
script!(
    /// Set or clear a group's limits, or its queue's (`group_limits.lua`).
    GROUP_LIMITS, "group_limits.lua", uses "lists.lua", "groups.lua"
);
script!(
    /// Read the sizes, limits and state of a queue's groups (`group_sizes.lua`).
    GROUP_SIZES, "group_sizes.lua", uses "group_scan.lua"
);
script!(
    /// Count a queue's groups with jobs and their jobs (`group_totals.lua`).
    GROUP_TOTALS, "group_totals.lua", uses "group_scan.lua"
);
