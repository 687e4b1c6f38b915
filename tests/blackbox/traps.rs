//! No traps (issue 28): a bare number under a second is refused as a
//! duration, repeated `pause`, `stop` and `resume` say so, `rename` onto a
//! taken name warns, `gc`'s hint repeats its flags, a mistyped command gets
//! a suggestion, a provider missing at `create agent` warns, and a cron
//! loop created without `--tz` records the creating shell's zone.

use loops_tests::TestEnv;
use serde_json::json;

use crate::mcp::{block_on, cli_json, mutable};

#[test]
fn a_bare_number_under_a_second_is_refused_for_every_duration_flag() {
    let env = TestEnv::new();
    for (command, flag) in [
        (
            &["create", "command", "x", "--cmd", "true", "--every"][..],
            "--every",
        ),
        (
            &[
                "create",
                "command",
                "x",
                "--cmd",
                "true",
                "--every",
                "1m",
                "--timeout",
            ],
            "--timeout",
        ),
        (
            &[
                "create",
                "command",
                "x",
                "--cmd",
                "true",
                "--every",
                "1m",
                "--retry-delay",
            ],
            "--retry-delay",
        ),
        (
            &[
                "create",
                "agent",
                "x",
                "--provider",
                "claude",
                "--prompt",
                "hi",
                "--every",
                "1m",
                "--timeout",
            ],
            "--timeout",
        ),
        (
            &[
                "create",
                "agent",
                "x",
                "--provider",
                "claude",
                "--prompt",
                "hi",
                "--every",
                "1m",
                "--idle-timeout",
            ],
            "--idle-timeout",
        ),
        (&["health", "--since"], "--since"),
        (&["daemon", "stop", "--grace"], "--grace"),
    ] {
        let ran = env.loops(command).args(["10"]).code(1).run();
        assert_eq!(
            ran.stderr,
            format!("error: {flag} 10 is 10 ms; write 10s, or 10ms if you mean it\n"),
            "{command:?}"
        );
    }
    assert_eq!(cli_json(&env, &["list"]), json!([]));
    // With a unit, or of a second and more, a number is what it says.
    for (every, ms) in [
        ("500ms", 500),
        ("10s", 10_000),
        ("1000", 1000),
        ("2500", 2500),
    ] {
        let ran = env
            .loops([
                "--json", "create", "command", every, "--cmd", "true", "--every", every,
            ])
            .run();
        assert_eq!(ran.json()["schedule"]["everyMs"], ms, "{every}");
        assert!(ran.stderr.is_empty(), "{every}: {}", ran.stderr);
    }
    // `edit` refuses it too, and changes nothing.
    for flag in ["--every", "--timeout", "--lease"] {
        env.loops(["edit", "10s", flag, "5"])
            .code(1)
            .stderr_has(&format!(
                "error: {flag} 5 is 5 ms; write 5s, or 5ms if you mean it"
            ))
            .run();
    }
    assert_eq!(
        cli_json(&env, &["show", "10s"])["schedule"]["everyMs"],
        10_000
    );
}

#[test]
fn a_json_number_of_milliseconds_still_works_over_mcp() {
    let env = TestEnv::new();
    block_on(async {
        let mcp = mutable(&env).await;
        let created = mcp
            .ok(
                "loops_create_command",
                json!({"name": "fast", "cmd": "true", "every": 500}),
            )
            .await;
        assert_eq!(created["schedule"]["everyMs"], 500, "{created}");
        // A string is read as the command line reads it.
        let refused = mcp
            .err(
                "loops_create_command",
                json!({"name": "slow", "cmd": "true", "every": "500"}),
            )
            .await;
        assert_eq!(
            refused,
            "--every 500 is 500 ms; write 500s, or 500ms if you mean it"
        );
        mcp.close().await;
    });
}

#[test]
fn repeated_pause_stop_and_resume_say_already_and_succeed() {
    let env = TestEnv::new();
    let id = env.create_command("a", "true", &["--every", "1h"]);
    env.loops(["pause", "a"])
        .stdout(&format!("{id} paused\n"))
        .run();
    env.loops(["pause", "a"])
        .stdout(&format!("{id} already paused\n"))
        .run();
    env.loops(["resume", "a"]).run();
    let ran = env.loops(["resume", "a"]).run();
    assert!(
        ran.stdout
            .starts_with(&format!("{id} already active next=")),
        "{}",
        ran.stdout
    );
    env.loops(["stop", "a"])
        .stdout(&format!("{id} stopped\n"))
        .run();
    env.loops(["stop", "a"])
        .stdout(&format!("{id} already stopped\n"))
        .run();
    // `--json` prints the loop either way.
    let lp = cli_json(&env, &["stop", "a"]);
    assert_eq!(lp, cli_json(&env, &["show", "a"]));
}

