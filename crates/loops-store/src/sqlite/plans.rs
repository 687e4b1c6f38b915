//! The queries a tick, the daemon's wake-up or a frequent command make
//! cost what they return, not what is stored (issue 14, and the list in
//! ARCHITECTURE.md "Cost flat in history").
//!
//! Two kinds of test. A plan test reads `EXPLAIN QUERY PLAN` and checks
//! the index a query uses and that it sorts nothing. A cost test runs the
//! query on a small and on a large database and compares the number of
//! virtual-machine steps SQLite took (`SQLITE_STMTSTATUS_VM_STEP`): a
//! query that reads every loop or every run takes steps in proportion to
//! them, one that reads an index range takes the same steps at both sizes.
//! Steps count work exactly, so unlike a timing they cannot be noisy.

use std::sync::Arc;

use rusqlite::{Params, StatementStatus, params};

use super::Sqlite;
use super::daemon::{NEXT_DUE, NEXT_EXPIRY, NEXT_LEASE_EXPIRY};
use crate::loops::statements::{COUNT_STATUS, DUE_LOOPS, EXPIRE_LOOPS, HAS_RUNNING_RUN};
use crate::runs::EXPIRED_LEASES;
use crate::runs::advance::ATTEMPT_CANCELLED;
use crate::runs::facts::{COSTED_RUNS, FAILURE_GROUPS};
use crate::runs::list::{LIST_ALL_RUNS, LIST_LOOP_RUNS, LIST_RUNS_BY_STATUS};
use crate::triggers::WATCH_LOOPS;

