//! Tests of the classifier (every rule, their order, upstream's quirks), the
//! fingerprint and the throttled classes (agents note §7).

use super::*;

/// A failed run (exit 1) whose error is `error` and whose stderr is `text`.
fn failed<'a>(error: Option<&'a str>, text: &'a str) -> FailureInput<'a> {
    FailureInput {
        status: RunStatus::Failed,
        error,
        stdout: None,
        stderr: Some(text),
        exit_code: Some(1),
    }
}

fn class_of(input: &FailureInput<'_>) -> Option<FailureClass> {
    classify(input).map(|c| c.class)
}

/// Checks the class of a failed run with `text` on stderr.
fn check(text: &str, expected: FailureClass) {
    assert_eq!(class_of(&failed(None, text)), Some(expected), "{text:?}");
}

#[test]
fn succeeded_running_and_exit_75_skips_are_not_failures() {
    let mut input = failed(Some("rate limit"), "rate limit");
    for (status, exit, expected) in [
        (RunStatus::Succeeded, Some(1), None),
        (RunStatus::Running, None, None),
        (RunStatus::Skipped, Some(75), None),
        (RunStatus::Skipped, Some(1), Some(FailureClass::RateLimit)),
        (RunStatus::Skipped, None, Some(FailureClass::RateLimit)),
        (RunStatus::Failed, Some(75), Some(FailureClass::RateLimit)),
        (RunStatus::Abandoned, None, Some(FailureClass::RateLimit)),
    ] {
        input.status = status;
        input.exit_code = exit;
        assert_eq!(class_of(&input), expected, "{status} exit {exit:?}");
    }
}

#[test]
fn rule_1_a_timeout_wins_over_any_text() {
    let input = FailureInput {
        status: RunStatus::TimedOut,
        ..failed(Some("idle timed out after 2000ms"), "429 rate limit")
    };
    assert_eq!(class_of(&input), Some(FailureClass::Timeout));
}

/// The classes of a skipped run with this error and stderr.
fn skipped(error: &str, text: &str) -> Option<FailureClass> {
    let input = FailureInput {
        status: RunStatus::Skipped,
        exit_code: None,
        ..failed(Some(error), text)
    };
    class_of(&input)
}

#[test]
fn rules_2_to_4_apply_to_skipped_runs_only() {
    let restart = "daemon restart interrupted active run 4f2a";
    let breaker = "circuit breaker open: 5 consecutive failed runs; loop auto-paused";
    let previous = "previous run still active";
    assert_eq!(skipped(restart, ""), Some(FailureClass::RestartInterrupted));
    assert_eq!(
        skipped("x", "Circuit Breaker Open"),
        Some(FailureClass::CircuitBreaker)
    );
    assert_eq!(
        skipped(previous, ""),
        Some(FailureClass::SkippedPreviousActive)
    );
    // In rule order.
    assert_eq!(
        skipped(restart, breaker),
        Some(FailureClass::RestartInterrupted)
    );
    assert_eq!(
        skipped(breaker, previous),
        Some(FailureClass::CircuitBreaker)
    );
    assert_eq!(
        skipped(previous, "rate limit"),
        Some(FailureClass::SkippedPreviousActive)
    );
    // Rule 2 reads the error's start, as written.
    assert_eq!(
        skipped(&format!("x {restart}"), ""),
        Some(FailureClass::Unknown)
    );
    assert_eq!(
        skipped("Daemon restart interrupted active run", ""),
        Some(FailureClass::Unknown)
    );
    let in_stderr = FailureInput {
        status: RunStatus::Skipped,
        exit_code: None,
        ..failed(None, restart)
    };
    assert_eq!(class_of(&in_stderr), Some(FailureClass::Unknown));
    // A failed run with the same texts falls through.
    for text in [restart, breaker, previous] {
        check(text, FailureClass::Unknown);
        assert_eq!(
            class_of(&failed(Some(text), "")),
            Some(FailureClass::Unknown)
        );
    }
}

#[test]
fn rule_5_preflight() {
    for text in [
        "runtime preflight failed: codex not found",
        "Preflight failed",
        "claude: executable not found in PATH",
        "none of required executables found: agent, cursor-agent",
        "auth profile preflight failed",
        "profile not found: work",
    ] {
        check(text, FailureClass::Preflight);
    }
    check("preflight failed: HTTP 429", FailureClass::Preflight);
}