#[test]
fn rename_onto_a_taken_name_warns_as_create_does() {
    let env = TestEnv::new();
    let first = env.create_command("build", "true", &["--every", "1h"]);
    let second = env.create_command("test", "true", &["--every", "1h"]);
    let ran = env
        .loops(["rename", &second, "build"])
        .stdout(&format!("renamed {second} test → build\n"))
        .run();
    assert_eq!(
        ran.stderr,
        format!(
            "warning: 2 loops are now named \"build\"; commands given this name refuse it, so \
             use the id {second}, or give one of them another name with `loops rename`\n"
        )
    );
    // A free name, or the loop's own, says nothing.
    let ran = env.loops(["rename", &first, "make"]).run();
    assert!(ran.stderr.is_empty(), "{}", ran.stderr);
    let ran = env.loops(["rename", &first, "make"]).run();
    assert!(ran.stderr.is_empty(), "{}", ran.stderr);
}

#[test]
fn gcs_dry_run_hint_repeats_the_flags_it_was_given() {
    let env = TestEnv::new();
    env.create_command("a", "true", &["--every", "1h"]);
    for _ in 0..3 {
        env.loops(["run-now", "a"]).run();
    }
    let policy = ["--max-age-days", "0", "--keep-per-loop", "0"];
    let ran = env.loops(["gc", "--dry-run"]).args(policy).run();
    assert!(
        ran.stderr.contains(
            "hint: nothing was deleted; run `loops gc --max-age-days 0 --keep-per-loop 0 \
             --apply` to delete these runs"
        ),
        "{}",
        ran.stderr
    );
    // Defaults are left out; the hint's command deletes what was counted.
    let ran = env.loops(["gc", "--max-age-days", "30"]).run();
    assert!(!ran.stderr.contains("--max-age-days"), "{}", ran.stderr);
    let applied = env
        .loops(["--json", "gc", "--apply"])
        .args(policy)
        .env("LOOPS_SKIP_BACKUP", Some("1"))
        .run()
        .json();
    assert_eq!(applied["loopRuns"], 2, "{applied}");
}

