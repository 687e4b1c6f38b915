//! Unit tests of agent output parsing: each fixture of
//! `tests/fixtures/agent_output/` read to its expected report, and the
//! rules for missing, malformed and truncated output.

use super::*;

const CLAUDE_SUCCESS: &str = include_str!("../../tests/fixtures/agent_output/claude_success.json");
const CLAUDE_IS_ERROR: &str =
    include_str!("../../tests/fixtures/agent_output/claude_is_error.json");
const CLAUDE_VERBOSE: &str =
    include_str!("../../tests/fixtures/agent_output/claude_verbose_array.json");
const CODEX_EXEC: &str = include_str!("../../tests/fixtures/agent_output/codex_exec.jsonl");
const CODEX_LEGACY: &str = include_str!("../../tests/fixtures/agent_output/codex_legacy.jsonl");
const CODEWITH_EXEC: &str = include_str!("../../tests/fixtures/agent_output/codewith_exec.jsonl");
const OPENCODE_RUN: &str = include_str!("../../tests/fixtures/agent_output/opencode_run.jsonl");
const CURSOR_JSON: &str = include_str!("../../tests/fixtures/agent_output/cursor_json.json");

fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Option<TokenUsage> {
    Some(TokenUsage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: cache_read,
        cache_write_tokens: cache_write,
    })
}

fn report(
    session_id: Option<&str>,
    result: Option<&str>,
    cost_usd: Option<f64>,
    usage: Option<TokenUsage>,
    is_error: Option<bool>,
) -> AgentReport {
    AgentReport {
        session_id: session_id.map(str::to_owned),
        result: result.map(str::to_owned),
        cost_usd,
        usage,
        is_error,
    }
}

fn check(provider: AgentProvider, stdout: &str, expected: AgentReport) {
    assert_eq!(
        parse(provider, stdout),
        expected,
        "{provider} output:\n{stdout}"
    );
}

#[test]
fn claude_success_fixture() {
    check(
        AgentProvider::Claude,
        CLAUDE_SUCCESS,
        report(
            Some("3b9f1c2e-7a4d-4e8b-9c1f-0000000000a1"),
            Some(
                "Fixed the flaky `retry_backoff` test: the jitter now comes from the injected \
                 clock.\n\n`cargo test -p demo` passes (42 tests).",
            ),
            Some(0.18342975),
            usage(38, 2417, 187_344, 12_873),
            Some(false),
        ),
    );
}

#[test]
fn claude_is_error_fixture_is_read() {
    let parsed = parse(AgentProvider::Claude, CLAUDE_IS_ERROR);
    assert_eq!(parsed.is_error, Some(true));
    assert_eq!(
        parsed.session_id.as_deref(),
        Some("3b9f1c2e-7a4d-4e8b-9c1f-0000000000c3")
    );
    assert!(
        parsed
            .result
            .as_deref()
            .is_some_and(|r| r.starts_with("API Error: 429 {"))
    );
    assert_eq!(parsed.cost_usd, Some(0.0));
    assert_eq!(parsed.usage, usage(0, 0, 0, 0));
}

#[test]
fn claude_verbose_array_reads_the_last_result() {
    let expected = report(
        Some("3b9f1c2e-7a4d-4e8b-9c1f-0000000000e5"),
        Some("The README now documents the `--idle-timeout` flag."),
        Some(0.0161906),
        usage(9, 187, 29_604, 2210),
        Some(false),
    );
    check(AgentProvider::Claude, CLAUDE_VERBOSE, expected.clone());
    // The same messages as `stream-json` lines.
    let Ok(Value::Array(messages)) = serde_json::from_str(CLAUDE_VERBOSE) else {
        panic!("the fixture is an array");
    };
    let lines: Vec<String> = messages.iter().map(Value::to_string).collect();
    check(AgentProvider::Claude, &lines.join("\n"), expected);
}

#[test]
fn claude_pretty_printed_envelope_is_one_document() {
    let Ok(value) = serde_json::from_str::<Value>(CLAUDE_SUCCESS) else {
        panic!("the fixture is JSON");
    };
    let pretty = serde_json::to_string_pretty(&value).unwrap_or_default();
    assert!(pretty.lines().count() > 1);
    assert_eq!(
        parse(AgentProvider::Claude, &pretty),
        parse(AgentProvider::Claude, CLAUDE_SUCCESS)
    );
}

