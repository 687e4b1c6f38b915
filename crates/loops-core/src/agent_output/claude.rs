//! Claude's `-p --output-format json` output: one `result` object at exit,
//! or, when verbose output is configured, an array of every message with
//! the `result` object last. `stream-json` lines are read too. The fields
//! are those of the Agent SDK's result message: `session_id`, `result` (or
//! `errors` on the error subtypes), `total_cost_usd`, `usage` (the run's
//! totals) and `is_error`, which claude sets on an API error even when it
//! exits 0 with `"subtype":"success"`. Cursor's `--output-format json`
//! envelope has the same fields.

use serde_json::{Map, Value};

use super::{AgentReport, TokenUsage, bounded, count, dollars, json_lines, session_id, text};

/// The report of claude's stdout: the whole output as one document, else
/// its JSONL lines.
pub(super) fn parse(stdout: &str) -> AgentReport {
    parse_envelope(stdout).unwrap_or_else(|| from_messages(json_lines(stdout)))
}

/// The report of a stdout that is one JSON document: a `result` object or
/// an array of messages. `None` when it is not JSON, or JSON of another kind.
pub(super) fn parse_envelope(stdout: &str) -> Option<AgentReport> {
    match serde_json::from_str(stdout.trim()).ok()? {
        Value::Object(message) => Some(from_messages([message])),
        Value::Array(messages) => {
            Some(from_messages(messages.into_iter().filter_map(
                |message| match message {
                    Value::Object(message) => Some(message),
                    _ => None,
                },
            )))
        }
        _ => None,
    }
}

/// The report of a sequence of messages: the last `result` message, with
/// the session id of any message when the result has none to keep.
fn from_messages(messages: impl IntoIterator<Item = Map<String, Value>>) -> AgentReport {
    let mut session = None;
    let mut last_result = None;
    for message in messages {
        if let Some(id) = session_id(message.get("session_id")) {
            session = Some(id);
        }
        if message.get("type").and_then(Value::as_str) == Some("result") {
            last_result = Some(message);
        }
    }
    let Some(result) = last_result else {
        return AgentReport {
            session_id: session,
            ..AgentReport::default()
        };
    };
    AgentReport {
        session_id: session_id(result.get("session_id")).or(session),
        result: text(result.get("result")).or_else(|| errors(&result)),
        cost_usd: dollars(result.get("total_cost_usd")),
        usage: result.get("usage").and_then(usage),
        is_error: result.get("is_error").and_then(Value::as_bool),
    }
}

/// The `errors` of an error subtype (`error_max_turns`,
/// `error_during_execution`, ...), which has no `result`, one a line.
fn errors(result: &Map<String, Value>) -> Option<String> {
    let errors: Vec<&str> = result
        .get("errors")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if errors.is_empty() {
        return None;
    }
    Some(bounded(&errors.join("\n")))
}

/// Claude's usage object, whose four counts are already disjoint.
fn usage(usage: &Value) -> Option<TokenUsage> {
    let usage = usage.as_object()?;
    Some(TokenUsage {
        input_tokens: count(usage.get("input_tokens")),
        output_tokens: count(usage.get("output_tokens")),
        cache_read_tokens: count(usage.get("cache_read_input_tokens")),
        cache_write_tokens: count(usage.get("cache_creation_input_tokens")),
    })
}
