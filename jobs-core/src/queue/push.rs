//! Where a job is pushed: [`Envelope`]s sealed (signed, checked) and sent in one round trip,
//! ready ones onto their lists, delayed ones into their delayed sets, unique and debounced ones
//! each with its lock or window.

use redis::ScriptInvocation;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::payload::delay::Delay;
use crate::payload::signing::SigningKey;
use crate::payload::unique::{Dispatched, Duplicate, UniqueLock};
use crate::payload::Payload;
use crate::queue::due::{due_arg, seconds_arg};
use crate::queue::durability::Durability;
use crate::queue::handle::RedisQueue;
use crate::queue::keys::{check_queue_name, KeyLayout};
use crate::queue::queued::Queued;
use crate::queue::scripts;

/// Jobs of one queue pushed per script call.
const PUSH_CHUNK: usize = 1000;

/// A job ready to be pushed: its queue, its payload, and its delay if any.
#[derive(Debug, Clone)]
pub struct Envelope {
    /// The job's uuid.
    pub uuid: uuid::Uuid,
    /// The job's registered name.
    pub job: std::borrow::Cow<'static, str>,
    /// The queue's name.
    pub queue: String,
    /// The payload JSON.
    pub payload: String,
    /// When set, the job goes to the delayed set: after a delay from the moment Redis runs
    /// the push, or at a point in time.
    pub delay: Option<Delay>,
    /// For a unique job, the lock its push takes.
    pub unique: Option<UniqueDispatch>,
    /// For a debounced job, its debounce window.
    pub debounce: Option<DebounceDispatch>,
    /// For a tracked job, the seconds its outcome is kept after it settles: its push starts
    /// its status record (see [`crate::status`]).
    pub track: Option<u64>,
    /// The group of the queue the job waits in, when it has one (see
    /// [`QueueKeys::for_group`](crate::queue::keys::QueueKeys::for_group)).
    pub group: Option<String>,
}

/// How long a tracked job's status record is kept while the job has not settled for good,
/// from its last change: a day. Its push starts the record with it ([`StatusStart`]), and each
/// change to the record while the job is open keeps it that long again.
pub(crate) const OPEN_STATUS_TTL: Duration = Duration::from_secs(24 * 3600);

/// A tracked job's status record as its push starts it ([`RedisQueue::status_start`]): its
/// key, and the arguments `track.lua` takes, which the scripts that push and start a record
/// in one step take too.
#[derive(Debug, Clone)]
pub(crate) struct StatusStart {
    /// `jobs:status:<uuid>`.
    pub(crate) record: String,
    state: &'static str,
    queue: String,
    job: String,
    keep_ms: u64,
}

impl StatusStart {
    /// Adds the record's state, queue, job and lifetime to `call`, in `track.lua`'s order.
    pub(crate) fn add_args(&self, call: &mut ScriptInvocation<'static>) {
        call.arg(self.state)
            .arg(&self.queue)
            .arg(&self.job)
            .arg(self.keep_ms);
    }
}

/// The debounce window of a debounced job's push (see [`crate::Job::debounce_id`]).
#[derive(Debug, Clone)]
pub struct DebounceDispatch {
    /// `<job>:<debounce id>`: the debounce state's key without its prefix.
    pub key: String,
    /// How long the job waits after the last dispatch.
    pub wait: Duration,
    /// How long it waits at most after the first dispatch of its window.
    pub max_wait: Duration,
}

/// The unique lock a unique job's push takes (see [`crate::payload::unique`]).
#[derive(Debug, Clone)]
pub struct UniqueDispatch {
    /// The lock as the payload carries it.
    pub lock: UniqueLock,
    /// The job's unique id.
    pub unique_id: String,
    /// How long the lock lasts at most.
    pub lasts: Duration,
}

/// The script calls of one pipeline, and which of them push unique jobs (call index,
/// envelope index).
struct Pipeline<'a> {
    name: &'a str,
    calls: Vec<ScriptInvocation<'static>>,
    unique_at: Vec<(usize, usize)>,
}

