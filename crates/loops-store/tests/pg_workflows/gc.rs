//! Retention on PostgreSQL: the same rows give the same batches, counts
//! and survivors as on SQLite, two daemons applying one batch at once
//! delete each row once, and the space report says what PostgreSQL knows.

use std::sync::{Arc, Barrier};
use std::thread;

use loops_core::Timestamp;
use loops_store::{GcBatch, GcCounts, GcCursor, GcPolicy, Store};

use crate::common::{
    DAY, SqliteFile, at, database, ids_on_both, loop_sql, on_both, pg_raw, pg_store, run_sql,
};

/// The instant of the gc pass.
fn now() -> Timestamp {
    at(100 * DAY)
}

/// Runs created before day 70 may go, beyond the newest 2 of each loop
/// (or workflow), 2 runs a batch.
fn policy() -> GcPolicy {
    let mut policy = GcPolicy::new(30 * DAY as u64 * 1000, 2, now());
    policy.batch_size = 2;
    policy
}

fn day(d: i64) -> Timestamp {
    at(d * DAY)
}

/// A workflow run of `wf` created on day `d`, with two steps and three
/// events, linked to `loop_run` if given.
fn workflow_run_sql(
    id: &str,
    wf: &str,
    loop_run: Option<(&str, &str)>,
    d: i64,
    status: &str,
) -> String {
    let t = day(d);
    let (loop_id, run) = loop_run.map_or(("NULL".to_owned(), "NULL".to_owned()), |(l, r)| {
        (format!("'{l}'"), format!("'{r}'"))
    });
    let mut sql = format!(
        "INSERT INTO workflow_runs (id, workflow_id, workflow_name, loop_id, loop_run_id, status,
                created_at, updated_at)
         VALUES ('{id}', '{wf}', 'wf-{wf}', {loop_id}, {run}, '{status}', '{t}', '{t}');"
    );
    for (i, step) in ["a", "b"].iter().enumerate() {
        sql.push_str(&format!(
            "INSERT INTO workflow_step_runs (id, workflow_run_id, step_id, sequence, status,
                    created_at, updated_at)
             VALUES ('{id}s{i}', '{id}', '{step}', {i}, 'succeeded', '{t}', '{t}');"
        ));
    }
    for i in 1..=3 {
        sql.push_str(&format!(
            "INSERT INTO workflow_events (id, workflow_run_id, sequence, event_type, created_at)
             VALUES ('{id}e{i}', '{id}', {i}, 'created', '{t}');"
        ));
    }
    sql
}

fn workflow_sql(id: &str) -> String {
    format!(
        "INSERT INTO workflow_specs (id, name, version, status, steps_json, created_at, updated_at)
         VALUES ('{id}', 'wf-{id}', 1, 'active', '[]', '{t}', '{t}');",
        t = day(0)
    )
}

