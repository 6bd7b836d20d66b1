//! The dashboard's page, assets and JSON endpoints. Reads are GETs; every change is a POST
//! (see [`super::guard`]). Errors are JSON `{"error": "..."}`: 404 for an unknown failed job,
//! 503 when Redis cannot be reached.

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use jobs_core::admin::telemetry::{RecentJob, WorkerInfo};
use jobs_core::admin::{
    Admin, AdminError, BatchDetail, FailedEntry, FailedFilter, FailedSelection, QueueStats,
};
use jobs_core::queue::keys::RECENT_LIMIT;
use serde::{Deserialize, Serialize};

/// Minutes the overview's chart covers.
const CHART_MINUTES: u32 = 60;
/// Minutes over which a queue's processing rate is measured, the current one included.
const RATE_MINUTES: u32 = 5;
/// Failed jobs listed at most, newest first.
const FAILED_LISTED: usize = 100;
/// Characters of an exception shown in the failed-job list.
const EXCEPTION_SUMMARY_CHARS: usize = 240;

pub(super) fn routes(admin: Admin) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/app.js", get(script))
        .route("/style.css", get(style))
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .route("/api/overview", get(overview))
        .route("/api/queues", get(queues))
        .route("/api/queues/{name}/pause", post(pause))
        .route("/api/queues/{name}/resume", post(resume))
        .route("/api/failed", get(failed))
        .route("/api/failed/retry", post(retry_matching))
        .route("/api/failed/forget", post(forget_matching))
        .route("/api/failed/{uuid}", get(failed_job))
        .route("/api/failed/{uuid}/retry", post(retry_one))
        .route("/api/failed/{uuid}/forget", post(forget_one))
        .route("/api/batches", get(batches))
        .route("/api/batches/{id}/cancel", post(cancel_batch))
        .route("/api/batches/{id}/retry", post(retry_batch))
        .route("/api/schedules", get(schedules))
        .route("/api/workers", get(workers))
        .route("/api/recent", get(recent))
        .with_state(admin)
}

async fn index() -> Response {
    asset(
        "text/html; charset=utf-8",
        include_str!("assets/index.html"),
    )
}

async fn script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("assets/app.js"),
    )
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", include_str!("assets/style.css"))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// An [`AdminError`] as an HTTP answer.
struct ApiError(AdminError);

