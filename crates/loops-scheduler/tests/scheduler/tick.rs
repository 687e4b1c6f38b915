//! One tick at a time: runs, retries, catch-up, recovery, overlap, status
//! and expiry (SPEC §3.1–§3.4, §10 items 36–46, §9 item 10).

use std::cell::RefCell;
use std::sync::Mutex;

use loops_core::{CatchUp, LoopRun, LoopStatus, ManualClock, Overlap, RunStatus};
use loops_exec::ExecError;
use loops_scheduler::{SchedulerError, TickOptions, TickResult, tick};
use loops_store::DeleteHistory;

use crate::common::*;

#[test]
fn a_due_once_loop_runs_completes_and_stops() {
    // SPEC §10 item 36.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let lp = store
        .create_loop(&command_loop("once", once(at(10))), t0())
        .unwrap();

    let early = tick(&store, &opts(&clock, &fake)).unwrap();
    assert!(early.is_empty(), "not due yet: {early:?}");

    clock.set(at(10));
    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    assert_eq!(r.completed.len(), 1);
    let run = &r.completed[0];
    assert_eq!(run.status, RunStatus::Succeeded);
    assert_eq!(run.scheduled_for, at(10));
    assert_eq!(run.attempt, 1);
    assert_eq!(run.claimed_by.as_deref(), Some(RUNNER_A));
    assert_eq!(run.stdout.as_deref(), Some("once attempt 1"));
    assert_eq!(run.lease_expires_at, None);
    assert!(r.claimed.is_empty() && r.skipped.is_empty());
    assert!(r.recovered.is_empty() && r.expired.is_empty());

    let lp = reload(&store, &lp);
    assert_eq!(lp.status, LoopStatus::Stopped);
    assert_eq!(lp.next_run_at, None);
    assert_eq!(lp.retry_scheduled_for, None);

    clock.advance(3_600_000);
    assert!(tick(&store, &opts(&clock, &fake)).unwrap().is_empty());
    assert_eq!(fake.calls().len(), 1);
}

#[test]
fn a_failure_with_attempts_left_schedules_a_retry_of_the_same_row() {
    // SPEC §10 items 37 and 38.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let mut new = command_loop("flaky", every(60_000));
    new.max_attempts = 2;
    new.retry_delay_ms = 5_000;
    let lp = store.create_loop(&new, t0()).unwrap();
    fake.script("flaky", [Outcome::Fail(3), Outcome::Succeed]);

    clock.set(at(60));
    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    assert_eq!(r.completed.len(), 1);
    let failed = r.completed[0].clone();
    assert_eq!(failed.status, RunStatus::Failed);
    assert_eq!(failed.attempt, 1);
    assert_eq!(failed.exit_code, Some(3));
    assert_eq!(failed.error.as_deref(), Some("process exited with code 3"));
    assert_eq!(failed.finished_at, Some(at(60)));

    let after_failure = reload(&store, &lp);
    assert_eq!(after_failure.status, LoopStatus::Active);
    assert_eq!(after_failure.retry_scheduled_for, Some(at(60)));
    assert_eq!(after_failure.next_run_at, Some(at(65)));

    clock.set(at(64));
    assert!(tick(&store, &opts(&clock, &fake)).unwrap().is_empty());

    clock.set(at(65));
    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    assert_eq!(r.completed.len(), 1);
    let retried = &r.completed[0];
    assert_eq!(retried.id, failed.id, "a retry rewrites the same row");
    assert_eq!(retried.attempt, 2);
    assert_eq!(retried.scheduled_for, at(60));
    assert_eq!(retried.status, RunStatus::Succeeded);
    assert_eq!(retried.error, None);
    assert_eq!(store.count_runs(None).unwrap(), 1);

    let lp = reload(&store, &lp);
    assert_eq!(lp.retry_scheduled_for, None);
    assert_eq!(lp.next_run_at, Some(at(120)));
    let attempts: Vec<u32> = fake.calls().iter().map(|c| c.attempt).collect();
    assert_eq!(attempts, [1, 2]);
}

