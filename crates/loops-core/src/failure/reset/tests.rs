//! Tests of [`retry_at`]: every wording it reads, with where it was found,
//! then its bounds, its order and its calendar arithmetic.

use chrono::{Local, TimeZone};

use super::*;

/// The fixed "now" of most rows: a Tuesday, 15:20 in Berlin (CET, +01:00).
const NOW: &str = "2026-03-10T14:20:00Z";

fn berlin() -> Zone {
    Zone::parse(Some("Europe/Berlin")).unwrap()
}

fn at_time(text: &str, now: &str) -> Option<String> {
    retry_at(text, now.parse().unwrap(), berlin()).map(|t| t.to_string())
}

fn at(text: &str) -> Option<String> {
    at_time(text, NOW)
}

/// Checks rows of (where the wording was found, text, now, expected).
fn check(rows: &[(&str, &str, &str, Option<&str>)]) {
    for &(source, text, now, expected) in rows {
        assert_eq!(
            at_time(text, now).as_deref(),
            expected,
            "{text:?} ({source})"
        );
    }
}

#[test]
fn the_wordings_of_the_issue() {
    check(&[
        (
            "issue 27",
            "Error: retry after 120s",
            NOW,
            Some("2026-03-10T14:22:00.000Z"),
        ),
        (
            "issue 27; RFC 9110 §10.2.3",
            "Retry-After: 120",
            NOW,
            Some("2026-03-10T14:22:00.000Z"),
        ),
        (
            "issue 27",
            "try again in 2 hours",
            NOW,
            Some("2026-03-10T16:20:00.000Z"),
        ),
        (
            "issue 27",
            "try again in 30 minutes",
            NOW,
            Some("2026-03-10T14:50:00.000Z"),
        ),
        (
            "issue 27",
            "try again in 45 seconds",
            NOW,
            Some("2026-03-10T14:20:45.000Z"),
        ),
        // 3 pm in Berlin was 20 minutes ago: the next one is tomorrow's.
        (
            "issue 27",
            "resets at 3pm",
            NOW,
            Some("2026-03-11T14:00:00.000Z"),
        ),
        (
            "issue 27",
            "resets at 15:00",
            NOW,
            Some("2026-03-11T14:00:00.000Z"),
        ),
        (
            "issue 27",
            "resets at 16:30",
            NOW,
            Some("2026-03-10T15:30:00.000Z"),
        ),
        (
            "issue 27",
            "reset at 2026-03-10T18:00:00+01:00",
            NOW,
            Some("2026-03-10T17:00:00.000Z"),
        ),
        (
            "issue 27",
            "reset at 2026-03-10T18:00:00Z",
            NOW,
            Some("2026-03-10T18:00:00.000Z"),
        ),
        (
            "issue 27",
            "x-ratelimit-reset: 1773156000",
            NOW,
            Some("2026-03-10T15:20:00.000Z"),
        ),
    ]);
}

