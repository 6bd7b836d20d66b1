//! Every Redis key name the project reads or writes: [`Keys`] names them all, one file per
//! family of keys.
//!
//! On one Redis server the names are exactly Laravel's, so an operator who knows
//! `php artisan queue:*` recognises each one. On a Redis Cluster every key of one queue carries
//! a hash tag (`queues:{emails}`, `queues:{emails}:delayed`, ...), as Laravel 13 does, so that the
//! scripts, which touch several keys of a queue at once, find them all in one slot.
//! docs/redis-layout.md describes what each key holds and who reads and writes it.
//!
//! - `queue.rs`: a queue's own keys and its groups' ([`QueueKeys`], [`GroupsKeys`]);
//! - `failed.rs`: the failed-job store, its pending `failed()` hooks, the retries' guards;
//! - `ops.rs`: what operators' tools read: workers, metrics, recent jobs, pause, waits,
//!   restart, outbox relays;
//! - `workflow.rs`: chains and batches;
//! - `status.rs`: tracked jobs' status, cancel requests, the settled stream, queue events,
//!   resumable jobs' checkpoints;
//! - `schedules.rs`: schedules;
//! - `limits.rs`: the per-job rules: rate limits, concurrency limits, overlap locks,
//!   exception throttles, unique and debounced jobs.
//!
//! `names.rs` holds the rules for the names of queues and groups, which the keys are built from.

mod failed;
mod limits;
mod names;
mod ops;
mod queue;
mod schedules;
mod status;
mod workflow;

pub use names::{
    check_group_name, check_queue_name, InvalidGroupName, InvalidQueueName, MAX_GROUP_NAME,
};
#[cfg(feature = "otel")]
pub(crate) use queue::ready_list;
pub use queue::{GroupsKeys, QueueKeys};

/// How key names are laid out: Laravel's names on one server, hash-tagged names on a cluster.
///
/// ```
/// use redjob::queue::keys::KeyLayout;
/// assert_eq!(KeyLayout::Standalone.queue("emails").ready, "queues:emails");
/// assert_eq!(KeyLayout::Cluster.queue("emails").ready, "queues:{emails}");
/// assert_eq!(KeyLayout::Cluster.queue("mail{eu}").ready, "queues:mail{eu}");
/// assert_eq!(KeyLayout::Cluster.failed_jobs(), "{failed_jobs}");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum KeyLayout {
    /// One Redis server (or a primary with replicas): Laravel's names, unchanged.
    #[default]
    Standalone,
    /// A Redis Cluster: each queue's keys, and the failed-job store's, share a hash tag.
    Cluster,
}

/// Whether Redis Cluster hashes `key` by a hash tag: the text between its first `{` and the
/// first `}` after it, when that text is not empty.
///
/// ```
/// use redjob::queue::keys::has_hash_tag;
/// assert!(has_hash_tag("mail{eu}"));
/// assert!(!has_hash_tag("mail"));
/// assert!(!has_hash_tag("mail{}"));
/// assert!(!has_hash_tag("mail{eu"));
/// ```
pub fn has_hash_tag(key: &str) -> bool {
    key.find('{')
        .and_then(|open| key[open + 1..].find('}'))
        .is_some_and(|len| len > 0)
}

/// Prefix of the keys this project adds (worker heartbeats, metrics, pause and restart, and
/// every capability's beyond the queue's own). Laravel has no key under it: its own are
/// `queues:*`, `failed_jobs*` and `illuminate:*`.
const OPS_PREFIX: &str = "jobs:";

/// Every key name of one deployment: its [`KeyLayout`], and the prefix put before every key
/// (Laravel's `database.redis.options.prefix`, by default `<app>_database_`), the failed-job
/// store's and the operators' keys included. On a cluster the prefix stands outside the hash
/// tag, as phpredis puts it there.
///
/// ```
/// use redjob::queue::keys::{KeyLayout, Keys};
/// let plain = Keys::new(KeyLayout::Standalone, "");
/// assert_eq!(plain.queue("default").ready, "queues:default");
/// let laravel = Keys::new(KeyLayout::Standalone, "laravel_database_");
/// assert_eq!(laravel.queue("default").delayed, "laravel_database_queues:default:delayed");
/// assert_eq!(laravel.failed_jobs(), "laravel_database_failed_jobs");
/// assert_eq!(laravel.paused(), "laravel_database_jobs:paused");
/// let cluster = Keys::new(KeyLayout::Cluster, "app_");
/// assert_eq!(cluster.queue("emails").ready, "app_queues:{emails}");
/// assert_eq!(cluster.failed_jobs_index(), "app_{failed_jobs}:index");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Keys {
    layout: KeyLayout,
    prefix: String,
}

