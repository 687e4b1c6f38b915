//! `loops gc` and the daemon's periodic gc (issue 14, retention): what is
//! kept and what goes, a dry run that changes nothing, workflow rows that
//! go with their runs, a gc beside a busy daemon without a `locked` error,
//! the daemon's `--gc-max-age` and `--gc-keep-per-loop`, the installed
//! unit carrying them, `doctor`'s warning, and the coalesced triggers
//! that go by their own age.
//!
//! History is seeded through the CLI (`run-now`, `workflows run`) and then
//! aged by rewriting `created_at` with SQL, or, for bulk, inserted
//! directly, on whichever backend the test runs.

use std::collections::BTreeMap;
use std::time::Duration;

use loops_store::testing::{RawDb, lit};
use loops_tests::{Daemon, TestEnv, instant_ago, sqlite_only, wait_for};
use rusqlite::{Connection, params};
use serde_json::{Value, json};

use crate::workflows::{create_workflow, shell_step};

/// The backups in the data directory's `backups/`, with the runs each holds.
fn backups(env: &TestEnv) -> Vec<i64> {
    let Ok(dir) = std::fs::read_dir(env.data_dir().join("backups")) else {
        return Vec::new();
    };
    dir.map(|e| {
        let path = e.expect("a backup").path();
        Connection::open(&path)
            .and_then(|c| c.query_row("SELECT COUNT(*) FROM loop_runs", [], |r| r.get(0)))
            .expect("a backup that opens")
    })
    .collect()
}

const DEADLINE: Duration = Duration::from_secs(30);

const DAY_MS: i64 = 86_400_000;

/// The test's database; on SQLite as loops itself runs it, foreign keys
/// off (PostgreSQL always checks them, and no arrangement here needs
/// otherwise).
fn db(env: &TestEnv) -> RawDb {
    let db = env.raw();
    if !db.is_postgres() {
        db.foreign_keys_off();
    }
    db
}

/// The ids of the runs of `loop_name`, oldest first.
fn run_ids(env: &TestEnv, loop_name: &str) -> Vec<String> {
    let runs = env
        .loops(["--json", "runs", loop_name, "--limit", "1000"])
        .run()
        .json();
    let mut ids: Vec<String> = runs
        .as_array()
        .expect("runs --json prints an array")
        .iter()
        .map(|r| r["id"].as_str().expect("a run id").to_owned())
        .collect();
    ids.reverse();
    ids
}

/// Moves run `id` back to `days` days ago (plus `seconds`, to order runs
/// of the same day).
fn age(env: &TestEnv, id: &str, days: i64, seconds: i64) {
    db(env).exec(&format!(
        "UPDATE loop_runs SET created_at = {} WHERE id = {}",
        instant_ago(days * DAY_MS - seconds * 1000),
        lit(id)
    ));
}

/// Rows per table.
fn counts(env: &TestEnv) -> BTreeMap<&'static str, i64> {
    let db = db(env);
    [
        "loops",
        "loop_runs",
        "workflow_runs",
        "workflow_step_runs",
        "workflow_events",
    ]
    .into_iter()
    .map(|t| {
        let n = db
            .int(&format!("SELECT COUNT(*) FROM {t}"))
            .expect("a count");
        (t, n)
    })
    .collect()
}

/// Every row of every table, as text, in rowid order (id order on
/// PostgreSQL, which has no rowid).
fn contents(env: &TestEnv) -> String {
    let db = db(env);
    let order = if db.is_postgres() { "id" } else { "rowid" };
    let mut all = String::new();
    for table in [
        "loops",
        "loop_runs",
        "workflow_runs",
        "workflow_step_runs",
        "workflow_events",
    ] {
        for row in db.rows(&format!("SELECT * FROM {table} ORDER BY {order}")) {
            for v in row {
                all.push_str(&format!("{v:?}|"));
            }
            all.push('\n');
        }
    }
    all
}

