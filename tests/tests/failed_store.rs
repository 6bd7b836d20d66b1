//! A large failed-job store: listing it in pages with a cursor, searching it on the Redis side,
//! and retrying or forgetting every matching job in chunks, through the library, the `jobsctl`
//! command and the dashboard's API, on one redis-server and on a Redis Cluster (each test runs
//! on both).

use chrono::{TimeZone, Utc};
use redis::AsyncCommands;
use redjob::admin::{Admin, AdminError, FailedFilter, FailedSelection};
use std::collections::HashSet;
use tests::dashboard::Dashboard;
use tests::failed_store::{seed_failed, Seeded};
use tests::jobs_command::JobsCommand;
use tests::{on_both_layouts, Server};

/// When the seeded jobs start failing: 2026-11-01T00:00:00Z.
const START: f64 = 1_793_491_200.0;

fn seeded(count: usize) -> Vec<Seeded> {
    (0..count).map(|n| Seeded::nth(n, START)).collect()
}

/// The uuids of `records` that `keep` selects, newest first: what a search must find.
fn newest_first(records: &[Seeded], keep: impl Fn(&Seeded) -> bool) -> Vec<String> {
    let mut found: Vec<&Seeded> = records.iter().filter(|r| keep(r)).collect();
    found.sort_by(|a, b| b.failed_at.total_cmp(&a.failed_at));
    found.iter().map(|r| r.uuid.clone()).collect()
}

fn uuids(entries: &[redjob::admin::FailedEntry]) -> Vec<String> {
    entries.iter().map(|e| e.record.uuid.clone()).collect()
}

async fn pages_visit_every_record_once_newest_first_while_records_come_and_go(redis: Server) {
    let queue = redis.queue();
    let admin = Admin::new(queue.clone());
    let records = seeded(230);
    seed_failed(&queue, &records).await;

    let page_of = |limit| FailedFilter {
        limit: Some(limit),
        ..FailedFilter::default()
    };
    let first = admin.failed_page(&page_of(50), None).await.unwrap();
    assert_eq!(first.total, 230);
    assert_eq!(first.entries.len(), 50);
    let positions: Vec<u64> = first.entries.iter().map(|e| e.position).collect();
    assert_eq!(positions, (181..=230).rev().collect::<Vec<u64>>());
    let mut seen = uuids(&first.entries);

    // Between pages: newer failures arrive, and records not listed yet go away.
    let newer: Vec<Seeded> = (1000..1005).map(|n| Seeded::nth(n, START)).collect();
    seed_failed(&queue, &newer).await;
    let gone: Vec<String> = [60, 61, 150]
        .iter()
        .map(|&n| records[n].uuid.clone())
        .collect();
    for uuid in &gone {
        admin.forget(uuid).await.unwrap();
    }
    let mut after = first.next.clone();
    while let Some(cursor) = after {
        let page = admin
            .failed_page(&page_of(50), Some(&cursor))
            .await
            .unwrap();
        assert!(page.entries.len() <= 50);
        seen.extend(uuids(&page.entries));
        after = page.next;
    }
    let expected = newest_first(&records, |r| !gone.contains(&r.uuid));
    assert_eq!(
        seen, expected,
        "each record once, newest first, none of the newer ones"
    );

    let invalid = admin.failed_page(&page_of(5), Some("not-a-cursor")).await;
    assert!(
        matches!(invalid, Err(AdminError::InvalidCursor(ref c)) if c == "not-a-cursor"),
        "{invalid:?}"
    );
}
on_both_layouts!(pages_visit_every_record_once_newest_first_while_records_come_and_go);