/// The history both databases hold (ids say what each row is for).
fn history() -> String {
    let mut sql = String::new();
    let mut run = |id: &str, lp: &str, d: i64, status: &str| {
        sql.push_str(&run_sql(id, lp, day(d), status, None, day(d)));
    };
    // Loop 1: six old finished runs and a recent one; the two newest stay.
    for (i, d) in [1, 2, 3, 4, 5, 6, 80].into_iter().enumerate() {
        run(&format!("a1000000000{i}"), "aaaaaaaaaaa1", d, "succeeded");
    }
    // Loop 2: runs that stay whatever their age: a retry pending, a run
    // in flight, an unknown status, and one an unfinished workflow run
    // points to; and old finished ones beyond its newest two.
    run("a20000000000", "aaaaaaaaaaa2", 1, "failed");
    run("a20000000001", "aaaaaaaaaaa2", 2, "running");
    run("a20000000002", "aaaaaaaaaaa2", 3, "succeeded");
    run("a20000000003", "aaaaaaaaaaa2", 4, "succeeded");
    run("a20000000004", "aaaaaaaaaaa2", 5, "abandoned");
    run("a20000000005", "aaaaaaaaaaa2", 6, "skipped");
    run("a20000000006", "aaaaaaaaaaa2", 7, "from-the-future");
    run("a20000000007", "aaaaaaaaaaa2", 8, "timed_out");
    run("a20000000008", "aaaaaaaaaaa2", 9, "succeeded");
    // Loop 3: one old run, which stays as its loop's newest.
    run("a30000000000", "aaaaaaaaaaa3", 1, "failed");
    // A deleted loop's runs.
    for i in 0..3 {
        run(
            &format!("a4000000000{i}"),
            "aaaaaaaaaaa4",
            1 + i,
            "succeeded",
        );
    }
    sql.push_str(&loop_sql("aaaaaaaaaaa1", None));
    sql.push_str(&loop_sql("aaaaaaaaaaa2", Some(day(1))));
    sql.push_str(&loop_sql("aaaaaaaaaaa3", None));
    sql.push_str(&workflow_sql("ffffffffff01"));
    sql.push_str(&workflow_sql("ffffffffff02"));
    let w1 = "ffffffffff01";
    let l2 = "aaaaaaaaaaa2";
    // Linked: one still running (its loop run stays), one finished (goes
    // with its loop run).
    sql.push_str(&workflow_run_sql(
        "b20000000002",
        w1,
        Some((l2, "a20000000002")),
        3,
        "running",
    ));
    sql.push_str(&workflow_run_sql(
        "b20000000003",
        w1,
        Some((l2, "a20000000003")),
        4,
        "succeeded",
    ));
    // Standalone runs of workflow 1 (one running) and workflow 2.
    for (i, status) in [
        "succeeded",
        "failed",
        "cancelled",
        "running",
        "timed_out",
        "succeeded",
    ]
    .into_iter()
    .enumerate()
    {
        let id = format!("c1000000000{i}");
        sql.push_str(&workflow_run_sql(&id, w1, None, 10 + i as i64, status));
    }
    sql.push_str(&workflow_run_sql(
        "c20000000000",
        "ffffffffff02",
        None,
        1,
        "failed",
    ));
    sql
}

/// One whole pass: every batch planned, then counted (dry run) or deleted.
fn pass(store: &Store, apply: bool) -> (GcCounts, Vec<GcBatch>) {
    let mut cursor = GcCursor::default();
    let mut counts = GcCounts::default();
    let mut batches = Vec::new();
    while !cursor.is_done() {
        let batch = store.plan_gc_batch(&policy(), &mut cursor).unwrap();
        counts.add(if apply {
            store.apply_gc_batch(&batch).unwrap()
        } else {
            store.count_gc_batch(&batch).unwrap()
        });
        batches.push(batch);
    }
    (counts, batches)
}

const TABLES: [&str; 4] = [
    "loop_runs",
    "workflow_runs",
    "workflow_step_runs",
    "workflow_events",
];

