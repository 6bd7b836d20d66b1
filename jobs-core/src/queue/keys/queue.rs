//! A queue's own keys, Laravel's (`queues:<name>`, `:delayed`, `:reserved`, `:notify`), its
//! groups', and the guard of a push made once.

use super::{has_hash_tag, KeyLayout, Keys};

/// Prefix of every queue key, as in Laravel.
const QUEUE_PREFIX: &str = "queues:";

/// The ready list of the queue `name` on one Redis server, without a prefix: Laravel's
/// `queues:<name>`, the name its package gives the queue in traces too.
pub(crate) fn ready_list(name: &str) -> String {
    format!("{QUEUE_PREFIX}{name}")
}

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
        Self::with_base(name, ready_list(name))
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
    /// them. `group` must pass [`check_group_name`](super::check_group_name).
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

impl KeyLayout {
    /// The keys of the queue called `name` in this layout.
    pub fn queue(self, name: &str) -> QueueKeys {
        match self {
            KeyLayout::Standalone => QueueKeys::new(name),
            KeyLayout::Cluster if has_hash_tag(name) => QueueKeys::new(name),
            KeyLayout::Cluster => QueueKeys::with_base(name, format!("{QUEUE_PREFIX}{{{name}}}")),
        }
    }
}

impl Keys {
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

    /// The guard that a job built ahead of time (a chain's link, a batch's callback), whose
    /// uuid is `uuid`, was pushed onto `queue` (`queues:<name>:pushed:<uuid>`), in the queue's
    /// slot; used on a cluster, where the step that owes the push is in another slot.
    pub fn pushed(&self, queue: &str, uuid: &str) -> String {
        format!("{}:pushed:{uuid}", self.queue(queue).ready)
    }
}