impl Keys {
    /// The keys of `layout`, each with `prefix` in front.
    pub fn new(layout: KeyLayout, prefix: impl Into<String>) -> Keys {
        Keys {
            layout,
            prefix: prefix.into(),
        }
    }

    /// One server or a cluster.
    pub fn layout(&self) -> KeyLayout {
        self.layout
    }

    /// The prefix before every key (empty: none).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `jobs:<name>`, a key of one per deployment.
    fn ops(&self, name: &str) -> String {
        self.prefixed(&format!("{OPS_PREFIX}{name}"))
    }

    /// `jobs:<family>:<name>`, with `name` as the hash tag on a cluster.
    fn tagged(&self, family: &str, name: &str) -> String {
        match self.layout {
            KeyLayout::Standalone => self.ops(&format!("{family}:{name}")),
            KeyLayout::Cluster => self.ops(&format!("{family}:{{{name}}}")),
        }
    }

    /// `jobs:<family>:<name>` on one server; on a cluster `<family>:<name>` under the keys of
    /// `queue`, for a key that must be in the slot of the queue its job is pushed onto.
    fn under_queue(&self, queue: &str, family: &str, name: &str) -> String {
        match self.layout {
            KeyLayout::Standalone => self.ops(&format!("{family}:{name}")),
            KeyLayout::Cluster => format!("{}:{family}:{name}", self.queue(queue).ready),
        }
    }

    fn prefixed(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slot-deciding part of a key, as Redis Cluster computes it.
    fn hashed_part(key: &str) -> &str {
        if let Some(open) = key.find('{') {
            if let Some(len) = key[open + 1..].find('}') {
                if len > 0 {
                    return &key[open + 1..open + 1 + len];
                }
            }
        }
        key
    }

    #[test]
    fn standalone_names_are_laravels() {
        for name in ["emails", "mail{eu}", "a:b"] {
            assert_eq!(KeyLayout::Standalone.queue(name), QueueKeys::new(name));
        }
        assert_eq!(KeyLayout::Standalone.failed_jobs(), "failed_jobs");
        assert_eq!(
            KeyLayout::Standalone.failed_jobs_index(),
            "failed_jobs:index"
        );
    }

    #[test]
    fn cluster_keys_of_one_queue_share_one_hash_tag() {
        let keys = KeyLayout::Cluster.queue("emails");
        assert_eq!(
            keys.all(),
            [
                "queues:{emails}",
                "queues:{emails}:delayed",
                "queues:{emails}:reserved",
                "queues:{emails}:notify"
            ]
        );
        for name in [
            "emails",
            "mail{eu}",
            "a{}b",
            "x{",
            "a:b",
            "{tag}rest",
            "é{ü}",
        ] {
            let keys = KeyLayout::Cluster.queue(name);
            let tags: Vec<&str> = keys.all().iter().map(|key| hashed_part(key)).collect();
            assert!(
                tags.iter().all(|tag| *tag == tags[0]) && has_hash_tag(&keys.ready),
                "{name}: {:?} hash by {tags:?}",
                keys.all()
            );
        }
        assert_eq!(
            hashed_part(KeyLayout::Cluster.failed_jobs()),
            hashed_part(KeyLayout::Cluster.failed_jobs_index())
        );
    }

    #[test]
    fn a_name_with_a_valid_tag_is_kept() {
        assert_eq!(
            KeyLayout::Cluster.queue("mail{eu}").ready,
            "queues:mail{eu}"
        );
        assert_eq!(
            KeyLayout::Cluster.queue("mail{eu}").reserved,
            "queues:mail{eu}:reserved"
        );
        assert_eq!(KeyLayout::Cluster.queue("mail{}").ready, "queues:{mail{}}");
    }
}