/// The query plan of `sql`, one line per step.
fn plan(sql: &str) -> String {
    let db = Sqlite::open_in_memory(Arc::new(|_| false)).unwrap();
    let mut stmt = db
        .conn
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .unwrap();
    // The values do not change the plan: every parameter is NULL.
    let nulls = vec![rusqlite::types::Null; stmt.parameter_count()];
    let rows = stmt
        .query_map(rusqlite::params_from_iter(nulls), |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    rows.join("\n")
}

fn assert_uses(sql: &str, index: &str) {
    let plan = plan(sql);
    assert!(plan.contains(index), "{index} not used:\n{plan}");
    assert!(!plan.contains("TEMP B-TREE"), "sorts every row:\n{plan}");
}

#[test]
fn listing_the_newest_runs_reads_the_created_index() {
    assert_uses(LIST_ALL_RUNS, "idx_runs_created");
}

#[test]
fn listing_runs_of_one_status_reads_the_status_created_index() {
    assert_uses(LIST_RUNS_BY_STATUS, "idx_runs_status_created");
}

#[test]
fn health_and_cost_read_only_the_runs_that_carry_what_they_report() {
    // Counting the groups sorts the failures since the instant, which is
    // what health reports; the newest run of each is found by the index.
    let health = plan(FAILURE_GROUPS);
    assert_eq!(health.matches("idx_runs_failure").count(), 2, "{health}");
    assert!(!health.contains("SCAN loop_runs"), "{health}");
    assert!(!health.contains("SCAN s"), "{health}");
    let cost = plan(COSTED_RUNS);
    for index in ["idx_runs_cost", "idx_runs_usage"] {
        assert!(cost.contains(index), "{index} not used:\n{cost}");
    }
    assert!(!cost.contains("SCAN loop_runs"), "{cost}");
}

#[test]
fn counting_by_status_reads_the_kept_counts() {
    let plan = plan(COUNT_STATUS);
    assert!(plan.contains("status_counts"), "{plan}");
    assert!(!plan.contains("loop_runs"), "{plan}");
}

#[test]
fn loop_expiry_reads_only_loops_that_expire() {
    assert_uses(NEXT_EXPIRY, "idx_loops_status_expires");
    assert_uses(EXPIRE_LOOPS, "idx_loops_status_expires");
}

#[test]
fn the_watch_loops_are_read_down_their_partial_index() {
    // Every daemon reads them every 5 s, so they must cost the few loops
    // that watch, not every active loop.
    assert_uses(WATCH_LOOPS, "idx_loops_watch");
}

#[test]
fn gc_walks_each_group_down_its_index() {
    use super::gc::*;
    // Loop runs oldest first up the time index, each held against the
    // newest runs of its loop, read down the loop index.
    let aged = plan(AGED_CANDIDATES);
    assert!(
        aged.lines()
            .next()
            .is_some_and(|l| l.contains("idx_runs_created")),
        "{aged}"
    );
    assert!(
        aged.contains("COVERING INDEX idx_runs_loop (loop_id=?)"),
        "{aged}"
    );
    assert!(!aged.contains("TEMP B-TREE"), "{aged}");
    for sql in [
        FIRST_WORKFLOW,
        NEXT_WORKFLOW,
        WORKFLOW_BOUNDARY,
        WORKFLOW_CANDIDATES,
    ] {
        assert_uses(sql, "idx_workflow_runs_workflow_created");
    }
    // A batch is checked again by its ids, not by its statuses.
    assert_uses(CONFIRM_LOOP_RUNS, "sqlite_autoindex_loop_runs_1 (id=?)");
    assert_uses(
        CONFIRM_WORKFLOW_RUNS,
        "sqlite_autoindex_workflow_runs_1 (id=?)",
    );
    // Counting and deleting a batch's rows reads only the ids it names.
    for sql in [LOOP_RUN_ROWS.all(), WORKFLOW_RUN_ROWS.all()].concat() {
        let plan = plan(sql);
        let scans: Vec<_> = plan
            .lines()
            .filter(|l| l.contains("SCAN ") && !l.contains("json_each"))
            .collect();
        assert!(scans.is_empty(), "{sql}\n{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{sql}\n{plan}");
    }
}

/// The instant every seeded loop is measured at: each loop's next run is
/// after it, so nothing is due.
const NOW: &str = "2026-01-01T00:00:00.000Z";

/// A database of `loops` active loops (two of which expire) with
/// `runs_per_loop` finished runs each (every tenth failed), a linked
/// cancelled workflow run for each loop, and three running runs of the
/// first loop, one of them with an expired lease.
fn seeded(loops: u32, runs_per_loop: u32) -> Sqlite {
    let db = Sqlite::open_in_memory(Arc::new(|_| false)).unwrap();
    db.conn
        .execute_batch(&format!(
            "BEGIN;
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {loops})
             INSERT INTO loops (id, name, status, schedule_json, target_json, next_run_at,
               catch_up, catch_up_limit, overlap, max_attempts, retry_delay_ms, lease_ms,
               expires_at, created_at, updated_at)
             SELECT printf('l%011d', i), 'loop-' || i, 'active', '{{}}', '{{}}',
               strftime('%Y-%m-%dT%H:%M:%fZ', '{NOW}', '+' || i || ' minutes'),
               'none', 1, 'allow', 1, 0, 60000,
               CASE WHEN i <= 2 THEN '2027-01-01T00:00:00.000Z' END, '{NOW}', '{NOW}'
             FROM n;
             WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n
                                     WHERE i < {loops} * {runs_per_loop} - 1)
             INSERT INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
               created_at, updated_at)
             SELECT printf('r%011d', i), printf('l%011d', i % {loops} + 1), 'x',
               strftime('%Y-%m-%dT%H:%M:%fZ', '2025-01-01', '+' || i || ' seconds'), 1,
               CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'succeeded' END,
               strftime('%Y-%m-%dT%H:%M:%fZ', '2025-01-01', '+' || i || ' seconds'),
               strftime('%Y-%m-%dT%H:%M:%fZ', '2025-01-01', '+' || i || ' seconds')
             FROM n;
             INSERT INTO workflow_specs (id, name, version, status, steps_json, created_at,
               updated_at) VALUES ('w1', 'w', 1, 'active', '[]', '{NOW}', '{NOW}');
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {loops})
             INSERT INTO workflow_runs (id, workflow_id, workflow_name, loop_id, loop_run_id,
               idempotency_key, status, created_at, updated_at)
             SELECT printf('wr%010d', i), 'w1', 'w', printf('l%011d', i),
               printf('r%011d', i - 1), 'key-' || i, 'cancelled', '{NOW}', '{NOW}'
             FROM n;
             INSERT INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
               claimed_by, lease_expires_at, created_at, updated_at)
             VALUES
               ('run-a', 'l00000000001', 'x', '2025-12-31T23:00:00.000Z', 1, 'running',
                'other:1', '2025-12-31T23:59:00.000Z', '{NOW}', '{NOW}'),
               ('run-b', 'l00000000001', 'x', '2025-12-31T23:01:00.000Z', 1, 'running',
                'other:1', '2026-01-01T00:05:00.000Z', '{NOW}', '{NOW}'),
               ('run-c', 'l00000000001', 'x', '2025-12-31T23:02:00.000Z', 1, 'running',
                'me', '2026-01-01T00:06:00.000Z', '{NOW}', '{NOW}');
             COMMIT;"
        ))
        .unwrap();
    db
}