#[test]
fn under_catch_up_all_a_retry_drops_the_remaining_slots() {
    // SPEC §10 item 39, §3.1 step 6.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let mut new = command_loop("retrying", every(1_000));
    new.catch_up = CatchUp::All;
    new.max_attempts = 2;
    let lp = store.create_loop(&new, t0()).unwrap();
    fake.script("retrying", [Outcome::Fail(1)]);

    clock.set(at(5));
    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    assert_eq!(r.completed.len(), 1);
    assert_eq!(store.count_runs(None).unwrap(), 1, "only one row exists");
    assert_eq!(fake.calls().len(), 1);
    let lp = reload(&store, &lp);
    assert_eq!(lp.retry_scheduled_for, Some(at(1)));
    assert_eq!(lp.next_run_at, Some(at(5).add_ms(60_000)));
}

#[test]
fn under_catch_up_all_a_final_failure_keeps_running_the_remaining_slots() {
    // The control for the test above: with no attempt left, a failure
    // schedules no retry, so every due slot still runs.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let mut new = command_loop("final", every(1_000));
    new.catch_up = CatchUp::All;
    let lp = store.create_loop(&new, t0()).unwrap();
    fake.script("final", [Outcome::Fail(1)]);

    clock.set(at(5));
    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    let slots: Vec<_> = r.completed.iter().map(|run| run.scheduled_for).collect();
    assert_eq!(slots, [at(1), at(2), at(3), at(4), at(5)]);
    assert_eq!(r.completed[0].status, RunStatus::Failed);
    assert!(
        r.completed[1..]
            .iter()
            .all(|run| run.status == RunStatus::Succeeded)
    );
    let lp = reload(&store, &lp);
    assert_eq!(lp.retry_scheduled_for, None);
    assert_eq!(lp.next_run_at, Some(at(6)));
}

#[test]
fn an_abandoned_run_advances_its_loop_within_the_same_tick() {
    // SPEC §10 item 40, §3.1 step 2.
    let fx = Fixture::new();
    let store = fx.store();
    let other = fx.store();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let mut new = command_loop("crashy", every(60_000));
    new.max_attempts = 2;
    new.retry_delay_ms = 5_000;
    new.lease_ms = 1_000;
    let lp = store.create_loop(&new, t0()).unwrap();
    // Runner B claims the slot and dies without finalizing.
    let claimed = other.claim_run(&lp, at(60), RUNNER_B, at(60)).unwrap();
    let stale = claimed.run().unwrap().clone();

    clock.set(at(62));
    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    assert_eq!(r.recovered.len(), 1);
    let abandoned = &r.recovered[0];
    assert_eq!(abandoned.id, stale.id);
    assert_eq!(abandoned.status, RunStatus::Abandoned);
    assert_eq!(
        abandoned.error.as_deref(),
        Some("run lease expired before completion")
    );
    assert!(r.completed.is_empty() && r.claimed.is_empty());
    let after = reload(&store, &lp);
    assert_eq!(after.status, LoopStatus::Active);
    assert_eq!(after.retry_scheduled_for, Some(at(60)));
    assert_eq!(after.next_run_at, Some(at(67)));
    assert!(fake.calls().is_empty());

    clock.set(at(67));
    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    assert_eq!(r.completed.len(), 1);
    assert_eq!(r.completed[0].id, stale.id);
    assert_eq!(r.completed[0].attempt, 2);
    assert_eq!(r.completed[0].status, RunStatus::Succeeded);
}

/// A loop every minute whose 00:01 slot runner B has claimed and holds.
fn loop_with_a_held_run(
    fx: &Fixture,
    overlap: Overlap,
) -> (loops_store::Store, loops_core::Loop, LoopRun) {
    let store = fx.store();
    let mut new = command_loop("busy", every(60_000));
    new.overlap = overlap;
    let lp = store.create_loop(&new, t0()).unwrap();
    let held = fx
        .store()
        .claim_run(&lp, at(60), RUNNER_B, at(60))
        .unwrap()
        .run()
        .unwrap()
        .clone();
    (store, lp, held)
}

