//! Every Redis key name the project reads or writes, in one place.
//!
//! On one Redis server the names are exactly Laravel's, so an operator who knows
//! `php artisan queue:*` recognises each one. On a Redis Cluster every key of one queue carries
//! a hash tag (`queues:{emails}`, `queues:{emails}:delayed`, ...), as Laravel 13 does, so that the
//! scripts, which touch several keys of a queue at once, find them all in one slot.
//! docs/redis-layout.md describes what each key holds and who reads and writes it.

/// Prefix of every queue key, as in Laravel.
pub const QUEUE_PREFIX: &str = "queues:";

/// Hash of failed jobs: uuid -> failed-job record (JSON).
pub const FAILED_JOBS: &str = "failed_jobs";

/// Sorted set of failed jobs: uuid, scored by the time of failure (seconds since the epoch).
pub const FAILED_JOBS_INDEX: &str = "failed_jobs:index";

/// Sorted set of failed jobs whose `failed()` hook has not finished: uuid, scored by when a
/// worker may run it (again).
pub const FAILED_HOOKS: &str = "failed_jobs:hooks";

/// [`FAILED_HOOKS`] on a Redis Cluster, in the slot of [`CLUSTER_FAILED_JOBS`].
pub const CLUSTER_FAILED_HOOKS: &str = "{failed_jobs}:hooks";

/// [`FAILED_JOBS`] on a Redis Cluster: the hash tag puts it in one slot with its index.
pub const CLUSTER_FAILED_JOBS: &str = "{failed_jobs}";

/// [`FAILED_JOBS_INDEX`] on a Redis Cluster, in the slot of [`CLUSTER_FAILED_JOBS`].
pub const CLUSTER_FAILED_JOBS_INDEX: &str = "{failed_jobs}:index";

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

impl KeyLayout {
    /// The keys of the queue called `name` in this layout.
    pub fn queue(self, name: &str) -> QueueKeys {
        match self {
            KeyLayout::Standalone => QueueKeys::new(name),
            KeyLayout::Cluster if has_hash_tag(name) => QueueKeys::new(name),
            KeyLayout::Cluster => QueueKeys::with_base(name, format!("{QUEUE_PREFIX}{{{name}}}")),
        }
    }

    /// The failed-job hash in this layout.
    pub fn failed_jobs(self) -> &'static str {
        match self {
            KeyLayout::Standalone => FAILED_JOBS,
            KeyLayout::Cluster => CLUSTER_FAILED_JOBS,
        }
    }

    /// The failed-job index in this layout.
    pub fn failed_jobs_index(self) -> &'static str {
        match self {
            KeyLayout::Standalone => FAILED_JOBS_INDEX,
            KeyLayout::Cluster => CLUSTER_FAILED_JOBS_INDEX,
        }
    }

    /// The pending `failed()` hooks in this layout.
    pub fn failed_hooks(self) -> &'static str {
        match self {
            KeyLayout::Standalone => FAILED_HOOKS,
            KeyLayout::Cluster => CLUSTER_FAILED_HOOKS,
        }
    }
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

// Defined with the crate's errors, which wrap it; the queue-name rule is here.
pub use crate::error::InvalidQueueName;

/// Checks that `name` can name a queue. Dispatch, bulk dispatch, the worker's `--queue` and
/// the operators' tools all apply this one rule, so a job can never be pushed where no worker
/// could take it from:
/// - not empty (the keys would be `queues:`, `queues::delayed`, ...);
/// - no comma: a worker's `--queue` (ours and Laravel's) is a comma-separated list, so no
///   worker could be told to take jobs from such a queue.
///
/// ```
/// use redjob::queue::keys::check_queue_name;
/// assert!(check_queue_name("emails").is_ok());
/// assert!(check_queue_name("mail{eu}").is_ok());
/// assert_eq!(
///     check_queue_name("").unwrap_err().to_string(),
///     "invalid queue name \"\": it is empty"
/// );
/// assert!(check_queue_name("high,low").is_err());
/// ```
pub fn check_queue_name(name: &str) -> Result<(), InvalidQueueName> {
    let reason = if name.is_empty() {
        "it is empty"
    } else if name.contains(',') {
        "it contains a comma, which separates the queues of a worker's --queue list"
    } else {
        return Ok(());
    };
    Err(InvalidQueueName {
        name: name.to_owned(),
        reason,
    })
}