#[test]
fn claude_code_wordings() {
    check(&[
        (
            "anthropics/claude-code#6119",
            "Claude AI usage limit reached|1755615600",
            "2025-08-19T14:08:25Z",
            Some("2025-08-19T15:00:00.000Z"),
        ),
        (
            "anthropics/claude-code#6119",
            "Claude usage limit reached. Your limit will reset at 5pm (Europe/Warsaw).",
            "2025-08-19T14:08:25Z",
            Some("2025-08-19T15:00:00.000Z"),
        ),
        (
            "anthropics/claude-code#1328",
            "Claude usage limit reached. Your limit will reset at 1 PM (Asia/Dubai).",
            NOW,
            Some("2026-03-11T09:00:00.000Z"),
        ),
        (
            "anthropics/claude-code#2087",
            "Your limit will reset at 1pm (Etc/GMT+5).",
            NOW,
            Some("2026-03-10T18:00:00.000Z"),
        ),
        (
            "anthropics/claude-code#6392",
            "5-hour limit reached ∙ resets 5am",
            NOW,
            Some("2026-03-11T04:00:00.000Z"),
        ),
        (
            "anthropics/claude-code#7892",
            "5-hour limit reached ∙ resets 9pm",
            NOW,
            Some("2026-03-10T20:00:00.000Z"),
        ),
        (
            "Maciek-roboblog/Claude-Code-Usage-Monitor#56",
            "Approaching usage limit · resets at 12pm",
            NOW,
            Some("2026-03-11T11:00:00.000Z"),
        ),
        (
            "anthropics/claude-code#74079",
            "You've hit your session limit · resets 12:50am (America/Los_Angeles)",
            NOW,
            Some("2026-03-11T07:50:00.000Z"),
        ),
        (
            "anthropics/claude-code#19472",
            "You've hit your limit · resets 11pm (America/Anchorage)",
            NOW,
            Some("2026-03-11T07:00:00.000Z"),
        ),
        (
            "anthropics/claude-code#12789",
            "Weekly limit reached · resets 10am (Asia/Seoul) · /upgrade to Max or turn on /extra-usage",
            NOW,
            Some("2026-03-11T01:00:00.000Z"),
        ),
        (
            "anthropics/claude-code#92834",
            "You've hit your weekly limit · resets Sep 15 at 7pm",
            "2026-09-09T12:00:00Z",
            Some("2026-09-15T17:00:00.000Z"),
        ),
        (
            "anthropics/claude-code#65802",
            "You've hit your weekly limit · resets Jun 7, 4pm (Europe/Rome)",
            "2026-06-06T10:00:00Z",
            Some("2026-06-07T14:00:00.000Z"),
        ),
        (
            "anthropics/claude-code#81647",
            "You've hit your weekly limit · resets Jul 31, 2am (UTC)",
            "2026-07-27T10:00:00Z",
            Some("2026-07-31T02:00:00.000Z"),
        ),
        (
            "anthropics/claude-code#16618 (/usage)",
            "Current week (Sonnet only) 52% used Resets Jan 12, 10:59am (America/New_York)",
            "2026-01-07T14:12:38Z",
            Some("2026-01-12T15:59:00.000Z"),
        ),
    ]);
}

#[test]
fn openai_and_codex_wordings() {
    check(&[
        (
            "openai/codex#3899",
            "■ You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) \
             or try again in 5 days 22 hours 11\nminutes.",
            NOW,
            Some("2026-03-16T12:31:00.000Z"),
        ),
        (
            "openai/codex codex-rs/core/src/error.rs (same day: %-I:%M %p)",
            "You've hit your usage limit. Try again at 8:19 PM.",
            NOW,
            Some("2026-03-10T19:19:00.000Z"),
        ),
        (
            "openai/codex#26668; error.rs (%b %-d{suffix}, %Y %-I:%M %p)",
            "You've hit your usage limit. Upgrade to Plus to continue using Codex \
             (https://chatgpt.com/explore/plus), or try again at Jul 5th, 2026 8:19 PM.",
            "2026-06-29T12:00:00Z",
            Some("2026-07-05T18:19:00.000Z"),
        ),
        (
            "james-6-23/codex2api#9 (usage_limit_reached body)",
            r#"{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"free","resets_at":1775317531,"resets_in_seconds":602705}}"#,
            "2026-03-28T16:20:26Z",
            Some("2026-04-04T15:45:31.000Z"),
        ),
        (
            "openai/codex#88",
            "Rate limit reached for o4-mini in organization org-* on tokens per min (TPM): \
             Limit 200000, Used 162960, Requested 42288. Please try again in 1.574s. Visit \
             https://platform.openai.com/account/rate-limits to learn more.",
            NOW,
            Some("2026-03-10T14:20:01.574Z"),
        ),
        (
            "semanser/codel#72",
            "429: Rate limit reached for gpt-4o ... Please try again in 18.642s.",
            NOW,
            Some("2026-03-10T14:20:18.642Z"),
        ),
        (
            "daveshap/Medical_Intake#9",
            "Limit: 10000 / min. Please try again in 6ms. Contact us",
            NOW,
            Some("2026-03-10T14:20:00.006Z"),
        ),
        (
            "anomalyco/opencode#1712 (OpenAI through opencode)",
            r#"{"type":"error","error":{"code":"rate_limit_exceeded","message":"Rate limit reached for gpt-5-mini ... Please try again in 915ms."}}"#,
            NOW,
            Some("2026-03-10T14:20:00.915Z"),
        ),
        (
            "OpenAI rate-limit headers (thoughtbot.com/blog/openai-rate-limits)",
            "x-ratelimit-reset-requests: 1s\nx-ratelimit-reset-tokens: 6m0s",
            NOW,
            Some("2026-03-10T14:26:00.000Z"),
        ),
        (
            "community.openai.com/t/1268905",
            "x-ratelimit-reset-tokens_usage_based: 9ms",
            NOW,
            Some("2026-03-10T14:20:00.009Z"),
        ),
        (
            "anthropics/anthropic-sdk-typescript#357",
            "retry-after-ms: 1500",
            NOW,
            Some("2026-03-10T14:20:01.500Z"),
        ),
    ]);
}

