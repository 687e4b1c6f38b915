//! A database written by the original 0.3.1 works in place: `tick` runs its
//! due loop and `runs` shows the result (SPEC §4.1, §4.2).

use loops_tests::TestEnv;
use rusqlite::Connection;

/// The tables and indexes exactly as the original 0.3.1 creates them.
const ORIGINAL_0_3_1_SCHEMA: &str = include_str!("../fixtures/original-0.3.1-schema.sql");

/// One due interval loop, as the original's `create command` writes it.
const LEGACY_LOOP: &str = r#"
INSERT INTO loops VALUES ('a1b2c3d4e5f6', 'legacy', NULL, 'active',
  '{"type":"interval","everyMs":60000,"anchor":"fixed_rate"}',
  '{"type":"command","command":"printf legacy","shell":true}',
  '2025-12-01T10:05:00.000Z', NULL, 'latest', 50, 'skip', 1, 60000, 1800000,
  NULL, '2025-12-01T10:00:00.000Z', '2025-12-01T10:00:00.000Z');
"#;

#[test]
fn an_original_database_ticks_in_place() {
    let env = TestEnv::new();
    std::fs::create_dir_all(env.data_dir()).unwrap();
    let db = Connection::open(env.db_path()).unwrap();
    db.execute_batch("PRAGMA journal_mode = WAL;").unwrap();
    db.execute_batch(ORIGINAL_0_3_1_SCHEMA).unwrap();
    db.execute_batch(LEGACY_LOOP).unwrap();
    drop(db);

    env.loops(["tick"])
        .stdout("completed=1 skipped=0 recovered=0 expired=0\n")
        .run();

    let runs = env.loops(["--json", "runs", "--show-output"]).run().json();
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
    let run = &runs[0];
    assert_eq!(run["loopId"], "a1b2c3d4e5f6");
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["stdout"], "legacy");
    // `latest` catch-up ran one slot on the loop's one-minute grid.
    let slot = run["scheduledFor"].as_str().unwrap();
    assert!(
        slot.ends_with(":00.000Z") && slot >= "2025-12-01T10:05:00.000Z",
        "{slot}"
    );

    let lp = env.loops(["show", "legacy"]).run().json();
    let next = lp["nextRunAt"].as_str().unwrap();
    assert!(next > slot, "the loop advanced past its slot: {next}");
    assert!(
        next.ends_with(":00.000Z"),
        "fixed_rate keeps the grid: {next}"
    );
    assert_eq!(lp["target"]["shell"], true);
}