/// Checks that `group` can name a group of a queue ([fair groups](crate::groups)): its keys
/// are built from it, in scripts too, so it must not look like another key's name:
/// - not empty, and at most [`MAX_GROUP_NAME`] bytes;
/// - no `:` (`queues:q:g:a:delayed` would be group `a`'s delayed set as well as group
///   `a:delayed`'s list), no `{` or `}` (a Redis Cluster hash tag), no comma, space or control
///   character.
///
/// ```
/// use redjob::queue::keys::check_group_name;
/// assert!(check_group_name("tenant-42").is_ok());
/// assert!(check_group_name("tenant:42").is_err());
/// assert!(check_group_name("").is_err());
/// ```
pub fn check_group_name(group: &str) -> Result<(), InvalidGroupName> {
    let reason = if group.is_empty() {
        "it is empty"
    } else if group.len() > MAX_GROUP_NAME {
        "it is longer than 128 bytes"
    } else if group
        .chars()
        .any(|c| matches!(c, ':' | '{' | '}' | ',') || c.is_whitespace() || c.is_control())
    {
        "it contains a colon, a brace, a comma, white space or a control character"
    } else {
        return Ok(());
    };
    Err(InvalidGroupName {
        group: group.to_owned(),
        reason,
    })
}

/// The longest group name, in bytes.
pub const MAX_GROUP_NAME: usize = 128;

// Defined with the crate's errors, which wrap it; the group-name rule is here.
pub use crate::error::InvalidGroupName;

/// The keys of one queue, or of one group of a queue.
///
/// ```
/// let keys = redjob::queue::keys::QueueKeys::new("emails");
/// assert_eq!(keys.ready, "queues:emails");
/// assert_eq!(keys.delayed, "queues:emails:delayed");
/// assert_eq!(keys.reserved, "queues:emails:reserved");
/// assert_eq!(keys.notify, "queues:emails:notify");
/// let acme = keys.for_group("acme");
/// assert_eq!(acme.ready, "queues:emails:g:acme");
/// assert_eq!(acme.delayed, "queues:emails:g:acme:delayed");
/// assert_eq!(acme.reserved, "queues:emails:g:acme:reserved");
/// assert_eq!(acme.notify, "queues:emails:notify");
/// assert_eq!(acme.group.as_deref(), Some("acme"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueueKeys {
    /// The queue's name, without the prefix.
    pub name: String,
    /// LIST of ready payloads: producers push to the tail, workers pop from the head.
    pub ready: String,
    /// ZSET of delayed and released payloads, scored by the time they become due.
    pub delayed: String,
    /// ZSET of reserved copies of running jobs, scored by the time the reservation expires.
    pub reserved: String,
    /// LIST of wake-up tokens, one per ready job, on which idle workers block. A group's
    /// keys share their queue's.
    pub notify: String,
    /// For the keys of one group of the queue, its name: then `ready`, `delayed` and
    /// `reserved` are the group's own (see [`QueueKeys::for_group`]).
    pub group: Option<String>,
}

impl QueueKeys {
    /// The keys of the queue called `name` on one Redis server: Laravel's names. On a cluster,
    /// use [`KeyLayout::queue`] (or `RedisQueue::queue_keys`).
    pub fn new(name: &str) -> Self {
        Self::with_base(name, format!("{QUEUE_PREFIX}{name}"))
    }

    fn with_base(name: &str, ready: String) -> Self {
        QueueKeys {
            name: name.to_owned(),
            delayed: format!("{ready}:delayed"),
            reserved: format!("{ready}:reserved"),
            notify: format!("{ready}:notify"),
            ready,
            group: None,
        }
    }

    /// The ready list of the queue itself, for the keys of a group as for the queue's.
    fn queue_ready(&self) -> &str {
        match &self.group {
            Some(group) => {
                let own = self.ready.len() - GROUP_INFIX.len() - group.len();
                &self.ready[..own]
            }
            None => &self.ready,
        }
    }