#[test]
fn other_provider_wordings() {
    check(&[
        (
            "Anthropic API rate-limit headers; anthropic-sdk-typescript#357",
            "anthropic-ratelimit-tokens-reset: 2026-03-10T14:21:30Z",
            NOW,
            Some("2026-03-10T14:21:30.000Z"),
        ),
        (
            "Gitlawb/openclaude#936; everruns/everruns#2280 (OpenRouter, epoch ms)",
            r#"{"error":{"message":"Rate limit exceeded: free-models-per-day.","code":429,"metadata":{"headers":{"X-RateLimit-Limit":"50","X-RateLimit-Remaining":"0","X-RateLimit-Reset":"1741305600000"}}}}"#,
            "2025-03-06T12:00:00Z",
            Some("2025-03-07T00:00:00.000Z"),
        ),
        (
            "browserbase/mcp-server-browserbase#129 (Gemini)",
            "You exceeded your current quota ...\nPlease retry in 47.434392449s.",
            NOW,
            Some("2026-03-10T14:20:47.434Z"),
        ),
        (
            "RooCodeInc/Roo-Code#3883 (Gemini RetryInfo)",
            r#"{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "26s"}"#,
            NOW,
            Some("2026-03-10T14:20:26.000Z"),
        ),
        (
            "earendil-works/pi#2851 (Gemini Code Assist)",
            "Cloud Code Assist API error (429): You have exhausted your capacity on this \
             model. Your quota will reset after 12h34m16s.",
            NOW,
            Some("2026-03-11T02:54:16.000Z"),
        ),
        (
            "router-for-me/CLIProxyAPI#449 (Gemini ErrorInfo)",
            r#""quotaResetDelay": "373.801628ms""#,
            NOW,
            Some("2026-03-10T14:20:00.374Z"),
        ),
        (
            "anomalyco/opencode#15988 (opencode's own retry)",
            "Rate limited. Quick retry in 1s…",
            NOW,
            Some("2026-03-10T14:20:01.000Z"),
        ),
        (
            "Gitlawb/openclaude#1542",
            "Retrying in 26 seconds… (attempt 5/10)",
            NOW,
            Some("2026-03-10T14:20:26.000Z"),
        ),
        (
            "RFC 9110 §10.2.3 (HTTP date)",
            "Retry-After: Tue, 10 Mar 2026 14:25:00 GMT",
            NOW,
            Some("2026-03-10T14:25:00.000Z"),
        ),
        (
            "docs.pyannote.ai/ratelimits (epoch seconds)",
            "X-RateLimit-Reset: 1773156000",
            NOW,
            Some("2026-03-10T15:20:00.000Z"),
        ),
    ]);
}

#[test]
fn wordings_left_alone() {
    check(&[
        // A monthly cycle's end, as a date with no time: not read.
        (
            "cursor/cursor#3703 (cursor-agent)",
            "Error: You've hit your usage limit\n  chatMessage: *Your usage limits will reset \
             when your monthly cycle ends on 11/17/2025.*",
            "2025-11-15T12:00:00Z",
            None,
        ),
        (
            "openai/codex#28089 (localized)",
            "You've hit your usage limit. Upgrade your plan to continue, or try again at 10 de \
             jul. de 2026, 11:52.",
            "2026-07-08T12:00:00Z",
            None,
        ),
        (
            "gemini-cli#1906",
            "Please wait and try again later.",
            NOW,
            None,
        ),
        (
            "Anthropic API",
            "This request would exceed your account's rate limit. Please try again later.",
            NOW,
            None,
        ),
    ]);
    for text in [
        "",
        "retry 3 times",
        "resets 3",
        "try again in a few minutes",
        "retry in 5 attempts",
        "retry after 120",
        "resets on Monday",
        "x-ratelimit-reset: 1.5",
        "x-ratelimit-reset: soon",
        "usage limit reached|soon",
        "Retry-After: soon",
        "retry-after-ms: soon",
        "3pm resets",
    ] {
        assert_eq!(at(text), None, "{text:?}");
    }
}

