//! `opencode run --format json` (and `aicopilot`, the same CLI): a JSONL
//! stream of `{type, timestamp, sessionID, ...}` events (`run.ts` `emit`).
//! `text` carries a finished text part, `step_finish` one model step's
//! `cost` and `tokens {input, output, reasoning, cache {read, write}}`,
//! `error` a session error, and `done` the session going idle at the end.
//! Steps report their own usage, so cost and tokens are summed over them;
//! reasoning tokens are counted as output.

use serde_json::Value;

use super::{AgentReport, TokenUsage, count, dollars, json_lines, session_id, sum, text};

/// The report of an opencode JSONL stream.
pub(super) fn parse(stdout: &str) -> AgentReport {
    let mut session = None;
    let mut message = None;
    let mut cost: Option<f64> = None;
    let mut usage: Option<TokenUsage> = None;
    let (mut failed, mut done) = (false, false);
    for event in json_lines(stdout) {
        if session.is_none() {
            session = session_id(event.get("sessionID"));
        }
        let part = event.get("part");
        match event.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = text(part.and_then(|part| part.get("text"))) {
                    message = Some(text);
                }
            }
            Some("step_finish") => {
                if let Some(step) = dollars(part.and_then(|part| part.get("cost"))) {
                    cost = Some(cost.unwrap_or_default() + step);
                }
                if let Some(step) = part.and_then(|part| part.get("tokens")).and_then(tokens) {
                    usage = Some(usage.unwrap_or_default().plus(step));
                }
            }
            Some("error") => failed = true,
            Some("done") => done = true,
            _ => {}
        }
    }
    AgentReport {
        session_id: session,
        result: message,
        // A sum of finite costs can still overflow to infinity.
        cost_usd: cost.filter(|cost| cost.is_finite()),
        usage,
        // opencode emits `done` after an error too, so an error wins.
        is_error: if failed {
            Some(true)
        } else {
            done.then_some(false)
        },
    }
}

/// A step's `tokens` object as disjoint counts.
fn tokens(tokens: &Value) -> Option<TokenUsage> {
    let tokens = tokens.as_object()?;
    let cache = tokens.get("cache");
    Some(TokenUsage {
        input_tokens: count(tokens.get("input")),
        output_tokens: sum(count(tokens.get("output")), count(tokens.get("reasoning"))),
        cache_read_tokens: count(cache.and_then(|cache| cache.get("read"))),
        cache_write_tokens: count(cache.and_then(|cache| cache.get("write"))),
    })
}