#[test]
fn rule_6_rate_limit_with_upstreams_429_quirk() {
    for text in [
        "Rate limit reached for o4-mini",
        "429 Too Many Requests",
        "Error: 429 {\"type\":\"error\"}",
        "Quota exceeded for quota metric",
        // Parity quirk: `429\b` has no leading boundary.
        "request id 14429",
    ] {
        check(text, FailureClass::RateLimit);
    }
    check("request id 4290", FailureClass::Unknown);
    // Rule 6 comes before rule 7.
    check("401 unauthorized: rate limit", FailureClass::RateLimit);
}

#[test]
fn rule_7_auth_with_upstreams_oauth_and_permission_quirks() {
    for text in [
        "401 Unauthorized",
        "Authentication failed",
        "auth error",
        "Invalid API key",
        "invalid token",
        "HTTP 403",
        "Not logged in · Please run /login",
        "please run /login",
        "login required",
        "not authenticated",
        "Failed to authenticate. API Error: 401",
        // Parity quirks: `auth\b` matches inside "oauth", and a filesystem's
        // EACCES reads as auth.
        "oauth",
        "bash: ./x: Permission denied",
        // `\b` is ASCII, as in JavaScript: a non-ASCII letter ends a word.
        "authé",
    ] {
        check(text, FailureClass::Auth);
    }
    for text in ["authorize the app", "error 4010", "code 4031"] {
        check(text, FailureClass::Unknown);
    }
    // Rule 7 comes before rule 8.
    check(
        "unauthorized: resource_exhausted https://api2.cursor.sh",
        FailureClass::Auth,
    );
}

fn summary_of(text: &str) -> Option<(FailureClass, Option<String>)> {
    classify(&failed(None, text)).map(|c| (c.class, c.summary))
}

fn capacity(host: &str) -> Option<(FailureClass, Option<String>)> {
    Some((
        FailureClass::ProviderCapacity,
        Some(format!(
            "provider capacity exhausted: resource_exhausted {host}"
        )),
    ))
}

#[test]
fn rule_8_provider_capacity_needs_a_cursor_host() {
    let host = "api2.cursor.sh";
    for text in [
        "ConnectError: [resource_exhausted] https://api2.cursor.sh/aiserver.v1.ChatService",
        "RESOURCE-EXHAUSTED at api2.cursor.sh:443",
        "resource_exhausted (\"https://api2.cursor.sh:443/x?y#z\");",
        "resource_exhausted HTTPS://API2.Cursor.SH",
        "resource_exhausted <api2.cursor.sh>, then example.com",
        "resource_exhausted `api2.cursor.sh`",
        "resource_exhausted [{api2.cursor.sh}]",
        "resource_exhausted http://api2.cursor.sh",
        // The first Cursor host wins; a bare token's port is not checked.
        "resource_exhausted api2.cursor.sh:99999 api3.cursor.sh",
        // JavaScript's `\s` splits at U+FEFF.
        "resource_exhausted\u{feff}api2.cursor.sh",
    ] {
        assert_eq!(summary_of(text), capacity(host), "{text:?}");
    }
    assert_eq!(
        summary_of("resource_exhausted cursor.sh"),
        capacity("cursor.sh")
    );
    assert_eq!(
        summary_of("resource_exhausted https://eu-2.api.cursor.sh"),
        capacity("eu-2.api.cursor.sh")
    );
    for text in [
        "resource_exhausted api.example.com",
        "resource_exhausted notcursor.sh",
        "resource_exhausted cursor.sh.example.com",
        "xresource_exhausted api2.cursor.sh",
        "resource_exhaustedx api2.cursor.sh",
        "resource exhausted api2.cursor.sh",
        "api2.cursor.sh is fine",
        // A URL's port must be one a URL allows, and it has no backslash.
        "resource_exhausted https://api2.cursor.sh:65536/",
        "resource_exhausted https://api2.cursor.sh/a\\b",
        "resource_exhausted https://api2.cursor.sh:/",
        "resource_exhausted https://user@api2.cursor.sh/",
        "resource_exhausted ftp://api2.cursor.sh",
        "resource_exhausted api2.cursor.sh:",
        "resource_exhausted api2.cursor.sh:4x3",
        "resource_exhausted a_b.cursor.sh",
        "resource_exhausted é.cursor.sh",
        "resource_exhausted -a.cursor.sh",
        "resource_exhausted a-.cursor.sh",
        "resource_exhausted a..cursor.sh",
        "resource_exhausted https://",
        // U+0085 is no space in JavaScript: one token, not a host.
        "resource_exhausted\u{85}api2.cursor.sh",
    ] {
        assert_eq!(
            summary_of(text).map(|s| s.0),
            Some(FailureClass::Unknown),
            "{text:?}"
        );
    }
    let long_label = format!("resource_exhausted {}.cursor.sh", "a".repeat(64));
    assert_eq!(
        summary_of(&long_label).map(|s| s.0),
        Some(FailureClass::Unknown)
    );
    let max_label = format!("{}.cursor.sh", "a".repeat(63));
    assert_eq!(
        summary_of(&format!("resource_exhausted {max_label}")),
        capacity(&max_label)
    );
    let long_name = format!("{}cursor.sh", "a.".repeat(122));
    assert_eq!(long_name.len(), 253);
    assert_eq!(
        summary_of(&format!("resource_exhausted {long_name}")),
        capacity(&long_name)
    );
    assert_eq!(
        summary_of(&format!("resource_exhausted a.{long_name}")).map(|s| s.0),
        Some(FailureClass::Unknown)
    );
}