#[test]
fn durations_take_every_unit_spelling() {
    let second = "2026-03-10T14:20:01.000Z";
    let minute = "2026-03-10T14:21:00.000Z";
    let hour = "2026-03-10T15:20:00.000Z";
    let day = "2026-03-11T14:20:00.000Z";
    let table = [
        ("1000ms", second),
        ("1000 msec", second),
        ("1000 msecs", second),
        ("1000 millisecond", second),
        ("1000 Milliseconds", second),
        ("1s", second),
        ("1 sec", second),
        ("1 secs", second),
        ("1 second", second),
        ("1 SECONDS", second),
        ("1m", minute),
        ("1 min", minute),
        ("1 mins", minute),
        ("1 minute", minute),
        ("1 minutes", minute),
        ("1h", hour),
        ("1 hr", hour),
        ("1 hrs", hour),
        ("1 hour", hour),
        ("1 hours", hour),
        ("1d", day),
        ("1 day", day),
        ("1 days", day),
        ("0.5m30s", minute),
        ("59m, 60s", hour),
        ("23 hours and 60 minutes", day),
        ("30s, and 30s", minute),
        ("1m 1 apple", minute),
    ];
    for (duration, expected) in table {
        for phrase in [
            "try again in",
            "retry in",
            "retrying in",
            "resets in",
            "reset in",
        ] {
            let text = format!("{phrase} {duration}");
            assert_eq!(at(&text).as_deref(), Some(expected), "{text:?}");
        }
    }
    for phrase in [
        "available in",
        "available again in",
        "retry after",
        "reset after",
        "resets after",
        "TRY  AGAIN IN",
    ] {
        let text = format!("{phrase} 1m");
        assert_eq!(at(&text).as_deref(), Some(minute), "{text:?}");
    }
}

#[test]
fn rate_limit_headers_hold_instants_epochs_durations_or_seconds() {
    let table = [
        ("x-ratelimit-reset: 30", Some("2026-03-10T14:20:30.000Z")),
        ("ratelimit-reset=0", Some(NOW_MS)),
        (
            "X-RATELIMIT-RESET = \"90\"",
            Some("2026-03-10T14:21:30.000Z"),
        ),
        ("x-ratelimit-reset: 999999999", None),
        ("x-ratelimit-reset: 1773152400000", Some(NOW_MS)),
        ("x-ratelimit-reset: 1773152400", Some(NOW_MS)),
        ("x-ratelimit-reset: 999999999999", None),
        ("x-ratelimit-reset: 99999999999999999999", None),
        ("x-ratelimit-reset: 15:00", Some("2026-03-11T14:00:00.000Z")),
        ("x-ratelimit-reset: 4pm", Some("2026-03-10T15:00:00.000Z")),
        (
            "x-ratelimit-reset: 2026-03-10T15:00:00Z",
            Some("2026-03-10T15:00:00.000Z"),
        ),
        ("resets_at: Mar 11, 9am", Some("2026-03-11T08:00:00.000Z")),
        ("resetsAt=1773156000", Some("2026-03-10T15:20:00.000Z")),
        ("reset_at: 1773156000", Some("2026-03-10T15:20:00.000Z")),
        ("resets_in_seconds: 60", Some("2026-03-10T14:21:00.000Z")),
        (
            "usage limit reached|1773156000000",
            Some("2026-03-10T15:20:00.000Z"),
        ),
        ("retry-after-ms: 1.5", Some("2026-03-10T14:20:00.002Z")),
        ("Retry-After: 1.5", Some("2026-03-10T14:20:01.500Z")),
        ("Retry-After: Tue, 10 Mar 2026 14:25:00 UTC", None),
    ];
    for (text, expected) in table {
        assert_eq!(at(text).as_deref(), expected, "{text:?}");
    }
}