/// Every pipeline of one push, and the scripts their calls use.
#[derive(Default)]
struct Plan<'a> {
    pipelines: Vec<Pipeline<'a>>,
    scripts: Vec<&'static redis::Script>,
    /// On a cluster, the calls that start tracked jobs' status records, each in a slot of its
    /// own: sent after the pipelines (on one server they are in the pipeline).
    records: Vec<ScriptInvocation<'static>>,
}

impl Plan<'_> {
    /// Notes that a call of the plan uses `script`, to load it ahead of the calls.
    fn uses(&mut self, script: &'static redis::Script) {
        if !self.scripts.iter().any(|used| std::ptr::eq(*used, script)) {
            self.scripts.push(script);
        }
    }
}

impl RedisQueue {
    /// Pushes jobs in one round trip: ready ones onto their lists with a wake-up token each,
    /// delayed ones into their delayed sets, and unique ones each with its lock, unless another
    /// job holds it. Order within a queue is kept. Returns what became of each, in order.
    ///
    /// With a [`QueueConfig::signing_key`](crate::QueueConfig::signing_key), each payload is
    /// signed first ([`Error::Unsignable`] when one is not a job payload). Nothing is pushed
    /// when any payload is larger than
    /// [`QueueConfig::max_payload_bytes`](crate::QueueConfig::max_payload_bytes)
    /// ([`Error::PayloadTooLarge`]).
    ///
    /// With the handle's [`QueueConfig::durability`](crate::QueueConfig::durability), the push
    /// is acknowledged once that many replicas have it ([`Error::NotDurable`] when fewer
    /// confirm in time: the jobs were pushed, and may or may not survive a failover).
    pub async fn push_all(&self, envelopes: &[Envelope]) -> Result<Vec<Dispatched>> {
        self.push_durably(envelopes, self.config.durability).await
    }

    /// [`push_all`](Self::push_all) with `durability` instead of the handle's default: one
    /// `WAIT` covers the whole push.
    pub async fn push_durably(
        &self,
        envelopes: &[Envelope],
        durability: Durability,
    ) -> Result<Vec<Dispatched>> {
        let sealed = self.seal(envelopes)?;
        let envelopes = sealed.as_deref().unwrap_or(envelopes);
        if let Some(recorded) = self.push_offline(envelopes).await {
            return Ok(recorded);
        }
        self.events_switch().await?;
        let plan = &self.plan(envelopes);
        let (outcomes, confirmation) = self
            .durably(durability, |lane| async move {
                let outcomes = lane.send(plan, envelopes).await?;
                for record in &plan.records {
                    lane.invoke::<u64>(record).await?;
                }
                Ok(outcomes)
            })
            .await?;
        if !self.on_queued.is_empty() {
            self.report_queued(envelopes, &outcomes);
        }
        if let Err(mut not_durable) = confirmation {
            not_durable.jobs = outcomes
                .iter()
                .filter(|outcome| !outcome.is_duplicate())
                .map(Dispatched::uuid)
                .collect();
            return Err(Error::NotDurable(not_durable));
        }
        Ok(outcomes)
    }

