//! A database written by the original 0.3.1 works in place: `tick` runs its
//! due loop and `runs` shows the result (SPEC §4.1, §4.2).

use loops_tests::{ORIGINAL_LOOP, TestEnv, sqlite_only};

#[test]
fn an_original_database_ticks_in_place() {
    sqlite_only!("a database file the original 0.3.1 wrote");
    let env = TestEnv::new();
    env.original_db(ORIGINAL_LOOP);

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
