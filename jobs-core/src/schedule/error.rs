//! [`ScheduleError`]: a schedule that cannot be defined as written.

/// Why a schedule cannot be defined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The cron expression does not parse.
    #[error("invalid cron expression {expression:?}: {reason}")]
    InvalidCron {
        /// The expression.
        expression: String,
        /// Why.
        reason: String,
    },
    /// A time of day that is not `HH:MM` or `HH:MM:SS`.
    #[error("invalid time of day {0:?}: write it HH:MM or HH:MM:SS")]
    InvalidTime(String),
    /// A time zone name the tz database does not know.
    #[error("unknown time zone {0:?}")]
    UnknownZone(String),
}