    /// The keys of the group `group` of this queue: a sub-queue shaped like the queue, with
    /// its own ready list `<queue>:g:<group>`, delayed set and reserved set (whose members are
    /// the group's running jobs, the leases its concurrency limit counts), in the queue's
    /// slot on a cluster, sharing the queue's wake-up list. Laravel's workers never read
    /// them. `group` must pass [`check_group_name`].
    pub fn for_group(&self, group: &str) -> QueueKeys {
        let ready = format!("{}{GROUP_INFIX}{group}", self.queue_ready());
        QueueKeys {
            name: self.name.clone(),
            delayed: format!("{ready}:delayed"),
            reserved: format!("{ready}:reserved"),
            notify: self.notify.clone(),
            ready,
            group: Some(group.to_owned()),
        }
    }

    /// These keys, or those of `group` of this queue when there is one
    /// ([`QueueKeys::for_group`]): where a job of that group, or of none, waits.
    ///
    /// ```
    /// use redjob::queue::keys::QueueKeys;
    /// assert_eq!(QueueKeys::new("emails").in_group(None).ready, "queues:emails");
    /// assert_eq!(QueueKeys::new("emails").in_group(Some("acme")).ready, "queues:emails:g:acme");
    /// ```
    pub fn in_group(self, group: Option<&str>) -> QueueKeys {
        match group {
            Some(group) => self.for_group(group),
            None => self,
        }
    }

    /// What every script that brings a group of this queue into its rotation is given first,
    /// in the order `groups_keys` in `lib/groups.lua` reads them: the rotation, the rotating
    /// set, the blocked set, the due set and the wake-up list; and the groups' key prefix.
    pub(crate) fn rotation_keys(&self) -> ([String; 5], String) {
        let keys = self.groups();
        (
            [
                keys.rotation,
                keys.rotating,
                keys.blocked,
                keys.due,
                self.notify.clone(),
            ],
            keys.group_prefix,
        )
    }

    /// The keys that order the groups of this queue ([`GroupsKeys`]).
    ///
    /// ```
    /// let groups = redjob::queue::keys::QueueKeys::new("emails").groups();
    /// assert_eq!(groups.rotation, "queues:emails:groups");
    /// assert_eq!(groups.group_prefix, "queues:emails:g:");
    /// ```
    pub fn groups(&self) -> GroupsKeys {
        let queue = self.queue_ready();
        GroupsKeys {
            rotation: format!("{queue}:groups"),
            rotating: format!("{queue}:groups:rotating"),
            blocked: format!("{queue}:groups:blocked"),
            due: format!("{queue}:groups:due"),
            limits: format!("{queue}:groups:limits"),
            own_turn: format!("{queue}:groups:own"),
            group_prefix: format!("{queue}{GROUP_INFIX}"),
        }
    }

    /// Every key of the queue: ready, delayed, reserved, notify.
    pub fn all(&self) -> [&str; 4] {
        [&self.ready, &self.delayed, &self.reserved, &self.notify]
    }
}

/// What comes between a queue's ready list and a group's name in the group's keys.
const GROUP_INFIX: &str = ":g:";

/// The keys by which a queue's groups take turns (docs/groups.md), in the queue's slot on a
/// cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupsKeys {
    /// LIST of the groups that may run a job now, each once: the rotation, served from the
    /// head, the served group moved to the tail.
    pub rotation: String,
    /// SET of the groups in the rotation.
    pub rotating: String,
    /// ZSET of groups with ready jobs that may not run one yet, scored by when to look again:
    /// at their concurrency limit, the earliest expiry of their reservations (a slot freed
    /// earlier brings them back at once); over their rate, when it allows the next job;
    /// paused, `+inf`.
    pub blocked: String,
    /// ZSET of groups with delayed or reserved jobs, scored by when the earliest of those
    /// falls due (a delayed job) or expires (a reservation).
    pub due: String,
    /// HASH of the groups' limits: `<group>:c` (concurrency), `<group>:r` (rate, `N/secs`),
    /// `<group>:p` (paused), and `*:c`, `*:r` for every group of the queue.
    pub limits: String,
    /// STRING: how many jobs the pops have taken from the groups since the queue's own list
    /// last had its turn, which comes again once each rotating group has had one. Kept a day.
    pub own_turn: String,
    /// What a group's name follows in its keys (`queues:<name>:g:`).
    pub group_prefix: String,
}