#[test]
fn overlap_skip_records_a_skipped_row_and_advances() {
    // SPEC §10 item 41.
    let fx = Fixture::new();
    let clock = ManualClock::new(at(120));
    let fake = FakeExecutor::new(&clock);
    let (store, lp, held) = loop_with_a_held_run(&fx, Overlap::Skip);

    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    assert_eq!(r.skipped.len(), 1);
    let skipped = &r.skipped[0];
    assert_eq!(skipped.status, RunStatus::Skipped);
    assert_eq!(skipped.scheduled_for, at(120));
    assert_eq!(skipped.attempt, 1);
    assert_eq!(skipped.error.as_deref(), Some("previous run still active"));
    assert_eq!(skipped.finished_at, Some(at(120)));
    assert!(r.completed.is_empty() && r.claimed.is_empty());
    assert!(fake.calls().is_empty());

    let after = reload(&store, &lp);
    assert_eq!(after.next_run_at, Some(at(180)));
    assert_eq!(after.status, LoopStatus::Active);
    let still = store.get_run(&held.id).unwrap().unwrap();
    assert_eq!(still.status, RunStatus::Running);
    assert_eq!(still.claimed_by.as_deref(), Some(RUNNER_B));
}

#[test]
fn overlap_allow_claims_the_slot_instead() {
    // SPEC §10 item 42.
    let fx = Fixture::new();
    let clock = ManualClock::new(at(120));
    let fake = FakeExecutor::new(&clock);
    let (store, lp, held) = loop_with_a_held_run(&fx, Overlap::Allow);

    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    assert!(r.skipped.is_empty());
    assert_eq!(r.completed.len(), 1);
    assert_eq!(r.completed[0].scheduled_for, at(120));
    assert_eq!(r.completed[0].status, RunStatus::Succeeded);
    assert_eq!(fake.calls().len(), 1);
    assert_eq!(reload(&store, &lp).next_run_at, Some(at(180)));
    let still = store.get_run(&held.id).unwrap().unwrap();
    assert_eq!(still.status, RunStatus::Running);
}

#[test]
fn an_overlap_skip_on_a_failed_slot_keeps_its_pending_retry() {
    // SPEC §9 item 10: the original treats the occupied slot as a success
    // and drops the retry; here the retry survives.
    let fx = Fixture::new();
    let store = fx.store();
    let other = fx.store();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let mut new = command_loop("retry-kept", every(60_000));
    new.max_attempts = 3;
    new.retry_delay_ms = 5_000;
    let lp = store.create_loop(&new, t0()).unwrap();
    fake.script("retry-kept", [Outcome::Fail(2)]);

    clock.set(at(60));
    let failed = tick(&store, &opts(&clock, &fake)).unwrap().completed[0].clone();
    assert_eq!(failed.status, RunStatus::Failed);
    // Another runner holds an ad-hoc slot of the same loop.
    let held = other
        .claim_run(&lp, at(62), RUNNER_B, at(62))
        .unwrap()
        .run()
        .unwrap()
        .clone();

    clock.set(at(65));
    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    assert!(r.skipped.is_empty(), "no new skipped row: {r:?}");
    assert_eq!(store.count_runs(None).unwrap(), 2);
    assert_eq!(store.get_run(&failed.id).unwrap().unwrap(), failed);
    let after = reload(&store, &lp);
    assert_eq!(after.retry_scheduled_for, Some(at(60)));
    assert_eq!(after.next_run_at, Some(at(65)));
    assert_eq!(fake.calls().len(), 1);

    // Once the other run is done, the retry runs as attempt 2.
    let result = loops_core::ExecutorResult {
        status: loops_core::ExecutorStatus::Succeeded,
        exit_code: Some(0),
        stdout: String::new(),
        stderr: String::new(),
        error: None,
        pid: None,
        started_at: at(62),
        finished_at: at(63),
        duration_ms: 1000,
        facts: Default::default(),
    };
    other.finalize_run(&held.id, &result, None, at(63)).unwrap();
    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    assert_eq!(r.completed.len(), 1);
    assert_eq!(r.completed[0].id, failed.id);
    assert_eq!(r.completed[0].attempt, 2);
    assert_eq!(r.completed[0].status, RunStatus::Succeeded);
}