#[test]
fn gc_keeps_and_deletes_what_sqlite_gc_does() {
    let Some(db) = database("gc_same") else {
        return;
    };
    let lite_file = SqliteFile::new();
    let lite = lite_file.store();
    let pg = pg_store(&db, "host-a", |_| false);
    let mut raw = pg_raw(&db);
    on_both(&lite_file, &mut raw, &history());

    let (lite_dry, lite_planned) = pass(&lite, false);
    let (pg_dry, pg_planned) = pass(&pg, false);
    assert_eq!(pg_dry, lite_dry);
    // The two walk in different orders (SQLite oldest first, PostgreSQL
    // loop by loop), so they batch differently; a pass's runs per loop
    // are the same.
    let tallies = |b: &[GcBatch]| {
        let mut per_loop = std::collections::BTreeMap::new();
        for t in b.iter().flat_map(|b| &b.per_loop) {
            *per_loop
                .entry((t.loop_id.clone(), t.loop_name.clone()))
                .or_insert(0) += t.runs;
        }
        per_loop
    };
    assert_eq!(tallies(&pg_planned), tallies(&lite_planned));
    let (lite_done, _) = pass(&lite, true);
    let (pg_done, _) = pass(&pg, true);
    assert_eq!(pg_done, lite_done);
    assert_eq!(pg_done, pg_dry);
    for table in TABLES {
        let (lite_ids, pg_ids) = ids_on_both(&lite_file, &mut raw, table);
        assert_eq!(pg_ids, lite_ids, "{table}");
    }

    // What went, spelled out, so a rule both got wrong still fails.
    let (_, loop_runs) = ids_on_both(&lite_file, &mut raw, "loop_runs");
    let kept: Vec<&str> = vec![
        "a10000000005",
        "a10000000006",
        "a20000000000",
        "a20000000001",
        "a20000000002",
        "a20000000006",
        "a20000000007",
        "a20000000008",
        "a30000000000",
        "a40000000001",
        "a40000000002",
    ];
    assert_eq!(loop_runs, kept);
    let (_, workflow_runs) = ids_on_both(&lite_file, &mut raw, "workflow_runs");
    assert_eq!(
        workflow_runs,
        [
            "b20000000002",
            "c10000000003",
            "c10000000004",
            "c10000000005",
            "c20000000000"
        ]
    );
    assert_eq!(
        pg_done,
        GcCounts {
            loop_runs: 9,
            workflow_runs: 4,
            step_runs: 8,
            events: 12,
            ..GcCounts::default()
        }
    );
    // A second pass finds nothing more.
    assert_eq!(pass(&pg, true).0, GcCounts::default());
}

#[test]
fn two_daemons_applying_one_batch_delete_each_row_once() {
    let Some(db) = database("gc_overlap") else {
        return;
    };
    let mut raw = pg_raw(&db);
    let planner = pg_store(&db, "host-a", |_| false);
    raw.batch_execute(&history()).unwrap();
    let mut everything = GcPolicy::new(30 * DAY as u64 * 1000, 2, now());
    everything.batch_size = 1000;
    let mut cursor = GcCursor::default();
    let mut batches = Vec::new();
    while !cursor.is_done() {
        batches.push(planner.plan_gc_batch(&everything, &mut cursor).unwrap());
    }
    let expected = batches.iter().fold(GcCounts::default(), |mut sum, b| {
        sum.add(planner.count_gc_batch(b).unwrap());
        sum
    });
    assert!(expected.total() > 0);
    let batches = Arc::new(batches);
    let barrier = Arc::new(Barrier::new(2));
    let daemons: Vec<_> = ["host-a", "host-b"]
        .into_iter()
        .map(|host| {
            let store = pg_store(&db, host, |_| false);
            let (batches, barrier) = (Arc::clone(&batches), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                let mut sum = GcCounts::default();
                for b in batches.iter() {
                    sum.add(store.apply_gc_batch(b).unwrap());
                }
                sum
            })
        })
        .collect();
    let mut total = GcCounts::default();
    for d in daemons {
        total.add(d.join().unwrap());
    }
    assert_eq!(total, expected);
    let mut after = GcCursor::default();
    while !after.is_done() {
        assert!(
            planner
                .plan_gc_batch(&everything, &mut after)
                .unwrap()
                .is_empty()
        );
    }
}

#[test]
fn the_space_report_is_the_database_size_with_nothing_free() {
    let Some(db) = database("gc_space") else {
        return;
    };
    let store = pg_store(&db, "host-a", |_| false);
    store.checkpoint_wal().unwrap();
    let size = || -> u64 {
        let size: i64 = pg_raw(&db)
            .query_one("SELECT pg_database_size(current_database())", &[])
            .unwrap()
            .get(0);
        u64::try_from(size).unwrap()
    };
    // The server may add a table's free-space or visibility map between
    // two reads (autovacuum): the report is read between two sizes.
    let before = size();
    let space = store.space_usage().unwrap();
    let after = size();
    // The database's files, a few of which are not whole blocks, in
    // blocks rounded up.
    assert_eq!(space.page_size, 8192);
    assert!(
        space.total_bytes() >= before && space.total_bytes() < after + 8192,
        "{space:?} {before}..{after}"
    );
    assert_eq!(space.free_bytes(), 0);
    assert!(!space.vacuum_would_help());
}
