//! The tick's stop token: nothing starts once it is cancelled, and runs in
//! flight are cancelled with its reason.

use loops_core::{ManualClock, RunStatus};
use loops_exec::CancelToken;
use loops_scheduler::{TickOptions, tick};

use crate::common::*;

#[test]
fn a_stop_before_the_tick_starts_no_slot() {
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    let lp = store
        .create_loop(&command_loop("idle", every(60_000)), t0())
        .unwrap();
    let stop = CancelToken::new();
    stop.cancel("daemon stopping");
    let o = TickOptions {
        hooks: loops_scheduler::HookSettings::none(),
        on_hook_error: None,
        stop: Some(&stop),
        ..opts(&clock, &fake)
    };
    let r = tick(&store, &o).unwrap();
    assert!(r.is_empty(), "{r:?}");
    assert!(fake.calls().is_empty());
    assert_eq!(store.count_runs(None).unwrap(), 0);
    assert_eq!(reload(&store, &lp).next_run_at, Some(at(60)));
}

#[test]
fn a_stop_mid_tick_cancels_runs_in_flight_and_starts_no_more() {
    // The loops keep the default 30-minute lease, so the runner's next
    // heartbeat is a minute away: the stop must not wait for it.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    let first = store
        .create_loop(&command_loop("first", once(at(10))), t0())
        .unwrap();
    let second = store
        .create_loop(&command_loop("second", once(at(20))), t0())
        .unwrap();
    fake.gate("first");
    fake.script("first", [Outcome::Fail(143)]);
    let stop = CancelToken::new();

    let r = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let ticking = s.spawn(|| {
            let o = TickOptions {
                hooks: loops_scheduler::HookSettings::none(),
                on_hook_error: None,
                stop: Some(&stop),
                max_parallel: 1,
                ..opts(&clock, &fake)
            };
            tick(&fx.store(), &o)
        });
        wait_until("the first run to start", || fake.waiting("first") == 1);
        stop.cancel("daemon stopping");
        ticking.join().unwrap()
    })
    .unwrap();

    assert_eq!(
        fake.cancellations(),
        [("first".to_owned(), "daemon stopping".to_owned())]
    );
    assert_eq!(r.completed.len(), 1);
    assert_eq!(r.completed[0].loop_id, first.id);
    assert_eq!(r.completed[0].status, RunStatus::Failed);
    assert_eq!(fake.calls_for("second").len(), 0);
    assert!(runs_of(&store, &second.id).is_empty());
    assert_eq!(reload(&store, &second).next_run_at, Some(at(20)));
}
