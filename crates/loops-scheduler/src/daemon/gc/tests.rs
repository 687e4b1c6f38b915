//! Tests of the gc pass: batch sizing, pacing, progress, stop, checkpoints and coalesced triggers.

use super::*;

#[test]
fn batches_grow_and_shrink_towards_the_target_hold() {
    let ms = Duration::from_millis;
    assert_eq!(next_size(64, ms(1), 500), 128, "at most doubled");
    assert_eq!(next_size(64, ms(2), 500), 128);
    assert_eq!(next_size(300, ms(1), 500), 500, "within the policy's size");
    assert_eq!(next_size(100, ms(5), 500), 80);
    assert_eq!(next_size(100, ms(100), 500), 50, "at most halved");
    assert_eq!(next_size(8, ms(100), 500), 8, "never below the least");
    assert_eq!(next_size(64, ms(1), 4), 4);
}

#[test]
fn a_pass_rests_a_multiple_of_each_batch_and_never_less_than_the_least() {
    let ms = Duration::from_millis;
    assert_eq!(pause_after(ms(0)), MIN_PAUSE);
    assert_eq!(pause_after(ms(1)), MIN_PAUSE);
    assert_eq!(pause_after(ms(5)), MIN_PAUSE);
    assert_eq!(pause_after(ms(8)), ms(16));
    assert_eq!(pause_after(ms(30)), ms(60));
}

#[test]
fn tallies_of_one_loop_across_batches_merge() {
    let tally = |id: &str, runs| GcLoopTally {
        loop_id: id.to_owned(),
        loop_name: id.to_owned(),
        runs,
    };
    let mut all = vec![tally("a", 2)];
    merge_tallies(&mut all, vec![tally("a", 3), tally("b", 1)]);
    assert_eq!(all, vec![tally("a", 5), tally("b", 1)]);
}

/// A pass reports its counts after every batch, growing to the
/// report's: `loops gc`'s live view shows them.
#[test]
fn a_pass_reports_its_progress_batch_by_batch() {
    let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let store = Store::open_in_memory(Arc::new(|_| false)).unwrap();
    loop_with_runs(&store, t0, 40);
    let policy = GcPolicy::new(86_400_000, 1, t0.add_ms(10 * 86_400_000));
    let seen = std::sync::Mutex::new(Vec::new());
    let report = collect_garbage(&store, &policy, true, &|| false, &|c| {
        seen.lock().unwrap().push(c.loop_runs);
    })
    .unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(report.counts.loop_runs, 39, "all but the newest");
    assert!(seen.len() > 1, "one report per batch: {seen:?}");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert_eq!(seen.last(), Some(&39));
    assert!(!describe(&report).contains("coalesced"), "none to name");
}

/// A loop due every minute that runs `true`.
fn every_minute(name: &str) -> loops_core::NewLoop {
    use loops_core::{CommandTarget, NewLoop, Schedule, Target};
    NewLoop::new(
        name,
        Schedule::Interval {
            every_ms: 60_000,
            anchor: None,
        },
        Target::Command(CommandTarget::new("true")),
    )
}

/// A loop on `store` with `runs` succeeded runs, a minute apart from `t0`.
fn loop_with_runs(store: &Store, t0: Timestamp, runs: i64) {
    use loops_core::{ExecutorResult, ExecutorStatus};
    let lp = store.create_loop(&every_minute("old"), t0).unwrap();
    for i in 0..runs {
        let slot = t0.add_ms(60_000 * i);
        let loops_store::Claim::Claimed { run, .. } =
            store.claim_run(&lp, slot, "me", slot).unwrap()
        else {
            panic!("not claimed");
        };
        let done = ExecutorResult {
            status: ExecutorStatus::Succeeded,
            error: None,
            ..ExecutorResult::failed(String::new(), slot, slot.add_ms(5))
        };
        store
            .finalize_run(&run.id, &done, None, slot.add_ms(5))
            .unwrap();
    }
}

/// A file store in `dir` with [`loop_with_runs`], its log checkpointed.
fn file_store_with_runs(dir: &Path, t0: Timestamp, runs: i64) -> Store {
    let store = Store::open(&dir.join("loops.db"), Arc::new(|_| false)).unwrap();
    loop_with_runs(&store, t0, runs);
    store.checkpoint_wal().unwrap();
    store
}

#[test]
fn a_short_log_is_left_to_grow_between_batches_and_checkpointed_at_the_end() {
    let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = file_store_with_runs(dir.path(), t0, 40);
    let mut policy = GcPolicy::new(86_400_000, 1, t0.add_ms(10 * 86_400_000));
    policy.batch_size = 8;
    let backlogs = std::sync::Mutex::new(Vec::new());
    let report = collect_garbage(&store, &policy, true, &|| false, &|_| {
        backlogs.lock().unwrap().push(store.wal_backlog());
    })
    .unwrap();
    assert_eq!(report.counts.loop_runs, 39);
    let backlogs = backlogs.into_inner().unwrap();
    // Far under `CHECKPOINT_AT`: no batch checkpointed, so the log
    // only grew.
    assert!(
        backlogs.iter().all(|b| b.is_some_and(|b| b > 0)),
        "{backlogs:?}"
    );
    assert!(backlogs.windows(2).all(|w| w[0] <= w[1]), "{backlogs:?}");
    assert_eq!(store.wal_backlog(), Some(0), "checkpointed at the end");
}