impl From<AdminError> for ApiError {
    fn from(err: AdminError) -> Self {
        ApiError(err)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match self.0 {
            AdminError::FailedJobNotFound(_)
            | AdminError::BatchNotFound(_)
            | AdminError::ScheduleNotFound(_) => StatusCode::NOT_FOUND,
            AdminError::InvalidRange { .. } => StatusCode::BAD_REQUEST,
            // A threshold written into Redis by hand that is not a number.
            AdminError::InvalidWait(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::SERVICE_UNAVAILABLE,
        };
        let body = Json(serde_json::json!({ "error": self.0.to_string() }));
        (status, body).into_response()
    }
}

type ApiResult<T> = Result<Json<T>, ApiError>;

/// One minute of the chart.
#[derive(Debug, Serialize)]
struct MinutePoint {
    minute: DateTime<Utc>,
    processed: u64,
    failed: u64,
}

/// `GET /api/overview`.
#[derive(Debug, Serialize)]
struct Overview {
    /// The last hour, oldest minute first.
    minutes: Vec<MinutePoint>,
    processed_last_hour: u64,
    failed_last_hour: u64,
    /// Jobs the live workers are running, and the most they can run at once.
    running: usize,
    concurrency: usize,
    workers: usize,
    /// Records in the failed-job store.
    failed_jobs: u64,
}

async fn overview(State(admin): State<Admin>) -> ApiResult<Overview> {
    // Three independent reads, sent together.
    let (metrics, workers, failed_jobs) = tokio::try_join!(
        admin.metrics(CHART_MINUTES),
        admin.workers(),
        admin.failed_count(),
    )?;
    let minutes: Vec<MinutePoint> = metrics
        .iter()
        .map(|m| {
            let total = m.bucket.total();
            MinutePoint {
                minute: m.minute,
                processed: total.processed,
                failed: total.failed,
            }
        })
        .collect();
    Ok(Json(Overview {
        processed_last_hour: minutes.iter().map(|m| m.processed).sum(),
        failed_last_hour: minutes.iter().map(|m| m.failed).sum(),
        minutes,
        running: workers.iter().map(|w| w.running).sum(),
        concurrency: workers.iter().map(|w| w.concurrency).sum(),
        workers: workers.len(),
        failed_jobs,
    }))
}

/// One row of `GET /api/queues`.
#[derive(Debug, Serialize)]
struct QueueRow {
    /// Its sizes, its wait with the threshold and whether that is exceeded, and its state.
    #[serde(flatten)]
    stats: QueueStats,
    /// Attempts processed per minute over the last few minutes.
    per_minute: f64,
    /// Ready jobs divided by that rate: how long a job pushed now waits, roughly. `None` when
    /// jobs are ready but the queue is paused or none was processed lately.
    estimated_wait_secs: Option<f64>,
}

async fn queues(State(admin): State<Admin>) -> ApiResult<Vec<QueueRow>> {
    let recent = admin.metrics(RATE_MINUTES).await?;
    // The window is the full minutes before this one plus the part of this one gone by.
    let window_secs =
        (f64::from(RATE_MINUTES - 1) * 60.0 + (Utc::now().timestamp() % 60) as f64).max(1.0);
    let names = admin.queues().await?;
    let mut rows = Vec::with_capacity(names.len());
    for stats in admin.queues_stats(&names).await? {
        let processed: u64 = recent
            .iter()
            .filter_map(|m| m.bucket.queues.get(&stats.name))
            .map(|c| c.processed)
            .sum();
        let per_second = processed as f64 / window_secs;
        let estimated_wait_secs = if stats.ready == 0 {
            Some(0.0)
        } else if per_second > 0.0 && !stats.paused {
            Some(stats.ready as f64 / per_second)
        } else {
            None
        };
        rows.push(QueueRow {
            stats,
            per_minute: per_second * 60.0,
            estimated_wait_secs,
        });
    }
    Ok(Json(rows))
}

/// What pause and resume answer.
#[derive(Debug, Serialize)]
struct QueueState {
    queue: String,
    paused: bool,
    /// Whether the request changed anything.
    changed: bool,
}

async fn pause(State(admin): State<Admin>, Path(name): Path<String>) -> ApiResult<QueueState> {
    let changed = admin.pause(&name).await?;
    Ok(Json(QueueState {
        queue: name,
        paused: true,
        changed,
    }))
}

async fn resume(State(admin): State<Admin>, Path(name): Path<String>) -> ApiResult<QueueState> {
    let changed = admin.resume(&name).await?;
    Ok(Json(QueueState {
        queue: name,
        paused: false,
        changed,
    }))
}

/// A search of failed jobs: `job`, `queue`, `text`, `tag` (empty means any).
#[derive(Debug, Default, Deserialize)]
struct Search {
    job: Option<String>,
    queue: Option<String>,
    text: Option<String>,
    tag: Option<String>,
}

impl Search {
    fn filter(self) -> FailedFilter {
        let given = |v: Option<String>| v.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        FailedFilter {
            queue: given(self.queue),
            job: given(self.job),
            text: given(self.text),
            tag: given(self.tag),
            limit: None,
        }
    }
}

/// One row of the failed-job list.
#[derive(Debug, Serialize)]
struct FailedRow {
    uuid: String,
    position: u64,
    job: String,
    display_name: Option<String>,
    queue: String,
    failed_at: String,
    attempts: Option<u64>,
    /// The exception's first line, cut short.
    exception: String,
    tags: Vec<String>,
}

/// `GET /api/failed`.
#[derive(Debug, Serialize)]
struct FailedList {
    /// Records in the store.
    total: u64,
    /// Records the search matches.
    matched: usize,
    /// The newest of them.
    jobs: Vec<FailedRow>,
}

async fn failed(State(admin): State<Admin>, Query(search): Query<Search>) -> ApiResult<FailedList> {
    let entries = admin.failed(&search.filter()).await?;
    let total = admin.failed_count().await?;
    let matched = entries.len();
    let jobs = entries
        .into_iter()
        .take(FAILED_LISTED)
        .map(|entry| {
            let record = entry.record;
            let first_line = record.exception.lines().next().unwrap_or_default();
            FailedRow {
                exception: first_line.chars().take(EXCEPTION_SUMMARY_CHARS).collect(),
                uuid: record.uuid,
                position: entry.position,
                job: entry.job,
                display_name: entry.display_name,
                queue: record.queue,
                failed_at: record.failed_at,
                attempts: entry.attempts,
                tags: entry.tags,
            }
        })
        .collect();
    Ok(Json(FailedList {
        total,
        matched,
        jobs,
    }))
}

async fn failed_job(
    State(admin): State<Admin>,
    Path(uuid): Path<String>,
) -> ApiResult<FailedEntry> {
    Ok(Json(admin.failed_job(&uuid).await?))
}

async fn retry_one(
    State(admin): State<Admin>,
    Path(uuid): Path<String>,
) -> ApiResult<jobs_core::admin::RetryReport> {
    let report = admin
        .retry(&FailedSelection::Uuids(vec![uuid.clone()]))
        .await?;
    if report.retried.is_empty() {
        return Err(AdminError::FailedJobNotFound(uuid).into());
    }
    Ok(Json(report))
}

async fn forget_one(
    State(admin): State<Admin>,
    Path(uuid): Path<String>,
) -> ApiResult<serde_json::Value> {
    admin.forget(&uuid).await?;
    Ok(Json(serde_json::json!({ "forgotten": 1 })))
}

async fn retry_matching(
    State(admin): State<Admin>,
    search: Option<Json<Search>>,
) -> ApiResult<jobs_core::admin::RetryReport> {
    let filter = search.map(|Json(s)| s).unwrap_or_default().filter();
    Ok(Json(admin.retry(&FailedSelection::Matching(filter)).await?))
}

async fn forget_matching(
    State(admin): State<Admin>,
    search: Option<Json<Search>>,
) -> ApiResult<serde_json::Value> {
    let filter = search.map(|Json(s)| s).unwrap_or_default().filter();
    let forgotten = admin.forget_matching(&filter).await?;
    Ok(Json(serde_json::json!({ "forgotten": forgotten })))
}

/// Batches the dashboard shows, newest first.
const BATCHES_SHOWN: usize = 20;

/// `GET /api/batches`: the newest batches, each with its failed jobs.
async fn batches(State(admin): State<Admin>) -> ApiResult<Vec<BatchDetail>> {
    let mut details = Vec::new();
    for status in admin.batches(BATCHES_SHOWN).await? {
        match admin.batch(&status.id.to_string()).await {
            Ok(detail) => details.push(detail),
            // Pruned since it was listed.
            Err(AdminError::BatchNotFound(_)) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(Json(details))
}

async fn cancel_batch(
    State(admin): State<Admin>,
    Path(id): Path<String>,
) -> ApiResult<serde_json::Value> {
    let cancelled = admin.cancel_batch(&id).await?;
    Ok(Json(
        serde_json::json!({ "id": id, "cancelled": cancelled }),
    ))
}

async fn retry_batch(
    State(admin): State<Admin>,
    Path(id): Path<String>,
) -> ApiResult<jobs_core::admin::RetryReport> {
    Ok(Json(admin.retry_batch(&id).await?))
}

async fn schedules(State(admin): State<Admin>) -> ApiResult<Vec<jobs_core::admin::ScheduleInfo>> {
    Ok(Json(admin.schedules().await?))
}

async fn workers(State(admin): State<Admin>) -> ApiResult<Vec<WorkerInfo>> {
    Ok(Json(admin.workers().await?))
}

/// `GET /api/recent?queue=Q&limit=N&tag=T`.
#[derive(Debug, Deserialize)]
struct RecentQuery {
    queue: String,
    limit: Option<usize>,
    tag: Option<String>,
}

async fn recent(
    State(admin): State<Admin>,
    Query(query): Query<RecentQuery>,
) -> ApiResult<Vec<RecentJob>> {
    let limit = query.limit.unwrap_or(20).min(RECENT_LIMIT);
    let recent = match query
        .tag
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        Some(tag) => admin.recent_tagged(&query.queue, limit, tag).await?,
        None => admin.recent(&query.queue, limit).await?,
    };
    Ok(Json(recent))
}
