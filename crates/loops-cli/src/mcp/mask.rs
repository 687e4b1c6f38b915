//! Secrets written into commands, hooks, prompts and URLs, masked in what
//! the tools return (issue 25 §4).
//!
//! The CLI shows its owner a loop's command whole; an MCP client is an
//! agent that may only read, so a `ghp_…` token in a command or a Slack
//! webhook URL in a hook is masked, with the shapes the output scrubber
//! masks in run output ([`loops_exec::mask_credentials`]). A server that
//! allows mutations shows them when a call asks with `showOutput`.
//!
//! Masking walks every string value of the JSON document a tool returns,
//! not a list of fields: a secret can sit in a command, its args, a hook,
//! a prompt, a working directory, a workflow step's target or an error
//! quoting any of them, and a list of fields would miss the next one added.
//! Object keys are left alone (they are field names and env names, whose
//! values are already redacted). A document without anything to mask is
//! returned as the command printed it, so it equals the CLI's `--json`.

use serde_json::Value;

use crate::app::Captured;

/// Masks what `captured` holds: every string of its JSON document, its
/// warnings and its error.
pub(super) fn mask(captured: &mut Captured) {
    if let Some(error) = &mut captured.error {
        mask_text(error);
    }
    for warning in &mut captured.warnings {
        mask_text(warning);
    }
    // The document is parsed, not scanned as text: a token right after an
    // escape (`\ntoken`) is only a word of its own once unescaped.
    match serde_json::from_str::<Value>(&captured.text) {
        Ok(mut document) => {
            if mask_strings(&mut document)
                && let Ok(text) = serde_json::to_string_pretty(&document)
            {
                captured.text = text;
            }
        }
        Err(_) => mask_text(&mut captured.text),
    }
}

/// Masks `text` in place.
fn mask_text(text: &mut String) {
    if let std::borrow::Cow::Owned(masked) = loops_exec::mask_credentials(text) {
        *text = masked;
    }
}

/// Masks every string in `value`; whether any changed.
fn mask_strings(value: &mut Value) -> bool {
    match value {
        Value::String(text) => match loops_exec::mask_credentials(text) {
            std::borrow::Cow::Owned(masked) => {
                *text = masked;
                true
            }
            std::borrow::Cow::Borrowed(_) => false,
        },
        // Every item is masked: no short cut once one changed.
        Value::Array(items) => items.iter_mut().map(mask_strings).fold(false, |a, b| a | b),
        Value::Object(fields) => fields
            .values_mut()
            .map(mask_strings)
            .fold(false, |a, b| a | b),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(text: &str) -> Captured {
        Captured {
            text: text.to_owned(),
            error: None,
            warnings: Vec::new(),
        }
    }

    #[test]
    fn strings_anywhere_in_the_document_are_masked_and_the_rest_kept() {
        let token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
        let document = serde_json::json!({
            "target": {"command": format!("a\n{token}"), "args": ["-H", token], "cwd": "/tmp"},
            "onFailure": "curl https://hooks.slack.com/services/T1/B1/XXXXXXXX",
            "maxAttempts": 3,
        });
        let mut reply = captured(&serde_json::to_string_pretty(&document).unwrap());
        mask(&mut reply);
        let masked: Value = serde_json::from_str(&reply.text).unwrap();
        assert_eq!(
            masked,
            serde_json::json!({
                "target": {"command": "a\n[redacted]", "args": ["-H", "[redacted]"], "cwd": "/tmp"},
                "onFailure": "curl https://hooks.slack.com/services/[redacted]",
                "maxAttempts": 3,
            })
        );
        // Key order and layout are the command's.
        assert!(reply.text.starts_with("{\n  \"target\""), "{}", reply.text);
    }

    #[test]
    fn a_document_without_secrets_is_kept_as_printed() {
        let text = "[\n  {\n    \"id\": \"0123456789ab\",\n    \"n\": 1.50\n  }\n]\n";
        let mut reply = captured(text);
        reply.error = Some(format!("no loop ghp_{}", "a".repeat(36)));
        mask(&mut reply);
        assert_eq!(reply.text, text);
        assert_eq!(reply.error.as_deref(), Some("no loop [redacted]"));
    }
}