#[test]
fn a_stopped_pass_deletes_nothing_more_and_still_reports_the_space() {
    let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = file_store_with_runs(dir.path(), t0, 10);
    let policy = GcPolicy::new(86_400_000, 1, t0.add_ms(10 * 86_400_000));
    let report = collect_garbage(&store, &policy, true, &|| true, &|_| {}).unwrap();
    assert!(!report.finished);
    assert_eq!(report.counts.total(), 0);
    assert!(report.after.page_count > 0, "{:?}", report.after);
    assert_eq!(report.after, report.before);
    assert_eq!(store.count_runs(None).unwrap(), 10);
}

#[test]
fn a_pass_deletes_old_coalesced_triggers_in_batches_and_a_dry_run_counts_them() {
    let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let store = Store::open_in_memory(Arc::new(|_| false)).unwrap();
    let lp = store.create_loop(&every_minute("downstream"), t0).unwrap();
    for i in 0..25 {
        store
            .add_trigger(&lp.id, &loops_store::NewTrigger::default(), t0.add_ms(i))
            .unwrap();
    }
    let mut policy = GcPolicy::new(86_400_000, 20, t0.add_ms(2 * 86_400_000));
    policy.batch_size = 10;
    // Pending triggers are not gc's, and a dry run of nothing counts no
    // batch.
    let none = collect_garbage(&store, &policy, false, &|| false, &|_| {}).unwrap();
    assert_eq!((none.batches, none.counts.total()), (0, 0));

    let newest = store.pending_triggers().unwrap().pop().unwrap();
    // Catch-up `latest`: claiming the newest folds the 24 older ones.
    let claim = store
        .claim_trigger(&lp, &newest.id, "me", t0.add_ms(100))
        .unwrap();
    assert!(matches!(claim, loops_store::Claim::Claimed { .. }));

    let dry = collect_garbage(&store, &policy, false, &|| false, &|_| {}).unwrap();
    assert_eq!(dry.batches, 1);
    assert_eq!(dry.counts.coalesced_triggers, 24);
    assert_eq!(dry.counts.total(), 24);
    assert_eq!(store.old_coalesced_triggers(policy.older_than).unwrap(), 24);

    let seen = std::sync::Mutex::new(Vec::new());
    let report = collect_garbage(&store, &policy, true, &|| false, &|c| {
        seen.lock().unwrap().push(c.coalesced_triggers);
    })
    .unwrap();
    assert_eq!(report.counts.coalesced_triggers, 24);
    assert!(report.finished);
    let seen = seen.into_inner().unwrap();
    assert!(seen.len() >= 3, "batches of at most 10: {seen:?}");
    assert_eq!(report.batches, seen.len() as u64);
    assert_eq!(seen.last(), Some(&24));
    assert_eq!(store.old_coalesced_triggers(policy.older_than).unwrap(), 0);
    // The claimed trigger stays with its run.
    assert_eq!(store.loop_triggers(&lp.id, 30).unwrap().len(), 1);
    assert!(describe(&report).contains(", 24 coalesced trigger(s)"));
}

#[test]
fn a_pass_is_due_shortly_after_start_then_hourly_from_its_start() {
    let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("loops.db");
    drop(Store::open(&database, Arc::new(|_| false)).unwrap());
    let settings = GcSettings {
        max_age: Duration::from_secs(86_400),
        keep_per_loop: 1,
        backup_first: false,
    };
    let logged = std::sync::Mutex::new(Vec::<String>::new());
    let log = |line: &str| logged.lock().unwrap().push(line.to_owned());
    let (wake, woken) = channel();
    std::thread::scope(|scope| {
        let data_dir = dir.path().to_path_buf();
        let mut gc = GcWorker::spawn(scope, database.into(), settings, wake, now, data_dir);
        let first = now.add_ms(millis(GC_FIRST_DELAY));
        assert_eq!(gc.next_due(), Some(first));
        gc.poll(first.add_ms(-1), &log);
        assert_eq!(gc.next_due(), Some(first), "not due yet");
        gc.poll(first, &log);
        assert_eq!(gc.next_due(), None, "a pass runs");
        assert!(matches!(
            woken.recv_timeout(Duration::from_secs(30)),
            Ok(Report::Wake)
        ));
        gc.poll(first.add_ms(10), &log);
        assert_eq!(gc.next_due(), Some(first.add_ms(millis(GC_PERIOD))));
    });
    let logged = logged.into_inner().unwrap();
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(
        logged[0].starts_with("gc: deleted 0 loop run(s)"),
        "{logged:?}"
    );
}