#[test]
fn paused_stopped_and_deleted_loops_never_advance() {
    // SPEC §10 item 43: loops that are not active when the tick starts.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    let paused = store
        .create_loop(&command_loop("paused", every(60_000)), t0())
        .unwrap();
    let stopped = store
        .create_loop(&command_loop("stopped", every(60_000)), t0())
        .unwrap();
    let deleted = store
        .create_loop(&command_loop("deleted", every(60_000)), t0())
        .unwrap();
    store.pause_loop(&paused.id, t0()).unwrap();
    store.stop_loop(&stopped.id, t0()).unwrap();
    store.delete_loop(&deleted.id, DeleteHistory::Keep).unwrap();

    clock.set(at(600));
    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    assert!(r.is_empty(), "{r:?}");
    assert!(fake.calls().is_empty());
    assert_eq!(store.count_runs(None).unwrap(), 0);
    let p = reload(&store, &paused);
    assert_eq!(
        (p.status, p.next_run_at),
        (LoopStatus::Paused, Some(at(60)))
    );
    let s = reload(&store, &stopped);
    assert_eq!((s.status, s.next_run_at), (LoopStatus::Stopped, None));
    assert!(store.get_loop(&deleted.id).unwrap().is_none());
}

#[test]
fn loops_paused_stopped_or_deleted_mid_run_are_not_advanced_by_the_finish() {
    // SPEC §10 item 43, §3.4 step 2, §9 item 8: the finish of a run never
    // overwrites a status change made while it ran.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    let names = ["paused", "stopped", "deleted"];
    let loops: Vec<_> = names
        .iter()
        .map(|n| {
            fake.gate(n);
            store
                .create_loop(&command_loop(n, every(60_000)), t0())
                .unwrap()
        })
        .collect();

    let r = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let ticking = s.spawn(|| tick(&fx.store(), &opts(&clock, &fake)));
        wait_until("three runs in flight", || fake.current() == 3);
        store.pause_loop(&loops[0].id, at(60)).unwrap();
        store.stop_loop(&loops[1].id, at(60)).unwrap();
        store
            .delete_loop(&loops[2].id, DeleteHistory::Keep)
            .unwrap();
        for n in names {
            fake.release(n);
        }
        ticking.join().unwrap()
    })
    .unwrap();

    assert_eq!(r.completed.len(), 3);
    assert!(
        r.completed
            .iter()
            .all(|run| run.status == RunStatus::Succeeded)
    );
    let p = reload(&store, &loops[0]);
    assert_eq!(
        (p.status, p.next_run_at),
        (LoopStatus::Paused, Some(at(60)))
    );
    let s = reload(&store, &loops[1]);
    assert_eq!((s.status, s.next_run_at), (LoopStatus::Stopped, None));
    assert!(store.get_loop(&loops[2].id).unwrap().is_none());
    assert_eq!(runs_of(&store, &loops[2].id).len(), 1, "history is kept");
}

/// Ticks `fx`'s store, each reported error pushed into `errors` as
/// `(loop name, message)`.
fn tick_reporting_into(
    fx: &Fixture,
    clock: &ManualClock,
    fake: &FakeExecutor<'_>,
    errors: &Mutex<Vec<(String, String)>>,
) -> Result<TickResult, SchedulerError> {
    let on_error = |lp: &loops_core::Loop, msg: &str| {
        errors
            .lock()
            .unwrap()
            .push((lp.name.clone(), msg.to_owned()));
    };
    let o = TickOptions {
        hooks: loops_scheduler::HookSettings::none(),
        on_hook_error: None,
        on_error: Some(&on_error),
        ..opts(clock, fake)
    };
    tick(&fx.store(), &o)
}

