//! Retention (issue 14, `loops gc`): which runs a gc pass deletes and
//! which it keeps, with their workflow rows, in batches.

use loops_core::Timestamp;
use loops_store::{GcBatch, GcCounts, GcCursor, GcPolicy, Store};
use rusqlite::params;

use crate::common::*;

const DAY: i64 = 86_400_000;

/// The instant of the gc pass: 100 days after `t0`.
fn now() -> Timestamp {
    t0().add_ms(100 * DAY)
}

/// Runs older than 30 days go, beyond the newest `keep` of each loop.
fn policy(keep: u32) -> GcPolicy {
    GcPolicy::new(30 * DAY as u64, keep, now())
}

/// One whole pass: every batch planned, then counted (dry run) or deleted.
fn pass(store: &Store, policy: &GcPolicy, apply: bool) -> (GcCounts, Vec<GcBatch>) {
    let mut cursor = GcCursor::default();
    let mut counts = GcCounts::default();
    let mut batches = Vec::new();
    while !cursor.is_done() {
        let batch = store.plan_gc_batch(policy, &mut cursor).unwrap();
        counts.add(if apply {
            store.apply_gc_batch(&batch).unwrap()
        } else {
            store.count_gc_batch(&batch).unwrap()
        });
        batches.push(batch);
    }
    (counts, batches)
}

/// Inserts a run of `loop_id` created `days_ago` days before [`now`], with
/// `status`; returns its id.
fn run(fx: &Fixture, loop_id: &str, days_ago: i64, status: &str) -> String {
    let raw = fx.raw();
    let n = raw.int("SELECT COUNT(*) FROM loop_runs").unwrap();
    let id = format!("{:012x}", 0xa0_0000_0000_u64 + n as u64);
    let at = ts(now().add_ms(-days_ago * DAY));
    // A second of offset per row keeps every slot unique.
    let slot = ts(now().add_ms(-days_ago * DAY + n * 1000));
    raw.exec(&format!(
        "INSERT INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
           created_at, updated_at)
         VALUES ({}, {}, 'l', {slot}, 1, {}, {at}, {at})",
        lit(&id),
        lit(loop_id),
        lit(status)
    ));
    id
}

/// Inserts a workflow run (of workflow `wf`) created `days_ago` days
/// before [`now`], linked to `loop_run` if given, with two steps and three
/// events; returns its id.
fn workflow_run(
    fx: &Fixture,
    wf: &str,
    loop_run: Option<&str>,
    days_ago: i64,
    status: &str,
) -> String {
    let raw = fx.raw();
    // As loops itself runs: a loop run may be gone (see `dangling`).
    raw.foreign_keys_off();
    let n = raw.int("SELECT COUNT(*) FROM workflow_runs").unwrap();
    let id = format!("{:012x}", 0xb0_0000_0000_u64 + n as u64);
    let at = ts(now().add_ms(-days_ago * DAY));
    raw.exec(&format!(
        "INSERT INTO workflow_specs (id, name, version, status, steps_json, created_at, updated_at)
         VALUES ({wf}, {wf}, 1, 'active', '[]', {at}, {at}) ON CONFLICT DO NOTHING",
        wf = lit(wf)
    ));
    raw.exec(&format!(
        "INSERT INTO workflow_runs (id, workflow_id, workflow_name, loop_run_id, status,
           created_at, updated_at)
         VALUES ({}, {wf}, {wf}, {}, {}, {at}, {at})",
        lit(&id),
        loop_run.map_or_else(|| "NULL".to_owned(), lit),
        lit(status),
        wf = lit(wf)
    ));
    for step in ["a", "b"] {
        raw.exec(&format!(
            "INSERT INTO workflow_step_runs (id, workflow_run_id, step_id, sequence, status,
               created_at, updated_at)
             VALUES ({}, {}, {}, 0, 'succeeded', {at}, {at})",
            lit(&format!("{id}{step}")),
            lit(&id),
            lit(step)
        ));
    }
    for seq in 1..=3 {
        raw.exec(&format!(
            "INSERT INTO workflow_events (id, workflow_run_id, sequence, event_type, created_at)
             VALUES ({}, {}, {seq}, 'e', {at})",
            lit(&format!("{id}{seq}")),
            lit(&id)
        ));
    }
    id
}

fn ids(fx: &Fixture, sql: &str) -> Vec<String> {
    fx.raw().texts(sql)
}

fn count(fx: &Fixture, table: &str) -> i64 {
    fx.raw()
        .int(&format!("SELECT COUNT(*) FROM {table}"))
        .unwrap()
}

fn run_ids(fx: &Fixture) -> Vec<String> {
    ids(fx, "SELECT id FROM loop_runs ORDER BY id")
}