/// Inserts `n` old succeeded runs of a loop named `name` (which need not
/// exist), created 40 to 60 days ago, in one transaction.
fn insert_old_runs(env: &TestEnv, loop_id: &str, name: &str, n: u32) {
    // 12 hex digits, distinct per loop name and run.
    let prefix = format!("{:06x}", name.len() * 0x1000 + name.as_bytes()[0] as usize);
    if env.on_postgres() {
        // One statement: a row at a time would take minutes.
        env.raw().exec(&format!(
            "INSERT INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
               started_at, finished_at, created_at, updated_at)
             SELECT {} || lpad(to_hex(i), 6, '0'), {}, {}, at, 1, 'succeeded', at, at, at, at
             FROM (SELECT i, date_trunc('milliseconds', now()) - interval '60 days'
                             + make_interval(secs => i::bigint * 86400 * 20 / {n}) AS at
                   FROM generate_series(0, {n} - 1) AS i) AS runs",
            lit(&prefix),
            lit(loop_id),
            lit(name)
        ));
        return;
    }
    let mut db = Connection::open(env.db_path()).expect("the database");
    db.busy_timeout(Duration::from_secs(10))
        .expect("a busy timeout");
    // As loops itself runs it.
    db.pragma_update(None, "foreign_keys", "OFF")
        .expect("foreign keys off");
    let tx = db.transaction().expect("a transaction");
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
                   started_at, finished_at, created_at, updated_at)
                 SELECT ?1, ?2, ?3, at, 1, 'succeeded', at, at, at, at
                 FROM (SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-60 days', ?4) AS at)",
            )
            .expect("an insert");
        for i in 0..n {
            let id = format!("{prefix}{i:06x}");
            let offset = format!("+{} seconds", u64::from(i) * 86_400 * 20 / u64::from(n));
            insert
                .execute(params![id, loop_id, name, offset])
                .expect("a run");
        }
    }
    tx.commit().expect("the runs");
}

/// Two loops with history: `a` has 6 runs, 4 of them 40 days old (one of
/// those still running), `b` has 2 runs, both 40 days old.
fn seed(env: &TestEnv) -> (Vec<String>, Vec<String>) {
    env.create_command("a", "true", &["--every", "1h"]);
    env.create_command("b", "true", &["--every", "1h"]);
    for _ in 0..6 {
        env.loops(["run-now", "a"]).run();
    }
    for _ in 0..2 {
        env.loops(["run-now", "b"]).run();
    }
    let a = run_ids(env, "a");
    let b = run_ids(env, "b");
    for (i, id) in a.iter().take(4).enumerate() {
        age(env, id, 40, i as i64);
    }
    for (i, id) in b.iter().enumerate() {
        age(env, id, 40, i as i64);
    }
    db(env).exec(&format!(
        "UPDATE loop_runs SET status = 'running' WHERE id = {}",
        lit(&a[1])
    ));
    (a, b)
}

#[test]
fn gc_deletes_old_finished_runs_and_keeps_the_newest_of_each_loop() {
    sqlite_only!("checks the SQLite backup gc --apply takes first and SQLite's page size");
    let env = TestEnv::new();
    let (a, b) = seed(&env);
    let runs_before = counts(&env)["loop_runs"];
    let ran = env
        .loops(["--json", "gc", "--apply", "--keep-per-loop", "1"])
        .run();
    let out = ran.json();
    assert_eq!(out["applied"], true);
    // Deleting cannot be undone: a backup of the history as it was came
    // first, and said so on stderr.
    assert_eq!(backups(&env), [runs_before], "{}", ran.stderr);
    assert!(
        ran.stderr.contains("before loops gc --apply"),
        "{}",
        ran.stderr
    );
    // a: runs 0, 2 and 3 are old and finished; run 1 still runs; runs 4
    // and 5 are young. b: the older of its two old runs; the newer one is
    // the loop's latest.
    assert_eq!(out["loopRuns"], 4);
    assert_eq!(run_ids(&env, "a"), [a[1].as_str(), &a[4], &a[5]]);
    assert_eq!(run_ids(&env, "b"), [b[1].as_str()]);
    let top = out["topLoops"].as_array().expect("topLoops");
    assert_eq!(top[0]["loopName"], "a");
    assert_eq!(top[0]["runs"], 3);
    assert!(out["space"]["pageSize"].as_u64().is_some_and(|n| n > 0));
    // A second pass finds nothing, even with a keep of 0: the newest run of
    // each loop always stays.
    let again = env
        .loops(["--json", "gc", "--apply", "--keep-per-loop", "0"])
        .run()
        .json();
    assert_eq!(again["loopRuns"], 0, "{again}");
}

