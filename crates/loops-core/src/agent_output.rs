//! What an agent run reports about itself (issue 27, "What each run did and
//! cost"): its session id, its final message, what it cost, its token usage
//! and whether it says it failed, read from the machine output each provider
//! prints in the mode loops runs it in (`agents-0.5.11.md` §2-§3). Upstream
//! reads none of it.
//!
//! | Provider | Mode | Read from |
//! | --- | --- | --- |
//! | claude | `-p --output-format json` | the `result` object (also the last of a verbose array, or of `stream-json` lines) |
//! | codex, codewith | `exec --json` JSONL | `thread.started`, `item.completed` agent messages, `turn.completed`/`turn.failed`; the older `{"id","msg":{...}}` events too |
//! | opencode, aicopilot | `run --format json` JSONL | `sessionID`, `text` parts, `step_finish` parts, `error` and `done` events |
//! | cursor | plain text | nothing, unless the whole stdout is a JSON `result` envelope |
//!
//! Usage is always `{inputTokens, outputTokens, cacheReadTokens,
//! cacheWriteTokens}`. `inputTokens` excludes cache reads: codex's and
//! codewith's `input_tokens` include their `cached_input_tokens`, which is
//! subtracted, as codex's own `TokenUsage::non_cached_input` does, while
//! claude and opencode report the two apart. Cache writes are taken as each
//! provider states them (claude's `cache_creation_input_tokens`, codewith's
//! `cache_write_input_tokens`, opencode's `cache.write`). `outputTokens`
//! includes reasoning tokens (opencode reports them apart and they are
//! added). Whether usage is summed depends on what the stream reports:
//!
//! - opencode reports each step's tokens and cost (`step_finish`), so they
//!   are **summed** over the steps;
//! - codex's legacy flat `token_count` events report one model request each,
//!   so they are summed too;
//! - claude's `result` object, codex's `turn.completed` (the thread's
//!   running total) and the legacy `token_count.info.total_token_usage` are
//!   already totals, so the **last** one is taken.
//!
//! Only claude and opencode state a cost.
//!
//! Rules: [`parse`] never fails and never panics. Output that is missing,
//! empty, not JSON or of another shape gives an [`AgentReport`] whose fields
//! are `None`; a malformed run output never fails a run by itself. In a
//! JSONL stream a line that does not start with `{` (after trimming) or
//! that does not parse is skipped, as upstream does: the first line of a
//! truncated tail is usually partial; a claude document cut by the output
//! retention is not JSON and gives nothing. The cost is linear in the input:
//! each line is parsed once and nothing is concatenated. The result text is
//! cut to its first [`MAX_AGENT_RESULT_BYTES`] bytes at a character
//! boundary; it is not scrubbed here, which is the caller's job, as for
//! stdout. A session id is kept only when it is 1 to 128 of `A-Z a-z 0-9
//! . _ : -` and does not start with `-`: it may be passed to the agent's
//! CLI as an argument, and must never read as an option. A token count, or
//! a sum of them, stops at `i64::MAX`, the most a database column holds.

mod claude;
mod codex;
mod opencode;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::status::AgentProvider;

/// The most bytes of an agent's final message an [`AgentReport`] keeps.
pub const MAX_AGENT_RESULT_BYTES: usize = 64 * 1024;

/// The longest session id kept, in bytes (all ASCII).
const MAX_SESSION_ID_LEN: usize = 128;

/// The most a token count is: `i64::MAX`, the most a database column
/// holds.
const MAX_TOKENS: u64 = i64::MAX.unsigned_abs();

/// What one agent run reported about itself; every field is `None` when the
/// output did not state it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentReport {
    /// The provider's id of the session or thread, for resuming it; only
    /// an id that is safe as an argument (see the module doc).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The agent's final message, at most [`MAX_AGENT_RESULT_BYTES`] bytes, not
    /// scrubbed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// What the run cost in US dollars, when the provider says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Tokens used, when the provider says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// Whether the output says the run failed (claude's `is_error`, a
    /// failed codex turn, an opencode `error` event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

impl AgentReport {
    /// Whether the output stated nothing at all.
    pub fn is_empty(&self) -> bool {
        *self == AgentReport::default()
    }
}