#[test]
fn rule_9_provider_unavailable_reads_the_first_lookup() {
    let unavailable = |code: &str| {
        Some((
            FailureClass::ProviderUnavailable,
            Some(format!("provider DNS lookup failed: {code} api2.cursor.sh")),
        ))
    };
    assert_eq!(
        summary_of("Error: getaddrinfo ENOTFOUND api2.cursor.sh"),
        unavailable("ENOTFOUND")
    );
    assert_eq!(
        summary_of("getaddrinfo eai_again API2.CURSOR.SH:443"),
        unavailable("eai_again")
    );
    // JavaScript's `\s` includes a no-break space.
    assert_eq!(
        summary_of("getaddrinfo\u{a0}EAI_AGAIN\u{a0}api2.cursor.sh"),
        unavailable("EAI_AGAIN")
    );
    for text in [
        "getaddrinfo ENOTFOUND example.com",
        "getaddrinfo ENOTFOUND example.com; getaddrinfo ENOTFOUND api2.cursor.sh",
        "getaddrinfo EAI_FAIL api2.cursor.sh",
        "xgetaddrinfo ENOTFOUND api2.cursor.sh",
    ] {
        assert_eq!(
            summary_of(text).map(|s| s.0),
            Some(FailureClass::Unknown),
            "{text:?}"
        );
    }
    // Rule 8 comes before rule 9.
    assert_eq!(
        summary_of("resource_exhausted; getaddrinfo ENOTFOUND api2.cursor.sh"),
        capacity("api2.cursor.sh")
    );
}

#[test]
fn the_text_is_error_then_stderr_then_stdout() {
    let input = FailureInput {
        stdout: Some("getaddrinfo ENOTFOUND api2.cursor.sh"),
        ..failed(Some("getaddrinfo ENOTFOUND example.com"), "")
    };
    assert_eq!(class_of(&input), Some(FailureClass::Unknown));
    let input = FailureInput {
        stdout: Some("getaddrinfo ENOTFOUND example.com"),
        ..failed(None, "getaddrinfo ENOTFOUND api2.cursor.sh")
    };
    assert_eq!(class_of(&input), Some(FailureClass::ProviderUnavailable));
    // Parts are joined by a newline, which `.` does not cross.
    let input = FailureInput {
        stdout: Some("not found"),
        ..failed(Some("model x"), "")
    };
    assert_eq!(class_of(&input), Some(FailureClass::Unknown));
    let input = FailureInput {
        stdout: Some("limit"),
        ..failed(Some("rate"), "")
    };
    assert_eq!(class_of(&input), Some(FailureClass::Unknown));
}