/// Prefix of the keys this project adds for operators (worker heartbeats, metrics, pause and
/// restart). Laravel has no key under it: its own are `queues:*`, `failed_jobs*` and
/// `illuminate:*`.
pub const OPS_PREFIX: &str = "jobs:";

/// Sorted set of live workers: worker id, scored by its last heartbeat (Unix seconds, by the
/// worker's clock). A member whose [`Keys::worker`] record has expired is a dead worker.
pub const WORKERS: &str = "jobs:workers";

/// Set of paused queue names: workers take no job from them until they are resumed.
pub const PAUSED: &str = "jobs:paused";

/// String holding the time of the last restart request (Unix milliseconds, by Redis's
/// clock), like Laravel's `illuminate:queue:restart`. A worker that sees it change after its
/// start stops once its running jobs are done.
pub const RESTART: &str = "jobs:restart";

/// Hash of wait thresholds: queue name -> the seconds its jobs may wait for a worker before
/// the queue is flagged (Horizon's `waits`). Written by the worker's `--wait` and `jobsctl
/// waits set`; read by `jobsctl`, the dashboard and the Prometheus gauges. One key, so it needs
/// no hash tag on a cluster.
pub const WAITS: &str = "jobs:waits";

/// Sorted set of the live outbox relays: relay id, scored by its last refresh (Unix seconds, by
/// the relay's clock). A member whose [`Keys::outbox_relay`] record has expired is a relay
/// that died.
pub const OUTBOX_RELAYS: &str = "jobs:outbox:relays";

/// Sorted set of cancel requests: the uuid of a job asked to stop, scored by when (Unix
/// milliseconds, by Redis's clock). A worker skips a waiting job found here and stops a
/// running one; the call that settles the job removes its entry.
pub const CANCEL_REQUESTS: &str = "jobs:cancel";

/// How long a job's status record ([`Keys::status`]) is kept while the job has not settled
/// for good, from its last change: a day.
pub const OPEN_STATUS_TTL: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Stream telling workers of each cancel request as it is made (`uuid`), so a running job is
/// stopped within milliseconds; capped, as a worker that missed entries reads
/// [`CANCEL_REQUESTS`] anyway.
pub const CANCEL_SIGNALS: &str = "jobs:cancel:signals";

/// Stream of tracked jobs as they settle for good (`uuid`, `state`), capped: what a waiting
/// dispatcher reads, so it learns of the outcome without polling.
pub const SETTLED_SIGNALS: &str = "jobs:settled";

/// Hash of the queues whose events are on: queue name -> the length its events stream is
/// kept at ([`Keys::events`]).
pub const EVENTS_ON: &str = "jobs:events";

/// How many finished attempts [`Keys::recent`] keeps per queue.
pub const RECENT_LIMIT: usize = 100;

/// Prefix of the per-minute metric hashes; see [`Keys::metrics_minute`].
pub const METRICS_PREFIX: &str = "jobs:metrics:";

