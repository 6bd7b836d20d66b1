//! Batches, unique locks and recent jobs listed in pages with a cursor and filtered, through
//! the library, the `jobsctl` command and the dashboard's API, on one redis-server and on a
//! Redis Cluster (each test runs on both).

use chrono::Utc;
use examples::{Noop, RebuildIndex, RefreshCache};
use redis::AsyncCommands;
use redjob::admin::{
    Admin, BatchFilter, BatchPage, BatchState, HeldLock, RecentFilter, UniqueFilter,
};
use redjob::admin::{AttemptOutcome, RecentJob};
use redjob::workflow::{Batch, BatchStatus};
use std::collections::HashSet;
use std::time::Duration;
use tests::dashboard::Dashboard;
use tests::jobs_command::JobsCommand;
use tests::{on_both_layouts, SentVia, Server};

fn jobsctl(redis: &Server) -> JobsCommand {
    JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url())
}

/// The cursor `jobsctl` printed on stderr for the next page of `what`.
fn cursor_in(stderr: &str, what: &str) -> Option<String> {
    let prefix = format!("More {what}: add --after ");
    stderr
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map(str::to_owned)
}

/// The `field` of each item `jobsctl --json <args>` lists, which must be the whole search in
/// one page (no cursor for more `what`): at a terminal a page may search for a second.
fn whole_search(jobs: &JobsCommand, args: &[&str], what: &str, field: &str) -> HashSet<String> {
    let ran = jobs.run(&[&["--json"], args].concat());
    assert_eq!(ran.code(), Some(0), "{args:?}: {}", ran.stderr);
    assert_eq!(cursor_in(&ran.stderr, what), None, "{args:?}: one page");
    let page: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    page.as_array()
        .unwrap()
        .iter()
        .map(|item| item[field].as_str().unwrap().to_owned())
        .collect()
}

/// Every batch `filter` matches, newest first, in pages of at most `limit`.
async fn every_batch(admin: &Admin, filter: &BatchFilter, limit: usize) -> Vec<BatchStatus> {
    let mut batches = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = admin
            .batches_page(filter, after.as_deref(), limit)
            .await
            .unwrap();
        assert!(page.batches.len() <= limit);
        batches.extend(page.batches);
        match page.next {
            Some(next) => after = Some(next),
            None => return batches,
        }
    }
}

/// Every unique lock `filter` matches, page after page, with the number of pages it took.
async fn every_lock(admin: &Admin, filter: &UniqueFilter, limit: usize) -> (Vec<HeldLock>, usize) {
    let mut locks = Vec::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = admin
            .unique_locks_page(filter, after.as_deref(), limit)
            .await
            .unwrap();
        pages += 1;
        locks.extend(page.locks);
        match page.next {
            Some(next) => after = Some(next),
            None => return (locks, pages),
        }
    }
}

/// Every item of an API listing that answers a JSON array, page after page, by the cursor in
/// its `x-next-cursor` header.
fn every_page(dash: &Dashboard, path: &str) -> Vec<serde_json::Value> {
    let mut items = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let url = match &next {
            None => path.to_owned(),
            Some(cursor) => format!("{path}&after={cursor}"),
        };
        let response = dash.send(tests::http::Request::get(&url));
        assert_eq!(response.status, 200, "{url}: {}", response.body);
        items.extend(response.json().as_array().unwrap().iter().cloned());
        match response.header("x-next-cursor") {
            Some(cursor) => next = Some(cursor.to_owned()),
            None => return items,
        }
    }
}

/// The library's listings given no time to search: every page takes one step and, unless the
/// listing ended, returns a cursor, so the tests follow cursors through short and empty pages.
fn hurried(queue: &redjob::RedisQueue) -> Admin {
    Admin::new(queue.clone()).with_page_budget(Duration::ZERO)
}

