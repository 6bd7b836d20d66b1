//! What a run measures besides its time: latency percentiles, throughput, peak RSS, this
//! process's and Redis's CPU (`INFO cpu`, `INFO commandstats`), and Redis's SLOWLOG.

use redjob::RedisQueue;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

use crate::common::{nearest_rank, own_cpu_seconds, round2};
use crate::run::error_text;

pub(crate) fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((kb / 1024.0 * 10.0).round() / 10.0)
}

/// Nearest-rank percentiles, as the kit computes them.
pub(crate) fn latency_fields(samples: &[f64]) -> Map<String, Value> {
    let mut fields = Map::new();
    if samples.is_empty() {
        return fields;
    }
    let mut s = samples.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let rank = |p: f64| nearest_rank(&s, p);
    fields.insert("p50_ms".into(), json!(round2(rank(0.50))));
    fields.insert("p99_ms".into(), json!(round2(rank(0.99))));
    fields.insert("max_ms".into(), json!(round2(s[s.len() - 1])));
    fields.insert("min_ms".into(), json!(round2(s[0])));
    fields
}

/// `jobs`, `jobs_per_sec` and `elapsed_s` of `jobs` done in `secs`.
pub(crate) fn throughput(jobs: usize, secs: f64) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("jobs".into(), json!(jobs));
    out.insert("jobs_per_sec".into(), json!((jobs as f64 / secs).round()));
    out.insert("elapsed_s".into(), json!(round2(secs)));
    out
}

/// This process's and Redis's CPU time so far, and Redis's time in each command.
pub(crate) struct CpuReading {
    own: f64,
    redis: f64,
    commands: BTreeMap<String, u64>,
}

impl CpuReading {
    pub(crate) async fn take(queue: &RedisQueue) -> Result<Self, String> {
        Ok(CpuReading {
            commands: redis_command_usec(queue).await.map_err(error_text)?,
            redis: redis_cpu_seconds(queue).await.map_err(error_text)?,
            own: own_cpu_seconds(),
        })
    }

    /// The CPU this process and Redis spent since this reading, per job of `jobs` done in
    /// `secs`, and their utilisation of the machine's cores over those seconds: 1.0 is every
    /// core busy the whole time.
    pub(crate) async fn since(
        &self,
        queue: &RedisQueue,
        jobs: usize,
        secs: f64,
    ) -> Result<Map<String, Value>, String> {
        let own = own_cpu_seconds() - self.own;
        let redis = redis_cpu_seconds(queue).await.map_err(error_text)? - self.redis;
        let per_job_us = |seconds: f64| round2(seconds * 1e6 / jobs as f64);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut out = Map::new();
        out.insert("redis_cpu_us_per_job".into(), json!(per_job_us(redis)));
        // Where Redis's time went: each command's µs per job (a script's include the commands
        // it calls, which are listed again by name), the larger ones only.
        let mut commands = Map::new();
        for (command, usec) in redis_command_usec(queue).await.map_err(error_text)? {
            let spent = usec.saturating_sub(self.commands.get(&command).copied().unwrap_or(0));
            let us = round2(spent as f64 / jobs as f64);
            if us >= 0.05 {
                commands.insert(command, json!(us));
            }
        }
        out.insert("redis_command_us_per_job".into(), Value::Object(commands));
        out.insert("worker_cpu_us_per_job".into(), json!(per_job_us(own)));
        out.insert("cores".into(), json!(cores));
        out.insert(
            "cpu_utilisation".into(),
            json!(round2((own + redis) / (secs * cores as f64))),
        );
        Ok(out)
    }
}

/// Logs every call of 1 ms or more from here on, and empties the log.
pub(crate) async fn reset_slowlog(queue: &RedisQueue) -> Result<(), String> {
    let _: () = queue
        .query(
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("slowlog-log-slower-than")
                .arg(1_000)
                .arg("slowlog-max-len")
                .arg(100_000),
        )
        .await
        .map_err(error_text)?;
    queue
        .query(redis::cmd("SLOWLOG").arg("RESET"))
        .await
        .map_err(error_text)
}

/// The SLOWLOG's entries, as [`slowlog_entries`], but for the benchmark's own SLOWLOG and
/// CONFIG calls, which are not queue operations.
pub(crate) async fn queue_calls_in_slowlog(queue: &RedisQueue) -> Result<Vec<Value>, String> {
    let slow: Vec<Value> = queue
        .query::<redis::Value>(redis::cmd("SLOWLOG").arg("GET").arg(100_000))
        .await
        .map(|v| slowlog_entries(&v))
        .map_err(error_text)?;
    Ok(slow
        .into_iter()
        .filter(|e| {
            let command = e["command"].as_str().unwrap_or("").to_ascii_uppercase();
            !command.starts_with("SLOWLOG") && !command.starts_with("CONFIG")
        })
        .collect())
}

/// CPU time Redis has used so far (user + system), from `INFO cpu`.
async fn redis_cpu_seconds(queue: &RedisQueue) -> redjob::Result<f64> {
    let info: String = queue.query(redis::cmd("INFO").arg("cpu")).await?;
    Ok(info
        .lines()
        .filter_map(|l| {
            l.strip_prefix("used_cpu_user:")
                .or_else(|| l.strip_prefix("used_cpu_sys:"))
        })
        .filter_map(|v| v.trim().parse::<f64>().ok())
        .sum())
}

/// The microseconds Redis has spent in each command so far, from `INFO commandstats`.
async fn redis_command_usec(queue: &RedisQueue) -> redjob::Result<BTreeMap<String, u64>> {
    let info: String = queue.query(redis::cmd("INFO").arg("commandstats")).await?;
    Ok(info
        .lines()
        .filter_map(|line| {
            let (command, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let usec = stats
                .split(',')
                .find_map(|field| field.strip_prefix("usec="))?
                .parse()
                .ok()?;
            Some((command.to_owned(), usec))
        })
        .collect())
}

/// SLOWLOG entries as `{"us": duration, "command": first word}`.
fn slowlog_entries(reply: &redis::Value) -> Vec<Value> {
    let redis::Value::Array(entries) = reply else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|entry| {
            let redis::Value::Array(fields) = entry else {
                return None;
            };
            let us = match fields.get(2)? {
                redis::Value::Int(us) => *us,
                _ => return None,
            };
            let command = match fields.get(3)? {
                redis::Value::Array(words) => words
                    .iter()
                    .take(2)
                    .filter_map(|w| match w {
                        redis::Value::BulkString(b) => {
                            Some(String::from_utf8_lossy(b).into_owned())
                        }
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
                _ => String::new(),
            };
            Some(json!({ "us": us, "command": command }))
        })
        .collect()
}