#[test]
fn a_purged_loop_does_not_abort_the_tick_for_other_loops() {
    // A loop deleted with its history while its run executes: the run's
    // finalize finds no row. That is reported through `on_error`, and the
    // tick still finalizes the other loops' runs.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    let purged = store
        .create_loop(&command_loop("purged", every(60_000)), t0())
        .unwrap();
    let kept = store
        .create_loop(&command_loop("kept", every(60_000)), t0())
        .unwrap();
    fake.gate("purged");
    fake.gate("kept");
    let errors = Mutex::new(Vec::new());

    let r = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let ticking = s.spawn(|| tick_reporting_into(&fx, &clock, &fake, &errors));
        wait_until("both runs in flight", || fake.current() == 2);
        let run = runs_of(&store, &purged.id).remove(0);
        store.delete_loop(&purged.id, DeleteHistory::Purge).unwrap();
        fake.release("purged");
        wait_until("the purge to be reported", || {
            !errors.lock().unwrap().is_empty()
        });
        fake.release("kept");
        (ticking.join().unwrap(), run)
    });
    let (r, purged_run) = (r.0.unwrap(), r.1);

    assert_eq!(r.completed.len(), 1);
    assert_eq!(r.completed[0].loop_id, kept.id);
    assert_eq!(r.completed[0].status, RunStatus::Succeeded);
    assert_eq!(
        errors.into_inner().unwrap(),
        [(
            "purged".to_owned(),
            format!("run not found after finalize: {}", purged_run.id)
        )]
    );
    assert_eq!(reload(&store, &kept).next_run_at, Some(at(120)));
}

#[test]
fn a_store_error_mid_tick_cancels_the_runs_in_flight_and_is_returned() {
    // Once the tick gives up, nobody heartbeats or finalizes the other runs
    // in flight, so they are cancelled rather than left running unobserved.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    for n in ["breaks", "bystander"] {
        fake.gate(n);
        store
            .create_loop(&command_loop(n, every(60_000)), t0())
            .unwrap();
    }

    let err = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let ticking = s.spawn(|| tick(&fx.store(), &opts(&clock, &fake)));
        wait_until("both runs in flight", || fake.current() == 2);
        let raw = rusqlite::Connection::open(fx.path()).unwrap();
        raw.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
        raw.execute_batch("ALTER TABLE loop_runs RENAME TO loop_runs_gone")
            .unwrap();
        fake.release("breaks");
        ticking.join().unwrap().unwrap_err()
    });

    assert!(err.to_string().contains("loop_runs"), "{err}");
    let cancelled = fake.cancellations();
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert_eq!(cancelled[0].0, "bystander");
    assert!(
        cancelled[0].1.starts_with("runner failed: "),
        "{cancelled:?}"
    );
}

#[test]
fn expiry_sets_expired_clears_next_run_and_reports_the_loop() {
    // SPEC §10 item 44, §2.6.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let mut new = command_loop("ending", every(60_000));
    new.expires_at = Some(at(90));
    let lp = store.create_loop(&new, t0()).unwrap();

    clock.set(at(60));
    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    assert_eq!(r.completed.len(), 1, "runs until it expires");
    assert!(r.expired.is_empty());

    clock.set(at(90));
    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    assert_eq!(r.expired.len(), 1);
    assert_eq!(r.expired[0].id, lp.id);
    assert_eq!(r.expired[0].status, LoopStatus::Expired);
    assert_eq!(r.expired[0].next_run_at, None);
    let after = reload(&store, &lp);
    assert_eq!(
        (after.status, after.next_run_at),
        (LoopStatus::Expired, None)
    );

    clock.set(at(600));
    assert!(tick(&store, &opts(&clock, &fake)).unwrap().is_empty());
    assert_eq!(fake.calls().len(), 1);
}

#[test]
fn the_tick_result_json_has_exactly_the_five_keys() {
    // SPEC §10 item 45.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    store
        .create_loop(&command_loop("json", every(60_000)), t0())
        .unwrap();
    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    let value = serde_json::to_value(&r).unwrap();
    let object = value.as_object().unwrap();
    let keys: Vec<&str> = object.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["claimed", "completed", "skipped", "recovered", "expired"]
    );
    assert!(object.values().all(serde_json::Value::is_array));
    let run = &object["completed"][0];
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["scheduledFor"], "2026-01-01T00:01:00.000Z");
}

