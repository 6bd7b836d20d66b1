//! The dashboard's page, assets and JSON endpoints. Reads are GETs; every change is a POST
//! (see [`super::guard`]). Errors are JSON `{"error": "..."}`: 404 for an unknown failed job,
//! 503 when Redis cannot be reached.

use crate::ops::time::parse_time;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use redjob::admin::{
    Admin, AdminError, BatchFilter, BatchState, FailedEntry, FailedFilter, FailedSelection,
    QueueStats, RecentFilter, UniqueFilter,
};
use redjob::admin::{AttemptOutcome, WorkerInfo, RECENT_LIMIT};
use serde::{Deserialize, Serialize};

/// Minutes the overview's chart covers.
const CHART_MINUTES: u32 = 60;
/// Minutes over which a queue's processing rate is measured, the current one included.
const RATE_MINUTES: u32 = 5;
/// Failed jobs listed on one page, newest first, unless the request asks for another size.
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
        .route("/api/running", get(running))
        .route("/api/groups", get(groups))
        .route("/api/queues/{name}/groups/{group}/pause", post(pause_group))
        .route(
            "/api/queues/{name}/groups/{group}/resume",
            post(resume_group),
        )
        .route("/api/jobs/{uuid}", get(job_status))
        .route("/api/jobs/{uuid}/cancel", post(cancel_job))
        .route("/api/outbox", get(outbox))
        .route("/api/unrunnable", get(unrunnable))
        .route("/api/recent", get(recent))
        .route("/api/unique", get(unique_locks))
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

/// An error as an HTTP answer: an [`AdminError`], or a request the API cannot read.
enum ApiError {
    Admin(AdminError),
    BadRequest(String),
}

impl ApiError {
    fn bad_request(reason: String) -> Self {
        ApiError::BadRequest(reason)
    }
}