#[test]
fn rules_10_to_15() {
    let table = [
        ("Error: model gpt-9 not found", FailureClass::ModelNotFound),
        ("model_not_found", FailureClass::ModelNotFound),
        ("Unknown model: opus-9", FailureClass::ModelNotFound),
        ("invalid model id", FailureClass::ModelNotFound),
        (
            "HTTP 404: the model does not exist",
            FailureClass::ModelNotFound,
        ),
        ("context length exceeded", FailureClass::ContextLength),
        ("context_length_exceeded", FailureClass::ContextLength),
        ("exceeds the context window", FailureClass::ContextLength),
        ("maximum context size", FailureClass::ContextLength),
        ("token limit", FailureClass::ContextLength),
        ("too many tokens", FailureClass::ContextLength),
        (
            "invalid response_format",
            FailureClass::SchemaResponseFormat,
        ),
        ("JSON schema is invalid", FailureClass::SchemaResponseFormat),
        (
            "schema validation failed",
            FailureClass::SchemaResponseFormat,
        ),
        ("invalid schema", FailureClass::SchemaResponseFormat),
        (
            "structured output unsupported",
            FailureClass::SchemaResponseFormat,
        ),
        ("Error: Cannot find module 'x'", FailureClass::NodeInit),
        ("module not found", FailureClass::NodeInit),
        (
            "at node:internal/modules/cjs/loader:1",
            FailureClass::NodeInit,
        ),
        ("bun: command not found", FailureClass::NodeInit),
        ("env: node: command not found", FailureClass::NodeInit),
        ("npm ERR! code E404", FailureClass::NodeInit),
        ("ERR_MODULE_NOT_FOUND", FailureClass::NodeInit),
        ("SIGSEGV", FailureClass::Sigsegv),
        ("Segmentation fault (core dumped)", FailureClass::Sigsegv),
        ("terminated by signal 11", FailureClass::Sigsegv),
        ("process exited with code 1", FailureClass::Unknown),
        // `.` stops at JavaScript's line terminators.
        ("model x\rnot found", FailureClass::Unknown),
        ("model x\u{2028}not found", FailureClass::Unknown),
        ("404 x\u{2029}model", FailureClass::Unknown),
        // In rule order.
        (
            "model not found: context length",
            FailureClass::ModelNotFound,
        ),
        ("context window: json schema", FailureClass::ContextLength),
        (
            "json schema: cannot find module",
            FailureClass::SchemaResponseFormat,
        ),
        ("npm err! sigsegv", FailureClass::NodeInit),
    ];
    for (text, expected) in table {
        check(text, expected);
    }
}

#[test]
fn rule_13_knows_bun_s_signal_exit_interop_failure() {
    let path = "/home/u/.bun/install/global/node_modules/signal-exit/dist/mjs/index.js";
    for text in [
        format!("SyntaxError: Missing 'default' export in module {path}"),
        format!("Missing 'default' export in module\n{path}"),
        format!("missing \"DEFAULT\" export in module {path}"),
        "Missing\t'default'\u{feff}export in module C:\\x\\signal-exit\\dist\\mjs\\index.js"
            .to_owned(),
    ] {
        check(&text, FailureClass::NodeInit);
    }
    for text in [
        // `\s` crosses a line, `.` does not.
        "Missing 'default' export in module /home/u\n/signal-exit/dist/mjs/index.js".to_owned(),
        "Missing 'default' export in module signal-exit/dist/mjs/index_js".to_owned(),
        "Missing 'default' export in module signal-exit/dist/cjs/index.js".to_owned(),
        "Missing\u{85}'default' export in module signal-exit/dist/mjs/index.js".to_owned(),
    ] {
        check(&text, FailureClass::Unknown);
    }
}

#[test]
fn a_loop_run_gives_its_fields() {
    let run: LoopRun = serde_json::from_value(serde_json::json!({
        "id": "0123456789ab", "loopId": "ba9876543210", "loopName": "n",
        "scheduledFor": "2026-01-01T00:00:00Z", "attempt": 1, "status": "failed",
        "exitCode": 3, "stdout": "out", "stderr": "err", "error": "boom",
        "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z"
    }))
    .unwrap();
    let input = FailureInput::from(&run);
    assert_eq!(
        input,
        FailureInput {
            status: RunStatus::Failed,
            error: Some("boom"),
            stdout: Some("out"),
            stderr: Some("err"),
            exit_code: Some(3),
        }
    );
}