async fn batches_page_newest_first_filtered_by_name_and_state(redis: Server) {
    let queue = redis.queue();
    let admin = hurried(&queue);
    let mut ids = Vec::new();
    for n in 0..65 {
        let name = if n % 2 == 0 { "import" } else { "export" };
        let id = Batch::new()
            .name(format!("{name}-{n}"))
            .job(Noop {}.dispatch().on_queue("idle"))
            .via(&queue)
            .dispatch()
            .await
            .unwrap();
        ids.push(id.to_string());
    }
    let cancelled: Vec<String> = ids.iter().step_by(13).cloned().collect();
    for id in &cancelled {
        assert!(admin.cancel_batch(id).await.unwrap());
    }

    // Batches made within one millisecond share a score: the cursor keeps them apart.
    let listed: Vec<String> = every_batch(&admin, &BatchFilter::default(), 20)
        .await
        .iter()
        .map(|b| b.id.to_string())
        .collect();
    assert_eq!(listed.len(), 65, "each batch once");
    assert_eq!(listed.iter().collect::<HashSet<_>>().len(), 65);
    let newest = admin.batches(65).await.unwrap();
    let newest_ids: Vec<String> = newest.iter().map(|b| b.id.to_string()).collect();
    assert_eq!(listed, newest_ids);
    // Newest first by the index's scores (on a cluster the record's own `created_at` is read
    // from another node's clock call, and may differ from its score by a millisecond).
    let mut conn = redis.conn().await;
    let mut scores = Vec::new();
    for id in &listed {
        let score: f64 = conn.zscore(redis.keys().batches(), id).await.unwrap();
        scores.push(score);
    }
    assert!(
        scores.windows(2).all(|pair| pair[0] >= pair[1]),
        "newest first: {scores:?}"
    );

    let exports = BatchFilter {
        name: Some("EXPORT".into()),
        ..Default::default()
    };
    let found = every_batch(&admin, &exports, 500).await;
    assert_eq!(found.len(), 32);
    assert!(found.iter().all(|b| b.name.starts_with("export-")));
    let cancelling = BatchFilter {
        state: Some(BatchState::Cancelling),
        ..Default::default()
    };
    let found: HashSet<String> = every_batch(&admin, &cancelling, 500)
        .await
        .iter()
        .map(|b| b.id.to_string())
        .collect();
    assert_eq!(found, cancelled.iter().cloned().collect());
    // One step reads the 50 newest batches: the page holds the cancelled ones among them, and
    // a cursor to the rest.
    let first = admin.batches_page(&cancelling, None, 500).await.unwrap();
    let ids_of = |page: &BatchPage| -> HashSet<String> {
        page.batches.iter().map(|b| b.id.to_string()).collect()
    };
    let newest: HashSet<String> = listed[..50].iter().cloned().collect();
    assert_eq!(ids_of(&first), &found & &newest);
    let rest = admin
        .batches_page(&cancelling, first.next.as_deref(), 500)
        .await
        .unwrap();
    assert_eq!(ids_of(&rest), &found - &newest);
    assert!(rest.next.is_none());

    let jobs = jobsctl(&redis);
    let first = jobs.run(&["--json", "batches", "--limit", "30"]);
    assert_eq!(first.code(), Some(0), "{}", first.stderr);
    let shown = serde_json::from_str::<serde_json::Value>(&first.stdout).unwrap();
    let shown = shown.as_array().unwrap().len();
    assert!((1..=30).contains(&shown), "{}", first.stdout);
    let cursor = cursor_in(&first.stderr, "batches").expect("a cursor on stderr");
    let second = jobs.json(&["batches", "--limit", "30", "--after", &cursor]);
    assert_eq!(second[0]["id"], listed[shown].as_str());
    let by_state = whole_search(
        &jobs,
        &["batches", "--state", "cancelling"],
        "batches",
        "id",
    );
    assert_eq!(by_state, found);
    let bad = jobs.run(&["batches", "--state", "sleeping"]);
    assert_eq!(bad.code(), Some(2));
    assert!(
        bad.stderr.contains("finished-with-failures"),
        "{}",
        bad.stderr
    );

    let dash = Dashboard::start(env!("CARGO_BIN_EXE_test_jobs"), redis.url(), &[], &[]);
    let paged: Vec<String> = every_page(&dash, "/api/batches?limit=25")
        .iter()
        .map(|b| b["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(paged, listed);
    let named: Vec<String> = every_page(&dash, "/api/batches?name=import-6")
        .iter()
        .map(|b| b["id"].as_str().unwrap().to_owned())
        .collect();
    let expected: Vec<String> = listed
        .iter()
        .filter(|id| [6, 60, 62, 64].iter().any(|&n| ids[n] == **id))
        .cloned()
        .collect();
    assert_eq!(named, expected);
}
on_both_layouts!(batches_page_newest_first_filtered_by_name_and_state);

async fn unique_locks_page_by_scan_steps_and_filter_by_job(redis: Server) {
    let queue = redis.queue();
    let admin = hurried(&queue);
    for shop in 0..230 {
        RebuildIndex {
            shop,
            ..Default::default()
        }
        .dispatch()
        .on_queue("idle")
        .sent_via(&queue)
        .await;
    }
    for shop in 0..20 {
        RefreshCache { shop, ms: 0 }
            .dispatch()
            .on_queue("idle")
            .sent_via(&queue)
            .await;
    }

    let (locks, pages) = every_lock(&admin, &UniqueFilter::default(), 60).await;
    let keys: Vec<String> = locks.into_iter().map(|lock| lock.key).collect();
    let distinct: HashSet<&String> = keys.iter().collect();
    assert_eq!(distinct.len(), 250, "every lock over {pages} pages");
    assert!(pages >= 2, "pages of about 60: {pages}");
    let all: HashSet<String> = admin
        .unique_locks()
        .await
        .unwrap()
        .into_iter()
        .map(|lock| lock.key)
        .collect();
    assert_eq!(distinct, all.iter().collect());

    let refresh = UniqueFilter {
        job: Some("refresh-cache".into()),
    };
    let (found, _) = every_lock(&admin, &refresh, 1000).await;
    let refresh_keys: HashSet<String> = found.into_iter().map(|lock| lock.key).collect();
    assert_eq!(refresh_keys.len(), 20);
    assert!(refresh_keys
        .iter()
        .all(|key| key.contains("refresh-cache:")));
    let no_glob = UniqueFilter {
        job: Some("refresh-*".into()),
    };
    let (found, _) = every_lock(&admin, &no_glob, 1000).await;
    assert!(found.is_empty(), "a job name is not a pattern");

    let jobs = jobsctl(&redis);
    let args = ["unique", "--job", "refresh-cache"];
    assert_eq!(
        whole_search(&jobs, &args, "unique locks", "key"),
        refresh_keys
    );
    let first = jobs.run(&["unique", "--limit", "50"]);
    assert_eq!(first.code(), Some(0), "{}", first.stderr);
    assert!(
        cursor_in(&first.stderr, "unique locks").is_some(),
        "{}",
        first.stderr
    );

    let dash = Dashboard::start(env!("CARGO_BIN_EXE_test_jobs"), redis.url(), &[], &[]);
    let locks = every_page(&dash, "/api/unique?job=rebuild-index&limit=50");
    let keys: HashSet<&str> = locks.iter().map(|l| l["key"].as_str().unwrap()).collect();
    assert_eq!(keys.len(), 230);
}
on_both_layouts!(unique_locks_page_by_scan_steps_and_filter_by_job);

fn attempt(n: usize, outcome: AttemptOutcome) -> RecentJob {
    RecentJob {
        uuid: format!("00000000-0000-4000-8000-{n:012}"),
        job: if n % 2 == 0 { "mail" } else { "invoice" }.into(),
        queue: "emails".into(),
        attempt: 1,
        outcome,
        runtime_us: 1000,
        finished_at: Utc::now(),
        worker: "w".into(),
        reason: None,
        tags: if n % 4 == 0 {
            vec!["vip".into()]
        } else {
            vec![]
        },
    }
}

async fn recent_jobs_page_by_the_last_one_shown_while_newer_ones_arrive(redis: Server) {
    let queue = redis.queue();
    let admin = Admin::new(queue.clone());
    let key = queue.keys().recent("emails");
    let mut conn = redis.conn().await;
    let outcome = |n: usize| match n % 3 {
        0 => AttemptOutcome::Failed,
        1 => AttemptOutcome::Done,
        _ => AttemptOutcome::Released,
    };
    // As a worker writes them: LPUSH, the newest at the head.
    for n in 0..90 {
        let entry = serde_json::to_string(&attempt(n, outcome(n))).unwrap();
        let _: () = conn.lpush(&key, entry).await.unwrap();
    }
    let failed = RecentFilter {
        outcome: Some(AttemptOutcome::Failed),
        ..Default::default()
    };
    let first = admin
        .recent_page("emails", &failed, None, 12)
        .await
        .unwrap();
    assert_eq!(first.jobs.len(), 12);
    // Ten newer attempts arrive before the next page.
    for n in 90..100 {
        let entry = serde_json::to_string(&attempt(n, AttemptOutcome::Failed)).unwrap();
        let _: () = conn.lpush(&key, entry).await.unwrap();
    }
    let second = admin
        .recent_page("emails", &failed, first.next.as_deref(), 100)
        .await
        .unwrap();
    assert!(second.next.is_none());
    let seen: Vec<String> = first
        .jobs
        .iter()
        .chain(&second.jobs)
        .map(|j| j.uuid.clone())
        .collect();
    let expected: Vec<String> = (0..90)
        .rev()
        .filter(|n| n % 3 == 0)
        .map(|n| attempt(n, AttemptOutcome::Failed).uuid)
        .collect();
    assert_eq!(seen, expected, "each failed attempt once, newest first");

    let vip_mail = RecentFilter {
        tag: Some("vip".into()),
        job: Some("mail".into()),
        ..Default::default()
    };
    let page = admin
        .recent_page("emails", &vip_mail, None, 100)
        .await
        .unwrap();
    assert_eq!(page.jobs.len(), 25);

    let jobs = jobsctl(&redis);
    let cli = jobs.run(&[
        "--json",
        "recent",
        "emails",
        "--outcome",
        "done",
        "--limit",
        "5",
    ]);
    assert_eq!(cli.code(), Some(0), "{}", cli.stderr);
    let cursor = cursor_in(&cli.stderr, "recent jobs").expect("a cursor");
    let next = jobs.json(&["recent", "emails", "--outcome", "done", "--after", &cursor]);
    assert_eq!(next.as_array().unwrap().len(), 20, "{next}");

    let dash = Dashboard::start(env!("CARGO_BIN_EXE_test_jobs"), redis.url(), &[], &[]);
    let released = every_page(&dash, "/api/recent?queue=emails&outcome=released&limit=7");
    assert_eq!(released.len(), 30);
    let bad = dash.send(tests::http::Request::get(
        "/api/recent?queue=emails&outcome=lost",
    ));
    assert_eq!(bad.status, 400);
}
on_both_layouts!(recent_jobs_page_by_the_last_one_shown_while_newer_ones_arrive);
