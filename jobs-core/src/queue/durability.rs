//! Durable writes: a write acknowledged only once replicas have it, so that a failover does
//! not lose it. This module holds what a caller asks for ([`Durability`]) and what it gets when
//! the replicas do not confirm ([`NotDurable`]).
//!
//! Redis replicates asynchronously: a primary that dies a moment after it answered a push can
//! take the push with it when a replica is promoted. `WAIT numreplicas timeout` blocks the
//! connection that sent the write until that many replicas have confirmed everything it wrote,
//! or the timeout passes, and answers how many did. A script cannot call it, so it follows
//! the write on the same connection.
//!
//! Durable writes go through a lane of their own, one connection per handle (shared by its
//! clones), so that a `WAIT` that blocks while replicas lag never holds up the handle's other
//! commands. One `WAIT` covers every write sent on the lane before it: writers that finish
//! while another's `WAIT` is on its way take the next `WAIT` together, and a bulk or pipeline
//! takes one. The lane connection does not reconnect behind its writers' backs: a `WAIT` on a
//! new connection would confirm nothing of the old one's writes, so a write whose connection
//! was lost before its `WAIT` answered is reported unconfirmed.
//!
//! On a Redis Cluster, `WAIT` goes to every primary and the fewest replicas any of them
//! confirmed is the answer: each shard's writes need that many of its own replicas.

use std::time::Duration;

/// How many replicas must have a write before it is acknowledged, and how long to wait for
/// them: set per dispatch ([`PendingDispatch::durable`](crate::PendingDispatch::durable)), per
/// bulk ([`Bulk::durable`](crate::Bulk::durable)), as a handle's default
/// ([`QueueConfig::durability`](crate::QueueConfig::durability)), and for a worker's
/// acknowledgements (`--durable-acks`).
///
/// ```
/// use redjob::Durability;
/// use std::time::Duration;
/// let durability = Durability::replicas(1).within(Duration::from_millis(500));
/// assert_eq!(durability.replicas, 1);
/// assert_eq!(Durability::replicas(2).timeout, Duration::from_secs(1));
/// assert!(Durability::NONE.is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durability {
    /// Replicas that must have the write (0: none, the write is acknowledged by the primary
    /// alone, as without durability).
    pub replicas: u32,
    /// How long to wait for them (default 1 s).
    pub timeout: Duration,
}

impl Durability {
    /// Acknowledged by the primary alone: what a write is without durability. A dispatch
    /// given it is not durable even when its handle's default is.
    pub const NONE: Durability = Durability::replicas(0);

    /// Acknowledged once `replicas` replicas have the write, waiting up to a second for them.
    pub const fn replicas(replicas: u32) -> Self {
        Durability {
            replicas,
            timeout: Duration::from_secs(1),
        }
    }

    /// This durability, waiting up to `timeout` for the replicas.
    pub const fn within(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Whether no replica is asked for.
    pub const fn is_none(&self) -> bool {
        self.replicas == 0
    }
}

/// A durable write that fewer replicas than asked confirmed in time: it is on the primary, and
/// may or may not survive a failover. The error of a durable dispatch
/// ([`Error::NotDurable`](crate::Error::NotDurable)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotDurable {
    /// Replicas asked for.
    pub wanted: u32,
    /// Replicas that confirmed the write: `None` when the connection was lost before Redis
    /// answered the `WAIT` (the write itself was acknowledged).
    pub confirmed: Option<u32>,
    /// How long they were waited for.
    pub timeout: Duration,
    /// The jobs written (a dispatch's or a bulk's): pushed, and not confirmed.
    pub jobs: Vec<uuid::Uuid>,
}

impl std::fmt::Display for NotDurable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.confirmed {
            Some(confirmed) => write!(
                f,
                "{confirmed} of {} replicas confirmed the write within {:?}",
                self.wanted, self.timeout
            )?,
            None => write!(
                f,
                "the connection was lost before {} replicas confirmed the write",
                self.wanted
            )?,
        }
        write!(
            f,
            ": it is on the primary and may or may not survive a failover"
        )?;
        if !self.jobs.is_empty() {
            write!(f, " ({} jobs)", self.jobs.len())?;
        }
        Ok(())
    }
}