    /// The script calls that push `envelopes`, in pipelines: on a cluster each queue's calls
    /// go in a pipeline of their own, to the node that owns the queue's slot; on one server
    /// every call goes in one pipeline. A unique job's call is its own, and its reply says
    /// whether it was pushed.
    fn plan<'e>(&self, envelopes: &'e [Envelope]) -> Plan<'e> {
        let mut plan = Plan::default();
        let mut offset = 0;
        for run in runs(envelopes) {
            let name = match self.layout() {
                KeyLayout::Standalone => "",
                KeyLayout::Cluster => run[0].queue.as_str(),
            };
            let at = match plan.pipelines.iter().position(|p| p.name == name) {
                Some(at) => at,
                None => {
                    plan.pipelines.push(Pipeline {
                        name,
                        calls: Vec::new(),
                        unique_at: Vec::new(),
                    });
                    plan.pipelines.len() - 1
                }
            };
            let script = script_for(&run[0]);
            plan.uses(script);
            // A queue's `queued` events go before its jobs, so that no `active` event of a
            // worker comes first; a unique job's after its push, which may be refused.
            let events = self.queued_events(run);
            if !events.is_empty() {
                plan.uses(&scripts::EVENT);
            }
            let touch = run[0].group.as_deref().filter(|_| touches_group(&run[0]));
            if touch.is_some() {
                plan.uses(&scripts::GROUP_TOUCH);
            }
            let pipeline = &mut plan.pipelines[at];
            let unique = run[0].unique.is_some();
            let (before, after) = match unique {
                true => (Vec::new(), events),
                false => (events, Vec::new()),
            };
            pipeline.calls.extend(before);
            if unique {
                pipeline.unique_at.push((pipeline.calls.len(), offset));
            }
            pipeline.calls.extend(self.calls_for(script, run));
            if let Some(name) = touch {
                // The group's job is in its list (or delayed set): it joins the rotation.
                pipeline
                    .calls
                    .push(self.group_touch(&run[0].queue, &[name]));
            }
            pipeline.calls.extend(after);
            let tracked = run.iter().filter(|envelope| envelope.track.is_some());
            let records: Vec<_> = tracked.map(|envelope| self.track_call(envelope)).collect();
            if !records.is_empty() {
                plan.uses(&scripts::TRACK);
            }
            match self.layout() {
                KeyLayout::Standalone => plan.pipelines[at].calls.extend(records),
                KeyLayout::Cluster => plan.records.extend(records),
            }
            offset += run.len();
        }
        plan
    }

    /// The calls that push one run of envelopes with `script`.
    fn calls_for(
        &self,
        script: &'static redis::Script,
        run: &[Envelope],
    ) -> Vec<ScriptInvocation<'static>> {
        let first = &run[0];
        let keys = self.envelope_keys(first);
        if let Some(debounce) = &first.debounce {
            let mut call = script.key(self.keys().debounce(&first.queue, &debounce.key));
            call.key(&keys.delayed)
                .key(&keys.notify)
                .arg(&first.payload)
                .arg(seconds_arg(debounce.wait))
                .arg(seconds_arg(debounce.max_wait));
            return vec![call];
        }
        if let Some(unique) = &first.unique {
            let push = UniquePush {
                queue: &first.queue,
                group: first.group.as_deref(),
                lock: &unique.lock.key,
                uuid: &first.uuid.to_string(),
                lasts_ms: unique.lasts.as_millis() as i64,
                payload: &first.payload,
                due: &first.delay.map_or(String::new(), |d| due_arg(Some(d))),
            };
            let mut call = self.unique_push_call(script, push);
            if let Some(group) = &first.group {
                call.arg(group);
            }
            return vec![call];
        }
        run.chunks(PUSH_CHUNK)
            .map(|chunk| {
                let mut call = match &first.group {
                    Some(_) => self.group_push(&keys, first.delay.is_some()),
                    None => {
                        let mut call =
                            script.key(first.delay.map_or(&keys.ready, |_| &keys.delayed));
                        call.key(&keys.notify);
                        call
                    }
                };
                for envelope in chunk {
                    if envelope.delay.is_some() {
                        call.arg(due_arg(envelope.delay));
                    }
                    call.arg(&envelope.payload);
                }
                call
            })
            .collect()
    }

    /// The keys `envelope` is pushed into: its group's, when it has one, else its queue's.
    fn envelope_keys(&self, envelope: &Envelope) -> crate::queue::keys::QueueKeys {
        self.queue_keys(&envelope.queue)
            .in_group(envelope.group.as_deref())
    }

    /// The calls that append the `queued` events of a run of envelopes of one queue, a call
    /// per [`PUSH_CHUNK`], when that queue's events are on; none otherwise.
    fn queued_events(&self, run: &[Envelope]) -> Vec<ScriptInvocation<'static>> {
        let queue = &run[0].queue;
        let Some(maxlen) = self.events_maxlen(queue) else {
            return Vec::new();
        };
        run.chunks(PUSH_CHUNK)
            .map(|chunk| {
                let mut call = scripts::EVENT.key(self.keys().events(queue));
                call.arg(maxlen).arg("queued");
                for envelope in chunk {
                    call.arg(envelope.uuid.to_string())
                        .arg(envelope.job.as_ref())
                        .arg(0);
                }
                call
            })
            .collect()
    }

    /// The call that starts a tracked job's status record as it is pushed, unless a worker
    /// made it first (`track.lua`). It follows the push in the same pipeline.
    fn track_call(&self, envelope: &Envelope) -> ScriptInvocation<'static> {
        let start = self.status_start(
            &envelope.uuid,
            &envelope.queue,
            &envelope.job,
            envelope.delay,
        );
        let mut call = scripts::TRACK.key(&start.record);
        start.add_args(&mut call);
        call
    }

    /// The status record a tracked job starts with as it is pushed: `queued`, or `delayed`
    /// when it is due later. The record lasts until the job is due, and a day more: a job that
    /// has not run by then is lost.
    pub(crate) fn status_start(
        &self,
        uuid: &uuid::Uuid,
        queue: &str,
        job: &str,
        delay: Option<Delay>,
    ) -> StatusStart {
        let (state, delay) = match delay {
            Some(delay) => ("delayed", delay.duration_from_now()),
            None => ("queued", Duration::ZERO),
        };
        let keep = delay + OPEN_STATUS_TTL;
        StatusStart {
            record: self.keys().status(&uuid.to_string()),
            state,
            queue: queue.to_owned(),
            job: job.to_owned(),
            keep_ms: keep.as_millis() as u64,
        }
    }

    /// The call of `script` that pushes a unique job and takes its lock in one step, with
    /// `push_unique.lua`'s keys and arguments (KEYS 1-3, ARGV 1-4); a script that takes more
    /// has its own added after them.
    pub(crate) fn unique_push_call(
        &self,
        script: &'static redis::Script,
        push: UniquePush<'_>,
    ) -> ScriptInvocation<'static> {
        let keys = self.queue_keys(push.queue).in_group(push.group);
        let mut call = script.key(self.keys().unique(push.queue, push.lock));
        call.key(match push.due.is_empty() {
            true => &keys.ready,
            false => &keys.delayed,
        })
        .key(&keys.notify)
        .arg(push.uuid)
        .arg(push.lasts_ms)
        .arg(push.payload)
        .arg(push.due);
        call
    }

    /// Sends the planned pipelines; returns what became of each envelope.
    async fn send(&self, plan: &Plan<'_>, envelopes: &[Envelope]) -> Result<Vec<Dispatched>> {
        let mut outcomes: Vec<Dispatched> = envelopes
            .iter()
            .map(|e| Dispatched::Queued(e.uuid))
            .collect();
        for pipeline in &plan.pipelines {
            let replies = self
                .invoke_all::<redis::Value>(&plan.scripts, &pipeline.calls)
                .await?;
            for &(call, at) in &pipeline.unique_at {
                // The holder's uuid; a lock someone else set by hand reads as the nil uuid.
                let holder = match &replies[call] {
                    redis::Value::BulkString(bytes) if !bytes.is_empty() => {
                        Some(String::from_utf8_lossy(bytes).parse().unwrap_or_default())
                    }
                    _ => None,
                };
                if let (Some(holder), Some(unique)) = (holder, &envelopes[at].unique) {
                    outcomes[at] = Dispatched::Duplicate(Duplicate {
                        job: envelopes[at].job.to_string(),
                        unique_id: unique.unique_id.clone(),
                        holder,
                    });
                }
            }
        }
        Ok(outcomes)
    }

    /// Tells the `on_queued` listeners of the jobs pushed.
    fn report_queued(&self, envelopes: &[Envelope], outcomes: &[Dispatched]) {
        for (envelope, outcome) in envelopes.iter().zip(outcomes) {
            if outcome.is_duplicate() {
                continue;
            }
            let queued = Queued {
                uuid: envelope.uuid,
                job: &envelope.job,
                queue: &envelope.queue,
                delay: envelope.delay,
                payload: &envelope.payload,
            };
            for listener in self.on_queued.iter() {
                let call = std::panic::AssertUnwindSafe(|| listener(&queued));
                if std::panic::catch_unwind(call).is_err() {
                    tracing::warn!(uuid = %envelope.uuid, "an on_queued listener panicked");
                }
            }
        }
    }

    /// Envelopes ready to push: signed with the handle's signing key (`None`: there is none,
    /// and the envelopes are pushed as they are), each checked for its queue's name and its
    /// size.
    pub(crate) fn seal(&self, envelopes: &[Envelope]) -> Result<Option<Vec<Envelope>>> {
        let signed = match &self.config.signing_key {
            Some(key) => Some(sign_all(key, envelopes)?),
            None => None,
        };
        for envelope in signed.as_deref().unwrap_or(envelopes) {
            check_queue_name(&envelope.queue)?;
            if envelope.payload.len() > self.config.max_payload_bytes {
                return Err(Error::PayloadTooLarge {
                    job: envelope.job.to_string(),
                    size: envelope.payload.len(),
                    limit: self.config.max_payload_bytes,
                });
            }
        }
        Ok(signed)
    }

    /// `envelope` sealed ([`RedisQueue::seal`]): signed, if this handle signs, and checked.
    pub(crate) fn seal_one(&self, envelope: Envelope) -> Result<Envelope> {
        Ok(match self.seal(std::slice::from_ref(&envelope))? {
            Some(mut signed) => signed.remove(0),
            None => envelope,
        })
    }
}