#[test]
fn a_tick_recovers_first_then_expires_then_runs_slots() {
    // SPEC §10 item 46.
    let fx = Fixture::new();
    let store = fx.store();
    let other = fx.store();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);

    // X: its run was abandoned and it is past its expiry. Recovery runs
    // while it is still active, so it gets a retry; expiry then keeps the
    // retry (SPEC §2.6). In the other order the advance would see an
    // expired loop and do nothing.
    let mut x = command_loop("x", every(60_000));
    x.max_attempts = 2;
    x.lease_ms = 1_000;
    x.expires_at = Some(at(100));
    let x = store.create_loop(&x, t0()).unwrap();
    other.claim_run(&x, at(60), RUNNER_B, at(60)).unwrap();

    // Y: its run was abandoned; recovery moves it past `now`, so no slot of
    // it is due. Were slots planned first, the held run would make the
    // 00:02 slot an overlap skip.
    let mut y = command_loop("y", every(60_000));
    y.lease_ms = 1_000;
    let y = store.create_loop(&y, t0()).unwrap();
    other.claim_run(&y, at(60), RUNNER_B, at(60)).unwrap();

    // Z: expired and due; it never runs.
    let mut z = command_loop("z", every(60_000));
    z.expires_at = Some(at(100));
    let z = store.create_loop(&z, t0()).unwrap();

    clock.set(at(125));
    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    assert_eq!(r.recovered.len(), 2);
    let mut expired: Vec<_> = r.expired.iter().map(|l| l.name.clone()).collect();
    expired.sort();
    assert_eq!(expired, ["x", "z"]);
    assert!(r.skipped.is_empty() && r.completed.is_empty() && r.claimed.is_empty());
    assert!(fake.calls().is_empty());

    let x = reload(&store, &x);
    assert_eq!(x.status, LoopStatus::Expired);
    assert_eq!(x.next_run_at, None);
    assert_eq!(x.retry_scheduled_for, Some(at(60)));
    let y_after = reload(&store, &y);
    assert_eq!(y_after.next_run_at, Some(at(180)));
    assert_eq!(runs_of(&store, &y.id).len(), 1);
    assert_eq!(reload(&store, &z).status, LoopStatus::Expired);
    assert!(runs_of(&store, &z.id).is_empty());
}

#[test]
fn on_run_and_on_error_callbacks_fire() {
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    store
        .create_loop(&command_loop("fine", every(60_000)), t0())
        .unwrap();
    store
        .create_loop(&command_loop("broken", every(60_000)), t0())
        .unwrap();
    fake.script(
        "broken",
        [Outcome::Error(ExecError::AccountsFailed {
            profile: "p".into(),
            tool: "claude".into(),
            stderr: "nope".into(),
        })],
    );
    let runs = RefCell::new(Vec::new());
    let errors = RefCell::new(Vec::new());
    let on_run = |run: &LoopRun| runs.borrow_mut().push((run.loop_name.clone(), run.status));
    let on_error = |lp: &loops_core::Loop, msg: &str| {
        errors.borrow_mut().push((lp.name.clone(), msg.to_owned()));
    };
    let o = TickOptions {
        hooks: loops_scheduler::HookSettings::none(),
        on_hook_error: None,
        on_run: Some(&on_run),
        on_error: Some(&on_error),
        ..opts(&clock, &fake)
    };
    tick(&store, &o).unwrap();

    let runs = runs.into_inner();
    let of = |name: &str| -> Vec<RunStatus> {
        runs.iter()
            .filter(|(n, _)| n == name)
            .map(|(_, s)| *s)
            .collect()
    };
    assert_eq!(of("fine"), [RunStatus::Running, RunStatus::Succeeded]);
    assert_eq!(of("broken"), [RunStatus::Running, RunStatus::Failed]);
    assert_eq!(
        errors.into_inner(),
        [(
            "broken".to_owned(),
            "accounts env failed for p/claude: nope".to_owned()
        )]
    );
}

#[test]
fn an_executor_error_is_finalized_as_failed_with_its_message() {
    // SPEC §10 item 53, §3.3 "thrown error".
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    let lp = store
        .create_loop(&command_loop("no-account", every(60_000)), t0())
        .unwrap();
    fake.script(
        "no-account",
        [Outcome::Error(ExecError::ProfileDirectoryMissing {
            profile: "p".into(),
            tool: "claude".into(),
            dir: "/x".into(),
        })],
    );
    let r = tick(&store, &opts(&clock, &fake)).unwrap();
    let run = &r.completed[0];
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(
        run.error.as_deref(),
        Some("account profile directory does not exist for p/claude: /x")
    );
    assert_eq!(run.stdout.as_deref(), Some(""));
    assert_eq!(run.stderr.as_deref(), Some(""));
    assert_eq!(run.exit_code, None);
    assert_eq!(run.finished_at, Some(at(60)));
    assert_eq!(run.duration_ms, Some(0));
    assert_eq!(reload(&store, &lp).next_run_at, Some(at(120)));
}

