//! When a schedule fires: a cron expression (with optional seconds) in a time zone, or a fixed
//! interval, as a sequence of nominal ticks.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use std::time::Duration;

use crate::schedule::error::ScheduleError;

/// When a schedule fires.
#[derive(Debug, Clone)]
pub enum When {
    /// A cron expression: five fields (minute, hour, day of month, month, day of week) or six
    /// (seconds first), read in a time zone, with daylight saving time handled as cron does (a
    /// skipped local time fires at the end of the gap; a repeated one fires once).
    Cron {
        /// The expression as written.
        expression: String,
        /// It, parsed.
        cron: Box<croner::Cron>,
        /// The zone its times are read in.
        zone: Tz,
    },
    /// Every interval, counted from the Unix epoch, so every process agrees on the ticks.
    Every(Duration),
}

impl When {
    /// A cron expression in UTC, with optional seconds.
    pub fn cron(expression: &str) -> Result<When, ScheduleError> {
        let cron = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .build()
            .parse(expression)
            .map_err(|err| ScheduleError::InvalidCron {
                expression: expression.to_owned(),
                reason: err.to_string(),
            })?;
        Ok(When::Cron {
            expression: expression.to_owned(),
            cron: Box::new(cron),
            zone: Tz::UTC,
        })
    }

    /// This schedule's times read in `zone` (a cron expression's; an interval has none).
    pub fn in_zone(self, zone: Tz) -> When {
        match self {
            When::Cron {
                expression, cron, ..
            } => When::Cron {
                expression,
                cron,
                zone,
            },
            every => every,
        }
    }

    /// How it is written, for operators: the expression and its zone, or the interval.
    pub fn describe(&self) -> String {
        match self {
            When::Cron {
                expression, zone, ..
            } => format!("{expression} ({zone})"),
            When::Every(every) => format!("every {}", humanize(*every)),
        }
    }

    /// The first tick strictly after `after`, if there is one.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            // Cron counts whole seconds: from the second `after` falls in, so that every
            // process, whenever it asks, gets the same ticks.
            When::Cron { cron, zone, .. } => cron
                .find_next_occurrence(&whole_second(after, false).with_timezone(zone), false)
                .ok()
                .map(|next| next.with_timezone(&Utc)),
            When::Every(every) => {
                let step = every.as_millis().max(1) as i64;
                let at = after.timestamp_millis();
                DateTime::from_timestamp_millis((at.div_euclid(step) + 1) * step)
            }
        }
    }

    /// The last tick strictly before `before`, if there is one.
    pub fn previous_before(&self, before: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            When::Cron { cron, zone, .. } => cron
                .find_previous_occurrence(&whole_second(before, true).with_timezone(zone), false)
                .ok()
                .map(|previous| previous.with_timezone(&Utc)),
            When::Every(every) => {
                let step = every.as_millis().max(1) as i64;
                let ms = (before.timestamp_millis() - 1).div_euclid(step) * step;
                DateTime::from_timestamp_millis(ms)
            }
        }
    }

    /// The ticks strictly after `after` and at or before `until`, oldest first, at most `max`.
    pub fn ticks_between(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        max: usize,
    ) -> Vec<DateTime<Utc>> {
        let mut ticks = Vec::new();
        let mut at = after;
        while ticks.len() < max {
            match self.next_after(at) {
                Some(next) if next <= until => {
                    ticks.push(next);
                    at = next;
                }
                _ => break,
            }
        }
        ticks
    }
}

/// `at` rounded down (or, with `up`, up) to a whole second.
fn whole_second(at: DateTime<Utc>, up: bool) -> DateTime<Utc> {
    let floor = DateTime::from_timestamp(at.timestamp(), 0).unwrap_or(at);
    match up && floor < at {
        true => floor + chrono::Duration::seconds(1),
        false => floor,
    }
}