#[test]
fn classes_spell_and_parse_as_upstream() {
    assert_eq!(FailureClass::ALL.len(), 15);
    let names: Vec<_> = FailureClass::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(
        names.join(", "),
        "timeout, restart_interrupted, circuit_breaker, skipped_previous_active, preflight, \
         rate_limit, auth, provider_capacity, provider_unavailable, model_not_found, \
         context_length, schema_response_format, node_init, sigsegv, unknown"
    );
    for &class in FailureClass::ALL {
        assert_eq!(class.as_str().parse::<FailureClass>(), Ok(class));
        assert_eq!(class.to_string(), class.as_str());
        let json = serde_json::to_value(class).unwrap();
        assert_eq!(json, serde_json::json!(class.as_str()));
        assert_eq!(serde_json::from_value::<FailureClass>(json).unwrap(), class);
    }
    let err = "rate-limit".parse::<FailureClass>().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "invalid failure class: \"rate-limit\" (expected one of {})",
            names.join(", ")
        )
    );
}

#[test]
fn the_throttled_classes_are_the_four_of_the_note() {
    let throttled: Vec<_> = FailureClass::ALL
        .iter()
        .filter(|c| c.is_throttled())
        .map(|c| c.as_str())
        .collect();
    assert_eq!(
        throttled,
        [
            "rate_limit",
            "auth",
            "provider_capacity",
            "provider_unavailable"
        ]
    );
    // Their retries wait four times longer (`retry_delay_ms`'s tests).
    for class in FailureClass::ALL {
        let expected = if class.is_throttled() { 4 } else { 1 };
        assert_eq!(class.retry_multiplier(), expected, "{class}");
    }
}

#[test]
fn evidence_is_the_summary_else_error_else_stderr_else_stdout() {
    let all = FailureInput {
        stdout: Some("out"),
        ..failed(Some("error"), "err")
    };
    assert_eq!(all.evidence(Some("summary")), "summary");
    assert_eq!(all.evidence(None), "error");
    // An empty error is still the error, as upstream's `??`.
    let empty = FailureInput {
        error: Some(""),
        ..all
    };
    assert_eq!(empty.evidence(None), "");
    let no_error = FailureInput { error: None, ..all };
    assert_eq!(no_error.evidence(None), "err");
    let stdout_only = FailureInput {
        stderr: None,
        ..no_error
    };
    assert_eq!(stdout_only.evidence(None), "out");
    let nothing = FailureInput {
        stdout: None,
        ..stdout_only
    };
    assert_eq!(nothing.evidence(None), "");
}

fn id() -> LoopId {
    LoopId::parse("0123456789ab").unwrap()
}

#[test]
fn fingerprints_match_upstream_s_hash() {
    // sha256("0123456789ab\nrate_limit\nfailed\n1\n<timestamp> rate limit reached")
    assert_eq!(
        fingerprint(
            &id(),
            FailureClass::RateLimit,
            RunStatus::Failed,
            Some(1),
            "2026-05-01T10:00:00.000Z rate limit reached"
        ),
        "7735a7b54561bcc2"
    );
    // An instant swallows what sticks to it; a bare date is kept.
    assert_eq!(
        fingerprint(
            &id(),
            FailureClass::Unknown,
            RunStatus::Failed,
            Some(-1),
            "at 2026-01-01T00:00:00Z, 2026-02-02T01:02:03.456Z and 2026-01-01 x"
        ),
        "a75153635c64f522"
    );
    // A missing exit code is an empty line; the cut is 120 characters.
    let long = "é".repeat(130);
    assert_eq!(
        fingerprint(
            &id(),
            FailureClass::Unknown,
            RunStatus::TimedOut,
            None,
            &long
        ),
        "93feee4769422acf"
    );
}