/// The environment variable [`QueueConfig::default`](crate::QueueConfig) reads the key prefix
/// from, as Laravel's `REDIS_PREFIX`.
pub const PREFIX_ENV: &str = "REDIS_PREFIX";

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

    /// The keys of the queue called `name`.
    pub fn queue(&self, name: &str) -> QueueKeys {
        let keys = self.layout.queue(name);
        if self.prefix.is_empty() {
            return keys;
        }
        QueueKeys::with_base(name, format!("{}{}", self.prefix, keys.ready))
    }

    /// The queue a ready list belongs to, from its key (`None` for any other key).
    pub fn queue_name<'k>(&self, ready_key: &'k str) -> Option<&'k str> {
        let name = ready_key
            .strip_prefix(self.prefix.as_str())?
            .strip_prefix(QUEUE_PREFIX)?;
        let name = match self.layout {
            KeyLayout::Standalone => name,
            KeyLayout::Cluster => name
                .strip_prefix('{')
                .and_then(|tagged| tagged.strip_suffix('}'))
                .unwrap_or(name),
        };
        Some(name)
    }

    /// The ready list of the queue a group's key (`<queue>:g:<group>...`) or a key of its
    /// groups' rotation (`<queue>:groups...`) belongs to; `None` for any other key.
    ///
    /// ```
    /// use redjob::queue::keys::Keys;
    /// let keys = Keys::default();
    /// assert_eq!(keys.queue_of_group_key("queues:fair:g:acme:delayed"), Some("queues:fair"));
    /// assert_eq!(keys.queue_of_group_key("queues:fair:groups:due"), Some("queues:fair"));
    /// assert_eq!(keys.queue_of_group_key("queues:fair:delayed"), None);
    /// ```
    pub fn queue_of_group_key<'k>(&self, key: &'k str) -> Option<&'k str> {
        if let Some(at) = key.find(GROUP_INFIX) {
            return Some(&key[..at]);
        }
        [
            ":groups",
            ":groups:rotating",
            ":groups:blocked",
            ":groups:due",
            ":groups:limits",
            ":groups:own",
        ]
        .iter()
        .find_map(|suffix| key.strip_suffix(suffix))
    }

    /// The `SCAN` pattern of every queue's keys.
    pub fn queues_pattern(&self) -> String {
        format!("{}{QUEUE_PREFIX}*", self.prefix)
    }

    /// The failed-job hash.
    pub fn failed_jobs(&self) -> String {
        self.prefixed(self.layout.failed_jobs())
    }

    /// The failed-job index.
    pub fn failed_jobs_index(&self) -> String {
        self.prefixed(self.layout.failed_jobs_index())
    }

    /// The failed jobs whose `failed()` hook has not finished ([`FAILED_HOOKS`]).
    pub fn failed_hooks(&self) -> String {
        self.prefixed(self.layout.failed_hooks())
    }

    /// The sorted set of live workers ([`WORKERS`]).
    pub fn workers(&self) -> String {
        self.prefixed(WORKERS)
    }

    /// The set of paused queue names ([`PAUSED`]).
    pub fn paused(&self) -> String {
        self.prefixed(PAUSED)
    }

    /// The wait thresholds of the queues ([`WAITS`]).
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().waits(), "jobs:waits");
    /// assert_eq!(Keys::new(KeyLayout::Cluster, "app_").waits(), "app_jobs:waits");
    /// ```
    pub fn waits(&self) -> String {
        self.prefixed(WAITS)
    }

    /// The time of the last restart request ([`RESTART`]).
    pub fn restart(&self) -> String {
        self.prefixed(RESTART)
    }

    /// The live outbox relays ([`OUTBOX_RELAYS`]).
    ///
    /// ```
    /// use redjob::queue::keys::Keys;
    /// assert_eq!(Keys::default().outbox_relays(), "jobs:outbox:relays");
    /// ```
    pub fn outbox_relays(&self) -> String {
        self.prefixed(OUTBOX_RELAYS)
    }

    /// An outbox relay's record (JSON, with a TTL).
    ///
    /// ```
    /// use redjob::queue::keys::Keys;
    /// assert_eq!(Keys::default().outbox_relay("4f1c"), "jobs:outbox:relay:4f1c");
    /// ```
    pub fn outbox_relay(&self, id: &str) -> String {
        self.prefixed(&format!("{OPS_PREFIX}outbox:relay:{id}"))
    }

    /// A queue's most recently finished attempts (JSON, newest first, at most
    /// [`RECENT_LIMIT`]).
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// let keys = Keys::new(KeyLayout::Standalone, "");
    /// assert_eq!(keys.recent("emails"), "jobs:recent:emails");
    /// ```
    pub fn recent(&self, queue: &str) -> String {
        self.prefixed(&format!("{OPS_PREFIX}recent:{queue}"))
    }

    /// A worker's heartbeat record (JSON, with a TTL).
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// let keys = Keys::new(KeyLayout::Standalone, "app_");
    /// assert_eq!(keys.worker("4f1c"), "app_jobs:worker:4f1c");
    /// ```
    pub fn worker(&self, id: &str) -> String {
        self.prefixed(&format!("{OPS_PREFIX}worker:{id}"))
    }

    /// One minute's job counters, `minute` being Unix seconds / 60.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// let keys = Keys::new(KeyLayout::Standalone, "");
    /// assert_eq!(keys.metrics_minute(29_395_828), "jobs:metrics:29395828");
    /// ```
    pub fn metrics_minute(&self, minute: i64) -> String {
        self.prefixed(&format!("{METRICS_PREFIX}{minute}"))
    }

    /// A rate limit's sliding window of admissions, for the limit `name` and the key `by`
    /// (empty: one window for every job under the limit). On a cluster every limit shares one
    /// hash tag, so that the limits of one job are checked and counted in one script call.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().limit("stripe", "acct:7"), "jobs:limit:stripe:acct:7");
    /// assert_eq!(Keys::new(KeyLayout::Cluster, "").limit("stripe", ""), "jobs:limit:{limits}:stripe");
    /// ```
    pub fn limit(&self, name: &str, by: &str) -> String {
        let tag = match self.layout {
            KeyLayout::Standalone => "",
            KeyLayout::Cluster => "{limits}:",
        };
        let key = format!("{OPS_PREFIX}limit:{tag}{name}");
        self.prefixed(&if by.is_empty() {
            key
        } else {
            format!("{key}:{by}")
        })
    }

    /// A concurrency limit's slots (`jobs:funnel:<name>`).
    pub fn funnel(&self, name: &str) -> String {
        self.tagged("funnel", name)
    }

    /// A lock against overlapping runs (`jobs:overlap:<scope>`).
    pub fn overlap(&self, scope: &str) -> String {
        self.tagged("overlap", scope)
    }

    /// An exception throttle's error count (`jobs:breaker:<key>`).
    pub fn breaker(&self, key: &str) -> String {
        self.tagged("breaker", key)
    }

    /// The unique lock `lock` (`<job>:<unique id>`) of a job dispatched to `queue`:
    /// `jobs:unique:<job>:<unique id>` on one server. On a cluster it must be in the queue's
    /// slot to be taken in the call that pushes the job, so it hangs under the queue's keys
    /// and a job is unique per queue there.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().unique("mail", "Rebuild:7"), "jobs:unique:Rebuild:7");
    /// assert_eq!(
    ///     Keys::new(KeyLayout::Cluster, "").unique("mail", "Rebuild:7"),
    ///     "queues:{mail}:unique:Rebuild:7"
    /// );
    /// ```
    pub fn unique(&self, queue: &str, lock: &str) -> String {
        match self.layout {
            KeyLayout::Standalone => self.prefixed(&format!("{OPS_PREFIX}unique:{lock}")),
            KeyLayout::Cluster => format!("{}:unique:{lock}", self.queue(queue).ready),
        }
    }

    /// The debounce state of the job `job` with debounce id `id`, dispatched to `queue`
    /// (`jobs:debounce:<job>:<id>`; on a cluster under the queue's keys, as [`Keys::unique`]).
    pub fn debounce(&self, queue: &str, lock: &str) -> String {
        match self.layout {
            KeyLayout::Standalone => self.prefixed(&format!("{OPS_PREFIX}debounce:{lock}")),
            KeyLayout::Cluster => format!("{}:debounce:{lock}", self.queue(queue).ready),
        }
    }

    /// The `SCAN` pattern of every unique lock (on a cluster, of every queue's).
    pub fn unique_pattern(&self) -> String {
        match self.layout {
            KeyLayout::Standalone => self.prefixed(&format!("{OPS_PREFIX}unique:*")),
            KeyLayout::Cluster => format!("{}{QUEUE_PREFIX}*:unique:*", self.prefix),
        }
    }

    /// The links of the chain `id` still to run (`jobs:chain:<id>`, a LIST of
    /// [links](crate::workflow)); on a cluster the id is the hash tag.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().chain("7f3e"), "jobs:chain:7f3e");
    /// assert_eq!(Keys::new(KeyLayout::Cluster, "").chain_catch("7f3e"), "jobs:chain:{7f3e}:catch");
    /// ```
    pub fn chain(&self, id: &str) -> String {
        self.tagged("chain", id)
    }

    /// The catch job of the chain `id` (`jobs:chain:<id>:catch`, a STRING holding a link),
    /// in the chain's slot.
    pub fn chain_catch(&self, id: &str) -> String {
        format!("{}:catch", self.chain(id))
    }

    /// The state of the schedule `name`, whose jobs go to `queue` (`jobs:schedule:<name>`, a
    /// HASH; on a cluster under the queue's keys, to be claimed in the call that pushes the
    /// tick's job).
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().schedule("mail", "digest"), "jobs:schedule:digest");
    /// assert_eq!(Keys::new(KeyLayout::Cluster, "").schedule("mail", "digest"), "queues:{mail}:schedule:digest");
    /// ```
    pub fn schedule(&self, queue: &str, name: &str) -> String {
        match self.layout {
            KeyLayout::Standalone => self.prefixed(&format!("{OPS_PREFIX}schedule:{name}")),
            KeyLayout::Cluster => format!("{}:schedule:{name}", self.queue(queue).ready),
        }
    }

    /// Every schedule a worker keeps, scored by when one last said so (Unix ms, Redis's clock):
    /// a schedule no worker has kept for a while is stale (`jobs:schedules`, a ZSET).
    pub fn schedules(&self) -> String {
        self.prefixed(&format!("{OPS_PREFIX}schedules"))
    }

    /// The queue of each schedule's job, by schedule name (`jobs:schedules:queues`, a HASH):
    /// on a cluster a schedule's state is under its queue's keys, found through this.
    pub fn schedule_queues(&self) -> String {
        self.prefixed(&format!("{OPS_PREFIX}schedules:queues"))
    }

    /// Names of schedules an operator asked to fire now (`jobs:schedules:run`, a LIST), taken
    /// by a worker that keeps them.
    pub fn schedule_runs(&self) -> String {
        self.prefixed(&format!("{OPS_PREFIX}schedules:run"))
    }

    /// The guard that a job built ahead of time (a chain's link, a batch's callback), whose
    /// uuid is `uuid`, was pushed onto `queue` (`queues:<name>:pushed:<uuid>`), in the queue's
    /// slot; used on a cluster, where the step that owes the push is in another slot.
    pub fn pushed(&self, queue: &str, uuid: &str) -> String {
        format!("{}:pushed:{uuid}", self.queue(queue).ready)
    }

    /// The guard of the retries of the failed job `uuid` onto `queue`
    /// (`queues:<name>:retried:<uuid>`), in the queue's slot; used on a cluster, where the
    /// failed-job store is in another slot and the record is removed in a second step. It holds
    /// when the failure last pushed back was recorded (the record's score in the failed-job
    /// index), which tells one failure of the job from the next.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(
    ///     Keys::new(KeyLayout::Cluster, "").retried("mail", "9a1c"),
    ///     "queues:{mail}:retried:9a1c"
    /// );
    /// ```
    pub fn retried(&self, queue: &str, uuid: &str) -> String {
        format!("{}:retried:{uuid}", self.queue(queue).ready)
    }

    /// The links the settled links of the chain `id` owe, by link uuid, on a cluster
    /// (`jobs:chain:<id>:owed`).
    pub fn chain_owed(&self, id: &str) -> String {
        format!("{}:owed", self.chain(id))
    }

    /// The jobs the settled jobs of the batch `id` owe, by job uuid, on a cluster
    /// (`jobs:batch:<id>:owed`).
    pub fn batch_owed(&self, id: &str) -> String {
        format!("{}:owed", self.batch(id))
    }

    /// The record of the batch `id` (`jobs:batch:<id>`, a HASH: its name, counters, options
    /// and the times it was created, cancelled and finished); on a cluster the id is the hash
    /// tag, which the batch's other keys share.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().batch("9a1c"), "jobs:batch:9a1c");
    /// assert_eq!(Keys::new(KeyLayout::Cluster, "").batch_pending("9a1c"), "jobs:batch:{9a1c}:pending");
    /// ```
    pub fn batch(&self, id: &str) -> String {
        self.tagged("batch", id)
    }

    /// The uuids of a batch's jobs that have not settled (`jobs:batch:<id>:pending`, a SET).
    pub fn batch_pending(&self, id: &str) -> String {
        format!("{}:pending", self.batch(id))
    }

    /// The uuids of a batch's jobs that failed, scored by when (`jobs:batch:<id>:failed`, a
    /// ZSET).
    pub fn batch_failed(&self, id: &str) -> String {
        format!("{}:failed", self.batch(id))
    }

    /// A batch's callback jobs (`jobs:batch:<id>:callbacks`, a HASH: `then`, `catch`,
    /// `finally` to a link).
    pub fn batch_callbacks(&self, id: &str) -> String {
        format!("{}:callbacks", self.batch(id))
    }

    /// The jobs of a batch that is a link of a chain, parked until the chain reaches it
    /// (`jobs:batch:<id>:parked`, a LIST of links).
    pub fn batch_parked(&self, id: &str) -> String {
        format!("{}:parked", self.batch(id))
    }

    /// The results of a batch's tracked jobs (`jobs:batch:<id>:results`, a HASH: uuid ->
    /// result JSON), for its callbacks to read.
    pub fn batch_results(&self, id: &str) -> String {
        format!("{}:results", self.batch(id))
    }

    /// Every key of the batch `id`: its record, pending and failed sets, callbacks, parked
    /// jobs, the steps recorded on a cluster, and its jobs' results.
    pub fn batch_family(&self, id: &str) -> [String; 7] {
        [
            self.batch(id),
            self.batch_pending(id),
            self.batch_failed(id),
            self.batch_callbacks(id),
            self.batch_parked(id),
            self.batch_owed(id),
            self.batch_results(id),
        ]
    }

    /// Every batch's id, scored by when it was created (`jobs:batches`, a ZSET), for listing
    /// and pruning.
    pub fn batches(&self) -> String {
        self.prefixed(&format!("{OPS_PREFIX}batches"))
    }

    /// The batches not known to have finished (`jobs:batches:running`, a ZSET: id -> created at,
    /// Unix ms), so that the pending-batch gauges read those alone rather than every batch kept.
    /// Added with the batch; a member found finished or gone is dropped by the reader.
    ///
    /// ```
    /// use redjob::queue::keys::Keys;
    /// assert_eq!(Keys::default().running_batches(), "jobs:batches:running");
    /// ```
    pub fn running_batches(&self) -> String {
        self.prefixed(&format!("{OPS_PREFIX}batches:running"))
    }

    /// When [`Keys::running_batches`] was first filled from [`Keys::batches`]
    /// (`jobs:batches:running:indexed`, a STRING of Unix ms): the batches an earlier version
    /// created, which it did not index as running, are added once.
    pub fn running_batches_indexed(&self) -> String {
        self.prefixed(&format!("{OPS_PREFIX}batches:running:indexed"))
    }

    /// A job's status (`jobs:status:<uuid>`, a HASH: its state, attempt, progress, worker,
    /// result or error), kept while it is open and for a while after it settles; on a
    /// cluster the uuid is the hash tag.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().status("9a1c"), "jobs:status:9a1c");
    /// assert_eq!(Keys::new(KeyLayout::Cluster, "").status("9a1c"), "jobs:status:{9a1c}");
    /// ```
    pub fn status(&self, uuid: &str) -> String {
        self.tagged("status", uuid)
    }

    /// The pending cancel requests ([`CANCEL_REQUESTS`]).
    pub fn cancel_requests(&self) -> String {
        self.prefixed(CANCEL_REQUESTS)
    }

    /// The stream of cancel requests workers follow ([`CANCEL_SIGNALS`]).
    pub fn cancel_signals(&self) -> String {
        self.prefixed(CANCEL_SIGNALS)
    }

    /// The stream of tracked jobs settling for good ([`SETTLED_SIGNALS`]).
    pub fn settled_signals(&self) -> String {
        self.prefixed(SETTLED_SIGNALS)
    }

    /// The queues whose events are on, with their streams' lengths ([`EVENTS_ON`]).
    pub fn events_on(&self) -> String {
        self.prefixed(EVENTS_ON)
    }

    /// The events stream of the queue `name` (`queues:<name>:events`, a STREAM: `event`,
    /// `uuid`, `job`, `attempt`, `data`), in the queue's slot on a cluster.
    ///
    /// ```
    /// use redjob::queue::keys::{KeyLayout, Keys};
    /// assert_eq!(Keys::default().events("emails"), "queues:emails:events");
    /// assert_eq!(Keys::new(KeyLayout::Cluster, "").events("emails"), "queues:{emails}:events");
    /// ```
    pub fn events(&self, name: &str) -> String {
        format!("{}:events", self.queue(name).ready)
    }

    /// `jobs:<family>:<name>`, with `name` as the hash tag on a cluster.
    fn tagged(&self, family: &str, name: &str) -> String {
        match self.layout {
            KeyLayout::Standalone => self.prefixed(&format!("{OPS_PREFIX}{family}:{name}")),
            KeyLayout::Cluster => self.prefixed(&format!("{OPS_PREFIX}{family}:{{{name}}}")),
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
