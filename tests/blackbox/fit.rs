//! Issue 28, "Fit the terminal": every table fits a terminal of 60, 80
//! and 120 columns (`COLUMNS`, with `LOOPS_FORCE_TTY=1` standing in for a
//! terminal) without cutting an id or a status, and piped output keeps
//! every value whole with no rule; human output shows local times (`TZ`)
//! while `--json` keeps UTC; `list` says `paused` and `done`; `runs` is
//! sorted by start and names loops as they are now.

use loops_tests::store_testing::lit;
use loops_tests::{Test, TestEnv};
use serde_json::json;

use crate::workflows::{create_workflow, exec_step};

const WIDTHS: [usize; 3] = [60, 80, 120];

/// A name long enough to be cut at every width tested, with labels.
const LONG_NAME: &str = "nightly-database-backup-of-the-production-cluster-in-frankfurt";

/// A workflow name long enough to be cut at 120 columns too.
const LONG_WORKFLOW: &str = "release-build-test-and-publish-every-artifact-for-every-platform-\
                             we-ship-to-customers-and-to-the-internal-mirrors";

/// The cells a character takes on a terminal: two for the CJK and
/// full-width ranges used here, else one.
fn width(line: &str) -> usize {
    line.chars()
        .map(|c| match c as u32 {
            0x2E80..=0xA4CF | 0xAC00..=0xD7A3 | 0xF900..=0xFAFF | 0xFF00..=0xFF60 => 2,
            _ => 1,
        })
        .sum()
}

/// Whether `text` holds an instant written as UTC ISO:
/// `2026-01-05T12:00:00Z` or `2026-01-05T12:00:00.000Z`.
fn has_utc_iso(text: &str) -> bool {
    const SHAPE: &[u8] = b"dddd-dd-ddTdd:dd:dd";
    let b = text.as_bytes();
    (0..b.len()).any(|i| {
        let Some(w) = b.get(i..i + SHAPE.len()) else {
            return false;
        };
        let shaped = w.iter().zip(SHAPE).all(|(c, s)| {
            if *s == b'd' {
                c.is_ascii_digit()
            } else {
                c == s
            }
        });
        let rest = &b[i + SHAPE.len()..];
        shaped && (rest.starts_with(b"Z") || (rest.get(4) == Some(&b'Z') && rest[0] == b'.'))
    })
}

/// Loops with long names and labels, a cron loop in another zone, a CJK
/// name, a failed run, a workflow run, a backup and a daemon log: every
/// table has something to cut.
fn crowded(env: &TestEnv) -> Vec<String> {
    let ids = vec![
        env.create_command(
            LONG_NAME,
            "true",
            &["--every", "1h", "--label", "production,backups,frankfurt"],
        ),
        env.create_command(
            "report",
            "echo 'the disk is full and nothing more can be written to it' >&2; exit 3",
            &["--cron", "0 9 * * MON-FRI", "--tz", "Asia/Kolkata"],
        ),
        env.create_command("日本語の名前のループです", "true", &["--every", "5m"]),
    ];
    env.loops(["run-now", LONG_NAME]).run();
    env.loops(["run-now", "report"]).code(1).run();
    let mut workflow = json!({"name": LONG_WORKFLOW, "steps": [exec_step("build", "true", &[])]});
    workflow["description"] = json!("one step");
    create_workflow(env, &workflow);
    env.loops(["workflows", "run", LONG_WORKFLOW]).run();
    // Backups are the SQLite file's; PostgreSQL has pg_dump.
    if !env.on_postgres() {
        env.loops(["backup"]).run();
    }
    let log = "2026-01-05T12:00:00.000Z [loops-daemon] started pid=1 lease=0123456789ab host=a-host \
         max-parallel=32 grace=30000ms and a message long enough to need cutting at 120 columns\n";
    std::fs::write(env.data_dir().join("daemon.log"), log).expect("the daemon log is written");
    ids
}