async fn filters_run_on_the_redis_side_and_find_what_a_full_read_finds(redis: Server) {
    let queue = redis.queue();
    let admin = Admin::new(queue.clone());
    let mut records = seeded(3000);
    // A record that is not JSON is found by text only, and kept by every other filter out.
    records[10].exception = "Connection RESET by peer\nat line 2".into();
    seed_failed(&queue, &records).await;
    let mut conn = redis.conn().await;
    let broken = uuid::Uuid::new_v4().to_string();
    let _: () = conn
        .hset(
            queue.keys().failed_jobs(),
            &broken,
            "not json: reset by peer",
        )
        .await
        .unwrap();
    let _: () = conn
        .zadd(queue.keys().failed_jobs_index(), &broken, START - 10.0)
        .await
        .unwrap();

    let at = |n: usize| Some(Utc.timestamp_opt((START + n as f64) as i64, 0).unwrap());
    let cases: Vec<(FailedFilter, Vec<String>)> = vec![
        (
            FailedFilter {
                queue: Some("q1".into()),
                ..Default::default()
            },
            newest_first(&records, |r| r.queue == "q1"),
        ),
        (
            FailedFilter {
                job: Some("Invoice".into()),
                tag: Some("vip".into()),
                ..Default::default()
            },
            newest_first(&records, |r| {
                r.job == "Invoice" && r.tags.contains(&"vip".to_owned())
            }),
        ),
        (
            FailedFilter {
                text: Some("HOST-7 (attempt 2".into()),
                ..Default::default()
            },
            newest_first(&records, |r| {
                r.exception.to_lowercase().contains("host-7 (attempt 2")
            }),
        ),
        (
            FailedFilter {
                text: Some("reset by PEER".into()),
                ..Default::default()
            },
            [records[10].uuid.clone(), broken.clone()].to_vec(),
        ),
        (
            FailedFilter {
                text: Some(records[1234].uuid.to_uppercase()),
                ..Default::default()
            },
            vec![records[1234].uuid.clone()],
        ),
        (
            FailedFilter {
                queue: Some("q2".into()),
                since: at(1000),
                until: at(1999),
                ..Default::default()
            },
            newest_first(&records, |r| {
                r.queue == "q2" && (START + 1000.0..=START + 1999.0).contains(&r.failed_at)
            }),
        ),
        (
            FailedFilter {
                tag: Some("no-such-tag".into()),
                ..Default::default()
            },
            vec![],
        ),
    ];
    for (filter, expected) in cases {
        let found = admin.failed(&filter).await.unwrap();
        assert_eq!(uuids(&found), expected, "{filter:?}");
        // Page by page, small pages: the same jobs in the same order.
        let mut paged = Vec::new();
        let mut after = None;
        loop {
            let small = FailedFilter {
                limit: Some(7),
                ..filter.clone()
            };
            let page = admin.failed_page(&small, after.as_deref()).await.unwrap();
            paged.extend(uuids(&page.entries));
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        assert_eq!(paged, expected, "paged: {filter:?}");
    }
}
on_both_layouts!(filters_run_on_the_redis_side_and_find_what_a_full_read_finds);

async fn a_rare_match_deep_in_a_large_store_is_found_in_bounded_steps(redis: Server) {
    let queue = redis.queue();
    let admin = Admin::new(queue.clone());
    let mut records = seeded(40_000);
    for n in [3, 17, 29_000] {
        records[n].exception = format!("needle {n}");
    }
    seed_failed(&queue, &records).await;
    let filter = FailedFilter {
        text: Some("NEEDLE".into()),
        ..Default::default()
    };
    let mut found = Vec::new();
    let mut scanned = 0;
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = admin.failed_page(&filter, after.as_deref()).await.unwrap();
        pages += 1;
        scanned += page.scanned;
        found.extend(uuids(&page.entries));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let expected = newest_first(&records, |r| r.exception.starts_with("needle"));
    assert_eq!(found, expected);
    assert_eq!(scanned, 40_000, "every record read once over {pages} pages");
}
on_both_layouts!(a_rare_match_deep_in_a_large_store_is_found_in_bounded_steps);

async fn retrying_and_forgetting_all_matching_move_each_job_once_in_chunks(redis: Server) {
    let queue = redis.queue();
    let admin = Admin::new(queue.clone());
    let records = seeded(2_400);
    seed_failed(&queue, &records).await;

    let on_q0 = FailedFilter {
        queue: Some("q0".into()),
        ..Default::default()
    };
    let report = admin
        .retry(&FailedSelection::Matching(on_q0.clone()))
        .await
        .unwrap();
    let expected: HashSet<String> = records
        .iter()
        .filter(|r| r.queue == "q0")
        .map(|r| r.uuid.clone())
        .collect();
    assert_eq!(report.retried.len(), expected.len());
    assert!(report.missing.is_empty() && report.duplicates.is_empty());
    let mut conn = redis.conn().await;
    let pushed: Vec<String> = conn
        .lrange(&queue.queue_keys("q0").ready, 0, -1)
        .await
        .unwrap();
    let pushed_uuids: Vec<String> = pushed
        .iter()
        .map(|p| {
            let payload: serde_json::Value = serde_json::from_str(p).unwrap();
            assert_eq!(payload["attempts"], 0, "{p}");
            payload["uuid"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(pushed_uuids.len(), expected.len(), "each job pushed once");
    assert_eq!(pushed_uuids.into_iter().collect::<HashSet<_>>(), expected);
    assert!(admin.failed(&on_q0).await.unwrap().is_empty());
    assert_eq!(admin.failed_count().await.unwrap(), 1_600);

    let vip_reports = FailedFilter {
        job: Some("Report".into()),
        tag: Some("vip".into()),
        ..Default::default()
    };
    let expected_forgotten = records
        .iter()
        .filter(|r| r.queue != "q0" && r.job == "Report" && r.tags.contains(&"vip".into()))
        .count() as u64;
    assert!(expected_forgotten > 0);
    assert_eq!(
        admin.forget_matching(&vip_reports).await.unwrap(),
        expected_forgotten
    );
    assert_eq!(
        admin.failed_count().await.unwrap(),
        1_600 - expected_forgotten
    );
    assert!(admin.failed(&vip_reports).await.unwrap().is_empty());

    // A limit retries the newest ones only.
    let newest_two = FailedFilter {
        limit: Some(2),
        ..Default::default()
    };
    let report = admin
        .retry(&FailedSelection::Matching(newest_two))
        .await
        .unwrap();
    let retried: Vec<String> = report.retried.iter().map(|r| r.uuid.clone()).collect();
    let remaining = newest_first(&records, |r| {
        r.queue != "q0" && !(r.job == "Report" && r.tags.contains(&"vip".into()))
    });
    assert_eq!(retried, remaining[..2]);
}
on_both_layouts!(retrying_and_forgetting_all_matching_move_each_job_once_in_chunks);

async fn jobsctl_pages_filters_by_time_and_retries_and_forgets_what_matches(redis: Server) {
    let queue = redis.queue();
    let jobs = JobsCommand::new(env!("CARGO_BIN_EXE_test_jobs"), redis.url());
    let now = Utc::now().timestamp() as f64;
    // Twelve jobs, one every ten minutes up to now: the newest is #12.
    let records: Vec<Seeded> = (0..12)
        .map(|n| Seeded::nth(n, now - 11.0 * 600.0))
        .enumerate()
        .map(|(n, mut r)| {
            r.failed_at = now - (11 - n) as f64 * 600.0;
            r
        })
        .collect();
    seed_failed(&queue, &records).await;

    let first = jobs.run(&["failed", "--limit", "5"]);
    assert_eq!(first.code(), Some(0), "{}", first.stderr);
    let lines: Vec<&str> = first.stdout.lines().collect();
    assert_eq!(lines.len(), 6, "{}", first.stdout);
    assert!(lines[1].starts_with(&format!("12  {}", records[11].uuid)));
    let cursor = first
        .stderr
        .trim()
        .strip_prefix("More failed jobs: add --after ")
        .unwrap_or_else(|| panic!("no cursor on stderr: {:?}", first.stderr))
        .to_owned();
    let second = jobs.json(&["failed", "--limit", "5", "--after", &cursor]);
    let positions: Vec<u64> = second
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["position"].as_u64().unwrap())
        .collect();
    assert_eq!(positions, [7, 6, 5, 4, 3]);

    // The last 35 minutes: the jobs that failed 0, 10, 20 and 30 minutes ago.
    let recent = jobs.json(&["failed", "--since", "35m"]);
    assert_eq!(recent.as_array().unwrap().len(), 4, "{recent}");
    let older = jobs.json(&["failed", "--until", "35m"]);
    assert_eq!(older.as_array().unwrap().len(), 8, "{older}");
    let bad = jobs.run(&["failed", "--since", "yesterday"]);
    assert_eq!(bad.code(), Some(2));
    assert!(bad.stderr.contains("an age such as 30m"), "{}", bad.stderr);
    let bad_cursor = jobs.run(&["failed", "--after", "nonsense"]);
    assert_eq!(bad_cursor.code(), Some(1));
    assert!(
        bad_cursor.stderr.contains("invalid cursor"),
        "{}",
        bad_cursor.stderr
    );

    let vip: Vec<&Seeded> = records
        .iter()
        .filter(|r| r.tags.contains(&"vip".into()))
        .collect();
    let retried = jobs.run(&["retry", "--tag", "vip"]);
    assert_eq!(retried.code(), Some(0), "{}", retried.stderr);
    for job in &vip {
        assert!(
            retried.stdout.contains(&format!(
                "Pushed {} back onto queue {}.",
                job.uuid, job.queue
            )),
            "{}",
            retried.stdout
        );
    }
    let mixed = jobs.run(&["retry", "all", "--tag", "vip"]);
    assert_eq!(mixed.code(), Some(1));

    let on_q1 = records
        .iter()
        .filter(|r| r.queue == "q1" && !r.tags.contains(&"vip".into()))
        .count();
    let forgot = jobs.run(&["forget", "--queue", "q1"]);
    assert_eq!(forgot.code(), Some(0), "{}", forgot.stderr);
    assert_eq!(forgot.stdout, format!("Forgot {on_q1} failed jobs.\n"));
    let left = jobs.json(&["failed"]);
    assert_eq!(
        left.as_array().unwrap().len(),
        12 - vip.len() - on_q1,
        "{left}"
    );
    let nothing = jobs.run(&["forget"]);
    assert_eq!(nothing.code(), Some(1));
}
on_both_layouts!(jobsctl_pages_filters_by_time_and_retries_and_forgets_what_matches);

async fn the_dashboard_api_pages_and_searches_the_store(redis: Server) {
    let queue = redis.queue();
    let records = seeded(120);
    seed_failed(&queue, &records).await;
    let dash = Dashboard::start(env!("CARGO_BIN_EXE_test_jobs"), redis.url(), &[], &[]);

    let first = dash.get_json("/api/failed?limit=40");
    assert_eq!(first["total"], 120);
    assert_eq!(first["jobs"].as_array().unwrap().len(), 40);
    let mut seen: Vec<String> = Vec::new();
    let mut page = first;
    loop {
        seen.extend(
            page["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| j["uuid"].as_str().unwrap().to_owned()),
        );
        let Some(next) = page["next"].as_str() else {
            break;
        };
        page = dash.get_json(&format!("/api/failed?limit=40&after={next}"));
    }
    assert_eq!(seen, newest_first(&records, |_| true));

    let vip = dash.get_json("/api/failed?tag=vip&queue=q2");
    let expected = newest_first(&records, |r| {
        r.queue == "q2" && r.tags.contains(&"vip".into())
    });
    assert_eq!(vip["matched"], expected.len());
    assert!(vip["next"].is_null());

    let bad = dash.send(tests::http::Request::get("/api/failed?since=whenever"));
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("an age such as 30m"), "{}", bad.body);
}
on_both_layouts!(the_dashboard_api_pages_and_searches_the_store);