#[test]
fn the_keep_and_the_age_both_protect_runs() {
    let env = TestEnv::new();
    let (a, b) = seed(&env);
    // The newest 20 of each loop stay: nothing goes.
    let out = env.loops(["--json", "gc", "--apply"]).run().json();
    assert_eq!(out["loopRuns"], 0);
    // Younger than 50 days: nothing goes either.
    let out = env
        .loops([
            "--json",
            "gc",
            "--apply",
            "--keep-per-loop",
            "0",
            "--max-age-days",
            "50",
        ])
        .run()
        .json();
    assert_eq!(out["loopRuns"], 0);
    assert_eq!(run_ids(&env, "a"), a);
    assert_eq!(run_ids(&env, "b"), b);
}

#[test]
fn a_dry_run_changes_nothing() {
    let env = TestEnv::new();
    seed(&env);
    let before = (counts(&env), contents(&env));
    let ran = env.loops(["gc", "--keep-per-loop", "1"]).run();
    assert!(
        ran.stdout
            .starts_with("dry run: would delete 4 loop run(s), 0 workflow run(s)"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains("\nmost from: a (3), b (1)\n"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stderr
            .contains("run `loops gc --keep-per-loop 1 --apply`"),
        "{}",
        ran.stderr
    );
    let json = env
        .loops(["--json", "gc", "--dry-run", "--keep-per-loop", "1"])
        .run()
        .json();
    assert_eq!(json["applied"], false);
    assert_eq!(json["loopRuns"], 4);
    assert_eq!(json["longestBatchMs"], 0);
    assert_eq!((counts(&env), contents(&env)), before);
    assert_eq!(backups(&env), [0; 0], "a dry run takes no backup");
}

#[test]
fn bad_values_are_refused_with_what_to_do() {
    let env = TestEnv::new();
    env.loops(["gc", "--max-age-days", "30d"])
        .code(1)
        .stderr_has("--max-age-days must be a whole number, 0 or more (such as 30)")
        .run();
    env.loops(["gc", "--keep-per-loop=-1"])
        .code(1)
        .stderr_has("--keep-per-loop must be a whole number")
        .run();
    env.loops(["gc", "--dry-run", "--apply"]).code(2).run();
    env.loops(["daemon", "run", "--gc-max-age", "soon"])
        .code(1)
        .stderr_has("soon")
        .run();
    env.loops(["daemon", "start", "--gc-keep-per-loop", "3"])
        .code(2)
        .stderr_has("--gc-max-age")
        .run();
}

#[test]
fn apply_prunes_workflow_runs_steps_and_events_with_their_runs() {
    let env = TestEnv::new();
    let workflow = json!({
        "name": "build",
        "steps": [shell_step("one", "true", &[]), shell_step("two", "true", &["one"])],
    });
    create_workflow(&env, &workflow);
    env.loops([
        "create",
        "workflow",
        "nightly",
        "--workflow",
        "build",
        "--every",
        "1h",
    ])
    .run();
    for _ in 0..3 {
        env.loops(["run-now", "nightly"]).run();
    }
    // Three standalone runs of the same workflow.
    for _ in 0..3 {
        env.loops(["workflows", "run", "build"]).run();
    }
    let runs = run_ids(&env, "nightly");
    for (i, id) in runs.iter().take(2).enumerate() {
        age(&env, id, 40, i as i64);
    }
    let db = db(&env);
    // Every standalone run but the newest.
    db.exec(&format!(
        "UPDATE workflow_runs SET created_at = {}
         WHERE loop_run_id IS NULL AND id <> (SELECT id FROM workflow_runs
           WHERE loop_run_id IS NULL ORDER BY created_at DESC, id DESC LIMIT 1)",
        instant_ago(40 * DAY_MS)
    ));
    let linked = |run: &str| -> Vec<String> {
        db.texts(&format!(
            "SELECT id FROM workflow_runs WHERE loop_run_id = {}",
            lit(run)
        ))
    };
    let gone: Vec<String> = linked(&runs[0]);
    assert_eq!(gone.len(), 1);
    let before = counts(&env);

    let out = env
        .loops(["--json", "gc", "--apply", "--keep-per-loop", "1"])
        .run()
        .json();
    // Both aged loop runs go (the young third one is the loop's newest),
    // each with its workflow run; both aged standalone runs go too (the
    // young one is the workflow's newest standalone run).
    assert_eq!(out["loopRuns"], 2);
    assert_eq!(out["workflowRuns"], 4);
    assert_eq!(out["stepRuns"], 8);
    let after = counts(&env);
    assert_eq!(after["loop_runs"], before["loop_runs"] - 2);
    assert_eq!(after["workflow_runs"], before["workflow_runs"] - 4);
    assert_eq!(
        after["workflow_step_runs"],
        before["workflow_step_runs"] - 8
    );
    assert_eq!(
        after["workflow_events"],
        before["workflow_events"] - out["events"].as_i64().unwrap()
    );
    assert!(linked(&runs[0]).is_empty() && linked(&runs[1]).is_empty());
    assert_eq!(
        linked(&runs[2]).len(),
        1,
        "the kept run keeps its workflow run"
    );
    for table in ["workflow_step_runs", "workflow_events"] {
        let orphans = db
            .int(&format!(
                "SELECT COUNT(*) FROM {table}
                 WHERE workflow_run_id NOT IN (SELECT id FROM workflow_runs)"
            ))
            .unwrap();
        assert_eq!(orphans, 0, "{table} rows left without their run");
    }
    for id in gone {
        env.loops(["workflows", "inspect", &id]).code(1).run();
    }
}

/// Succeeded runs of the loops whose name starts with `tick`.
#[test]
fn vacuum_shrinks_the_database_after_gc_deletes_many_runs() {
    sqlite_only!("SQLite's VACUUM; on PostgreSQL --vacuum only says autovacuum does it");
    let env = TestEnv::new();
    let id = env.create_command("old", "true", &["--every", "1h"]);
    insert_old_runs(&env, &id, "old", 20_000);
    let file = || {
        std::fs::metadata(env.db_path())
            .expect("the database")
            .len()
    };
    // Without --vacuum the deleted rows leave free pages, and gc says how
    // to give them back.
    env.loops(["gc", "--apply", "--keep-per-loop", "10000"])
        .stdout_has("then run: loops gc --vacuum")
        .run();
    let grown = file();
    let out = env
        .loops([
            "--json",
            "gc",
            "--apply",
            "--keep-per-loop",
            "1",
            "--vacuum",
        ])
        .run()
        .json();
    assert_eq!(out["loopRuns"], 9_999, "{out}");
    let before = out["vacuum"]["bytesBefore"].as_u64().expect("bytesBefore");
    let after = out["vacuum"]["bytesAfter"].as_u64().expect("bytesAfter");
    assert!(before >= grown, "{out}");
    assert!(after * 4 < before, "{out}");
    assert_eq!(file(), after, "the WAL is empty after the VACUUM");
    assert_eq!(run_ids(&env, "old").len(), 1);
    // Without --vacuum there is no such field; a dry run vacuums too, and
    // says so in human output.
    let dry = env.loops(["--json", "gc"]).run().json();
    assert!(dry.get("vacuum").is_none(), "{dry}");
    env.loops(["gc", "--vacuum"])
        .stdout_has("vacuum: the database took ")
        .stdout_has(" given back)")
        .run();
}

fn busy_runs(env: &TestEnv) -> i64 {
    db(env)
        .int("SELECT COUNT(*) FROM loop_runs WHERE loop_name LIKE 'tick%' AND status = 'succeeded'")
        .expect("a count")
}

#[test]
fn gc_apply_runs_beside_a_busy_daemon_without_a_locked_error() {
    sqlite_only!("about SQLite's one write lock (no `database is locked` beside a busy daemon)");
    let env = TestEnv::new();
    for i in 0..4 {
        env.create_command(&format!("tick{i}"), "true", &["--every", "1s"]);
    }
    // Many thousands of old runs of two other loops.
    env.create_command("old-a", "true", &["--every", "1h"]);
    let old_a = env.loops(["--json", "show", "old-a"]).run().json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    insert_old_runs(&env, &old_a, "old-a", 25_000);
    insert_old_runs(&env, "0000000000ff", "removed", 25_000);
    let _daemon = Daemon::start(&env, &[]);
    wait_for("the daemon to run the busy loops", DEADLINE, || {
        (busy_runs(&env) >= 4).then_some(())
    });

    let mut gc = env.spawn(&["--json", "gc", "--apply", "--keep-per-loop", "5"]);
    let start = busy_runs(&env);
    // The daemon keeps finishing runs while gc deletes.
    let mut finished_during_gc = false;
    let status = wait_for("gc to finish", Duration::from_secs(120), || {
        if busy_runs(&env) >= start + 2 && gc.try_wait().ok().flatten().is_none() {
            finished_during_gc = true;
        }
        gc.try_wait().expect("gc's status")
    });
    let out = gc.wait_with_output().expect("gc's output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(status.success(), "gc failed: {stderr}");
    for word in ["locked", "busy"] {
        assert!(!stderr.contains(word), "{stderr}");
    }
    let report: Value = serde_json::from_slice(&out.stdout).expect("gc --json");
    assert_eq!(report["loopRuns"], 49_990);
    assert!(
        finished_during_gc,
        "the daemon finished no run while gc ran"
    );
    let log = std::fs::read_to_string(env.data_dir().join("daemon.log")).unwrap_or_default();
    for word in ["locked", "busy", "error"] {
        assert!(!log.contains(word), "the daemon logged {word:?}:\n{log}");
    }
    wait_for("the daemon to run again after gc", DEADLINE, || {
        (busy_runs(&env) >= start + 4).then_some(())
    });
}

#[test]
fn the_daemon_prunes_old_runs_with_its_gc_flags() {
    let env = TestEnv::new();
    env.create_command("old", "true", &["--every", "1h"]);
    for _ in 0..3 {
        env.loops(["run-now", "old"]).run();
    }
    let runs = run_ids(&env, "old");
    for (i, id) in runs.iter().enumerate() {
        age(&env, id, 3, i as i64);
    }
    let daemon = Daemon::start(&env, &["--gc-max-age", "1d", "--gc-keep-per-loop", "1"]);
    wait_for("the daemon's gc", DEADLINE, || {
        (run_ids(&env, "old") == [runs[2].clone()]).then_some(())
    });
    // Its first pass backed the history up first; on PostgreSQL, whose
    // backups are pg_dump's to take, there is no file to find.
    let backed_up: &[i64] = if env.on_postgres() { &[] } else { &[3] };
    assert_eq!(backups(&env), backed_up);
    let log = wait_for("the gc log line", DEADLINE, || {
        let log = std::fs::read_to_string(env.data_dir().join("daemon.log")).ok()?;
        log.contains("gc: deleted 2 loop run(s)").then_some(log)
    });
    assert!(
        log.contains(&format!("started pid={} ", daemon.pid))
            && log.contains(" gc-max-age=86400000ms gc-keep-per-loop=1"),
        "{log}"
    );
}

#[test]
fn the_installed_unit_carries_the_gc_flags() {
    let env = TestEnv::new();
    env.loops([
        "daemon",
        "install",
        "--platform",
        "linux",
        "--gc-max-age",
        "30d",
        "--gc-keep-per-loop",
        "5",
    ])
    .run();
    let unit = std::fs::read_to_string(env.systemd_unit_path()).expect("the unit");
    let exec = unit
        .lines()
        .find(|l| l.starts_with("ExecStart="))
        .expect("an ExecStart line");
    assert!(
        exec.ends_with(" daemon run --gc-max-age 30d --gc-keep-per-loop 5"),
        "{exec}"
    );
    env.loops([
        "daemon",
        "install",
        "--platform",
        "linux",
        "--gc-max-age",
        "0",
    ])
    .code(1)
    .stderr_has("--gc-max-age must be greater than zero")
    .run();
}

fn retention(env: &TestEnv) -> Value {
    let report = env.run(&["--json", "doctor"]);
    let report: Value = serde_json::from_slice(&report.stdout).expect("doctor --json");
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["id"] == "retention")
        .cloned()
        .expect("a retention check")
}

#[test]
fn doctor_warns_about_a_large_history_without_gc() {
    let env = TestEnv::new();
    env.create_command("a", "true", &["--every", "1h"]);
    let check = retention(&env);
    assert_eq!(check["status"], "ok", "{check}");
    insert_old_runs(&env, "0000000000aa", "many", 100_001);
    let check = retention(&env);
    assert_eq!(check["status"], "warn", "{check}");
    assert!(
        check["message"]
            .as_str()
            .is_some_and(|m| m.contains("loops gc --apply") && m.contains("--gc-max-age")),
        "{check}"
    );
    // A service installed with gc counts as gc on.
    env.loops(["daemon", "install", "--gc-max-age", "30d"])
        .run();
    let check = retention(&env);
    assert_eq!(check["status"], "ok", "{check}");
    assert!(
        check["detail"]
            .as_str()
            .is_some_and(|d| d.contains("installed service")),
        "{check}"
    );
}

/// Triggers that catch-up `latest` folded into a newer one belong to no
/// run; gc deletes those coalesced before its cutoff (issue 32).
#[test]
fn gc_deletes_the_triggers_catch_up_coalesced_before_its_cutoff() {
    let env = TestEnv::new();
    env.loops([
        "create", "command", "fold", "--every", "1h", "--cmd", "true",
    ])
    .run();
    for _ in 0..4 {
        env.loops(["trigger", "fold"]).run();
    }
    // The tick runs the newest trigger and folds the three older ones.
    env.loops(["tick"]).run();
    let db = db(&env);
    let coalesced = "SELECT COUNT(*) FROM loop_triggers WHERE coalesced_at IS NOT NULL";
    assert_eq!(db.int(coalesced).unwrap(), 3);
    // Two of them 40 days ago.
    let two = if db.is_postgres() {
        "(SELECT id FROM loop_triggers WHERE coalesced_at IS NOT NULL ORDER BY id LIMIT 2)"
    } else {
        "(SELECT id FROM loop_triggers WHERE coalesced_at IS NOT NULL ORDER BY rowid LIMIT 2)"
    };
    db.exec(&format!(
        "UPDATE loop_triggers SET coalesced_at = {} WHERE id IN {two}",
        instant_ago(40 * DAY_MS)
    ));

    let dry = env.loops(["--json", "gc"]).run().json();
    assert_eq!(dry["coalescedTriggers"], 2, "{dry}");
    assert_eq!(db.int(coalesced).unwrap(), 3, "a dry run deletes nothing");
    let done = env.loops(["gc", "--apply"]).run();
    assert!(
        done.stdout.contains(", 2 coalesced trigger(s) in "),
        "{}",
        done.stdout
    );
    assert_eq!(db.int(coalesced).unwrap(), 1, "the young one stays");
    // The trigger of the run that ran stays with its run.
    let all = db.int("SELECT COUNT(*) FROM loop_triggers").unwrap();
    assert_eq!(all, 2);
    let again = env.loops(["--json", "gc", "--apply"]).run().json();
    assert_eq!(again["coalescedTriggers"], 0, "{again}");
}