#[test]
fn a_panicking_executor_fails_its_run_instead_of_hanging_the_tick() {
    // Without a report from the panicked worker the dispatcher would wait,
    // heartbeating the lease, forever. The tick runs on a detached thread
    // so that such a hang fails the test instead of stalling the suite.
    let fx: &'static Fixture = Box::leak(Box::new(Fixture::new()));
    let clock: &'static ManualClock = Box::leak(Box::new(ManualClock::new(at(60))));
    let store = fx.store();
    let lp = store
        .create_loop(&command_loop("panicky", every(60_000)), t0())
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let fake = FakeExecutor::new(clock);
        fake.script("panicky", [Outcome::Panic]);
        let _ = tx.send(tick(&fx.store(), &opts(clock, &fake)).unwrap());
    });
    let r = rx.recv_timeout(DEADLINE).expect("the tick hung");
    let run = &r.completed[0];
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(
        run.error.as_deref(),
        Some("executor panicked: fake executor told to panic")
    );
    assert_eq!(run.lease_expires_at, None);
    assert_eq!(reload(&store, &lp).next_run_at, Some(at(120)));
}

#[test]
fn a_loop_whose_stored_schedule_cannot_be_planned_is_paused_with_its_reason() {
    // A schedule another implementation stored (here a time zone chrono-tz
    // does not know, and a cron field croner rejects) fails every plan: the
    // loop is paused once, with the reason on its record, instead of an
    // error on every tick.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    let fine = store
        .create_loop(&command_loop("fine", every(60_000)), t0())
        .unwrap();
    let zone = store
        .create_loop(&command_loop("zone", every(60_000)), t0())
        .unwrap();
    let field = store
        .create_loop(&command_loop("field", every(60_000)), t0())
        .unwrap();
    let conn = rusqlite::Connection::open(fx.path()).unwrap();
    for (lp, schedule) in [
        (
            &zone,
            r#"{"type":"cron","expression":"* * * * *","timezone":"Mars/Olympus_Mons"}"#,
        ),
        (&field, r#"{"type":"cron","expression":"* * * * * * * *"}"#),
    ] {
        conn.execute(
            "UPDATE loops SET schedule_json = ?2 WHERE id = ?1",
            [lp.id.as_str(), schedule],
        )
        .unwrap();
    }
    drop(conn);
    let errors = RefCell::new(Vec::new());
    let on_error = |lp: &loops_core::Loop, msg: &str| {
        errors.borrow_mut().push((lp.name.clone(), msg.to_owned()));
    };
    let o = TickOptions {
        hooks: loops_scheduler::HookSettings::none(),
        on_hook_error: None,
        on_error: Some(&on_error),
        ..opts(&clock, &fake)
    };
    let r = tick(&store, &o).unwrap();
    assert_eq!(r.completed.len(), 1, "{r:?}");
    assert_eq!(r.completed[0].loop_id, fine.id);

    for lp in [&zone, &field] {
        let paused = reload(&store, lp);
        assert_eq!(paused.status, LoopStatus::Paused, "{}", lp.name);
        let reason = paused.paused_reason.clone().unwrap_or_default();
        assert!(
            reason.starts_with("schedule cannot be planned: ") && reason.contains("loop paused"),
            "{reason}"
        );
        assert_eq!(paused.next_run_at, lp.next_run_at, "the slot is kept");
        let shown = serde_json::to_value(&paused).unwrap();
        assert_eq!(shown["pausedReason"], reason.as_str());
    }
    assert_eq!(errors.borrow().len(), 2, "{:?}", errors.borrow());

    // Later ticks leave it alone: no second error.
    clock.advance(60_000);
    tick(&store, &o).unwrap();
    assert_eq!(errors.borrow().len(), 2, "{:?}", errors.borrow());
    assert_eq!(runs_of(&store, &zone.id), []);

    // Resumed (say, after another implementation fixed the row), the reason
    // is gone; a loop paused by a user never had one.
    let conn = rusqlite::Connection::open(fx.path()).unwrap();
    conn.execute(
        "UPDATE loops SET schedule_json = ?2 WHERE id = ?1",
        [zone.id.as_str(), r#"{"type":"interval","everyMs":60000}"#],
    )
    .unwrap();
    drop(conn);
    let resumed = store.resume_loop(&zone.id, at(120)).unwrap();
    assert_eq!(resumed.loop_().paused_reason, None);
    store.pause_loop(&fine.id, at(120)).unwrap();
    let shown = serde_json::to_value(reload(&store, &fine)).unwrap();
    assert!(shown.get("pausedReason").is_none(), "{shown}");
}

#[test]
fn a_finalize_that_fails_is_retried_until_it_lands() {
    // Issue 12 §5: a finalize that fails on a transient store error (here a
    // write lock held elsewhere past the busy timeout; a full disk or an
    // I/O error is the same to the runner) keeps its result and is tried
    // again, so the run ends soon after the store accepts writes again
    // instead of at lease expiry. The failure is reported once.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    let lp = store
        .create_loop(&command_loop("stuck", every(60_000)), t0())
        .unwrap();
    fake.gate("stuck");
    let errors = Mutex::new(Vec::new());

    let r = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let ticking = s.spawn(|| tick_reporting_into(&fx, &clock, &fake, &errors));
        wait_until("the run in flight", || fake.current() == 1);
        let raw = rusqlite::Connection::open(fx.path()).unwrap();
        raw.execute_batch("BEGIN IMMEDIATE").unwrap();
        fake.release("stuck");
        wait_until("the failed finalize to be reported", || {
            !errors.lock().unwrap().is_empty()
        });
        raw.execute_batch("ROLLBACK").unwrap();
        ticking.join().unwrap()
    });
    let r = r.unwrap();

    assert_eq!(r.completed.len(), 1, "{r:?}");
    assert_eq!(r.completed[0].status, RunStatus::Succeeded);
    assert_eq!(r.completed[0].stdout.as_deref(), Some("stuck attempt 1"));
    let errors = errors.into_inner().unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].1.starts_with(&format!(
            "recording run {} failed, retrying until it succeeds: ",
            r.completed[0].id
        )),
        "{errors:?}"
    );
    let stored = runs_of(&store, &lp.id).remove(0);
    assert_eq!(stored.status, RunStatus::Succeeded);
    assert_eq!(reload(&store, &lp).next_run_at, Some(at(120)));
}

