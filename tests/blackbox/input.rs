//! Input that forgives and explains (issue 16 §6): compound durations and
//! their spellings (a bare number under a second: traps.rs), relative
//! `--at` times and the warning for a past one, cron errors that name their
//! field, and messages without stored field names.

use loops_tests::TestEnv;

/// Creates a command loop with `extra` options, under a name of its own
/// (a shared name would add a warning); its JSON and stderr.
fn create(env: &TestEnv, extra: &[&str]) -> (serde_json::Value, String) {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let name = format!("x{}", N.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let ran = env
        .loops(["--json", "create", "command", &name, "--cmd", "true"])
        .args(extra)
        .run();
    (ran.json(), ran.stderr)
}

#[test]
fn compound_durations_and_long_spellings_are_accepted() {
    let env = TestEnv::new();
    for (every, ms) in [
        ("1h30m", 5_400_000),
        ("2d12h", 216_000_000),
        ("1m30s", 90_000),
        ("90sec", 90_000),
        ("5min", 300_000),
    ] {
        let (lp, stderr) = create(&env, &["--every", every]);
        assert_eq!(lp["schedule"]["everyMs"], ms, "{every}");
        assert!(stderr.is_empty(), "{every}: {stderr}");
    }
    let (lp, _) = create(&env, &["--every", "1m", "--timeout", "1h30m"]);
    assert_eq!(lp["target"]["timeoutMs"], 5_400_000);
}

#[test]
fn what_the_original_rejects_stays_rejected_with_the_accepted_forms() {
    let env = TestEnv::new();
    for bad in ["1 h", "5x", "30m1h", "1h30"] {
        let ran = env
            .loops(["create", "command", "x", "--cmd", "true", "--every", bad])
            .code(1)
            .run();
        assert_eq!(
            ran.stderr.lines().next().unwrap_or_default(),
            format!(
                "error: invalid duration: {bad} (use a number and a unit: 500ms, 30s, 5m, 1h, \
                 1d, or a sum such as 1h30m; a bare number of 1000 or more is milliseconds)"
            )
        );
    }
    env.loops(["create", "command", "x", "--cmd", "true", "--every", "0"])
        .code(1)
        .stderr_has("error: --every must be greater than zero")
        .run();
    // Nothing was created.
    assert_eq!(
        env.loops(["--json", "list"]).run().json(),
        serde_json::json!([])
    );
}

#[test]
fn at_takes_relative_times_and_warns_about_the_past() {
    let env = TestEnv::new();
    #[expect(
        clippy::disallowed_methods,
        reason = "the built binary reads the real clock, so the test compares with it"
    )]
    let before = chrono::Utc::now();
    let (lp, stderr) = create(&env, &["--at", "+10m"]);
    assert!(stderr.is_empty(), "{stderr}");
    let at = |lp: &serde_json::Value| {
        chrono::DateTime::parse_from_rfc3339(lp["schedule"]["at"].as_str().unwrap())
            .unwrap()
            .with_timezone(&chrono::Utc)
    };
    let ahead = (at(&lp) - before).num_seconds();
    assert!((590..=660).contains(&ahead), "+10m is {ahead}s ahead");
    let (lp, _) = create(&env, &["--at", "in 1h30m"]);
    let ahead = (at(&lp) - before).num_seconds();
    assert!(
        (5_390..=5_460).contains(&ahead),
        "in 1h30m is {ahead}s ahead"
    );

    // `tomorrow 09:00` is 09:00 local time on the next local day.
    let ran = env
        .loops([
            "--json",
            "create",
            "command",
            "x",
            "--cmd",
            "true",
            "--at",
            "tomorrow 09:00",
        ])
        .env("TZ", Some("Asia/Tokyo"))
        .run();
    let tokyo = at(&ran.json()).with_timezone(&chrono_tz_tokyo());
    assert_eq!(tokyo.format("%H:%M:%S").to_string(), "09:00:00");
    #[expect(
        clippy::disallowed_methods,
        reason = "the built binary reads the real clock, so the test compares with it"
    )]
    let today = chrono::Utc::now()
        .with_timezone(&chrono_tz_tokyo())
        .date_naive();
    assert_eq!(tokyo.date_naive(), today.succ_opt().unwrap());

    let ran = env
        .loops([
            "create",
            "command",
            "x",
            "--cmd",
            "true",
            "--at",
            "2020-01-01T00:00:00Z",
        ])
        .run();
    // The first line; the daemon hint may follow.
    assert_eq!(
        ran.stderr.lines().next(),
        Some(
            "warning: --at 2020-01-01T00:00:00.000Z is in the past; the loop runs at the next tick"
        )
    );
    let ran = env
        .loops(["create", "command", "x", "--cmd", "true", "--every", "1m"])
        .args(["--expires-at", "2020-01-01"])
        .run();
    assert!(
        ran.stderr
            .contains("--expires-at 2020-01-01T00:00:00.000Z is in the past"),
        "{}",
        ran.stderr
    );
    env.loops([
        "create",
        "command",
        "x",
        "--cmd",
        "true",
        "--at",
        "in 5 minutes",
    ])
    .code(1)
    .stderr_has("error: invalid --at: in 5 minutes (use ISO-8601")
    .run();
}

