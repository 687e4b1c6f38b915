//! A workflow run as an executor result (SPEC §6.7), with a bounded summary
//! (SPEC §9 item 25).
//!
//! The original puts every step's full output into the result's stdout, so
//! a workflow of chatty steps stores megabytes in its loop run. Here the
//! summary `{workflowRun, steps}` is built in stages until it fits the
//! executor's output cap:
//! 1. each step's stdout and stderr keep their last
//!    [`STEP_OUTPUT_SUMMARY_BYTES`], behind a `[truncated <n> bytes]` marker
//!    (the same marker as captured output);
//! 2. if that is still too big, step outputs are reduced to the marker;
//! 3. if even that is too big (thousands of steps), only the first steps
//!    that fit are listed, and `omittedSteps` counts the rest.
//!
//! Every stage is valid pretty-printed JSON. The full output of every step
//! stays in its step row (`workflows inspect`). Only a cap smaller than the
//! run record itself falls back to cutting the text.

use loops_core::{ExecutorResult, ExecutorStatus, StepRun, WorkflowRun, WorkflowRunStatus};
use serde::Serialize;

/// How much of each step's stdout and of its stderr a summary keeps: the
/// last 4 KiB.
pub const STEP_OUTPUT_SUMMARY_BYTES: usize = 4096;

/// Maps a workflow run to the result a loop run records (SPEC §6.7).
///
/// - status: succeeded and timed_out map to themselves, everything else
///   (including cancelled) to failed; exit code 0 when succeeded, else 1;
/// - stdout: the pretty JSON `{workflowRun, steps}`, at most
///   `max_output_bytes` (see the module docs); stderr: empty; no pid;
/// - error: the run's error, else `fallback_error` (the reason the runner
///   stopped);
/// - started/finished: the run's; duration: the run's, else the time
///   between them.
pub fn workflow_result(
    run: &WorkflowRun,
    steps: &[StepRun],
    fallback_error: Option<&str>,
    max_output_bytes: usize,
) -> ExecutorResult {
    let status = match run.status {
        WorkflowRunStatus::Succeeded => ExecutorStatus::Succeeded,
        WorkflowRunStatus::TimedOut => ExecutorStatus::TimedOut,
        _ => ExecutorStatus::Failed,
    };
    let started_at = run.started_at.unwrap_or(run.created_at);
    let finished_at = run.finished_at.unwrap_or(run.updated_at);
    ExecutorResult {
        status,
        exit_code: Some(if status == ExecutorStatus::Succeeded {
            0
        } else {
            1
        }),
        stdout: summary(run, steps, max_output_bytes),
        stderr: String::new(),
        error: run
            .error
            .clone()
            .or_else(|| fallback_error.map(str::to_owned)),
        pid: None,
        started_at,
        finished_at,
        duration_ms: run
            .duration_ms
            .unwrap_or_else(|| finished_at.millis_since(started_at).max(0)),
        facts: Default::default(),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary<'a> {
    workflow_run: &'a WorkflowRun,
    steps: &'a [StepRun],
    #[serde(skip_serializing_if = "Option::is_none")]
    omitted_steps: Option<usize>,
}

/// The bounded summary (see the module docs).
fn summary(run: &WorkflowRun, steps: &[StepRun], max: usize) -> String {
    let render = |steps: &[StepRun], omitted: usize| {
        let summary = Summary {
            workflow_run: run,
            steps,
            omitted_steps: (omitted > 0).then_some(omitted),
        };
        // Serializing plain records into a string cannot fail; an empty
        // summary is still a bounded one.
        serde_json::to_string_pretty(&summary).unwrap_or_default()
    };
    let capped = |keep: usize| -> Vec<StepRun> {
        steps
            .iter()
            .map(|s| StepRun {
                stdout: s.stdout.as_deref().map(|t| tail(t, keep)),
                stderr: s.stderr.as_deref().map(|t| tail(t, keep)),
                ..s.clone()
            })
            .collect()
    };
    let text = render(&capped(STEP_OUTPUT_SUMMARY_BYTES), 0);
    if text.len() <= max {
        return text;
    }
    let bare = capped(0);
    let text = render(&bare, 0);
    if text.len() <= max {
        return text;
    }
    // The longest prefix of the steps that fits, by bisection: the rendered
    // size grows with the number of steps listed.
    let (mut lo, mut hi) = (0, bare.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if render(&bare[..mid], bare.len() - mid).len() <= max {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let text = render(&bare[..lo], bare.len() - lo);
    if text.len() <= max {
        return text;
    }
    tail(&text, max)
}

/// The last bytes of `text` that fit in `max` together with a
/// `[truncated <n> bytes]\n` marker, cut on a character boundary. Text that
/// fits is returned as is.
fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    // The marker's length depends on the count it shows; the count is at
    // most `text.len()`, so reserve room for that many digits.
    let marker_room = format!("[truncated {} bytes]\n", text.len()).len();
    let keep = max.saturating_sub(marker_room);
    let mut start = text.len() - keep;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let kept = &text[start..];
    let marker = format!("[truncated {start} bytes]\n");
    if marker.len() + kept.len() <= max || keep == 0 {
        format!("{marker}{kept}")
    } else {
        // Only reachable with a cap below the marker's own length.
        marker
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_keep_the_end_behind_a_marker() {
        assert_eq!(tail("hello", 10), "hello");
        let t = tail(&"x".repeat(100), 40);
        assert!(t.starts_with("[truncated ") && t.len() <= 40, "{t}");
        assert!(t.ends_with("xxxx"));
        // Never cuts a multi-byte character.
        let t = tail(&"é".repeat(100), 41);
        assert!(t.len() <= 41 && t.ends_with('é'), "{t}");
        assert_eq!(tail(&"x".repeat(100), 0), "[truncated 100 bytes]\n");
    }
}