#[test]
fn a_mistyped_command_suggests_the_nearest_and_points_to_help() {
    let env = TestEnv::new();
    let ran = env.loops(["lsit"]).code(2).run();
    assert!(
        ran.stderr.starts_with(
            "error: unrecognized subcommand 'lsit'\n\n  tip: some similar subcommands exist: \
             'ls', 'list'\n"
        ),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr
            .ends_with("\nFor more information, try 'loops --help'.\n"),
        "{}",
        ran.stderr
    );
    let ran = env.loops(["daemon", "strat"]).code(2).run();
    assert!(ran.stderr.contains("'start'"), "{}", ran.stderr);
    assert!(
        ran.stderr
            .ends_with("\nFor more information, try 'loops daemon --help'.\n"),
        "{}",
        ran.stderr
    );
    // Nothing near: no tip, still the pointer; stdout stays empty.
    let ran = env.loops(["zzzz"]).code(2).stdout("").run();
    assert!(!ran.stderr.contains("tip:"), "{}", ran.stderr);
    assert!(
        ran.stderr
            .ends_with("\nFor more information, try 'loops --help'.\n"),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_provider_missing_at_create_warns_at_once() {
    let env = TestEnv::new();
    let path = format!("{}:/usr/bin:/bin", env.bin_dir().display());
    let create = |name: &str, provider: &str| {
        env.loops(["--json", "create", "agent", name, "--provider", provider])
            .args(["--prompt", "hi", "--every", "1h"])
            .env("PATH", Some(&path))
            .run()
    };
    let ran = create("a", "cursor");
    assert_eq!(ran.json()["target"]["provider"], "cursor");
    assert_eq!(
        ran.stderr,
        "warning: provider cursor runs agent (or cursor-agent), which is not on the PATH; \
         install it, or its runs will fail with \"Executable not found\"\n"
    );
    // Once either program is there, nothing is said.
    env.write_script("cursor-agent", "cat > /dev/null");
    let ran = create("b", "cursor");
    assert!(ran.stderr.is_empty(), "{}", ran.stderr);
    // The help names the ids the CLI accepts, not the programs.
    let help = env.loops(["create", "agent", "--help"]).run().stdout;
    assert!(
        help.contains("--provider <PROVIDER>      The agent CLI: claude, cursor, codewith,"),
        "{help}"
    );
    env.loops(["create", "agent", "c", "--provider", "cursor-agent"])
        .args(["--prompt", "hi", "--every", "1h"])
        .code(1)
        .stderr_has("unsupported provider: cursor-agent (use one of claude, cursor,")
        .run();
}

/// Creates cron loop `name` under `TZ=tz` and returns its stored schedule
/// and what `create` said on stderr.
fn cron_made_under(
    env: &TestEnv,
    name: &str,
    tz: &str,
    flags: &[&str],
) -> (serde_json::Value, String) {
    let mut args = vec![
        "create",
        "command",
        name,
        "--cmd",
        "true",
        "--cron",
        "0 9 * * *",
    ];
    args.extend(flags);
    let ran = env.loops(&args).env("TZ", Some(tz)).run();
    let lp = cli_json(env, &["show", name]);
    (lp["schedule"].clone(), ran.stderr)
}

#[test]
fn a_cron_loop_made_without_tz_records_the_shells_zone() {
    let env = TestEnv::new();
    let (kolkata, said) = cron_made_under(&env, "kolkata", "Asia/Kolkata", &[]);
    assert_eq!(
        kolkata,
        json!({"type": "cron", "expression": "0 9 * * *", "timezone": "Asia/Kolkata"})
    );
    assert!(!said.contains("warning"), "{said}");
    // TZ's other spellings name the same zone; `--tz` wins over the shell.
    let (colon, _) = cron_made_under(&env, "colon", ":Asia/Kolkata", &[]);
    assert_eq!(colon["timezone"], "Asia/Kolkata");
    let (path, _) = cron_made_under(&env, "path", "/usr/share/zoneinfo/America/New_York", &[]);
    assert_eq!(path["timezone"], "America/New_York");
    let (given, _) = cron_made_under(&env, "given", "Asia/Kolkata", &["--tz", "Europe/Berlin"]);
    assert_eq!(given["timezone"], "Europe/Berlin");
    // 09:00 in Kolkata is 03:30 UTC: the loop fires on its maker's clock,
    // whatever zone the daemon or a later command runs in.
    let lp = env
        .loops(["--json", "show", "kolkata"])
        .env("TZ", Some("UTC"))
        .run()
        .json();
    let next = lp["nextRunAt"].as_str().unwrap();
    assert!(next.ends_with("T03:30:00.000Z"), "{next}");
    // The list shows the zone.
    let listed = env.loops(["list"]).env("TZ", Some("UTC")).run().stdout;
    assert!(listed.contains("Asia/Kolkata"), "{listed}");
}

#[test]
fn a_tz_that_names_no_zone_warns_and_doctor_names_the_daemons_zone() {
    let env = TestEnv::new();
    // A POSIX rule names no zone: the loop keeps none, as the original's
    // rows, and runs on the daemon's local time.
    let (rule, said) = cron_made_under(&env, "rule", "IST-5:30", &[]);
    assert_eq!(rule, json!({"type": "cron", "expression": "0 9 * * *"}));
    assert!(
        said.contains("warning: TZ=IST-5:30 names no zone such as Europe/Berlin; the loop runs on the daemon's local time; give --tz to choose its zone"),
        "{said}"
    );
    let report = env
        .loops(["--json", "doctor"])
        .env("TZ", Some("Europe/Lisbon"))
        .run()
        .json();
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "cron-zone")
        .unwrap_or_else(|| panic!("no cron-zone check: {report}"));
    let message = check["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "cron loop rule has no zone: it runs on the daemon's local time, Europe/Lisbon"
        ),
        "{message}"
    );
    // A loop with a zone is not named.
    cron_made_under(&env, "zoned", "Asia/Kolkata", &[]);
    let report = env.loops(["--json", "doctor"]).run().json();
    let named = report["checks"].to_string();
    assert!(!named.contains("cron loop zoned"), "{named}");
}
