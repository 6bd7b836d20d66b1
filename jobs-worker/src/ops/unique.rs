//! `jobsctl unique`: the locks of unique jobs.

use redjob::admin::{Admin, AdminError, HeldLock, UniqueFilter};
use serde::Serialize;

use super::error::CliError;
use super::render::{more, none_found, print, table};

/// Lists a page of the unique locks and their holders.
pub(super) async fn list(
    admin: &Admin,
    json: bool,
    filter: &UniqueFilter,
    after: Option<String>,
    limit: usize,
) -> Result<u8, CliError> {
    let page = admin
        .unique_locks_page(filter, after.as_deref(), limit)
        .await?;
    let locks = page.locks;
    print(json, &locks, |locks: &Vec<HeldLock>| {
        if locks.is_empty() {
            return none_found("unique locks", page.next.as_deref());
        }
        let rows = locks
            .iter()
            .map(|lock| {
                let ttl = lock.ttl_ms.map_or_else(
                    || "never".to_owned(),
                    |ms| format!("{:.0} s", ms as f64 / 1000.0),
                );
                vec![lock.key.clone(), lock.holder.clone(), ttl]
            })
            .collect();
        table(&["KEY", "HELD BY", "EXPIRES IN"], rows)
    })?;
    more("unique locks", page.next.as_deref());
    Ok(0)
}

/// Frees unique locks; names the keys it did not find.
pub(super) async fn forget(admin: &Admin, json: bool, keys: Vec<String>) -> Result<u8, CliError> {
    #[derive(Serialize)]
    struct Forgotten {
        forgotten: Vec<String>,
        missing: Vec<String>,
    }
    let mut report = Forgotten {
        forgotten: Vec::new(),
        missing: Vec::new(),
    };
    for key in keys {
        match admin.forget_unique(&key).await {
            Ok(()) => report.forgotten.push(key),
            Err(AdminError::UniqueLockNotFound(key)) => report.missing.push(key),
            Err(err) => return Err(err.into()),
        }
    }
    print(json, &report, |r| {
        r.forgotten
            .iter()
            .map(|key| format!("Freed unique lock {key}.\n"))
            .collect()
    })?;
    if !report.missing.is_empty() {
        return Err(CliError::Incomplete(format!(
            "no unique lock {}",
            report.missing.join(", ")
        )));
    }
    Ok(0)
}