#[test]
fn fingerprints_are_stable_and_tell_each_field_apart() {
    let base = |evidence: &str| {
        fingerprint(
            &id(),
            FailureClass::Auth,
            RunStatus::Failed,
            Some(1),
            evidence,
        )
    };
    let one = base("login required 2026-01-01T00:00:00Z");
    assert_eq!(one.len(), 16);
    assert!(
        one.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    assert_eq!(one, base("login required 2026-12-31T23:59:59.999+01:00"));
    assert_ne!(one, base("login required 2026-01-01 00:00:00Z"));
    // Only the first 120 characters count.
    let head = "x".repeat(120);
    assert_eq!(base(&format!("{head}a")), base(&format!("{head}b")));
    assert_ne!(
        base(&format!("{}a", &head[1..])),
        base(&format!("{}b", &head[1..]))
    );
    let other = LoopId::parse("ba9876543210").unwrap();
    let variants = [
        fingerprint(&other, FailureClass::Auth, RunStatus::Failed, Some(1), "e"),
        fingerprint(
            &id(),
            FailureClass::RateLimit,
            RunStatus::Failed,
            Some(1),
            "e",
        ),
        fingerprint(&id(), FailureClass::Auth, RunStatus::TimedOut, Some(1), "e"),
        fingerprint(&id(), FailureClass::Auth, RunStatus::Failed, Some(2), "e"),
        fingerprint(&id(), FailureClass::Auth, RunStatus::Failed, None, "e"),
        base("e"),
    ];
    for (i, a) in variants.iter().enumerate() {
        for b in &variants[i + 1..] {
            assert_ne!(a, b);
        }
    }
}

#[test]
fn a_classified_run_fingerprints_its_summary() {
    let input = failed(
        Some("process exited with code 1"),
        "resource_exhausted https://api2.cursor.sh/x",
    );
    let classified = classify(&input).unwrap();
    assert_eq!(classified.fingerprint(&id(), &input), "290bf5e2c73e0617");
    let plain = failed(Some("process exited with code 1"), "boom");
    let unknown = classify(&plain).unwrap();
    assert_eq!(
        unknown.fingerprint(&id(), &plain),
        fingerprint(
            &id(),
            FailureClass::Unknown,
            RunStatus::Failed,
            Some(1),
            "process exited with code 1"
        )
    );
}

#[test]
fn every_classifier_pattern_compiles_without_unicode_tables() {
    // Forcing each compiles it through `pattern`, which checks it in a
    // debug build (the reset and host patterns are forced by their tests).
    for re in [
        &PREFLIGHT,
        &RATE_LIMIT,
        &AUTH,
        &MODEL_NOT_FOUND,
        &CONTEXT_LENGTH,
        &SCHEMA,
        &NODE_INIT,
        &SIGNAL_EXIT,
        &SIGSEGV,
        &TIMESTAMP,
    ] {
        assert_eq!(unicode_tables_needed(re.as_str()), None, "{}", re.as_str());
    }
}

#[test]
fn the_unicode_check_names_what_needs_the_tables() {
    for (source, found) in [
        (r"a\sb", Some(r"\s at 1")),
        (r"\p{L}", Some(r"\p at 0")),
        (r"x\d", Some(r"\d at 1")),
        (r"\bword", Some(r"\b at 0")),
        ("(?i)abc", Some("(?i at 0")),
        ("(?i:abc)", Some("(?i at 0")),
        ("(?i-u)x(?u:[a])", Some("(?u at 7")),
        // Past an escape, the scan goes on two bytes later.
        (r"abc\.\s", Some(r"\s at 5")),
    ] {
        assert_eq!(unicode_tables_needed(source).as_deref(), found, "{source}");
    }
    for fine in [
        r"(?-u:\b)429",
        r"(?i-u)resets?(?u-i:[\t ])",
        r"[\\/]x\.y",
        // A group without flags, whatever follows its parenthesis.
        "(xi|y)",
        "(?P<hour>[0-9]{1,2})(?:st|nd)",
        JS_SPACE,
        JS_NOT_SPACE,
        JS_DOT,
    ] {
        assert_eq!(unicode_tables_needed(fine), None, "{fine}");
    }
    // JavaScript's space set, no more and no less.
    let space = Regex::new(&format!("^{JS_SPACE}$")).unwrap();
    let spaces: Vec<u32> = (0..=0x10FFFF_u32)
        .filter_map(char::from_u32)
        .filter(|c| space.is_match(c.encode_utf8(&mut [0; 4])))
        .map(u32::from)
        .collect();
    let js = [
        0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0xA0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
        0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
        0xFEFF,
    ];
    assert_eq!(spaces, js);
    let not_space = Regex::new(&format!("^{JS_NOT_SPACE}$")).unwrap();
    assert!(not_space.is_match("x") && !not_space.is_match("\u{FEFF}") && !not_space.is_match(" "));
}
