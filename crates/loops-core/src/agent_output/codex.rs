//! `codex exec --json` and `codewith exec --json`: a JSONL stream of
//! thread events (`exec_events.rs`): `thread.started` names the thread,
//! `item.completed` carries each `agent_message`, and `turn.completed`
//! carries the thread's running token total (`turn.failed` when the turn
//! failed). Older codex builds printed each protocol event as
//! `{"id":...,"msg":{"type":...}}` instead: `session_configured`,
//! `agent_message`, `token_count` and `task_complete` with
//! `last_agent_message`; the same events wrapped as `{"payload":{...}}`
//! (codex's rollout lines, which upstream also reads for codewith's
//! `task_complete`) are read the same way.
//!
//! A top-level `error` event is not a failure by itself: codex also reports
//! retries with it, and a failed turn ends with `turn.failed`.

use serde_json::{Map, Value};

use super::{AgentReport, TokenUsage, count, json_lines, session_id, text};

/// What the stream has said so far.
#[derive(Default)]
struct Stream {
    session_id: Option<String>,
    message: Option<String>,
    /// The last `turn.completed` usage, a running total.
    turn_total: Option<TokenUsage>,
    /// The last legacy `token_count.info.total_token_usage`, a running total.
    legacy_total: Option<TokenUsage>,
    /// The sum of the legacy flat `token_count` events, one per request.
    legacy_sum: Option<TokenUsage>,
    is_error: Option<bool>,
}

/// The report of a codex or codewith JSONL stream.
pub(super) fn parse(stdout: &str) -> AgentReport {
    let mut stream = Stream::default();
    for event in json_lines(stdout) {
        match ["msg", "payload"]
            .into_iter()
            .find_map(|key| event.get(key).and_then(Value::as_object))
        {
            Some(inner) => stream.legacy(inner),
            None => stream.current(&event),
        }
    }
    AgentReport {
        session_id: stream.session_id,
        result: stream.message,
        cost_usd: None,
        usage: stream
            .turn_total
            .or(stream.legacy_total)
            .or(stream.legacy_sum),
        is_error: stream.is_error,
    }
}

impl Stream {
    /// One event of the current `thread.*`/`turn.*`/`item.*` stream.
    fn current(&mut self, event: &Map<String, Value>) {
        match event.get("type").and_then(Value::as_str) {
            Some("thread.started") => {
                if let Some(id) = session_id(event.get("thread_id")) {
                    self.session_id = Some(id);
                }
            }
            Some("item.completed") => {
                let item = event.get("item");
                let kind = item
                    .and_then(|item| item.get("type"))
                    .and_then(Value::as_str);
                if kind == Some("agent_message")
                    && let Some(message) = text(item.and_then(|item| item.get("text")))
                {
                    self.message = Some(message);
                }
            }
            Some("turn.completed") => {
                if let Some(total) = event.get("usage").and_then(usage) {
                    self.turn_total = Some(total);
                }
                self.is_error = Some(false);
            }
            Some("turn.failed") => self.is_error = Some(true),
            _ => {}
        }
    }

    /// One legacy protocol event, the object under `msg` or `payload`.
    fn legacy(&mut self, event: &Map<String, Value>) {
        match event.get("type").and_then(Value::as_str) {
            Some("session_configured") => {
                if let Some(id) = session_id(event.get("session_id")) {
                    self.session_id = Some(id);
                }
            }
            Some("agent_message") => {
                if let Some(message) = text(event.get("message")) {
                    self.message = Some(message);
                }
            }
            Some("token_count") => self.token_count(event),
            Some("task_complete") => {
                if let Some(message) = text(event.get("last_agent_message")) {
                    self.message = Some(message);
                }
                self.is_error = Some(false);
            }
            // The legacy `error` event ended the task; retries were
            // `stream_error`.
            Some("error") => self.is_error = Some(true),
            _ => {}
        }
    }

    /// A legacy `token_count`: `{info: {total_token_usage}}` (a running
    /// total) from late 2025, flat per-request counts before.
    fn token_count(&mut self, event: &Map<String, Value>) {
        if let Some(info) = event.get("info") {
            if let Some(total) = info.get("total_token_usage").and_then(usage) {
                self.legacy_total = Some(total);
            }
            return;
        }
        let request = counts(event);
        self.legacy_sum = Some(self.legacy_sum.unwrap_or_default().plus(request));
    }
}

/// A codex usage object as disjoint counts.
fn usage(usage: &Value) -> Option<TokenUsage> {
    usage.as_object().map(counts)
}

/// The counts of a codex usage object, or of a flat legacy `token_count`:
/// `input_tokens` includes `cached_input_tokens`, which is subtracted.
fn counts(usage: &Map<String, Value>) -> TokenUsage {
    let cached = count(usage.get("cached_input_tokens"));
    TokenUsage {
        input_tokens: count(usage.get("input_tokens")).saturating_sub(cached),
        output_tokens: count(usage.get("output_tokens")),
        cache_read_tokens: cached,
        cache_write_tokens: count(usage.get("cache_write_input_tokens")),
    }
}