impl From<AdminError> for ApiError {
    fn from(err: AdminError) -> Self {
        ApiError::Admin(err)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            ApiError::BadRequest(reason) => (StatusCode::BAD_REQUEST, reason),
            ApiError::Admin(err) => {
                let status = match err {
                    AdminError::FailedJobNotFound(_)
                    | AdminError::BatchNotFound(_)
                    | AdminError::ScheduleNotFound(_) => StatusCode::NOT_FOUND,
                    AdminError::InvalidRange { .. } | AdminError::InvalidCursor(_) => {
                        StatusCode::BAD_REQUEST
                    }
                    // A threshold written into Redis by hand that is not a number.
                    AdminError::InvalidWait(_) => StatusCode::INTERNAL_SERVER_ERROR,
                    _ => StatusCode::SERVICE_UNAVAILABLE,
                };
                (status, err.to_string())
            }
        };
        (status, Json(serde_json::json!({ "error": message }))).into_response()
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

/// One of the busiest groups of a queue, as the dashboard lists them.
#[derive(Debug, Serialize)]
struct GroupRow {
    queue: String,
    #[serde(flatten)]
    group: redjob::groups::GroupInfo,
}

/// The busiest groups of every queue that has groups, as many of each as the gauges show.
async fn groups(State(admin): State<Admin>) -> ApiResult<Vec<GroupRow>> {
    let names = admin.queues().await?;
    let mut rows = Vec::new();
    for stats in admin.queues_stats(&names).await? {
        if stats.groups == 0 {
            continue;
        }
        let groups = admin
            .queue()
            .groups(&stats.name)
            .list()
            .await
            .map_err(redjob::admin::AdminError::from)?;
        rows.extend(
            groups
                .groups
                .into_iter()
                .take(crate::prometheus::BUSIEST_GROUPS)
                .map(|group| GroupRow {
                    queue: stats.name.clone(),
                    group,
                }),
        );
    }
    Ok(Json(rows))
}

/// What pausing and resuming a group answer.
#[derive(Debug, Serialize)]
struct GroupPaused {
    queue: String,
    group: String,
    paused: bool,
}

async fn pause_group(state: State<Admin>, path: Path<(String, String)>) -> ApiResult<GroupPaused> {
    set_group_paused(state, path, true).await
}

async fn resume_group(state: State<Admin>, path: Path<(String, String)>) -> ApiResult<GroupPaused> {
    set_group_paused(state, path, false).await
}

async fn set_group_paused(
    State(admin): State<Admin>,
    Path((queue, group)): Path<(String, String)>,
    paused: bool,
) -> ApiResult<GroupPaused> {
    let groups = admin.queue().groups(&queue);
    let changed = match paused {
        true => groups.pause(&group).await,
        false => groups.resume(&group).await,
    };
    changed.map_err(redjob::admin::AdminError::from)?;
    Ok(Json(GroupPaused {
        queue,
        group,
        paused,
    }))
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

/// A search field as given: trimmed, and `None` when empty (a search box left blank).
fn given(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// A search of failed jobs: `job`, `queue`, `text`, `tag`, and `since` and `until` (RFC 3339
/// or an age such as `2h`); empty means any.
#[derive(Debug, Default, Deserialize)]
struct Search {
    job: Option<String>,
    queue: Option<String>,
    text: Option<String>,
    tag: Option<String>,
    since: Option<String>,
    until: Option<String>,
}

impl Search {
    fn filter(self, limit: Option<usize>) -> Result<FailedFilter, ApiError> {
        let time = |v: Option<String>| {
            given(v)
                .map(|v| parse_time(&v).map_err(ApiError::bad_request))
                .transpose()
        };
        Ok(FailedFilter {
            queue: given(self.queue),
            job: given(self.job),
            text: given(self.text),
            tag: given(self.tag),
            since: time(self.since)?,
            until: time(self.until)?,
            limit,
        })
    }
}

/// A page of a search: where it goes on from (`after`, a page's `next`) and its size.
#[derive(Debug, Default, Deserialize)]
struct PageQuery {
    after: Option<String>,
    limit: Option<usize>,
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

/// `GET /api/failed`: one page of a search, newest first.
#[derive(Debug, Serialize)]
struct FailedList {
    /// Records in the store.
    total: u64,
    /// Jobs on this page (all the matches when `next` is null).
    matched: usize,
    /// The jobs of this page.
    jobs: Vec<FailedRow>,
    /// The cursor of the next page (`?after=`), or null at the end.
    next: Option<String>,
    /// Records read to find this page.
    scanned: u64,
}

async fn failed(
    State(admin): State<Admin>,
    Query(search): Query<Search>,
    Query(page): Query<PageQuery>,
) -> ApiResult<FailedList> {
    let filter = search.filter(Some(page.limit.unwrap_or(FAILED_LISTED)))?;
    let found = admin.failed_page(&filter, page.after.as_deref()).await?;
    let jobs: Vec<FailedRow> = found
        .entries
        .into_iter()
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
        total: found.total,
        matched: jobs.len(),
        jobs,
        next: found.next,
        scanned: found.scanned,
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
) -> ApiResult<redjob::admin::RetryReport> {
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
) -> ApiResult<redjob::admin::RetryReport> {
    let filter = search.map(|Json(s)| s).unwrap_or_default().filter(None)?;
    Ok(Json(admin.retry(&FailedSelection::Matching(filter)).await?))
}

async fn forget_matching(
    State(admin): State<Admin>,
    search: Option<Json<Search>>,
) -> ApiResult<serde_json::Value> {
    let filter = search.map(|Json(s)| s).unwrap_or_default().filter(None)?;
    let forgotten = admin.forget_matching(&filter).await?;
    Ok(Json(serde_json::json!({ "forgotten": forgotten })))
}

/// Batches the dashboard shows on one page, newest first, unless the request asks for
/// another size.
const BATCHES_SHOWN: usize = 20;

/// The header a listing that stays a JSON array carries its next page's cursor in.
const NEXT_CURSOR: &str = "x-next-cursor";

/// A page of a listing: the items as a JSON array, and the cursor of the next page, if any,
/// in the [`NEXT_CURSOR`] header (pass it as `?after=`).
fn paged<T: Serialize>(items: Vec<T>, next: Option<String>) -> Response {
    let mut response = Json(items).into_response();
    if let Some(value) = next.and_then(|next| header::HeaderValue::from_str(&next).ok()) {
        response.headers_mut().insert(NEXT_CURSOR, value);
    }
    response
}

/// `GET /api/batches?name=&state=&after=&limit=`.
#[derive(Debug, Default, Deserialize)]
struct BatchQuery {
    name: Option<String>,
    state: Option<String>,
    after: Option<String>,
    limit: Option<usize>,
}

/// `GET /api/batches`: a page of batches, newest first, each with its failed jobs.
async fn batches(
    State(admin): State<Admin>,
    Query(query): Query<BatchQuery>,
) -> Result<Response, ApiError> {
    let filter = BatchFilter {
        name: given(query.name),
        state: given(query.state)
            .map(|state| state.parse::<BatchState>().map_err(ApiError::bad_request))
            .transpose()?,
    };
    let limit = query.limit.unwrap_or(BATCHES_SHOWN);
    let page = admin
        .batches_page(&filter, query.after.as_deref(), limit)
        .await?;
    let details = admin.with_failed_jobs(page.batches).await?;
    Ok(paged(details, page.next))
}

/// `GET /api/unique?job=&after=&limit=`.
#[derive(Debug, Default, Deserialize)]
struct UniqueQuery {
    job: Option<String>,
    after: Option<String>,
    limit: Option<usize>,
}

/// Unique locks the dashboard shows on one page.
const LOCKS_SHOWN: usize = 50;

/// `GET /api/unique`: a page of unique locks with their holders.
async fn unique_locks(
    State(admin): State<Admin>,
    Query(query): Query<UniqueQuery>,
) -> Result<Response, ApiError> {
    let filter = UniqueFilter {
        job: given(query.job),
    };
    let limit = query.limit.unwrap_or(LOCKS_SHOWN);
    let page = admin
        .unique_locks_page(&filter, query.after.as_deref(), limit)
        .await?;
    Ok(paged(page.locks, page.next))
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
) -> ApiResult<redjob::admin::RetryReport> {
    Ok(Json(admin.retry_batch(&id).await?))
}

async fn schedules(State(admin): State<Admin>) -> ApiResult<Vec<redjob::admin::ScheduleInfo>> {
    Ok(Json(admin.schedules().await?))
}

async fn workers(State(admin): State<Admin>) -> ApiResult<Vec<WorkerInfo>> {
    Ok(Json(admin.workers().await?))
}

/// A job a live worker is running, with its status when it is tracked.
#[derive(Debug, Serialize)]
struct RunningJob {
    #[serde(flatten)]
    job: redjob::admin::RunningJob,
    /// The worker running it: `<name>@<host>`.
    worker: String,
    /// Its last progress (JSON), when it is tracked and reported one.
    progress: Option<serde_json::Value>,
    /// The last checkpoint it saved, when it is a resumable job that saved one.
    checkpoint: Option<serde_json::Value>,
    /// Whether it keeps a status record.
    tracked: bool,
}

/// `GET /api/running`: the jobs live workers run, oldest first, with their progress and
/// checkpoint.
async fn running(State(admin): State<Admin>) -> ApiResult<Vec<RunningJob>> {
    let workers = admin.workers().await?;
    let listed: Vec<(String, redjob::admin::RunningJob)> = workers
        .into_iter()
        .flat_map(|w| {
            let worker = format!("{}@{}", w.name, w.host);
            w.jobs.into_iter().map(move |job| (worker.clone(), job))
        })
        .collect();
    let statuses = futures_util::future::join_all(listed.iter().map(|(_, job)| async {
        let uuid = job.uuid.parse().ok()?;
        // Only a job whose worker says it has a checkpoint is asked for it.
        let checkpoint = async {
            match job.checkpointed {
                true => admin
                    .queue()
                    .checkpoint(&job.queue, uuid)
                    .await
                    .ok()
                    .flatten(),
                false => None,
            }
        };
        let (status, checkpoint) = tokio::join!(admin.queue().status(uuid), checkpoint);
        Some((status.ok(), checkpoint))
    }))
    .await;
    let mut jobs: Vec<RunningJob> = listed
        .into_iter()
        .zip(statuses)
        .map(|((worker, job), read)| {
            let (status, checkpoint) = read.unwrap_or_default();
            let tracked = status
                .as_ref()
                .is_some_and(|s| s.state != redjob::status::JobState::Unknown);
            RunningJob {
                job,
                worker,
                progress: status.and_then(|s| s.progress),
                checkpoint: checkpoint.map(crate::ops::status::checkpoint_value),
                tracked,
            }
        })
        .collect();
    jobs.sort_by_key(|job| job.job.started_at);
    Ok(Json(jobs))
}

/// `GET /api/jobs/{uuid}`: a job's status.
async fn job_status(
    State(admin): State<Admin>,
    Path(uuid): Path<uuid::Uuid>,
) -> ApiResult<crate::ops::status::StatusWithCheckpoint> {
    Ok(Json(
        crate::ops::status::with_checkpoint(&admin, uuid).await?,
    ))
}

/// `POST /api/jobs/{uuid}/cancel`: asks a job to stop; says what the request found.
async fn cancel_job(
    State(admin): State<Admin>,
    Path(uuid): Path<uuid::Uuid>,
) -> ApiResult<serde_json::Value> {
    let found = admin.queue().cancel(uuid).await.map_err(AdminError::from)?;
    Ok(Json(
        serde_json::json!({ "uuid": uuid, "found": found.found(), "state": found.state() }),
    ))
}

/// The outbox tables their live relays serve, with what the relays last measured.
async fn outbox(State(admin): State<Admin>) -> ApiResult<Vec<redjob::admin::OutboxReport>> {
    Ok(Json(admin.outboxes().await?))
}

/// The job types some worker met and could not run lately, and how many live workers link
/// each.
async fn unrunnable(State(admin): State<Admin>) -> ApiResult<Vec<redjob::admin::UnrunnableJobs>> {
    Ok(Json(admin.unrunnable().await?))
}

/// `GET /api/recent?queue=Q&limit=N&tag=T&job=J&outcome=O&after=C`.
#[derive(Debug, Deserialize)]
struct RecentQuery {
    queue: String,
    limit: Option<usize>,
    tag: Option<String>,
    job: Option<String>,
    outcome: Option<String>,
    after: Option<String>,
}

/// `GET /api/recent`: a page of a queue's recent attempts, newest first.
async fn recent(
    State(admin): State<Admin>,
    Query(query): Query<RecentQuery>,
) -> Result<Response, ApiError> {
    let filter = RecentFilter {
        tag: given(query.tag),
        job: given(query.job),
        outcome: given(query.outcome)
            .map(|o| o.parse::<AttemptOutcome>().map_err(ApiError::bad_request))
            .transpose()?,
    };
    let limit = query.limit.unwrap_or(20).min(RECENT_LIMIT);
    let page = admin
        .recent_page(&query.queue, &filter, query.after.as_deref(), limit)
        .await?;
    Ok(paged(page.jobs, page.next))
}