#[test]
fn old_finished_runs_go_beyond_the_newest_kept_per_loop() {
    let fx = Fixture::new();
    let store = fx.store();
    let a = create(&store, "a", 1);
    let b = create(&store, "b", 1);
    // Loop a: 10 old runs of every finished status, then 2 young ones.
    let statuses = ["succeeded", "failed", "timed_out", "abandoned", "skipped"];
    let old_a: Vec<String> = (0..10)
        .map(|i| run(&fx, a.id.as_str(), 60 - i, statuses[i as usize % 5]))
        .collect();
    let young_a: Vec<String> = (0..2)
        .map(|i| run(&fx, a.id.as_str(), 5 - i, "succeeded"))
        .collect();
    // Loop b: 2 old runs only.
    let old_b: Vec<String> = (0..2)
        .map(|i| run(&fx, b.id.as_str(), 50 - i, "succeeded"))
        .collect();

    let (counts, _) = pass(&store, &policy(3), true);
    // Loop a keeps its 2 young runs and its newest old one (3 in all);
    // loop b keeps both, having no more than 3.
    assert_eq!(counts.loop_runs, 9);
    let mut kept = vec![old_a[9].clone()];
    kept.extend(young_a);
    kept.extend(old_b);
    kept.sort();
    assert_eq!(run_ids(&fx), kept);
}

#[test]
fn young_runs_stay_beyond_the_keep() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "a", 1);
    let young: Vec<String> = (0..5)
        .map(|i| run(&fx, lp.id.as_str(), 29 - i, "succeeded"))
        .collect();
    let (counts, _) = pass(&store, &policy(1), true);
    assert_eq!(counts, GcCounts::default());
    let mut young = young;
    young.sort();
    assert_eq!(run_ids(&fx), young);
}

#[test]
fn the_newest_run_of_a_loop_stays_even_with_a_keep_of_zero() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "a", 1);
    let runs: Vec<String> = (0..3)
        .map(|i| run(&fx, lp.id.as_str(), 90 - i, "failed"))
        .collect();
    let (counts, _) = pass(&store, &policy(0), true);
    assert_eq!(counts.loop_runs, 2);
    assert_eq!(run_ids(&fx), vec![runs[2].clone()]);
}

#[test]
fn running_and_unknown_runs_stay() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "a", 1);
    let running = run(&fx, lp.id.as_str(), 90, "running");
    let queued = run(&fx, lp.id.as_str(), 89, "queued");
    let done = run(&fx, lp.id.as_str(), 88, "succeeded");
    run(&fx, lp.id.as_str(), 1, "succeeded");
    let (counts, _) = pass(&store, &policy(1), true);
    assert_eq!(counts.loop_runs, 1);
    let left = run_ids(&fx);
    assert!(
        left.contains(&running) && left.contains(&queued),
        "{left:?}"
    );
    assert!(!left.contains(&done));
}

#[test]
fn a_run_whose_slot_waits_for_a_retry_stays() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "a", 3);
    let failed = run(&fx, lp.id.as_str(), 60, "failed");
    run(&fx, lp.id.as_str(), 1, "succeeded");
    fx.raw().exec(&format!(
        "UPDATE loops SET retry_scheduled_for =
           (SELECT scheduled_for FROM loop_runs WHERE id = {}) WHERE id = {}",
        lit(&failed),
        lit(lp.id.as_str())
    ));
    let (counts, _) = pass(&store, &policy(1), true);
    assert_eq!(counts.loop_runs, 0);
    assert!(run_ids(&fx).contains(&failed));
}

#[test]
fn workflow_rows_go_with_their_loop_run_and_an_unfinished_one_keeps_it() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "a", 1);
    let finished = run(&fx, lp.id.as_str(), 60, "succeeded");
    let stuck = run(&fx, lp.id.as_str(), 59, "failed");
    run(&fx, lp.id.as_str(), 1, "succeeded");
    // Two attempts' workflow runs of the finished run, all finished.
    let w1 = workflow_run(&fx, "wf", Some(&finished), 60, "failed");
    let w2 = workflow_run(&fx, "wf", Some(&finished), 60, "succeeded");
    // The stuck run's workflow run never finished.
    let w3 = workflow_run(&fx, "wf", Some(&stuck), 59, "running");

    let (dry, _) = pass(&store, &policy(1), false);
    let expected = GcCounts {
        loop_runs: 1,
        workflow_runs: 2,
        step_runs: 4,
        events: 6,
        ..GcCounts::default()
    };
    assert_eq!(dry, expected);
    assert_eq!(count(&fx, "loop_runs"), 3, "a dry run deletes nothing");

    let (applied, _) = pass(&store, &policy(1), true);
    assert_eq!(applied, expected);
    assert!(!run_ids(&fx).contains(&finished));
    assert!(run_ids(&fx).contains(&stuck));
    assert_eq!(
        ids(&fx, "SELECT id FROM workflow_runs"),
        vec![w3.clone()],
        "{w1} {w2} went"
    );
    for table in ["workflow_step_runs", "workflow_events"] {
        let orphans = fx
            .raw()
            .int(&format!(
                "SELECT COUNT(*) FROM {table}
                 WHERE workflow_run_id NOT IN (SELECT id FROM workflow_runs)"
            ))
            .unwrap();
        assert_eq!(orphans, 0, "{table}");
    }
    assert_eq!(count(&fx, "workflow_step_runs"), 2);
    assert_eq!(count(&fx, "workflow_events"), 3);
}