#[test]
fn claude_stream_cut_before_its_result_keeps_the_session() {
    let init = r#"{"type":"system","subtype":"init","session_id":"s-init"}"#;
    let partial = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"half"#;
    check(
        AgentProvider::Claude,
        &format!("{init}\n{partial}"),
        report(Some("s-init"), None, None, None, None),
    );
}

#[test]
fn claude_session_id_of_the_result_wins_else_any_message() {
    let init = r#"{"type":"system","session_id":"a"}"#;
    let with_id = r#"{"type":"result","session_id":"b"}"#;
    let without = r#"{"type":"result","result":"r"}"#;
    assert_eq!(
        parse(AgentProvider::Claude, &format!("{init}\n{with_id}"))
            .session_id
            .as_deref(),
        Some("b")
    );
    assert_eq!(
        parse(AgentProvider::Claude, &format!("{init}\n{without}"))
            .session_id
            .as_deref(),
        Some("a")
    );
    let second = r#"{"type":"result","result":"second"}"#;
    let first = r#"{"type":"result","result":"first"}"#;
    let parsed = parse(AgentProvider::Claude, &format!("[{first},{second}]"));
    assert_eq!(parsed.result.as_deref(), Some("second"));
}

#[test]
fn claude_error_subtypes_report_their_errors() {
    let stdout = r#"{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["first",7,"second"],"session_id":"s"}"#;
    let parsed = parse(AgentProvider::Claude, stdout);
    assert_eq!(parsed.result.as_deref(), Some("first\nsecond"));
    assert_eq!(parsed.is_error, Some(true));
    for errors in [r#"[]"#, r#"[1,null]"#, r#""text""#] {
        let stdout = format!(r#"{{"type":"result","errors":{errors}}}"#);
        assert_eq!(
            parse(AgentProvider::Claude, &stdout).result,
            None,
            "{errors}"
        );
    }
    let both = r#"{"type":"result","result":"text","errors":["e"]}"#;
    assert_eq!(
        parse(AgentProvider::Claude, both).result.as_deref(),
        Some("text")
    );
}

#[test]
fn claude_fields_of_the_wrong_type_are_not_stated() {
    let stdout = r#"{"type":"result","result":5,"session_id":7,"total_cost_usd":-1,"usage":[1],"is_error":"yes"}"#;
    assert!(parse(AgentProvider::Claude, stdout).is_empty());
    let stdout = r#"[1,"x",{"type":"result","result":"ok"},null]"#;
    assert_eq!(
        parse(AgentProvider::Claude, stdout).result.as_deref(),
        Some("ok")
    );
    for scalar in ["42", r#""text""#, "null", "true"] {
        assert!(parse(AgentProvider::Claude, scalar).is_empty(), "{scalar}");
    }
}

#[test]
fn cursor_reads_only_a_whole_envelope() {
    check(
        AgentProvider::Cursor,
        CURSOR_JSON,
        report(
            Some("c7e1d2a4-0b3f-4c6e-8d9a-000000000027"),
            Some("Renamed `fetch_all` to `fetch_pages` in 3 files."),
            None,
            None,
            Some(false),
        ),
    );
    // Its usual plain text, even with a JSON line in it, states nothing.
    let text = format!("Done.\n{}", CURSOR_JSON.trim());
    assert!(parse(AgentProvider::Cursor, &text).is_empty());
    assert!(!parse(AgentProvider::Claude, &text).is_empty());
}

#[test]
fn codex_exec_fixture() {
    check(
        AgentProvider::Codex,
        CODEX_EXEC,
        report(
            Some("0199a213-81c0-7800-8aa1-000000000027"),
            Some(
                "Fixed the flaky retry test: the jitter now comes from the injected clock, and \
                 all 42 tests pass.",
            ),
            None,
            usage(84_210 - 71_936, 1893, 71_936, 0),
            Some(false),
        ),
    );
}

#[test]
fn codewith_exec_fixture_has_cache_writes() {
    check(
        AgentProvider::Codewith,
        CODEWITH_EXEC,
        report(
            Some("0199b7c4-5e21-7a90-b3d2-000000000027"),
            Some("Reviewed PR 27: two nits, no blockers."),
            None,
            usage(40_233 - 35_840, 911, 35_840, 4096),
            Some(false),
        ),
    );
}

#[test]
fn codex_legacy_fixture_sums_its_requests() {
    check(
        AgentProvider::Codex,
        CODEX_LEGACY,
        report(
            None,
            Some("Fixed the flaky retry test; all 42 tests pass."),
            None,
            usage(
                (12_480 - 3072) + (13_105 - 12_288),
                402 + 88,
                3072 + 12_288,
                0,
            ),
            Some(false),
        ),
    );
}

#[test]
fn codex_failed_turn_keeps_the_last_message() {
    let stdout = [
        r#"{"type":"thread.started","thread_id":"t"}"#,
        r#"{"type":"item.completed","item":{"id":"i0","type":"agent_message","text":"trying"}}"#,
        r#"{"type":"item.completed","item":{"id":"i1","type":"reasoning","text":"thinking"}}"#,
        r#"{"type":"item.completed","item":{"id":"i2","type":"agent_message"}}"#,
        r#"{"type":"error","message":"Reconnecting... 1/5"}"#,
        r#"{"type":"turn.failed","error":{"message":"stream disconnected"}}"#,
    ]
    .join("\n");
    check(
        AgentProvider::Codex,
        &stdout,
        report(Some("t"), Some("trying"), None, None, Some(true)),
    );
    // A retry notice alone says nothing about the outcome.
    let retry = r#"{"type":"error","message":"Reconnecting... 1/5"}"#;
    assert!(parse(AgentProvider::Codex, retry).is_empty());
}

#[test]
fn codex_turn_totals_are_not_summed() {
    let stdout = [
        r#"{"type":"thread.started"}"#,
        r#"{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":1}}"#,
        r#"{"type":"turn.failed","error":{"message":"x"}}"#,
        r#"{"type":"turn.completed","usage":{"input_tokens":30,"cached_input_tokens":50,"output_tokens":2}}"#,
        r#"{"type":"turn.completed","usage":"none"}"#,
    ]
    .join("\n");
    // The last stated total wins; a cached count above the input saturates.
    check(
        AgentProvider::Codex,
        &stdout,
        report(None, None, None, usage(0, 2, 50, 0), Some(false)),
    );
}

#[test]
fn codex_legacy_events_under_msg_or_payload() {
    let stdout = [
        r#"{"id":"0","msg":{"type":"session_configured","session_id":"legacy-1"}}"#,
        r#"{"id":"0","msg":{"type":"session_configured"}}"#,
        r#"{"id":"0","msg":{"type":"agent_message","message":"first"}}"#,
        r#"{"id":"0","msg":{"type":"agent_message","message":3}}"#,
        r#"{"id":"0","msg":{"type":"error","message":"boom"}}"#,
    ]
    .join("\n");
    check(
        AgentProvider::Codex,
        &stdout,
        report(Some("legacy-1"), Some("first"), None, None, Some(true)),
    );
    let rollout = [
        r#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"event_msg","payload":{"type":"agent_message","message":"kept"}}"#,
        r#"{"timestamp":"2026-01-01T00:00:01.000Z","type":"event_msg","payload":{"type":"task_complete"}}"#,
    ]
    .join("\n");
    check(
        AgentProvider::Codewith,
        &rollout,
        report(None, Some("kept"), None, None, Some(false)),
    );
    let last = r#"{"msg":{"type":"task_complete","last_agent_message":"final"}}"#;
    assert_eq!(
        parse(AgentProvider::Codex, last).result.as_deref(),
        Some("final")
    );
}

#[test]
fn codex_legacy_token_totals_and_their_precedence() {
    let info = |input: u64| {
        format!(
            r#"{{"msg":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{input},"cached_input_tokens":1,"output_tokens":2}},"last_token_usage":{{"input_tokens":1}}}}}}}}"#
        )
    };
    let flat = r#"{"msg":{"type":"token_count","input_tokens":100,"output_tokens":100}}"#;
    let null_info = r#"{"msg":{"type":"token_count","info":null}}"#;
    let totals = [info(5), info(9), null_info.to_owned(), flat.to_owned()].join("\n");
    assert_eq!(
        parse(AgentProvider::Codex, &totals).usage,
        usage(8, 2, 1, 0)
    );
    let flats = [flat, flat].join("\n");
    assert_eq!(
        parse(AgentProvider::Codex, &flats).usage,
        usage(200, 200, 0, 0)
    );
    assert_eq!(parse(AgentProvider::Codex, null_info).usage, None);
    let turn = r#"{"type":"turn.completed","usage":{"input_tokens":7}}"#;
    let mixed = [turn, &info(5)].join("\n");
    assert_eq!(parse(AgentProvider::Codex, &mixed).usage, usage(7, 0, 0, 0));
}

#[test]
fn opencode_run_fixture_sums_its_steps() {
    let expected = report(
        Some("ses_4f2a9c1d7ffeSYNTHETIC0027a"),
        Some("All 42 demo tests pass; nothing needed changing."),
        Some(0.0112345 + 0.0031),
        usage(11_087 + 412, 145 + 96 + 32, 10_880, 1024),
        Some(false),
    );
    check(AgentProvider::Opencode, OPENCODE_RUN, expected.clone());
    check(AgentProvider::Aicopilot, OPENCODE_RUN, expected);
}

#[test]
fn opencode_errors_and_the_end_of_the_session() {
    let error = r#"{"type":"error","sessionID":"ses_b","error":{"name":"APIError","data":{"message":"rate limited"}}}"#;
    let done = r#"{"type":"done","sessionID":"ses_c","reason":"idle","rejected":[]}"#;
    let text =
        r#"{"type":"text","sessionID":"ses_a","part":{"type":"text","text":"partial answer"}}"#;
    let no_text = r#"{"type":"text","part":{"type":"text"}}"#;
    let stdout = [text, no_text, error, done].join("\n");
    check(
        AgentProvider::Opencode,
        &stdout,
        report(
            Some("ses_a"),
            Some("partial answer"),
            None,
            None,
            Some(true),
        ),
    );
    assert_eq!(parse(AgentProvider::Opencode, done).is_error, Some(false));
    assert_eq!(parse(AgentProvider::Opencode, text).is_error, None);
}

#[test]
fn opencode_steps_without_cost_or_tokens() {
    let bare = r#"{"type":"step_finish","part":{"type":"step-finish","reason":"stop"}}"#;
    let bad = r#"{"type":"step_finish","part":{"cost":"free","tokens":[1]}}"#;
    let stdout = [bare, bad].join("\n");
    assert!(parse(AgentProvider::Opencode, &stdout).is_empty());
    let partial =
        r#"{"type":"step_finish","part":{"cost":0,"tokens":{"output":3,"cache":{"read":2}}}}"#;
    let parsed = parse(AgentProvider::Opencode, partial);
    assert_eq!(
        (parsed.cost_usd, parsed.usage),
        (Some(0.0), usage(0, 3, 2, 0))
    );
    let huge = r#"{"type":"step_finish","part":{"cost":1e308}}"#;
    assert_eq!(
        parse(AgentProvider::Opencode, &[huge, huge].join("\n")).cost_usd,
        None
    );
}

#[test]
fn missing_or_malformed_output_gives_an_empty_report() {
    let inputs = [
        "",
        "\n\n",
        "   ",
        "plain text answer",
        "{",
        "{\"type\":",
        "[1,2",
        "}{",
        "\u{feff}{\"type\":\"result\"}x",
        "null\nnull",
    ];
    for provider in AgentProvider::ALL.iter().copied() {
        for input in inputs {
            check(provider, input, AgentReport::default());
        }
    }
}

#[test]
fn a_truncated_tail_skips_its_partial_first_line() {
    for (provider, fixture) in [
        (AgentProvider::Codex, CODEX_EXEC),
        (AgentProvider::Opencode, OPENCODE_RUN),
    ] {
        let whole = parse(provider, fixture);
        let tail = &fixture[12..];
        let cut = parse(provider, tail);
        assert_eq!(
            (cut.result, cut.usage),
            (whole.result, whole.usage),
            "{provider}"
        );
    }
    // The thread id was only on the cut line.
    assert_eq!(
        parse(AgentProvider::Codex, &CODEX_EXEC[12..]).session_id,
        None
    );
}

#[test]
fn lines_are_trimmed_and_crlf_is_accepted() {
    let stdout = "  {\"type\":\"thread.started\",\"thread_id\":\"t\"}  \r\nwarning: {not json}\r\n";
    assert_eq!(
        parse(AgentProvider::Codex, stdout).session_id.as_deref(),
        Some("t")
    );
    let prefixed = "x{\"type\":\"thread.started\",\"thread_id\":\"t\"}";
    assert!(parse(AgentProvider::Codex, prefixed).is_empty());
}

#[test]
fn counts_and_dollars_accept_only_non_negative_numbers() {
    let value = |text: &str| serde_json::from_str::<Value>(text).ok();
    assert_eq!(count(value("12").as_ref()), 12);
    assert_eq!(count(value("12.9").as_ref()), 12);
    assert_eq!(count(value("0.0").as_ref()), 0);
    // Clamped to what a database column holds, never wrapped.
    let max = i64::MAX.unsigned_abs();
    assert_eq!(count(value("1e30").as_ref()), max);
    assert_eq!(count(value(&u64::MAX.to_string()).as_ref()), max);
    assert_eq!(count(value(&(max + 1).to_string()).as_ref()), max);
    assert_eq!(count(value(&max.to_string()).as_ref()), max);
    assert_eq!(count(value(&(max - 1).to_string()).as_ref()), max - 1);
    assert_eq!(count(value("-5").as_ref()), 0);
    assert_eq!(count(value("-0.5").as_ref()), 0);
    assert_eq!(count(value(r#""5""#).as_ref()), 0);
    assert_eq!(count(None), 0);
    assert_eq!(dollars(value("0.5").as_ref()), Some(0.5));
    assert_eq!(dollars(value("0").as_ref()), Some(0.0));
    assert_eq!(dollars(value("-0.5").as_ref()), None);
    assert_eq!(dollars(value(r#""0.5""#).as_ref()), None);
    assert_eq!(dollars(None), None);
}

#[test]
fn usage_adds_up_to_i64_max() {
    let top = i64::MAX.unsigned_abs();
    let max = TokenUsage {
        input_tokens: top,
        output_tokens: top - 1,
        cache_read_tokens: 1,
        cache_write_tokens: top - 20,
    };
    let one = TokenUsage {
        input_tokens: 1,
        output_tokens: 1,
        cache_read_tokens: 10,
        cache_write_tokens: 20,
    };
    assert_eq!(max.plus(one), usage(top, top, 11, top).unwrap_or_default());
    assert_eq!(sum(u64::MAX, u64::MAX), top);
    assert_eq!(sum(top - 2, 1), top - 1);
}

#[test]
fn token_counts_stop_at_i64_max_in_every_provider() {
    let big = u64::MAX;
    let top = i64::MAX.unsigned_abs();
    let claude = format!(
        r#"{{"type":"result","usage":{{"input_tokens":{big},"output_tokens":1,"cache_read_input_tokens":1e300,"cache_creation_input_tokens":2}}}}"#
    );
    assert_eq!(
        parse(AgentProvider::Claude, &claude).usage,
        usage(top, 1, top, 2)
    );
    // Per-request counts summed past the limit.
    let legacy = format!(r#"{{"msg":{{"type":"token_count","output_tokens":{top}}}}}"#);
    let codex = format!("{legacy}\n{legacy}");
    assert_eq!(
        parse(AgentProvider::Codex, &codex).usage,
        usage(0, top, 0, 0)
    );
    // Output and reasoning added past the limit.
    let step = format!(
        r#"{{"type":"step_finish","part":{{"tokens":{{"input":1,"output":{top},"reasoning":{top}}}}}}}"#
    );
    assert_eq!(
        parse(AgentProvider::Opencode, &step).usage,
        usage(1, top, 0, 0)
    );
}

#[test]
fn the_result_is_bounded_at_a_char_boundary() {
    let long = "a".repeat(MAX_AGENT_RESULT_BYTES + 10);
    assert_eq!(bounded(&long).len(), MAX_AGENT_RESULT_BYTES);
    let exact = "a".repeat(MAX_AGENT_RESULT_BYTES);
    assert_eq!(bounded(&exact), exact);
    // Two-byte characters after one byte put the limit inside a character.
    let wide = format!("a{}", "é".repeat(MAX_AGENT_RESULT_BYTES));
    let cut = bounded(&wide);
    assert_eq!(cut.len(), MAX_AGENT_RESULT_BYTES - 1);
    assert!(wide.starts_with(&cut));
    assert_eq!(bounded("short é"), "short é");
    let stdout = format!(r#"{{"type":"result","result":"{long}"}}"#);
    let parsed = parse(AgentProvider::Claude, &stdout);
    assert_eq!(parsed.result.map(|r| r.len()), Some(MAX_AGENT_RESULT_BYTES));
}

#[test]
fn a_session_id_is_kept_only_when_it_cannot_read_as_an_option() {
    let longest = "a".repeat(128);
    for good in [
        "3b9f1c2e-7a4d-4e8b-9c1f-0000000000a1",
        "ses_01J:thread.2_x-y",
        "a",
        longest.as_str(),
    ] {
        assert!(is_session_id(good), "{good:?}");
    }
    let too_long = "a".repeat(129);
    for bad in [
        "-x",
        "--resume",
        too_long.as_str(),
        "a b",
        "",
        "a\nb",
        "a/b",
        "a=b",
        "é",
    ] {
        assert!(!is_session_id(bad), "{bad:?}");
    }
    // Through each provider: an id that is not kept is not stated.
    for bad in ["-x", too_long.as_str(), "a b"] {
        let id = serde_json::to_string(bad).unwrap_or_default();
        let claude = format!(r#"{{"type":"result","result":"done","session_id":{id}}}"#);
        assert_eq!(parse(AgentProvider::Claude, &claude).session_id, None);
        let codex = format!(r#"{{"type":"thread.started","thread_id":{id}}}"#);
        assert_eq!(parse(AgentProvider::Codex, &codex).session_id, None);
        let legacy = format!(r#"{{"msg":{{"type":"session_configured","session_id":{id}}}}}"#);
        assert_eq!(parse(AgentProvider::Codex, &legacy).session_id, None);
        let opencode = format!(r#"{{"type":"text","sessionID":{id}}}"#);
        assert_eq!(parse(AgentProvider::Opencode, &opencode).session_id, None);
    }
    // An id that is not kept does not hide one that is.
    let claude = "{\"type\":\"system\",\"session_id\":\"s-1\"}\n\
                  {\"type\":\"result\",\"session_id\":\"-x\"}";
    assert_eq!(
        parse(AgentProvider::Claude, claude).session_id.as_deref(),
        Some("s-1")
    );
    let opencode = "{\"type\":\"text\",\"sessionID\":\"-x\"}\n\
                    {\"type\":\"text\",\"sessionID\":\"ses_2\"}";
    assert_eq!(
        parse(AgentProvider::Opencode, opencode)
            .session_id
            .as_deref(),
        Some("ses_2")
    );
}

#[test]
fn a_report_is_empty_until_one_field_is_stated() {
    assert!(AgentReport::default().is_empty());
    let stated = AgentReport {
        is_error: Some(false),
        ..AgentReport::default()
    };
    assert!(!stated.is_empty());
}

#[test]
fn the_report_serializes_in_camel_case_without_unstated_fields() {
    let parsed = parse(AgentProvider::Claude, CLAUDE_SUCCESS);
    let json = serde_json::to_value(&parsed).unwrap_or_default();
    assert_eq!(json["sessionId"], "3b9f1c2e-7a4d-4e8b-9c1f-0000000000a1");
    assert_eq!(json["costUsd"], 0.18342975);
    assert_eq!(json["isError"], false);
    assert_eq!(
        json["usage"],
        serde_json::json!({
            "inputTokens": 38,
            "outputTokens": 2417,
            "cacheReadTokens": 187_344,
            "cacheWriteTokens": 12_873,
        })
    );
    let back: AgentReport = serde_json::from_value(json).unwrap_or_default();
    assert_eq!(back, parsed);
    let empty = serde_json::to_string(&AgentReport::default()).unwrap_or_default();
    assert_eq!(empty, "{}");
}