fn humanize(every: Duration) -> String {
    let secs = every.as_secs();
    match (secs, every.subsec_millis()) {
        (s, 0) if s % 3600 == 0 && s > 0 => format!("{} h", s / 3600),
        (s, 0) if s % 60 == 0 && s > 0 => format!("{} min", s / 60),
        (s, 0) => format!("{s} s"),
        (_, _) => format!("{} ms", every.as_millis()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
    }

    #[test]
    fn cron_with_and_without_seconds() {
        let minutely = When::cron("*/5 * * * *").unwrap();
        assert_eq!(
            minutely.next_after(utc(2026, 1, 1, 10, 3, 0)),
            Some(utc(2026, 1, 1, 10, 5, 0))
        );
        let secondly = When::cron("*/10 * * * * *").unwrap();
        assert_eq!(
            secondly.ticks_between(utc(2026, 1, 1, 0, 0, 0), utc(2026, 1, 1, 0, 0, 35), 10),
            [
                utc(2026, 1, 1, 0, 0, 10),
                utc(2026, 1, 1, 0, 0, 20),
                utc(2026, 1, 1, 0, 0, 30)
            ]
        );
        assert!(When::cron("61 * * * *").is_err());
    }

    #[test]
    fn a_zone_with_daylight_saving_time_fires_each_day_once_as_cron_does() {
        // Europe/Paris moves from 02:00 to 03:00 on 2026-03-29 and back on 2026-10-25.
        let daily = When::cron("30 2 * * *")
            .unwrap()
            .in_zone(chrono_tz::Europe::Paris);
        // The gap: 02:30 does not exist on 2026-03-29; it fires when the clocks reach 03:00.
        let spring =
            daily.ticks_between(utc(2026, 3, 27, 12, 0, 0), utc(2026, 3, 30, 12, 0, 0), 10);
        assert_eq!(
            spring,
            [
                utc(2026, 3, 28, 1, 30, 0),
                utc(2026, 3, 29, 1, 0, 0),
                utc(2026, 3, 30, 0, 30, 0)
            ]
        );
        // The repeated hour: 02:30 happens twice on 2026-10-25; it fires once, the first time.
        let autumn =
            daily.ticks_between(utc(2026, 10, 24, 12, 0, 0), utc(2026, 10, 26, 12, 0, 0), 10);
        assert_eq!(
            autumn,
            [utc(2026, 10, 25, 0, 30, 0), utc(2026, 10, 26, 1, 30, 0)]
        );
    }

    #[test]
    fn cron_ticks_are_whole_seconds_whenever_they_are_asked_for() {
        let hourly = When::cron("0 0 * * * *").unwrap();
        let at = utc(2026, 1, 1, 10, 3, 0) + chrono::Duration::milliseconds(44);
        assert_eq!(hourly.next_after(at), Some(utc(2026, 1, 1, 11, 0, 0)));
        let secondly = When::cron("* * * * * *").unwrap();
        assert_eq!(secondly.next_after(at), Some(utc(2026, 1, 1, 10, 3, 1)));
        assert_eq!(
            secondly.previous_before(at),
            Some(utc(2026, 1, 1, 10, 3, 0))
        );
    }

    #[test]
    fn previous_ticks_step_back_one_at_a_time() {
        let minutely = When::cron("0 * * * * *").unwrap();
        let at = utc(2026, 1, 1, 10, 3, 0);
        assert_eq!(
            minutely.previous_before(at),
            Some(utc(2026, 1, 1, 10, 2, 0))
        );
        let every = When::Every(Duration::from_secs(60));
        assert_eq!(every.previous_before(at), Some(utc(2026, 1, 1, 10, 2, 0)));
    }

    #[test]
    fn intervals_count_from_the_epoch() {
        let every = When::Every(Duration::from_secs(10));
        assert_eq!(
            every.next_after(utc(2026, 1, 1, 0, 0, 3)),
            Some(utc(2026, 1, 1, 0, 0, 10))
        );
        assert_eq!(every.describe(), "every 10 s");
    }
}