/// The commands whose output is a table (or a line per item).
const TABLES: [&[&str]; 7] = [
    &["list"],
    &["runs"],
    &["workflows", "list"],
    &["workflows", "runs"],
    &["backup", "--list"],
    &["doctor"],
    &["daemon", "logs"],
];

/// [`TABLES`] that `env`'s backend has: `backup` is SQLite's alone.
fn tables(env: &TestEnv) -> Vec<&'static [&'static str]> {
    TABLES
        .into_iter()
        .filter(|args| !(env.on_postgres() && args[0] == "backup"))
        .collect()
}

/// The stdout of `loops <args>`, laid out for a terminal `columns` wide,
/// or piped.
fn run_table(env: &TestEnv, args: &[&str], columns: Option<usize>) -> String {
    let test = env.loops(args.iter().copied());
    let test = match columns {
        Some(c) => test
            .env("LOOPS_FORCE_TTY", Some("1"))
            .env("COLUMNS", Some(&c.to_string())),
        None => test,
    };
    // `doctor` exits 1 when a check fails (here no provider is
    // installed), whatever the layout.
    let code = match args {
        ["doctor"] => env.run(args).status.code().unwrap_or(0),
        _ => 0,
    };
    test.code(code).run().stdout
}

#[test]
fn every_table_fits_60_80_and_120_columns_and_piped_output_is_whole() {
    let env = TestEnv::new();
    let ids = crowded(&env);
    for args in tables(&env) {
        let piped = run_table(&env, args, None);
        let whole = piped.lines().map(width).max().unwrap_or(0);
        assert!(whole > 60, "{args:?}: {piped}");
        for columns in WIDTHS {
            let out = run_table(&env, args, Some(columns));
            let what = format!("{args:?} at {columns}:\n{out}");
            assert!(!out.is_empty(), "{what}");
            for line in out.lines() {
                assert!(width(line) <= columns, "{what}\n{line:?} is too wide");
            }
            // Cut where the whole text would not fit.
            assert_eq!(out.contains('…'), whole > columns, "{what}");
            let headed = !matches!(args, ["doctor"] | ["daemon", "logs"]);
            assert_eq!(
                out.lines().nth(1).is_some_and(|l| l.starts_with('─')),
                headed,
                "{what}"
            );
        }
        assert!(!piped.contains('─'), "{args:?}: {piped}");
        assert!(!piped.contains('…'), "{args:?}: {piped}");
        assert!(!piped.contains('\u{1b}'), "{args:?}: {piped}");
    }
    // Ids and statuses are never cut, at any width.
    for columns in WIDTHS {
        let list = run_table(&env, &["list"], Some(columns));
        for id in &ids {
            assert!(list.contains(&format!("{id}  ")), "{list}");
        }
        assert_eq!(list.matches("  active  ").count(), 3, "{list}");
        let runs = run_table(&env, &["runs"], Some(columns));
        assert!(
            runs.contains("  succeeded  ") && runs.contains("  failed  "),
            "{runs}"
        );
        let json = env.loops(["--json", "runs"]).run().json();
        for run in json.as_array().unwrap() {
            assert!(runs.contains(run["id"].as_str().unwrap()), "{runs}");
        }
    }
    // Piped: the whole values.
    let list = run_table(&env, &["list"], None);
    assert!(
        list.contains(&format!("{LONG_NAME} [production,backups,frankfurt]")),
        "{list}"
    );
    assert!(
        list.contains("cron 0 9 * * MON-FRI (Asia/Kolkata)"),
        "{list}"
    );
    assert!(list.contains("日本語の名前のループです"), "{list}");
    let runs = run_table(&env, &["runs"], None);
    assert!(runs.contains(LONG_NAME), "{runs}");
    let workflows = run_table(&env, &["workflows", "runs"], None);
    assert!(workflows.contains(LONG_WORKFLOW), "{workflows}");
    if !env.on_postgres() {
        let backups = run_table(&env, &["backup", "--list"], None);
        assert!(
            backups.contains(&env.data_dir().join("backups").display().to_string()),
            "{backups}"
        );
    }
    let logs = run_table(&env, &["daemon", "logs"], None);
    assert!(logs.trim_end().ends_with("at 120 columns"), "{logs}");
}

