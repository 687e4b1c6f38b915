//! The daemon's log line for a run: `run <id> started: <name> slot=…
//! attempt=… loop=<loop id>` when it is claimed and `run <id> <status>: …
//! in <ms>ms exit=<code> (<error>)` when
//! it ends (issue 16 §4), so `loops daemon logs -f` says how each run
//! ended without a second command.
//!
//! The line holds the first line of the run's `error` (which loops writes,
//! already masked of the run's secrets), cut at [`ERROR_CHARS`]
//! characters, never the run's output. Every stored string in it (the
//! loop's name, the error) has its control characters escaped, so one
//! run is one line of the log and no name can move a terminal's cursor.

use loops_core::{LoopRun, RunStatus};

/// The most characters of a run's error a line holds.
pub(super) const ERROR_CHARS: usize = 160;

/// One log line for a run.
pub(super) fn describe_run(run: &LoopRun) -> String {
    let mut line = match run.status {
        RunStatus::Running => format!("run {} started", run.id),
        status => format!("run {} {status}", run.id),
    };
    // `loop=` lets `daemon logs --loop` find a loop's lines whatever its
    // name was then (issue 28).
    line.push_str(&format!(
        ": {} slot={} attempt={} loop={}",
        escape(&run.loop_name),
        run.scheduled_for,
        run.attempt,
        run.loop_id
    ));
    if run.status != RunStatus::Running {
        if let Some(ms) = run.duration_ms {
            line.push_str(&format!(" in {ms}ms"));
        }
        if let Some(code) = run.exit_code {
            line.push_str(&format!(" exit={code}"));
        }
    }
    if let Some(error) = &run.error {
        line.push_str(&format!(" ({})", first_line(error)));
    }
    line
}

/// The first non-empty line of `error`, escaped and cut, with `…` when
/// something was left out.
fn first_line(error: &str) -> String {
    let mut lines = error.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("");
    let more = lines.next().is_some();
    let mut shown: String = first.chars().take(ERROR_CHARS).collect();
    let cut = shown.len() < first.len();
    shown = escape(&shown);
    if cut || more {
        shown.push('…');
    }
    shown
}

/// `text` with each character a terminal would not show as itself (a
/// control, bidi or zero-width character) written as its Rust escape.
fn escape(text: &str) -> String {
    loops_core::escape_for_terminal(text, &[]).unwrap_or_else(|| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(status: RunStatus, exit_code: Option<i32>, error: Option<&str>) -> LoopRun {
        let at = "2026-01-02T03:04:05.000Z";
        let mut run: LoopRun = serde_json::from_value(serde_json::json!({
            "id": "0123456789ab", "loopId": "ba9876543210", "loopName": "nightly\u{1b}[2J",
            "scheduledFor": at, "attempt": 1, "status": "running",
            "createdAt": at, "updatedAt": at,
        }))
        .unwrap();
        run.status = status;
        run.exit_code = exit_code;
        run.error = error.map(str::to_owned);
        run.duration_ms = Some(12);
        run
    }

    #[test]
    fn the_finish_line_gives_the_exit_code_and_the_first_error_line() {
        let line = describe_run(&run(
            RunStatus::Failed,
            Some(3),
            Some("process exited with code 3\nsecond line"),
        ));
        assert_eq!(
            line,
            "run 0123456789ab failed: nightly\\u{1b}[2J slot=2026-01-02T03:04:05.000Z \
             attempt=1 loop=ba9876543210 in 12ms exit=3 (process exited with code 3…)"
        );
        let started = describe_run(&run(RunStatus::Running, None, None));
        assert_eq!(
            started,
            "run 0123456789ab started: nightly\\u{1b}[2J slot=2026-01-02T03:04:05.000Z attempt=1 \
             loop=ba9876543210"
        );
    }

    #[test]
    fn a_long_error_is_cut_and_its_controls_escaped() {
        let long = format!("bell\u{7}{}", "x".repeat(500));
        let line = describe_run(&run(RunStatus::TimedOut, None, Some(&long)));
        let kept = "x".repeat(ERROR_CHARS - 5);
        assert!(line.ends_with(&format!("(bell\\u{{7}}{kept}…)")), "{line}");
        assert!(!line.contains('\u{7}'));
    }

    #[test]
    fn bidi_and_zero_width_characters_are_escaped_in_the_log_line() {
        let line = describe_run(&run(
            RunStatus::Failed,
            Some(1),
            Some("safe\u{202e}txt.exe\u{200b}"),
        ));
        assert!(line.contains("safe\\u{202e}txt.exe\\u{200b}"), "{line}");
        assert!(!line.chars().any(loops_core::hides_on_terminal), "{line}");
    }
}