#[test]
fn standalone_workflow_runs_keep_the_newest_of_each_workflow() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "a", 1);
    // A loop's workflow runs are the loop's business, however old.
    let loop_run = run(&fx, lp.id.as_str(), 1, "succeeded");
    let linked = workflow_run(&fx, "wf", Some(&loop_run), 80, "succeeded");
    // Standalone runs of wf: 4 old (one still running), 1 young.
    let s_old: Vec<String> = (0..3)
        .map(|i| workflow_run(&fx, "wf", None, 70 - i, "succeeded"))
        .collect();
    let s_running = workflow_run(&fx, "wf", None, 75, "running");
    let s_young = workflow_run(&fx, "wf", None, 3, "cancelled");
    // A run whose loop run is gone counts as standalone.
    let dangling = workflow_run(&fx, "wf2", Some("ffffffffffff"), 60, "failed");
    let other = workflow_run(&fx, "wf2", None, 40, "failed");

    let (counts, batches) = pass(&store, &policy(2), true);
    // wf keeps its 2 newest standalone runs (the young one and the newest
    // old one) and its running one; wf2 keeps both.
    assert_eq!(
        counts,
        GcCounts {
            loop_runs: 0,
            workflow_runs: 2,
            step_runs: 4,
            events: 6,
            ..GcCounts::default()
        }
    );
    assert!(batches.iter().all(|b| b.per_loop.is_empty()));
    let mut kept = vec![
        linked,
        s_old[2].clone(),
        s_running,
        s_young,
        dangling,
        other,
    ];
    kept.sort();
    assert_eq!(ids(&fx, "SELECT id FROM workflow_runs ORDER BY id"), kept);
}

#[test]
fn runs_of_a_removed_loop_are_collected_by_their_loop_id() {
    let fx = Fixture::new();
    let store = fx.store();
    let runs: Vec<String> = (0..4)
        .map(|i| run(&fx, "0000000000aa", 60 - i, "succeeded"))
        .collect();
    let (counts, batches) = pass(&store, &policy(1), true);
    assert_eq!(counts.loop_runs, 3);
    assert_eq!(run_ids(&fx), vec![runs[3].clone()]);
    let tally: Vec<_> = batches.iter().flat_map(|b| b.per_loop.clone()).collect();
    assert_eq!(tally.len(), 1);
    assert_eq!(tally[0].loop_id, "0000000000aa");
    assert_eq!(tally[0].runs, 3);
}

#[test]
fn batches_stay_within_their_size_and_cover_everything() {
    let fx = Fixture::new();
    let store = fx.store();
    let mut newest = Vec::new();
    for l in 0..5 {
        let lp = create(&store, &format!("l{l}"), 1);
        for i in 0..7 {
            let id = run(&fx, lp.id.as_str(), 90 - i, "succeeded");
            if i == 6 {
                newest.push(id);
            }
        }
    }
    let mut small = policy(1);
    small.batch_size = 4;
    let (dry, _) = pass(&store, &small, false);
    let (counts, batches) = pass(&store, &small, true);
    assert_eq!(dry, counts);
    assert_eq!(counts.loop_runs, 30);
    assert!(
        batches
            .iter()
            .all(|b| b.per_loop.iter().map(|t| t.runs).sum::<u64>() <= 4)
    );
    assert!(batches.len() >= 8, "{} batches", batches.len());
    newest.sort();
    assert_eq!(run_ids(&fx), newest);
    // A second pass finds nothing more.
    assert_eq!(pass(&store, &small, true).0, GcCounts::default());
}

