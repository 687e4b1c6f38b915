//! Run leases while a run executes: heartbeats keep them alive, and a
//! runner that lost its lease is fenced out and cancelled (SPEC §3.3,
//! §10 item 47, §9 items 11–13).

use std::time::Duration;

use loops_core::{Clock, LoopStatus, ManualClock, RunStatus};
use loops_scheduler::{heartbeat_period, tick};

use crate::common::*;

#[test]
fn the_heartbeat_period_is_a_third_of_the_lease_within_bounds() {
    // SPEC §10 item 47: max(10, min(60000, ⌊leaseMs/3⌋)).
    let cases = [
        (1, 10),
        (29, 10),
        (30, 10),
        (33, 11),
        (60, 20),
        (100, 33),
        (180_000, 60_000),
        (180_002, 60_000),
        (1_800_000, 60_000),
        (u64::MAX, 60_000),
    ];
    for (lease_ms, period_ms) in cases {
        assert_eq!(
            heartbeat_period(lease_ms),
            Duration::from_millis(period_ms),
            "lease {lease_ms}"
        );
    }
}

#[test]
fn a_run_that_keeps_heartbeating_stays_running_past_its_lease() {
    // SPEC §10 item 47. The lease is 60 ms, so the runner renews it every
    // 20 ms of real time, against the injected clock. The test moves that
    // clock 30 ms at a time and waits for each renewal, so the lease is
    // never expired at the clock's reading, however slow the machine.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let mut new = command_loop("long", every(60_000));
    new.lease_ms = 60;
    let lp = store.create_loop(&new, t0()).unwrap();
    fake.gate("long");
    clock.set(at(60));

    let r = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let ticking = s.spawn(|| tick(&fx.store(), &opts(&clock, &fake)));
        wait_until("the run to start", || fake.waiting("long") == 1);
        let run = runs_of(&store, &lp.id).remove(0);
        assert_eq!(run.lease_expires_at, Some(at(60).add_ms(60)));
        for _ in 0..10 {
            clock.advance(30);
            let want = clock.now().add_ms(60);
            wait_until("the lease to be renewed", || {
                store.get_run(&run.id).unwrap().unwrap().lease_expires_at == Some(want)
            });
        }
        // 300 ms of clock time later, well past the 60 ms lease, the run
        // is still running and no other runner may recover it.
        assert!(clock.now() >= at(60).add_ms(5 * 60));
        let recovered = store.recover_expired_run_leases(clock.now()).unwrap();
        assert!(recovered.is_empty(), "{recovered:?}");
        assert_eq!(
            store.get_run(&run.id).unwrap().unwrap().status,
            RunStatus::Running
        );
        fake.release("long");
        ticking.join().unwrap()
    })
    .unwrap();

    assert_eq!(r.completed.len(), 1);
    let run = &r.completed[0];
    assert_eq!(run.status, RunStatus::Succeeded);
    assert_eq!(run.finished_at, Some(at(60).add_ms(300)));
    assert!(fake.cancellations().is_empty());
    assert_eq!(reload(&store, &lp).next_run_at, Some(at(120)));
}

#[test]
fn a_runner_whose_run_was_taken_over_is_cancelled_and_fenced_out() {
    // SPEC §9 item 12: the original runner's finalize is dropped and does
    // not advance the loop; its lost heartbeat cancels the run. Runner B
    // reads a clock 61 ms ahead of runner A's, so A's lease (60 ms) has
    // expired for B but not for A: only the claimant fence stops A.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    let mut new = command_loop("taken", every(60_000));
    new.lease_ms = 60;
    let lp = store.create_loop(&new, t0()).unwrap();
    fake.gate("taken");

    let (r, taken) = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let ticking = s.spawn(|| tick(&fx.store(), &opts(&clock, &fake)));
        wait_until("the run to start", || fake.waiting("taken") == 1);
        let taken = store
            .claim_run(&lp, at(60), RUNNER_B, at(60).add_ms(61))
            .unwrap()
            .run()
            .unwrap()
            .clone();
        (ticking.join().unwrap(), taken)
    });
    let r = r.unwrap();

    assert_eq!(
        fake.cancellations(),
        [("taken".to_owned(), "run lease lost".to_owned())]
    );
    assert_eq!(taken.attempt, 1);
    assert!(r.completed.is_empty());
    assert_eq!(r.claimed.len(), 1, "the fenced-out run is left running");
    let stored = store.get_run(&taken.id).unwrap().unwrap();
    assert_eq!(stored, taken, "A's succeeded result was dropped");
    assert_eq!(stored.claimed_by.as_deref(), Some(RUNNER_B));
    assert_eq!(stored.stdout, None);
    let after = reload(&store, &lp);
    assert_eq!(after.next_run_at, Some(at(60)), "not advanced");
    assert_eq!(after.status, LoopStatus::Active);
}

#[test]
fn a_runner_whose_run_was_recovered_is_cancelled_and_does_not_advance_twice() {
    // SPEC §9 items 11–12. Recovery by another runner abandons the run and
    // schedules its retry; the original runner's later success must neither
    // overwrite the abandoned row nor clear that retry.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    let mut new = command_loop("recovered", every(60_000));
    new.lease_ms = 60;
    new.max_attempts = 2;
    new.retry_delay_ms = 5_000;
    let lp = store.create_loop(&new, t0()).unwrap();
    fake.gate("recovered");
    let b_now = at(60).add_ms(61);

    let r = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let ticking = s.spawn(|| tick(&fx.store(), &opts(&clock, &fake)));
        wait_until("the run to start", || fake.waiting("recovered") == 1);
        let recovered = store.recover_expired_run_leases(b_now).unwrap();
        assert_eq!(recovered.len(), 1);
        ticking.join().unwrap()
    })
    .unwrap();

    assert_eq!(
        fake.cancellations(),
        [("recovered".to_owned(), "run lease lost".to_owned())]
    );
    assert_eq!(r.completed.len(), 1);
    let run = &r.completed[0];
    assert_eq!(run.status, RunStatus::Abandoned);
    assert_eq!(
        run.error.as_deref(),
        Some("run lease expired before completion")
    );
    assert_eq!(run.stdout, None, "A's output was not written");
    let after = reload(&store, &lp);
    assert_eq!(after.retry_scheduled_for, Some(at(60)));
    assert_eq!(after.next_run_at, Some(b_now.add_ms(5_000)));
}
