//! Manual runs (`run-now`, SPEC §3.5, §10 items 48–53).

use loops_core::{ExecutorResult, ExecutorStatus, LoopStatus, ManualClock, ProcessRef, RunStatus};
use loops_exec::ExecError;
use loops_scheduler::{
    SchedulerError, TickOptions, manual_run_scheduled_for, run_now, should_advance_manual_run, tick,
};

use crate::common::*;

#[test]
fn run_now_on_a_due_loop_runs_its_due_slot_and_advances() {
    // SPEC §10 item 48, the `nextRunAt` half.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(90));
    let fake = FakeExecutor::new(&clock);
    let lp = store
        .create_loop(&command_loop("due", every(60_000)), t0())
        .unwrap();
    assert_eq!(manual_run_scheduled_for(&lp, at(90)), at(60));
    assert!(should_advance_manual_run(&lp, at(60), at(90)));

    let run = run_now(&store, &lp, &opts(&clock, &fake)).unwrap();
    assert_eq!(run.scheduled_for, at(60));
    assert_eq!(run.status, RunStatus::Succeeded);
    assert_eq!(reload(&store, &lp).next_run_at, Some(at(120)));
}

#[test]
fn run_now_on_a_due_loop_prefers_its_pending_retry() {
    // SPEC §10 item 48: `retryScheduledFor ?? nextRunAt`.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    let mut new = command_loop("retry", every(60_000));
    new.max_attempts = 2;
    new.retry_delay_ms = 5_000;
    let lp = store.create_loop(&new, t0()).unwrap();
    fake.script("retry", [Outcome::Fail(1)]);
    let failed = tick(&store, &opts(&clock, &fake)).unwrap().completed[0].clone();

    clock.set(at(70));
    let lp = reload(&store, &lp);
    assert_eq!(lp.retry_scheduled_for, Some(at(60)));
    assert_eq!(manual_run_scheduled_for(&lp, at(70)), at(60));
    let run = run_now(&store, &lp, &opts(&clock, &fake)).unwrap();
    assert_eq!(run.id, failed.id);
    assert_eq!(run.attempt, 2);
    assert_eq!(run.status, RunStatus::Succeeded);
    let after = reload(&store, &lp);
    assert_eq!(after.retry_scheduled_for, None);
    assert_eq!(after.next_run_at, Some(at(120)));
}

#[test]
fn run_now_on_a_loop_that_is_not_due_runs_now_and_keeps_next_run() {
    // SPEC §10 item 49.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(30));
    let fake = FakeExecutor::new(&clock);
    let mut new = command_loop("early", every(60_000));
    new.max_attempts = 3;
    let lp = store.create_loop(&new, t0()).unwrap();
    assert!(!should_advance_manual_run(&lp, at(30), at(30)));

    let run = run_now(&store, &lp, &opts(&clock, &fake)).unwrap();
    assert_eq!(run.scheduled_for, at(30));
    assert_eq!(run.status, RunStatus::Succeeded);
    let after = reload(&store, &lp);
    assert_eq!(after.next_run_at, Some(at(60)));
    assert_eq!(after.updated_at, lp.updated_at, "the loop row is untouched");

    // A failed ad-hoc run schedules no retry either.
    clock.set(at(40));
    fake.script("early", [Outcome::Fail(1)]);
    let run = run_now(&store, &reload(&store, &lp), &opts(&clock, &fake)).unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    let after = reload(&store, &lp);
    assert_eq!(after.next_run_at, Some(at(60)));
    assert_eq!(after.retry_scheduled_for, None);
}

#[test]
fn a_tick_during_run_now_neither_duplicates_nor_recovers_it() {
    // SPEC §10 item 50. The manual run reports pid 4242, which the probe
    // says is alive. The concurrent tick reads a clock past the run's
    // lease, so only the recorded pid protects the run from recovery.
    let fx = Fixture::new();
    fx.set_alive(4242);
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let later = ManualClock::new(at(62));
    let fake = FakeExecutor::new(&clock);
    let mut new = command_loop("manual", every(60_000));
    new.lease_ms = 1_000;
    let lp = store.create_loop(&new, t0()).unwrap();
    fake.gate("manual");
    fake.spawns("manual", ProcessRef::pid(4242));

    let (manual, concurrent) = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let manual = s.spawn(|| run_now(&fx.store(), &lp, &opts(&clock, &fake)));
        wait_until("the pid to be recorded", || {
            runs_of(&store, &lp.id)
                .first()
                .is_some_and(|r| r.pid == Some(4242))
        });
        let concurrent = s
            .spawn(|| tick(&fx.store(), &opts(&later, &fake)))
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(fake.calls().len(), 1, "the tick started nothing");
        fake.release("manual");
        (manual.join().unwrap().unwrap(), concurrent)
    });

    assert!(concurrent.recovered.is_empty(), "{concurrent:?}");
    assert!(concurrent.completed.is_empty() && concurrent.skipped.is_empty());
    assert_eq!(store.count_runs(None).unwrap(), 1);
    assert_eq!(manual.status, RunStatus::Succeeded);
    assert_eq!(manual.pid, Some(4242));
    assert_eq!(manual.scheduled_for, at(60));
    assert_eq!(reload(&store, &lp).next_run_at, Some(at(120)));
}