#[test]
fn a_batch_tallies_each_loop_once_however_its_runs_interleave() {
    let fx = Fixture::new();
    let store = fx.store();
    let (a, b) = (create(&store, "a", 1), create(&store, "b", 1));
    // Old runs of a and b by turns, then a young one of each that stays.
    for day in 0..6 {
        let lp = if day % 2 == 0 { &a } else { &b };
        run(&fx, lp.id.as_str(), 90 - day, "succeeded");
    }
    for lp in [&a, &b] {
        run(&fx, lp.id.as_str(), 1, "succeeded");
    }
    let (counts, batches) = pass(&store, &policy(1), true);
    assert_eq!(counts.loop_runs, 6);
    let full: Vec<_> = batches.iter().filter(|b| !b.is_empty()).collect();
    assert_eq!(full.len(), 1, "{batches:?}");
    let mut tally: Vec<_> = full[0]
        .per_loop
        .iter()
        .map(|t| (t.loop_id.clone(), t.runs))
        .collect();
    tally.sort();
    let mut want = vec![(a.id.to_string(), 3), (b.id.to_string(), 3)];
    want.sort();
    assert_eq!(tally, want);
}

#[test]
fn a_run_that_started_again_after_planning_is_not_deleted() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "a", 3);
    let old = run(&fx, lp.id.as_str(), 60, "failed");
    run(&fx, lp.id.as_str(), 1, "succeeded");
    let mut cursor = GcCursor::default();
    let batch = store.plan_gc_batch(&policy(1), &mut cursor).unwrap();
    assert!(!batch.is_empty());
    // Another runner retries the slot between the plan and the delete.
    fx.raw().exec(&format!(
        "UPDATE loop_runs SET status = 'running' WHERE id = {}",
        lit(&old)
    ));
    assert_eq!(store.apply_gc_batch(&batch).unwrap(), GcCounts::default());
    assert!(run_ids(&fx).contains(&old));
}

#[test]
fn space_usage_counts_free_pages_after_a_delete() {
    sqlite_only!("counts SQLite's pages and free list");
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "a", 1);
    let raw = rusqlite::Connection::open(fx.path()).unwrap();
    raw.execute_batch("BEGIN").unwrap();
    for i in 0..2000 {
        raw.execute(
            "INSERT INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status,
               stdout, created_at, updated_at)
             VALUES (printf('%012x', ?1), ?2, 'a', ?3, 1, 'succeeded', ?4, ?3, ?3)",
            params![
                i,
                lp.id.as_str(),
                t0().add_ms(i * 1000).to_string(),
                "x".repeat(500)
            ],
        )
        .unwrap();
    }
    raw.execute_batch("COMMIT").unwrap();
    let before = store.space_usage().unwrap();
    assert!(before.page_size > 0 && before.page_count > 100);
    assert!(!before.vacuum_would_help());
    let (counts, _) = pass(&store, &policy(1), true);
    assert_eq!(counts.loop_runs, 1999);
    let after = store.space_usage().unwrap();
    assert!(after.freelist_count > before.freelist_count);
    assert!(after.vacuum_would_help(), "{after:?}");
    assert_eq!(after.free_bytes(), after.page_size * after.freelist_count);
}

#[test]
fn runs_created_at_the_same_instant_are_walked_one_by_one() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "a", 1);
    let runs: Vec<String> = (0..10)
        .map(|_| run(&fx, lp.id.as_str(), 60, "succeeded"))
        .collect();
    let standalone: Vec<String> = (0..10)
        .map(|_| workflow_run(&fx, "wf", None, 60, "succeeded"))
        .collect();
    let mut small = policy(2);
    small.batch_size = 3;
    let (counts, _) = pass(&store, &small, true);
    assert_eq!(counts.loop_runs, 8);
    assert_eq!(counts.workflow_runs, 8);
    // Among equal instants the later rows count as newer.
    assert_eq!(run_ids(&fx), runs[8..].to_vec());
    assert_eq!(
        ids(&fx, "SELECT id FROM workflow_runs ORDER BY id").len(),
        2,
        "{standalone:?}"
    );
}

#[test]
fn the_trigger_of_a_deleted_run_goes_with_it() {
    let fx = Fixture::new();
    let store = fx.store();
    let lp = create(&store, "a", 1);
    let old = run(&fx, lp.id.as_str(), 60, "succeeded");
    let young = run(&fx, lp.id.as_str(), 5, "succeeded");
    for (i, run_id) in [&old, &young].into_iter().enumerate() {
        fx.raw().exec(&format!(
            "INSERT INTO loop_triggers (id, loop_id, kind, created_at, run_id)
             VALUES ({}, {}, 'manual', {}, {})",
            lit(&format!("{i:012x}")),
            lit(lp.id.as_str()),
            ts(now().add_ms(-70 * DAY)),
            lit(run_id)
        ));
    }
    let (counts, _) = pass(&store, &policy(1), true);
    assert_eq!(counts.loop_runs, 1);
    assert_eq!(
        ids(&fx, "SELECT run_id FROM loop_triggers ORDER BY run_id"),
        vec![young]
    );
}