const NOW_MS: &str = "2026-03-10T14:20:00.000Z";

#[test]
fn absurd_instants_are_dropped_and_the_last_plausible_wins() {
    let table = [
        ("try again in 7 days", Some("2026-03-17T14:20:00.000Z")),
        ("try again in 7 days 1ms", None),
        ("try again in 8 days", None),
        ("try again in 99999999999999999999999 days", None),
        ("Retry-After: -5", None),
        ("retry after -5s", None),
        ("reset at 2026-03-10T14:15:00Z", Some(NOW_MS)),
        ("reset at 2026-03-10T14:14:59.999Z", None),
        (
            "reset at 2026-03-17T14:20:00Z",
            Some("2026-03-17T14:20:00.000Z"),
        ),
        ("reset at 2026-03-17T14:20:00.001Z", None),
        ("usage limit reached|1773152100", Some(NOW_MS)),
        ("usage limit reached|1773152099", None),
        // The latest plausible one wins.
        (
            "retry after 60s; try again in 2 hours",
            Some("2026-03-10T16:20:00.000Z"),
        ),
        (
            "try again in 2 hours; retry after 60s",
            Some("2026-03-10T14:21:00.000Z"),
        ),
        (
            "try again in 2 hours; try again in 30 days",
            Some("2026-03-10T16:20:00.000Z"),
        ),
        (
            "retry-after-ms: 1500\nRetry-After: 2",
            Some("2026-03-10T14:20:02.000Z"),
        ),
    ];
    for (text, expected) in table {
        assert_eq!(at(text).as_deref(), expected, "{text:?}");
    }
}

#[test]
fn wall_times_within_the_grace_are_now() {
    let table = [
        // 15:20 in Berlin: 15:16 and 15:15 were within 5 minutes.
        ("resets 3:16pm", Some(NOW_MS)),
        ("resets 3:15pm", Some(NOW_MS)),
        ("resets 3:14pm", Some("2026-03-11T14:14:00.000Z")),
        ("resets 3:20pm", Some(NOW_MS)),
        ("resets 3:21pm", Some("2026-03-10T14:21:00.000Z")),
        ("resets 15:20:30", Some("2026-03-10T14:20:30.000Z")),
    ];
    for (text, expected) in table {
        assert_eq!(at(text).as_deref(), expected, "{text:?}");
    }
}

#[test]
fn clock_times() {
    let table = [
        ("resets 12am", Some("2026-03-10T23:00:00.000Z")),
        ("resets 12pm", Some("2026-03-11T11:00:00.000Z")),
        ("resets 11:59pm", Some("2026-03-10T22:59:00.000Z")),
        ("resets 1am", Some("2026-03-11T00:00:00.000Z")),
        ("resets 9 p.m.", Some("2026-03-10T20:00:00.000Z")),
        ("resets 9 P.M.", Some("2026-03-10T20:00:00.000Z")),
        ("resets 9 A.M.", Some("2026-03-11T08:00:00.000Z")),
        ("resets 9PM", Some("2026-03-10T20:00:00.000Z")),
        ("resets 23:59:59", Some("2026-03-10T22:59:59.000Z")),
        ("resets 0:00", Some("2026-03-10T23:00:00.000Z")),
        ("resets 16:00 UTC", Some("2026-03-10T16:00:00.000Z")),
        ("resets 16:00 gmt.", Some("2026-03-10T16:00:00.000Z")),
        ("resets 16:00 (UTC)", Some("2026-03-10T16:00:00.000Z")),
        // A zone that is not one is the caller's.
        ("resets 16:00 (Mars/Base)", Some("2026-03-10T15:00:00.000Z")),
        ("resets 16:00 UTCX", Some("2026-03-10T15:00:00.000Z")),
        ("resets 13pm", None),
        ("resets 0am", None),
        ("resets 24:00", None),
        ("resets 12:60", None),
        ("resets 12:30:60", None),
        ("resets 9 amazing things", None),
        ("resets 9 apples", None),
    ];
    for (text, expected) in table {
        assert_eq!(at(text).as_deref(), expected, "{text:?}");
    }
}