#[test]
fn run_now_cannot_claim_a_running_or_succeeded_slot() {
    // SPEC §10 item 51.
    let fx = Fixture::new();
    let store = fx.store();
    let other = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    let lp = store
        .create_loop(&command_loop("taken", every(60_000)), t0())
        .unwrap();

    let held = other
        .claim_run(&lp, at(60), RUNNER_B, at(60))
        .unwrap()
        .run()
        .unwrap()
        .clone();
    let err = run_now(&store, &lp, &opts(&clock, &fake)).unwrap_err();
    assert!(matches!(err, SchedulerError::CouldNotClaim), "{err:?}");
    assert_eq!(err.to_string(), "could not claim manual run");

    // B finishes without advancing the loop, so the slot is still due and
    // already succeeded.
    let done = ExecutorResult {
        status: ExecutorStatus::Succeeded,
        exit_code: Some(0),
        stdout: "b".into(),
        stderr: String::new(),
        error: None,
        pid: None,
        started_at: at(60),
        finished_at: at(61),
        duration_ms: 1000,
        facts: Default::default(),
    };
    other.finalize_run(&held.id, &done, None, at(61)).unwrap();
    let err = run_now(&store, &lp, &opts(&clock, &fake)).unwrap_err();
    assert_eq!(err.to_string(), "could not claim manual run");

    assert!(fake.calls().is_empty());
    assert_eq!(store.count_runs(None).unwrap(), 1);
    assert_eq!(reload(&store, &lp).next_run_at, Some(at(60)));
}

#[test]
fn run_now_works_on_paused_stopped_and_expired_loops() {
    // SPEC §10 item 52, §3.5: manual runs ignore the loop status, and a
    // loop that is not active is never advanced.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(30));
    let fake = FakeExecutor::new(&clock);
    let paused = store
        .create_loop(&command_loop("paused", every(60_000)), t0())
        .unwrap();
    let stopped = store
        .create_loop(&command_loop("stopped", every(60_000)), t0())
        .unwrap();
    let mut expiring = command_loop("expired", every(60_000));
    expiring.expires_at = Some(at(10));
    let expired = store.create_loop(&expiring, t0()).unwrap();
    store.pause_loop(&paused.id, t0()).unwrap();
    store.stop_loop(&stopped.id, t0()).unwrap();
    store.expire_loops(at(10)).unwrap();

    for (lp, status, next) in [
        (&paused, LoopStatus::Paused, Some(at(60))),
        (&stopped, LoopStatus::Stopped, None),
        (&expired, LoopStatus::Expired, None),
    ] {
        let lp = reload(&store, lp);
        let run = run_now(&store, &lp, &opts(&clock, &fake)).unwrap();
        assert_eq!(run.status, RunStatus::Succeeded, "{}", lp.name);
        assert_eq!(run.scheduled_for, at(30));
        let after = reload(&store, &lp);
        assert_eq!((after.status, after.next_run_at), (status, next));
    }

    // A paused loop whose slot is due runs that slot and stays paused.
    clock.set(at(90));
    let lp = reload(&store, &paused);
    let run = run_now(&store, &lp, &opts(&clock, &fake)).unwrap();
    assert_eq!(run.scheduled_for, at(60));
    let after = reload(&store, &paused);
    assert_eq!(
        (after.status, after.next_run_at),
        (LoopStatus::Paused, Some(at(60)))
    );
    assert_eq!(fake.calls().len(), 4);
}

#[test]
fn run_now_finalizes_an_executor_error_as_failed() {
    // SPEC §10 item 53.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(30));
    let fake = FakeExecutor::new(&clock);
    let lp = store
        .create_loop(&command_loop("acct", every(60_000)), t0())
        .unwrap();
    let message = "accounts env failed for work/claude: no such profile";
    fake.script(
        "acct",
        [Outcome::Error(ExecError::AccountsFailed {
            profile: "work".into(),
            tool: "claude".into(),
            stderr: "no such profile".into(),
        })],
    );
    let errors = std::cell::RefCell::new(Vec::new());
    let on_error = |_: &loops_core::Loop, m: &str| errors.borrow_mut().push(m.to_owned());
    let o = TickOptions {
        hooks: loops_scheduler::HookSettings::none(),
        on_hook_error: None,
        on_error: Some(&on_error),
        ..opts(&clock, &fake)
    };

    let run = run_now(&store, &lp, &o).unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error.as_deref(), Some(message));
    assert_eq!(run.stdout.as_deref(), Some(""));
    assert_eq!(run.stderr.as_deref(), Some(""));
    assert_eq!(run.exit_code, None);
    assert_eq!(errors.into_inner(), [message]);
}
