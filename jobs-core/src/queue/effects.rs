//! The effects a settling script applies in the call that removes a job's reservation
//! (`scripts/lib/effects.lua`): each is a name and its arguments, its keys following the
//! script's own.

use redis::ScriptInvocation;

use crate::queue::hold::Hold;
use crate::queue::keys::QueueKeys;
use crate::workflow::batch::BatchStep;
use crate::workflow::chain::target;
use crate::workflow::{BatchProgress, Link};
use uuid::Uuid;

/// The effects of one settling call, in the order the script applies them.
#[derive(Debug, Default)]
pub(crate) struct Effects {
    keys: Vec<String>,
    args: Vec<String>,
}

/// A link as stored, decoded, and the keys of the queue it goes to.
pub(crate) type StoredLink = (String, Link, QueueKeys);

/// The step a finished link makes its chain take (`chain_done` in `lib/chain.lua`).
#[derive(Debug)]
pub(crate) struct ChainDone {
    /// The chain's list key.
    pub(crate) list: String,
    /// The chain's catch key.
    pub(crate) catch: String,
    /// The head of the list as read, to pop; `None` when nothing is popped.
    pub(crate) head: Option<String>,
    /// The link pushed now; `None` when the chain is over.
    pub(crate) next: Option<StoredLink>,
    /// Links put in front of the list, in order.
    pub(crate) front: Vec<String>,
    /// Links appended to the list, in order.
    pub(crate) back: Vec<String>,
    /// The batch the popped head is, which starts in the same call.
    pub(crate) starts: Option<Uuid>,
}

impl Effects {
    /// Frees what the job held.
    pub(crate) fn holds(&mut self, holds: &[Hold]) {
        if holds.is_empty() {
            return;
        }
        self.args.push("holds".into());
        self.args.push(holds.len().to_string());
        for hold in holds {
            self.keys.push(hold.key.clone());
            self.args.push(hold.owner.clone());
        }
    }

    /// Pushes a chain's next link and keeps the rest.
    pub(crate) fn chain_done(&mut self, step: ChainDone) {
        let (next, due, target, notify) = match &step.next {
            Some((stored, link, keys)) => (
                stored.clone(),
                link.due.clone(),
                target(link, keys),
                keys.notify.clone(),
            ),
            // No push: the keys only fill their places.
            None => (
                String::new(),
                String::new(),
                step.list.clone(),
                step.list.clone(),
            ),
        };
        self.keys.extend([step.list, step.catch, target, notify]);
        self.args.extend([
            "chain".into(),
            step.head.unwrap_or_default(),
            next,
            due,
            step.front.len().to_string(),
        ]);
        self.args.extend(step.front);
        self.args.push(step.back.len().to_string());
        self.args.extend(step.back);
    }

    /// Pushes a chain's catch job, once, and keeps the links after the failed one for `keep`.
    pub(crate) fn chain_failed(
        &mut self,
        list: String,
        catch: String,
        link: Option<StoredLink>,
        keep: std::time::Duration,
    ) {
        let (stored, due, target, notify) = match &link {
            Some((stored, link, keys)) => (
                stored.clone(),
                link.due.clone(),
                target(link, keys),
                keys.notify.clone(),
            ),
            None => (String::new(), String::new(), list.clone(), list.clone()),
        };
        self.keys.extend([list, catch, target, notify]);
        self.args.extend([
            "chain".into(),
            stored,
            due,
            keep.as_secs().max(1).to_string(),
        ]);
    }

    /// Counts a job done in its batch, pushing the jobs its handler added to the batch and
    /// counting the links it added to its chain (`joined`).
    pub(crate) fn batch_done(
        &mut self,
        step: BatchStep,
        progress: &BatchProgress,
        added: Vec<StoredLink>,
        joined: &[Uuid],
    ) {
        self.batch(&step, progress.job);
        self.args.push(added.len().to_string());
        for (stored, link, keys) in added {
            self.keys.push(target(&link, &keys));
            self.keys.push(keys.notify);
            self.args.extend([link.uuid.to_string(), link.due, stored]);
        }
        self.args.push(joined.len().to_string());
        self.args.extend(joined.iter().map(Uuid::to_string));
    }

    /// Counts a job failed in its batch; the links of its chain after it (`leaving`) leave the
    /// batch.
    pub(crate) fn batch_failed(
        &mut self,
        step: BatchStep,
        progress: &BatchProgress,
        leaving: &[Uuid],
    ) {
        self.batch(&step, progress.job);
        self.args.push(leaving.len().to_string());
        self.args.extend(leaving.iter().map(Uuid::to_string));
    }

    /// Starts a batch its chain reached: pushes its parked jobs (`links`, in the order of the
    /// `parked` list) and closes the dispatch that parked them.
    pub(crate) fn batch_start(&mut self, step: BatchStep, parked: String, links: Vec<StoredLink>) {
        self.keys.extend(step.keys().map(str::to_owned));
        self.keys.push(parked);
        self.args.push("batch_start".into());
        self.args.extend(step.args());
        self.args.push(links.len().to_string());
        for (_, link, keys) in links {
            self.keys.push(target(&link, &keys));
            self.keys.push(keys.notify);
            self.args.push(link.due);
        }
    }

    fn batch(&mut self, step: &BatchStep, job: Uuid) {
        self.keys.extend(step.keys().map(str::to_owned));
        self.args.push("batch".into());
        self.args.extend(step.args());
        self.args.push(job.to_string());
    }

    /// Adds the effects' keys and arguments to a settling script's call, after its own.
    pub(crate) fn add_to(&self, call: &mut ScriptInvocation<'_>) {
        for key in &self.keys {
            call.key(key);
        }
        for arg in &self.args {
            call.arg(arg);
        }
    }
}