#[test]
fn below_80_columns_optional_columns_go_in_their_documented_order() {
    let env = TestEnv::new();
    crowded(&env);
    let header = |args: &[&str], columns| {
        run_table(&env, args, Some(columns))
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    // At 80 and above, text is cut first; a column goes only when cutting
    // is not enough, and then in the same order.
    for columns in [80, 120] {
        let list = header(&["list"], columns);
        assert!(
            list.contains("SCHEDULE") && list.contains("LAST RUN"),
            "{list}"
        );
    }
    let runs = header(&["runs"], 120);
    assert!(
        runs.contains("ATTEMPT") && runs.contains("DURATION"),
        "{runs}"
    );
    let runs = header(&["runs"], 80);
    assert!(
        !runs.contains("ATTEMPT") && runs.contains("CLASS"),
        "{runs}"
    );
    // `list` drops LAST RUN, then SCHEDULE; `runs` drops ATTEMPT, COST,
    // CLASS, DURATION, then EXIT.
    let list = header(&["list"], 60);
    assert_eq!(
        list.split_whitespace().collect::<Vec<_>>(),
        ["ID", "NAME", "STATUS", "NEXT", "RUN"]
    );
    let list = header(&["list"], 79);
    assert!(!list.contains("LAST RUN"), "{list}");
    let runs = header(&["runs"], 60);
    assert!(
        !runs.contains("ATTEMPT") && !runs.contains("CLASS"),
        "{runs}"
    );
    assert!(runs.starts_with("RUN           LOOP"), "{runs}");
    assert!(
        runs.contains("STATUS") && runs.contains("STARTED"),
        "{runs}"
    );
}

#[test]
fn human_output_shows_local_time_and_json_keeps_utc() {
    let env = TestEnv::new();
    let kolkata = |t: Test| t.env("TZ", Some("Asia/Kolkata"));
    let ran = kolkata(env.loops([
        "create",
        "command",
        "once",
        "--cmd",
        "true",
        "--at",
        "2030-01-02T03:04:05Z",
    ]))
    .run();
    assert!(
        ran.stdout.contains(" next=2030-01-02T08:34:05+05:30"),
        "{}",
        ran.stdout
    );
    let ran = kolkata(env.loops(["edit", "once", "--timeout", "5m"])).run();
    assert!(
        ran.stdout.contains("next 2030-01-02T08:34:05+05:30"),
        "{}",
        ran.stdout
    );
    env.loops(["pause", "once"]).run();
    let ran = kolkata(env.loops(["resume", "once"])).run();
    assert!(
        ran.stdout.ends_with(" next=2030-01-02T08:34:05+05:30\n"),
        "{}",
        ran.stdout
    );
    let json = kolkata(env.loops(["--json", "resume", "once"]))
        .run()
        .json();
    assert_eq!(json["nextRunAt"], "2030-01-02T03:04:05.000Z");

    crowded(&env);
    for args in tables(&env) {
        let code = env.run(args).status.code().unwrap_or(0);
        let out = kolkata(env.loops(args.iter().copied()))
            .code(code)
            .run()
            .stdout;
        assert!(!has_utc_iso(&out), "{args:?}: {out}");
    }
    assert!(has_utc_iso("at 2026-01-05T12:00:00.000Z") && has_utc_iso("2026-01-05T12:00:00Z"));
    // The log's 12:00 UTC is 17:30 in Kolkata.
    let logs = kolkata(env.loops(["daemon", "logs"])).run().stdout;
    assert!(
        logs.starts_with("2026-01-05 17:30:00 [loops-daemon] started"),
        "{logs}"
    );
    let raw = kolkata(env.loops(["--json", "daemon", "logs"]))
        .run()
        .stdout;
    assert!(
        raw.starts_with("2026-01-05T12:00:00.000Z [loops-daemon]"),
        "{raw}"
    );
    if !env.on_postgres() {
        let json = env.loops(["--json", "backup", "--list"]).run().json();
        assert!(has_utc_iso(&json.to_string()), "{json}");
    }
}

#[test]
fn a_paused_loop_says_paused_and_a_finished_once_loop_says_done() {
    let env = TestEnv::new();
    env.create_command("hourly", "true", &["--every", "1h"]);
    env.loops(["pause", "hourly"]).run();
    env.create_command("once", "true", &["--at", "now"]);
    env.create_command("never", "true", &["--at", "2030-01-01T00:00:00Z"]);
    env.loops(["stop", "never"]).run();
    env.loops(["tick"]).run();
    let list = env.loops(["list"]).run().stdout;
    let row = |name: &str| {
        let row = list
            .lines()
            .find(|l| l.contains(&format!("  {name}  ")))
            .unwrap_or_default();
        row.split("  ")
            .filter(|c| !c.is_empty())
            .map(str::trim)
            .collect::<Vec<_>>()
    };
    assert_eq!(row("hourly")[2], "paused", "{list}");
    assert_eq!(row("hourly")[4], "paused", "{list}");
    assert_eq!(row("once")[2], "done", "{list}");
    // Stopped before it ran: not done.
    assert_eq!(row("never")[2], "stopped", "{list}");
    let json = env.loops(["--json", "show", "once"]).run().json();
    assert_eq!(json["status"], "stopped");
    assert!(!list.contains(" in 59m"), "{list}");
}

#[test]
fn runs_are_sorted_by_start_and_name_loops_as_they_are_now() {
    let env = TestEnv::new();
    env.create_command("first", "true", &["--every", "1h"]);
    env.create_command("second", "true", &["--every", "1h"]);
    env.loops(["run-now", "first"]).run();
    env.loops(["run-now", "second"]).run();
    // `first` ran second: its row was written first, but it started later.
    env.set_run_times(
        "first",
        "2026-01-05T10:00:00.000Z",
        "2026-01-05T11:00:00.000Z",
        1000,
    );
    env.set_run_times(
        "second",
        "2026-01-05T09:00:00.000Z",
        "2026-01-05T09:30:00.000Z",
        1000,
    );
    env.raw().exec(&format!(
        "UPDATE loop_runs SET created_at = {} WHERE loop_name = {}",
        lit("2026-01-05T08:00:00.000Z"),
        lit("first")
    ));
    env.loops(["rename", "first", "renamed"]).run();
    env.loops(["remove", "second"]).run();
    let ran = env.loops(["runs"]).frozen().run();
    let rows: Vec<&str> = ran.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{}", ran.stdout);
    // Newest start first, its start shown (11:00 Berlin, not the finish).
    assert!(rows[0].contains("  renamed  "), "{}", ran.stdout);
    assert!(rows[0].contains("2h ago (11:00)"), "{}", ran.stdout);
    assert!(rows[1].contains("  second (removed)  "), "{}", ran.stdout);
    assert!(rows[1].contains("3h ago (10:00)"), "{}", ran.stdout);
    // JSON keeps the stored names and order.
    let json = env.loops(["--json", "runs"]).run().json();
    assert_eq!(json[0]["loopName"], "second");
    assert_eq!(json[1]["loopName"], "first");
    // One run by id names its loop the same way.
    for (run, name) in [
        (&json[1], "loop:      renamed ("),
        (&json[0], "loop:      second (removed) ("),
    ] {
        let one = env
            .loops(["runs", run["id"].as_str().unwrap()])
            .run()
            .stdout;
        assert!(one.contains(name), "{one}");
    }
}
