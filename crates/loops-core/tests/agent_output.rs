//! Agent output parsing through the public API (issue 27): arbitrary text,
//! cut fixtures and random JSON of the providers' shapes never make
//! `parse_agent_output` panic, and what it returns stays within its rules
//! (a bounded result, finite non-negative cost, a session id that is no
//! option, token counts within `i64`); large output is read in one pass.

use loops_core::{AgentProvider, AgentReport, MAX_AGENT_RESULT_BYTES, parse_agent_output};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Value, json};

const FIXTURES: [&str; 8] = [
    include_str!("fixtures/agent_output/claude_success.json"),
    include_str!("fixtures/agent_output/claude_is_error.json"),
    include_str!("fixtures/agent_output/claude_verbose_array.json"),
    include_str!("fixtures/agent_output/codex_exec.jsonl"),
    include_str!("fixtures/agent_output/codex_legacy.jsonl"),
    include_str!("fixtures/agent_output/codewith_exec.jsonl"),
    include_str!("fixtures/agent_output/opencode_run.jsonl"),
    include_str!("fixtures/agent_output/cursor_json.json"),
];

/// Keys and `type` values the parsers look at, so random JSON reaches them.
const KEYS: &[&str] = &[
    "type",
    "subtype",
    "session_id",
    "sessionID",
    "thread_id",
    "result",
    "errors",
    "total_cost_usd",
    "usage",
    "is_error",
    "input_tokens",
    "cached_input_tokens",
    "cache_write_input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "item",
    "text",
    "msg",
    "payload",
    "message",
    "last_agent_message",
    "info",
    "total_token_usage",
    "part",
    "cost",
    "tokens",
    "input",
    "output",
    "reasoning",
    "cache",
    "read",
    "write",
];
const TYPES: &[&str] = &[
    "result",
    "system",
    "assistant",
    "thread.started",
    "turn.completed",
    "turn.failed",
    "item.completed",
    "agent_message",
    "error",
    "session_configured",
    "token_count",
    "task_complete",
    "event_msg",
    "text",
    "step_finish",
    "done",
];

/// A proptest config with `default` cases unless `PROPTEST_CASES` says
/// otherwise, and no regressions file.
fn config(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Asserts the invariants of any report.
fn check_report(report: &AgentReport) {
    if let Some(result) = &report.result {
        assert!(
            result.len() <= MAX_AGENT_RESULT_BYTES,
            "result of {} bytes",
            result.len()
        );
    }
    if let Some(cost) = report.cost_usd {
        assert!(cost.is_finite() && cost >= 0.0, "cost {cost}");
    }
    if let Some(id) = &report.session_id {
        let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-');
        assert!(
            (1..=128).contains(&id.len()) && !id.starts_with('-') && id.bytes().all(allowed),
            "session id {id:?}"
        );
    }
    if let Some(usage) = report.usage {
        let counts = [
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
        ];
        assert!(
            counts.iter().all(|n| *n <= i64::MAX.unsigned_abs()),
            "{usage:?}"
        );
    }
}

fn parse_all(stdout: &str) {
    for provider in AgentProvider::ALL.iter().copied() {
        check_report(&parse_agent_output(provider, stdout));
    }
}

/// Random JSON whose object keys and strings are often ones the parsers
/// read.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|n| json!(n)),
        prop::sample::select(TYPES).prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|pairs| {
                Value::Object(
                    pairs
                        .into_iter()
                        .map(|(key, value)| (key.to_owned(), value))
                        .collect::<Map<String, Value>>(),
                )
            }),
        ]
    })
}

/// An event: an object with a known `type` and random fields.
fn event() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(TYPES),
        prop::collection::vec((prop::sample::select(KEYS), json_value()), 0..6),
    )
        .prop_map(|(kind, fields)| {
            let mut object: Map<String, Value> = fields
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value))
                .collect();
            object.insert("type".to_owned(), Value::from(kind));
            Value::Object(object)
        })
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn arbitrary_text_never_panics(stdout in any::<String>()) {
        parse_all(&stdout);
    }

    #[test]
    fn cut_and_spliced_fixtures_never_panic(
        first in 0..FIXTURES.len(),
        second in 0..FIXTURES.len(),
        start in any::<prop::sample::Index>(),
        end in any::<prop::sample::Index>(),
        noise in ".{0,8}",
    ) {
        let whole = format!("{}{noise}\n{}", FIXTURES[first], FIXTURES[second]);
        let (mut a, mut b) = (start.index(whole.len() + 1), end.index(whole.len() + 1));
        if a > b {
            std::mem::swap(&mut a, &mut b);
        }
        while !whole.is_char_boundary(a) {
            a -= 1;
        }
        while !whole.is_char_boundary(b) {
            b -= 1;
        }
        parse_all(&whole[a..b]);
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn random_events_never_panic(
        events in prop::collection::vec(event(), 0..8),
        as_array in any::<bool>(),
    ) {
        let lines: Vec<String> = events.iter().map(Value::to_string).collect();
        let stdout = if as_array { format!("[{}]", lines.join(",")) } else { lines.join("\n") };
        parse_all(&stdout);
    }
}

#[test]
fn large_output_is_read_in_one_pass() {
    // 20,000 agent messages of 200 bytes: concatenating them, or rescanning
    // the stream per line, would be quadratic and take minutes.
    let body = "x".repeat(200);
    let mut stdout = String::from("{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n");
    for n in 0..20_000 {
        stdout.push_str(&format!(
            "{{\"type\":\"item.completed\",\"item\":{{\"id\":\"item_{n}\",\"type\":\"agent_message\",\"text\":\"{n} {body}\"}}}}\n"
        ));
    }
    stdout.push_str(
        "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":3,\"output_tokens\":4}}\n",
    );
    let report = parse_agent_output(AgentProvider::Codex, &stdout);
    assert_eq!(report.result, Some(format!("19999 {body}")));
    assert_eq!(report.usage.map(|usage| usage.output_tokens), Some(4));

    // A 2 MiB result is kept to its first MAX_AGENT_RESULT_BYTES.
    let huge = "é".repeat(1 << 20);
    let envelope = json!({"type": "result", "result": huge, "is_error": false}).to_string();
    let report = parse_agent_output(AgentProvider::Claude, &envelope);
    let result = report.result.unwrap_or_default();
    assert!(result.len() <= MAX_AGENT_RESULT_BYTES && result.len() > MAX_AGENT_RESULT_BYTES - 2);
    assert!(huge.starts_with(&result));
}