/// A unique job's push, as [`RedisQueue::unique_push_call`] takes it.
pub(crate) struct UniquePush<'a> {
    /// The queue's name.
    pub(crate) queue: &'a str,
    /// The group of the queue the job waits in, if any.
    pub(crate) group: Option<&'a str>,
    /// The lock's key under the queue: `<job>:<unique id>`.
    pub(crate) lock: &'a str,
    /// The job's uuid, the lock's value.
    pub(crate) uuid: &'a str,
    /// How long the lock lasts at most.
    pub(crate) lasts_ms: i64,
    /// The payload.
    pub(crate) payload: &'a str,
    /// `''` to push the job ready, else its due time as `later.lua` takes it.
    pub(crate) due: &'a str,
}

/// The script that pushes a run starting with `first`.
fn script_for(first: &Envelope) -> &'static redis::Script {
    match (&first.unique, &first.debounce, first.delay, &first.group) {
        (Some(_), _, _, _) => &scripts::PUSH_UNIQUE,
        (None, Some(_), _, _) => &scripts::DEBOUNCE,
        (None, None, _, Some(_)) => &scripts::GROUP_PUSH,
        (None, None, Some(_), None) => &scripts::LATER,
        (None, None, None, None) => &scripts::PUSH,
    }
}

/// Whether a run of a group's jobs needs `group_touch.lua` after its push to bring the group
/// into the rotation: a debounced job's does; `group_push.lua` brings the group in itself, and
/// `push_unique.lua` scores it due for the next pop to bring in.
fn touches_group(first: &Envelope) -> bool {
    first.debounce.is_some()
}

/// Splits envelopes into runs of the same queue, group and kind (ready or delayed), keeping
/// order; a unique or debounced job is a run of its own.
fn runs(envelopes: &[Envelope]) -> impl Iterator<Item = &[Envelope]> {
    let plain = |e: &Envelope| e.unique.is_none() && e.debounce.is_none();
    envelopes.chunk_by(move |a, b| {
        a.queue == b.queue
            && a.group == b.group
            && a.delay.is_some() == b.delay.is_some()
            && plain(a)
            && plain(b)
    })
}

/// Envelopes whose payloads carry their signature under `key`.
fn sign_all(key: &SigningKey, envelopes: &[Envelope]) -> Result<Vec<Envelope>> {
    envelopes
        .iter()
        .map(|envelope| {
            let mut payload =
                Payload::from_json(&envelope.payload).map_err(|source| Error::Unsignable {
                    job: envelope.job.to_string(),
                    source,
                })?;
            payload.signature = Some(key.sign(&payload));
            Ok(Envelope {
                payload: payload.to_json(),
                ..envelope.clone()
            })
        })
        .collect()
}
