//! `io`: jobs that await 5 ms of simulated I/O, beside bare tasks awaiting the same device.

use redjob::RedisQueue;
use serde_json::{json, Map, Value};
use std::time::Instant;

use crate::common::round2;
use crate::io_device::{io_device, record_us, take_io_figures, IO_AWAITED_US};
use crate::jobs::{Io, IO_WAIT};
use crate::measure::{throughput, CpuReading};
use crate::run::{error_text, push_in_chunks, timed_drain};
use crate::Args;

/// `io`: N queued jobs that each await 5 ms of simulated I/O, one worker of concurrency C,
/// timed to the N-th job's end; the ideal is C jobs per 5 ms.
pub(crate) async fn io(args: &Args, queue: &RedisQueue) -> Result<Map<String, Value>, String> {
    push_in_chunks(queue, args.jobs, |n| Io { n })
        .await
        .map_err(error_text)?;
    let ideal = args.concurrency as f64 / IO_WAIT.as_secs_f64();
    let (bare_rate, mut bare) = bare_io(args.jobs, args.concurrency).await;
    let cpu = CpuReading::take(queue).await?;
    let (rate, secs) = timed_drain(args, queue, args.jobs).await?;
    let mut out = throughput(args.jobs, secs);
    out.extend(cpu.since(queue, args.jobs, secs).await?);
    out.insert("concurrency".into(), json!(args.concurrency));
    out.insert("ideal_jobs_per_sec".into(), json!(ideal.round()));
    out.insert("of_ideal".into(), json!(round2(rate / ideal)));
    // Where a slot's time beyond the 5 ms goes: the simulated device's own lateness, the
    // wake-up of the job's task once the device completed, and the wait as the handler saw it
    // (both, and the 5 ms).
    out.extend(take_io_figures());
    bare.insert("of_ideal".into(), json!(round2(bare_rate / ideal)));
    out.insert("bare".into(), Value::Object(bare));
    Ok(out)
}

/// The host's own ceiling for the `io` scenario, measured before the worker runs: `jobs`
/// requests to the same simulated device, awaited by `concurrency` bare tasks of the same
/// runtime, with no queue and no worker. Returns their rate (requests/s) and
/// [`take_io_figures`].
async fn bare_io(jobs: usize, concurrency: usize) -> (f64, Map<String, Value>) {
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|task| {
            let requests = jobs / concurrency + usize::from(task < jobs % concurrency);
            tokio::spawn(async move {
                for _ in 0..requests {
                    let asked = Instant::now();
                    io_device().request(IO_WAIT).await;
                    record_us(&IO_AWAITED_US, asked.elapsed());
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a bare I/O task does not panic");
    }
    let rate = jobs as f64 / start.elapsed().as_secs_f64();
    (rate, take_io_figures())
}