#[test]
fn dates() {
    let table = [
        ("resets Mar 11 at 9am", Some("2026-03-11T08:00:00.000Z")),
        ("resets March 11, 9am", Some("2026-03-11T08:00:00.000Z")),
        ("resets mar. 11, 09:00", Some("2026-03-11T08:00:00.000Z")),
        (
            "resets Mar 11th, 2026 9:00 AM",
            Some("2026-03-11T08:00:00.000Z"),
        ),
        ("resets Mar 12 2026, 9am", Some("2026-03-12T08:00:00.000Z")),
        ("resets Mar 10, 3:16pm", Some(NOW_MS)),
        ("resets Mar 10, 3:14pm", None),
        ("resets Mar 10th, 2027 4pm", None),
        ("resets Feb 30, 3pm", None),
        ("resets Mar 11", None),
        ("resets Sep 8, 3pm", None),
    ];
    for (text, expected) in table {
        assert_eq!(at(text).as_deref(), expected, "{text:?}");
    }
    for (month, name) in MONTHS.iter().enumerate() {
        let now = format!("2026-{:02}-01T00:00:00Z", month + 1);
        let text = format!("resets {name} 2, 1pm (UTC)");
        let expected = format!("2026-{:02}-02T13:00:00.000Z", month + 1);
        assert_eq!(at_time(&text, &now), Some(expected), "{text}");
    }
    // Without a year, the next such date: into the next year.
    assert_eq!(
        at_time("resets Jan 2, 9am", "2026-12-30T12:00:00Z").as_deref(),
        Some("2027-01-02T08:00:00.000Z")
    );
    assert_eq!(
        at_time("resets Feb 29, 9am (UTC)", "2027-02-25T12:00:00Z"),
        None
    );
    assert_eq!(
        at_time("resets Feb 29, 9am (UTC)", "2028-02-25T12:00:00Z").as_deref(),
        Some("2028-02-29T09:00:00.000Z")
    );
}

#[test]
fn iso_instants() {
    let table = [
        (
            "reset at 2026-03-10T16:00",
            Some("2026-03-10T15:00:00.000Z"),
        ),
        (
            "reset at 2026-03-10T16:00:00.250",
            Some("2026-03-10T15:00:00.250Z"),
        ),
        (
            "reset at 2026-03-10T16:00Z",
            Some("2026-03-10T16:00:00.000Z"),
        ),
        (
            "reset at 2026-03-10T16:00:00-01:30",
            Some("2026-03-10T17:30:00.000Z"),
        ),
        (
            "reset at 2026-03-10T20:00:00+0530",
            Some("2026-03-10T14:30:00.000Z"),
        ),
        (
            "reset at 2026-03-10T20:00+0530",
            Some("2026-03-10T14:30:00.000Z"),
        ),
        ("reset at 2026-13-10T16:00:00Z", None),
    ];
    for (text, expected) in table {
        assert_eq!(at(text).as_deref(), expected, "{text:?}");
    }
}

#[test]
fn daylight_saving_changes() {
    // 02:30 does not exist in Berlin on 2026-03-29: the clocks jump to 03:30.
    assert_eq!(
        at_time("resets Mar 29, 2:30am", "2026-03-28T12:00:00Z").as_deref(),
        Some("2026-03-29T01:30:00.000Z")
    );
    // 02:30 happens twice on 2026-10-25: the first.
    assert_eq!(
        at_time("resets Oct 25, 2:30am", "2026-10-24T12:00:00Z").as_deref(),
        Some("2026-10-25T00:30:00.000Z")
    );
}

#[test]
fn the_hosts_local_zone() {
    let now: Timestamp = NOW.parse().unwrap();
    let local = now.to_datetime().with_timezone(&Local);
    let tomorrow = local.date_naive().succ_opt().unwrap();
    let expected = Local
        .from_local_datetime(&tomorrow.and_hms_opt(0, 30, 0).unwrap())
        .earliest()
        .unwrap();
    let text = format!("resets {} 0:30", tomorrow.format("%b %-d"));
    assert_eq!(
        retry_at(&text, now, Zone::Local),
        Timestamp::from_datetime(&expected)
    );
    let wall = local.naive_local() + TimeDelta::minutes(10);
    assert_eq!(
        retry_at(
            &format!("resets {}", wall.format("%H:%M")),
            now,
            Zone::Local
        ),
        Some(now.add_ms(600_000))
    );
}
