//! Cursors of listings of sorted sets, newest first (the failed-job store's index, the index of
//! batches): the score and member of the last entry read, `<score>/<member>`. Unlike a
//! position, such a cursor stays valid while entries are added and removed.

use redis::AsyncCommands;

use super::{Admin, AdminError};

/// Where a listing goes on from: the last entry read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cursor {
    /// Its score, as Redis wrote it.
    pub(super) score: String,
    /// Its member.
    pub(super) member: String,
}

impl Cursor {
    /// Reads a cursor as a page gave it; [`AdminError::InvalidCursor`] for any other text.
    pub(super) fn parse(text: &str) -> Result<Cursor, AdminError> {
        let invalid = || AdminError::InvalidCursor(text.to_owned());
        let (score, member) = text.split_once('/').ok_or_else(invalid)?;
        if score.parse::<f64>().is_err() || member.is_empty() {
            return Err(invalid());
        }
        Ok(Cursor {
            score: score.to_owned(),
            member: member.to_owned(),
        })
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.score, self.member)
    }
}

impl Admin {
    /// Up to `count` entries of the sorted set `key`, newest (highest score) first, after
    /// `cursor` (from the newest without one), with their scores. Entries of one score come
    /// in reverse order of their members, as `ZRANGE ... REV` gives them.
    pub(super) async fn newest_after(
        &self,
        key: &str,
        cursor: Option<&Cursor>,
        count: usize,
    ) -> Result<Vec<(String, String)>, AdminError> {
        let mut conn = self.queue.connection();
        let start = match cursor {
            None => 0,
            Some(cursor) => {
                let newer: usize = self
                    .queue
                    .timed(conn.zcount(key, format!("({}", cursor.score), "+inf"))
                    .await?;
                let tied: Vec<String> = self
                    .queue
                    .timed(conn.zrangebyscore(key, &cursor.score, &cursor.score))
                    .await?;
                newer + tied.iter().filter(|m| **m >= cursor.member).count()
            }
        };
        let entries: Vec<(String, String)> = self
            .queue
            .timed(
                redis::cmd("ZRANGE")
                    .arg(key)
                    .arg(start)
                    .arg(start + count.max(1) - 1)
                    .arg("REV")
                    .arg("WITHSCORES")
                    .query_async(&mut conn),
            )
            .await?;
        Ok(entries)
    }
}
