//! Retry delays.

use std::fmt;
use std::str::FromStr;

/// Seconds to wait before each retry: `[1, 5, 10]` waits 1 s after the first failed attempt,
/// 5 s after the second and 10 s after every later one (the last value repeats).
///
/// ```
/// use redjob::Backoff;
/// let backoff: Backoff = "1,5,10".parse().unwrap();
/// assert_eq!(backoff.after_attempt(1), 1);
/// assert_eq!(backoff.after_attempt(3), 10);
/// assert_eq!(backoff.after_attempt(7), 10);
/// assert_eq!(backoff.to_string(), "1,5,10");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Backoff(Vec<u64>);

impl Backoff {
    /// A backoff from a list of seconds; an empty list means no wait.
    pub fn new(seconds: impl Into<Vec<u64>>) -> Self {
        Backoff(seconds.into())
    }

    /// The seconds, in order.
    pub fn seconds(&self) -> &[u64] {
        &self.0
    }

    /// Seconds to wait after failed attempt number `attempt` (counting from 1).
    pub fn after_attempt(&self, attempt: u32) -> u64 {
        let index = (attempt.max(1) as usize - 1).min(self.0.len().saturating_sub(1));
        self.0.get(index).copied().unwrap_or(0)
    }

    /// The larger of two backoffs, value by value, the shorter list's last value repeating.
    ///
    /// The worker's effective `--backoff` is the larger of `--backoff` and `--delay`, as in
    /// Laravel.
    pub fn max(&self, other: &Backoff) -> Backoff {
        let len = self.0.len().max(other.0.len());
        Backoff(
            (1..=len as u32)
                .map(|a| self.after_attempt(a).max(other.after_attempt(a)))
                .collect(),
        )
    }
}

impl fmt::Display for Backoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

/// A backoff list that is not comma-separated whole seconds.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid backoff {0:?}: expected whole seconds separated by commas, like 1,5,10")]
pub struct InvalidBackoff(String);

impl FromStr for Backoff {
    type Err = InvalidBackoff;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().is_empty() {
            return Ok(Backoff::default());
        }
        s.split(',')
            .map(|part| part.trim().parse::<u64>())
            .collect::<Result<Vec<_>, _>>()
            .map(Backoff)
            .map_err(|_| InvalidBackoff(s.to_owned()))
    }
}

impl From<u64> for Backoff {
    fn from(seconds: u64) -> Self {
        Backoff(vec![seconds])
    }
}

impl From<Vec<u64>> for Backoff {
    fn from(seconds: Vec<u64>) -> Self {
        Backoff(seconds)
    }
}

impl From<&[u64]> for Backoff {
    fn from(seconds: &[u64]) -> Self {
        Backoff(seconds.to_vec())
    }
}

impl<const N: usize> From<[u64; N]> for Backoff {
    fn from(seconds: [u64; N]) -> Self {
        Backoff(seconds.to_vec())
    }
}