/// The virtual-machine steps `sql` takes to return all its rows.
fn steps(db: &Sqlite, sql: &str, params: impl Params) -> i32 {
    let mut stmt = db.conn.prepare(sql).unwrap();
    let mut rows = stmt.query(params).unwrap();
    while rows.next().unwrap().is_some() {}
    drop(rows);
    stmt.get_status(StatementStatus::VmStep)
}

/// Every query of the daemon's wake-up, the tick and the frequent
/// commands, with its parameters, as run on the seeded databases.
fn measured(db: &Sqlite) -> Vec<(&'static str, i32)> {
    vec![
        ("due loops (tick)", steps(db, DUE_LOOPS, params![NOW, 100])),
        (
            "next due loop (wake-up)",
            steps(db, NEXT_DUE, params![r#"["l00000000001"]"#]),
        ),
        ("next expiry (wake-up)", steps(db, NEXT_EXPIRY, [])),
        ("expire loops (tick)", steps(db, EXPIRE_LOOPS, params![NOW])),
        ("watch loops (every 5 s)", steps(db, WATCH_LOOPS, [])),
        (
            "next lease expiry (wake-up)",
            steps(db, NEXT_LEASE_EXPIRY, params![NOW, "me"]),
        ),
        (
            "expired run leases (tick)",
            steps(db, EXPIRED_LEASES.0, params![NOW]),
        ),
        (
            "running run of a busy loop (overlap)",
            steps(db, HAS_RUNNING_RUN, params!["l00000000001"]),
        ),
        (
            "running run of an idle loop (overlap)",
            steps(db, HAS_RUNNING_RUN, params!["l00000000002"]),
        ),
        (
            "cancelled workflow attempt (finalize)",
            // A run with no workflow run: the search finds nothing, the
            // case where reading the wrong index costs the most.
            steps(db, ATTEMPT_CANCELLED, params!["r99999999999", "key-0"]),
        ),
        (
            "count of every run (daemon status)",
            steps(db, COUNT_STATUS, params!["loop_runs", None::<&str>]),
        ),
        (
            "count of failed runs (doctor)",
            steps(db, COUNT_STATUS, params!["loop_runs", "failed"]),
        ),
        (
            "count of active loops (list)",
            steps(db, COUNT_STATUS, params!["loops", "active"]),
        ),
        (
            "newest runs (runs)",
            steps(
                db,
                LIST_ALL_RUNS,
                params![None::<&str>, None::<&str>, 20, 0],
            ),
        ),
        (
            "newest failed runs (runs --status)",
            steps(
                db,
                LIST_RUNS_BY_STATUS,
                params![None::<&str>, "failed", 20, 0],
            ),
        ),
        (
            "failures since an instant (health)",
            steps(db, FAILURE_GROUPS, params!["2024-01-01T00:00:00.000Z"]),
        ),
        (
            "costed runs since an instant (cost)",
            steps(db, COSTED_RUNS, params!["2024-01-01T00:00:00.000Z"]),
        ),
        (
            "newest runs of a loop (runs <loop>)",
            steps(
                db,
                LIST_LOOP_RUNS,
                params!["l00000000003", None::<&str>, 20, 0],
            ),
        ),
    ]
}

/// 40 times the loops and twice the runs per loop (80 times the runs),
/// with enough rows at both sizes to fill every limit: every query takes
/// about the steps it took on the small database. A query that read every
/// loop or run would take hundreds of times as many.
#[test]
fn no_frequent_query_grows_with_what_is_stored() {
    let small = measured(&seeded(50, 20));
    let large = measured(&seeded(2_000, 40));
    let grown: Vec<String> = small
        .iter()
        .zip(&large)
        .filter(|((_, s), (_, l))| *l > s * 3 / 2 + 20)
        .map(|((name, s), (_, l))| format!("{name}: {s} steps small, {l} steps large"))
        .collect();
    assert!(
        grown.is_empty(),
        "cost grows with history:\n{}",
        grown.join("\n")
    );
    // The measure does see growth: reading every run is not flat.
    let scan = |db: &Sqlite| {
        steps(
            db,
            "SELECT COUNT(*) FROM loop_runs WHERE +status = 'failed'",
            [],
        )
    };
    assert!(scan(&seeded(2_000, 40)) > 10 * scan(&seeded(50, 20)));
}
