//! The JSON shape of a run as every surface prints it (SPEC §7.2): the
//! record's own JSON with `stdout` and `stderr` replaced by their length
//! unless shown. `loops runs --json` and a hook's stdin (issue 17) both use
//! it, so the two cannot drift.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::model::LoopRun;

/// A run as JSON, its output redacted unless `show_output`.
pub fn run_json(run: &LoopRun, show_output: bool) -> Value {
    streams_json(run, show_output)
}

/// A record with `stdout`, `stderr` and `result` fields as JSON, those
/// redacted unless `show_output`: an empty stream is omitted, another becomes
/// `[redacted <n> chars]`.
pub fn streams_json<T: Serialize>(record: &T, show_output: bool) -> Value {
    // The core records serialize to plain maps of strings and numbers;
    // serde_json cannot fail on them.
    let mut value = serde_json::to_value(record).unwrap_or(Value::Null);
    if !show_output && let Some(fields) = value.as_object_mut() {
        for stream in ["stdout", "stderr", "result"] {
            redact_stream(fields, stream);
        }
    }
    value
}

/// `[redacted <n> chars]` for a non-empty stream; lengths count characters.
pub fn redacted_len(text: &str) -> String {
    format!("[redacted {} chars]", text.chars().count())
}

fn redact_stream(fields: &mut Map<String, Value>, stream: &str) {
    match fields.get(stream) {
        Some(Value::String(text)) if text.is_empty() => {
            // shift_remove keeps the order of the remaining keys.
            fields.shift_remove(stream);
        }
        Some(Value::String(text)) => {
            let redacted = redacted_len(text);
            fields.insert(stream.to_owned(), Value::from(redacted));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_redacted_to_its_length_unless_shown() {
        let record = serde_json::json!({
            "id": "r", "stdout": "héllo", "stderr": "", "result": "done", "error": "boom",
        });
        let redacted = streams_json(&record, false);
        assert_eq!(
            redacted,
            serde_json::json!({
                "id": "r", "stdout": "[redacted 5 chars]", "result": "[redacted 4 chars]",
                "error": "boom",
            })
        );
        // The empty stream is gone; the rest keep their order.
        let keys: Vec<&str> = redacted
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["id", "stdout", "result", "error"]);
        assert_eq!(streams_json(&record, true), record);
    }
}