/// Tokyo has had no daylight saving time since 1951: a fixed +09:00.
fn chrono_tz_tokyo() -> chrono::FixedOffset {
    chrono::FixedOffset::east_opt(9 * 3600).expect("+09:00 is a valid offset")
}

#[test]
fn cron_errors_name_the_field_and_its_range() {
    let env = TestEnv::new();
    for (cron, message) in [
        ("0 25 * * *", "25 is out of range for hour (0–23)"),
        ("60 * * * *", "60 is out of range for minute (0–59)"),
        ("* * 32 * *", "32 is out of range for day of month (1–31)"),
        ("* * * 13 *", "13 is out of range for month (1–12)"),
        ("* * * * 8", "8 is out of range for day of week (0–7)"),
    ] {
        env.loops(["create", "command", "x", "--cmd", "true", "--cron", cron])
            .code(1)
            .stderr_has(message)
            .run();
    }
}

#[test]
fn a_missing_executable_is_one_line_and_verbose_adds_the_path() {
    let env = TestEnv::new();
    let file = env.home().join("wf.json");
    std::fs::write(
        &file,
        r#"{"name":"w","steps":[{"id":"a","target":{"type":"command","command":"no-such-binary-for-loops"}}]}"#,
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let ran = env
        .loops(["workflows", "validate", file, "--preflight"])
        .code(1)
        .run();
    assert_eq!(
        ran.stderr,
        "error: workflow step a: Executable not found in PATH: no-such-binary-for-loops (not on \
         the PATH runs get: `loops doctor` shows it, --verbose prints it here)\n"
    );
    let ran = env
        .loops(["workflows", "validate", file, "--preflight", "--verbose"])
        .code(1)
        .run();
    // Said once, with the PATH.
    assert_eq!(
        ran.stderr.matches("Executable not found").count(),
        1,
        "{}",
        ran.stderr
    );
    assert!(ran.stderr.contains(". Effective PATH=/"), "{}", ran.stderr);

    // A run keeps the SPEC's whole message; its human line is short.
    env.loops(["create", "command", "x", "--no-shell", "--every", "1h"])
        .args(["--cmd", "no-such-binary-for-loops"])
        .run();
    let ran = env.loops(["run-now", "x"]).code(1).run();
    assert!(
        ran.stdout
            .contains("no-such-binary-for-loops (not on the PATH"),
        "{}",
        ran.stdout
    );
    let runs = env.loops(["--json", "runs", "x"]).run().json();
    let error = runs[0]["error"].as_str().unwrap();
    assert!(
        error
            .starts_with("Executable not found in PATH: no-such-binary-for-loops. Effective PATH="),
        "{error}"
    );
}
