//! Redaction of what the CLI prints (SPEC §7.2), with the gaps of SPEC §9
//! item 26 closed: every surface, human or `--json`, including `tick --json`
//! and `runs --json`, goes through these functions.
//!
//! | Field | Default | With `--show-output` |
//! |---|---|---|
//! | agent `prompt` longer than 80 characters | first 80 + `... [redacted <n> chars]` | same |
//! | command and agent `env` values | `"[redacted]"` | same |
//! | run `stdout` / `stderr` | `[redacted <n> chars]`, omitted when empty | raw |
//!
//! Workflow step targets are redacted as loop targets are; step runs and a
//! workflow run's summary result (whose stdout embeds every step's output)
//! as loop runs are. Lengths count characters. Error strings, `args`,
//! workflow runs and events are never redacted.

use std::borrow::Cow;

use loops_core::{ExecutorResult, Loop, LoopRun, StepRun, Target, WorkflowSpec};
use loops_scheduler::TickResult;
use serde::Serialize;
use serde_json::{Map, Value, json};

/// Prompts up to this many characters are shown whole.
const PROMPT_VISIBLE_CHARS: usize = 80;

/// Whether run output is shown (`--show-output`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// Replace output by its length.
    Redacted,
    /// Show output as captured.
    Shown,
}

impl Output {
    pub(crate) fn from_flag(show_output: bool) -> Output {
        if show_output {
            Output::Shown
        } else {
            Output::Redacted
        }
    }
}

/// A loop as it may be printed, with its secrets redacted.
///
/// Typed rather than a JSON value: `list --json` prints thousands of these,
/// and most loops have nothing to redact, so they are borrowed as they are.
pub(crate) fn loop_json(lp: &Loop) -> Cow<'_, Loop> {
    let secret = match &lp.target {
        Target::Command(c) => c.env.as_ref().is_some_and(|env| !env.is_empty()),
        Target::Agent(a) => {
            a.prompt.chars().nth(PROMPT_VISIBLE_CHARS).is_some()
                || a.env.as_ref().is_some_and(|env| !env.is_empty())
        }
        Target::Workflow(_) => false,
    };
    if !secret {
        return Cow::Borrowed(lp);
    }
    Cow::Owned(into_loop_json(lp.clone()))
}

/// [`loop_json`] of an owned loop: env values replaced, a long prompt cut.
pub(crate) fn into_loop_json(mut lp: Loop) -> Loop {
    match &mut lp.target {
        Target::Command(c) => {
            for value in c.env.iter_mut().flat_map(|env| env.values_mut()) {
                *value = "[redacted]".to_owned();
            }
        }
        Target::Agent(a) => {
            if a.prompt.chars().nth(PROMPT_VISIBLE_CHARS).is_some() {
                a.prompt = prompt(&a.prompt);
            }
            for value in a.env.iter_mut().flat_map(|env| env.values_mut()) {
                *value = "[redacted]".to_owned();
            }
        }
        Target::Workflow(_) => {}
    }
    lp
}

/// A run as JSON, with its output redacted unless shown: exactly what a
/// hook reads on its stdin (`loops_core::run_json`).
pub(crate) fn run_json(run: &LoopRun, output: Output) -> Value {
    loops_core::run_json(run, output == Output::Shown)
}

/// A workflow step run as JSON, with its output redacted unless shown.
pub(crate) fn step_json(step: &StepRun, output: Output) -> Value {
    with_streams(step, output)
}

/// An executor result as JSON (a workflow run's summary), with its output
/// redacted unless shown: the summary's stdout embeds every step's output.
pub(crate) fn result_json(result: &ExecutorResult, output: Output) -> Value {
    with_streams(result, output)
}

/// A workflow as JSON, with the secrets of its steps' targets redacted.
pub(crate) fn workflow_json(spec: &WorkflowSpec) -> Value {
    let mut value = to_value(spec);
    redact_steps(&mut value);
    value
}

/// Redacts the targets of the `steps` array of a workflow JSON object.
pub(crate) fn redact_steps(workflow: &mut Value) {
    let Some(steps) = workflow.get_mut("steps").and_then(Value::as_array_mut) else {
        return;
    };
    for step in steps {
        if let Some(target) = step.get_mut("target").and_then(Value::as_object_mut) {
            redact_target(target);
        }
    }
}

/// A record with `stdout` and `stderr` fields as JSON, those redacted
/// unless shown: the one shape of `loops_core::streams_json`, which a
/// hook's stdin uses too.
fn with_streams<T: Serialize>(record: &T, output: Output) -> Value {
    loops_core::streams_json(record, output == Output::Shown)
}

/// A tick result as JSON: exactly the keys of SPEC §3.1 step 7.
pub(crate) fn tick_json(result: &TickResult, output: Output) -> Value {
    let runs = |runs: &[LoopRun]| -> Value { runs.iter().map(|r| run_json(r, output)).collect() };
    json!({
        "claimed": runs(&result.claimed),
        "completed": runs(&result.completed),
        "skipped": runs(&result.skipped),
        "recovered": runs(&result.recovered),
        "expired": result.expired.iter().map(loop_json).collect::<Vec<_>>(),
    })
}

/// `[redacted <n> chars]` for a non-empty stream.
pub(crate) fn redacted_len(text: &str) -> String {
    loops_core::redacted_len(text)
}

/// A prompt as it may be printed: whole up to 80 characters, else its
/// first 80 and the count of the rest.
pub(crate) fn prompt(text: &str) -> String {
    let total = text.chars().count();
    if total <= PROMPT_VISIBLE_CHARS {
        return text.to_owned();
    }
    let visible: String = text.chars().take(PROMPT_VISIBLE_CHARS).collect();
    format!(
        "{visible}... [redacted {} chars]",
        total - PROMPT_VISIBLE_CHARS
    )
}

fn redact_target(target: &mut Map<String, Value>) {
    if let Some(Value::Object(env)) = target.get_mut("env") {
        for value in env.values_mut() {
            *value = Value::from("[redacted]");
        }
    }
    if let Some(Value::String(text)) = target.get_mut("prompt") {
        *text = prompt(text);
    }
}

fn to_value<T: Serialize>(record: &T) -> Value {
    // The core records serialize to plain maps of strings and numbers;
    // serde_json cannot fail on them.
    serde_json::to_value(record).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_prompts_keep_their_first_80_characters() {
        assert_eq!(prompt("short"), "short");
        let long = "é".repeat(100);
        assert_eq!(
            prompt(&long),
            format!("{}... [redacted 20 chars]", "é".repeat(80))
        );
        assert_eq!(prompt(&"x".repeat(80)), "x".repeat(80));
    }

    #[test]
    fn empty_streams_are_omitted_and_others_measured() {
        let record = json!({"stdout": "hello", "stderr": ""});
        let fields = with_streams(&record, Output::Redacted);
        assert_eq!(fields["stdout"], "[redacted 5 chars]");
        assert!(fields.get("stderr").is_none());
        assert_eq!(with_streams(&record, Output::Shown), record);
    }
}