/// Tokens one run used; see the module doc for what each provider's counts
/// mean.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// Input tokens not read from a prompt cache.
    pub input_tokens: u64,
    /// Output tokens, reasoning included.
    pub output_tokens: u64,
    /// Input tokens read from a prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to a prompt cache.
    pub cache_write_tokens: u64,
}

impl TokenUsage {
    /// The two usages added field by field, up to `i64::MAX`.
    fn plus(self, other: TokenUsage) -> TokenUsage {
        TokenUsage {
            input_tokens: sum(self.input_tokens, other.input_tokens),
            output_tokens: sum(self.output_tokens, other.output_tokens),
            cache_read_tokens: sum(self.cache_read_tokens, other.cache_read_tokens),
            cache_write_tokens: sum(self.cache_write_tokens, other.cache_write_tokens),
        }
    }
}

/// What `provider`'s run reported in its `stdout`; see the module doc for
/// what is read from each provider. Never fails: unreadable output gives an
/// empty report.
///
/// ```
/// use loops_core::{AgentProvider, parse_agent_output};
/// let stdout = r#"{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s-1","total_cost_usd":0.25}"#;
/// let report = parse_agent_output(AgentProvider::Claude, stdout);
/// assert_eq!(report.result.as_deref(), Some("done"));
/// assert_eq!(report.cost_usd, Some(0.25));
/// assert_eq!(report.is_error, Some(false));
/// assert!(parse_agent_output(AgentProvider::Codex, "not json").is_empty());
/// ```
pub fn parse(provider: AgentProvider, stdout: &str) -> AgentReport {
    match provider {
        AgentProvider::Claude => claude::parse(stdout),
        // 0.5.11 runs cursor without `--output-format`, so its stdout is the
        // answer as text; only a whole JSON envelope is read.
        AgentProvider::Cursor => claude::parse_envelope(stdout).unwrap_or_default(),
        AgentProvider::Codex | AgentProvider::Codewith => codex::parse(stdout),
        AgentProvider::Opencode | AgentProvider::Aicopilot => opencode::parse(stdout),
    }
}

/// The JSON objects of a JSONL stream, in order: each line trimmed (which
/// also drops a `\r`), kept if it starts with `{` and parses to an object.
fn json_lines(stdout: &str) -> impl Iterator<Item = Map<String, Value>> + '_ {
    stdout
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with('{'))
        .filter_map(|line| match serde_json::from_str(line) {
            Ok(Value::Object(object)) => Some(object),
            _ => None,
        })
}

/// A token count: a non-negative integer, or a float cut to one, at most
/// `i64::MAX`; anything else (absent, negative, text) counts 0.
fn count(value: Option<&Value>) -> u64 {
    let Some(value) = value else { return 0 };
    let n = match value.as_u64() {
        Some(n) => n,
        // `as` truncates the fraction and saturates: a negative float gives
        // 0, one beyond the range u64::MAX.
        None => value.as_f64().map_or(0, |n| n as u64),
    };
    n.min(MAX_TOKENS)
}

/// Two token counts added, up to `i64::MAX`.
fn sum(a: u64, b: u64) -> u64 {
    a.saturating_add(b).min(MAX_TOKENS)
}

/// A dollar amount: a finite, non-negative number.
fn dollars(value: Option<&Value>) -> Option<f64> {
    value
        .and_then(Value::as_f64)
        .filter(|n| n.is_finite() && *n >= 0.0)
}

/// A string field, bounded as a result.
fn text(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).map(bounded)
}

/// A session id field, when it is one safe to pass as an argument (see
/// the module doc); any other value is not stated.
fn session_id(value: Option<&Value>) -> Option<String> {
    value
        .and_then(Value::as_str)
        .filter(|id| is_session_id(id))
        .map(str::to_owned)
}

/// 1 to [`MAX_SESSION_ID_LEN`] of `A-Z a-z 0-9 . _ : -`, not starting with
/// `-`, so never an option.
fn is_session_id(id: &str) -> bool {
    (1..=MAX_SESSION_ID_LEN).contains(&id.len())
        && !id.starts_with('-')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// The first [`MAX_AGENT_RESULT_BYTES`] bytes of `text`, cut back to a
/// character boundary.
fn bounded(text: &str) -> String {
    text[..text.floor_char_boundary(MAX_AGENT_RESULT_BYTES)].to_owned()
}

#[cfg(test)]
mod tests;
