//! Rendering for people: `--json` or aligned tables, cut lines, and times as `5s ago` or
//! `in 2m 5s`. Every `jobsctl` command prints through here.

use chrono::{DateTime, Utc};
use serde::Serialize;
use std::io::Write;

use super::error::CliError;

/// Prints `value` as JSON, or as `human` renders it.
pub(super) fn print<T: Serialize>(
    json: bool,
    value: &T,
    human: impl FnOnce(&T) -> String,
) -> Result<(), CliError> {
    let text = if json {
        let mut text = serde_json::to_string_pretty(value).expect("command output serializes");
        text.push('\n');
        text
    } else {
        human(value)
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// What an empty page of `what` prints. A page that stopped searching (after its budget) with
/// a cursor may be empty while later pages are not, so it does not say there are none.
pub(super) fn none_found(what: &str, next: Option<&str>) -> String {
    match next {
        None => format!("No {what}.\n"),
        Some(_) => format!("No {what} in the part searched so far.\n"),
    }
}

/// Says on stderr how to list the next page, when there is one: `More <what>: add --after
/// <cursor>`. Stdout keeps the page alone, a table or a JSON document.
pub(super) fn more(what: &str, next: Option<&str>) {
    if let Some(next) = next {
        eprintln!("More {what}: add --after {next}");
    }
}

/// Left-aligned columns, two spaces apart.
pub(super) fn table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header_cells: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header_cells).chain(rows.iter()) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The first line of `text`, cut to `max` characters.
pub(super) fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() > max {
        let cut: String = line.chars().take(max - 1).collect();
        format!("{cut}…")
    } else {
        line.to_owned()
    }
}

/// `at` against `now`: `5s ago`, or `in 2m 5s`, with the time itself.
pub(super) fn relative(now: DateTime<Utc>, at: DateTime<Utc>) -> String {
    let secs = (at - now).num_seconds();
    let when = at.format("%Y-%m-%d %H:%M:%S");
    if secs >= 0 {
        format!("{when} (in {})", span(secs))
    } else {
        format!("{when} ({} ago)", span(-secs))
    }
}

pub(super) fn ago(now: DateTime<Utc>, at: DateTime<Utc>) -> String {
    format!("{} ago", span((now - at).num_seconds().max(0)))
}

/// A number of seconds as `45s`, `2m 5s`, `3h 4m` or `2d 3h`.
pub(super) fn span(secs: i64) -> String {
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_naturally() {
        assert_eq!(span(45), "45s");
        assert_eq!(span(125), "2m 5s");
        assert_eq!(span(3 * 3600 + 240), "3h 4m");
        assert_eq!(span(2 * 86400 + 3 * 3600), "2d 3h");
    }

    #[test]
    fn tables_align_columns() {
        let out = table(
            &["A", "LONGER"],
            vec![
                vec!["xyz".into(), "1".into()],
                vec!["q".into(), "22".into()],
            ],
        );
        assert_eq!(out, "A    LONGER\nxyz  1\nq    22\n");
    }

    #[test]
    fn an_empty_page_with_a_cursor_does_not_say_there_are_none() {
        assert_eq!(none_found("batches", None), "No batches.\n");
        assert_eq!(
            none_found("batches", Some("1795612592.0001371/d39695e7")),
            "No batches in the part searched so far.\n"
        );
    }
}