#[test]
fn a_loop_whose_runs_cost_its_daily_cap_is_paused_before_the_next() {
    // Issue 27: `--max-cost-per-day` is checked before each run.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    let mut new = command_loop("spender", every(60_000));
    new.policy.max_cost_per_day = loops_core::Usd::from_dollars(1.0);
    let lp = store.create_loop(&new, t0()).unwrap();
    fake.script("spender", [Outcome::Costs(0.6), Outcome::Costs(0.6)]);
    let errors = RefCell::new(Vec::new());
    let on_error = |lp: &loops_core::Loop, msg: &str| {
        errors.borrow_mut().push((lp.name.clone(), msg.to_owned()));
    };
    let o = TickOptions {
        on_error: Some(&on_error),
        ..opts(&clock, &fake)
    };
    tick(&store, &o).unwrap();
    clock.advance(60_000);
    // $0.60 of $1 spent: it runs again.
    tick(&store, &o).unwrap();
    assert_eq!(fake.calls_for("spender").len(), 2);
    assert!(errors.borrow().is_empty(), "{:?}", errors.borrow());
    clock.advance(60_000);
    let r = tick(&store, &o).unwrap();
    assert!(r.completed.is_empty(), "{r:?}");
    assert_eq!(fake.calls_for("spender").len(), 2, "no third run");
    let paused = reload(&store, &lp);
    assert_eq!(paused.status, LoopStatus::Paused);
    let reason = paused.paused_reason.unwrap();
    assert!(
        reason.starts_with("daily cost cap reached: $1.20 spent today of maxCostPerDayUsd $1.00"),
        "{reason}"
    );
    assert_eq!(errors.borrow().as_slice(), [("spender".to_owned(), reason)]);
}
