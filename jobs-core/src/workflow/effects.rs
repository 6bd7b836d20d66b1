//! The workflow's effects, as a settling script applies them in the call that removes a job's
//! reservation (`lib/chain.lua`, `lib/batch.lua`): each writes its keys and arguments in the
//! order its Lua function reads them.

use std::time::Duration;
use uuid::Uuid;

use crate::queue::effects::Effects;
use crate::queue::keys::QueueKeys;
use crate::workflow::advance::ChainDone;
use crate::workflow::count::BatchStep;
use crate::workflow::link::{Link, StoredLink};

/// The key a stored link is pushed to, its queue's notify, and its stored form and due time;
/// a missing link fills the key places with `placeholder` and pushes nothing.
fn push_places(link: &Option<StoredLink>, placeholder: &str) -> ([String; 2], [String; 2]) {
    match link {
        Some((stored, link, keys)) => (
            [link.destination(keys), keys.notify.clone()],
            [stored.clone(), link.due.clone()],
        ),
        None => (
            [placeholder.to_owned(), placeholder.to_owned()],
            [String::new(), String::new()],
        ),
    }
}

/// Pushes a chain's next link and keeps the rest (`chain_done`).
pub(crate) fn chain_done(effects: &mut Effects, step: ChainDone) {
    let ([destination, notify], [next, due]) = push_places(&step.next, &step.list);
    let mut args = vec![step.head.unwrap_or_default(), next, due];
    args.push(step.front.len().to_string());
    args.extend(step.front);
    args.push(step.back.len().to_string());
    args.extend(step.back);
    effects.add("chain", [step.list, step.catch, destination, notify], args);
}

/// Pushes a chain's catch job, once, and keeps the links after the failed one for `keep`
/// (`chain_failed`).
pub(crate) fn chain_failed(
    effects: &mut Effects,
    list: String,
    catch: String,
    link: Option<StoredLink>,
    keep: Duration,
) {
    let ([destination, notify], [stored, due]) = push_places(&link, &list);
    let args = [stored, due, keep.as_secs().max(1).to_string()];
    effects.add("chain", [list, catch, destination, notify], args);
}

/// Counts the job `job` done in its batch, pushing the jobs its handler added to the batch and
/// counting the links it added to its chain (`joined`) (`batch_done`).
pub(crate) fn batch_done(
    effects: &mut Effects,
    step: &BatchStep,
    job: Uuid,
    added: Vec<StoredLink>,
    joined: &[Uuid],
) {
    let (mut keys, mut args) = batch_places(step, job);
    args.push(added.len().to_string());
    for (stored, link, queue_keys) in added {
        keys.push(link.destination(&queue_keys));
        keys.push(queue_keys.notify);
        args.extend([link.uuid.to_string(), link.due, stored]);
    }
    args.push(joined.len().to_string());
    args.extend(joined.iter().map(Uuid::to_string));
    effects.add("batch", keys, args);
}

/// Counts the job `job` failed in its batch; the links of its chain after it (`leaving`) leave
/// the batch (`batch_failed`).
pub(crate) fn batch_failed(effects: &mut Effects, step: &BatchStep, job: Uuid, leaving: &[Uuid]) {
    let (keys, mut args) = batch_places(step, job);
    args.push(leaving.len().to_string());
    args.extend(leaving.iter().map(Uuid::to_string));
    effects.add("batch", keys, args);
}

/// Starts a batch its chain reached: pushes its parked jobs (`links`, in the order of the
/// `parked` list, each with the keys of its queue) and closes the dispatch that parked them
/// (`batch_start`).
pub(crate) fn batch_start(
    effects: &mut Effects,
    step: &BatchStep,
    parked: String,
    links: Vec<(Link, QueueKeys)>,
) {
    let mut keys: Vec<String> = step.keys().map(str::to_owned).collect();
    keys.push(parked);
    let mut args: Vec<String> = step.args().collect();
    args.push(links.len().to_string());
    for (link, queue_keys) in links {
        keys.push(link.destination(&queue_keys));
        keys.push(queue_keys.notify);
        args.push(link.due);
    }
    effects.add("batch_start", keys, args);
}

/// The keys and first arguments of a job's count in its batch (`batch_from`, then the job).
fn batch_places(step: &BatchStep, job: Uuid) -> (Vec<String>, Vec<String>) {
    let keys = step.keys().map(str::to_owned).collect();
    let mut args: Vec<String> = step.args().collect();
    args.push(job.to_string());
    (keys, args)
}
