//! Parallel execution across loops, serial slots within a loop (SPEC §9
//! item 1, §3.1 step 5).

use loops_core::{CatchUp, ManualClock, RunStatus};
use loops_scheduler::{TickOptions, tick};

use crate::common::*;

#[test]
fn independent_loops_run_in_parallel_up_to_max_parallel() {
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    let names = ["a", "b", "c", "d", "e"];
    for n in names {
        fake.gate(n);
        store
            .create_loop(&command_loop(n, every(60_000)), t0())
            .unwrap();
    }

    let r = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let ticking = s.spawn(|| {
            let o = TickOptions {
                hooks: loops_scheduler::HookSettings::none(),
                on_hook_error: None,
                max_parallel: 4,
                ..opts(&clock, &fake)
            };
            tick(&fx.store(), &o)
        });
        wait_until("four runs in flight", || fake.current() == 4);
        assert_eq!(fake.calls().len(), 4, "the fifth waits for a free slot");
        for n in names {
            fake.release(n);
        }
        ticking.join().unwrap()
    })
    .unwrap();

    assert_eq!(r.completed.len(), 5);
    assert_eq!(fake.max_concurrency(), 4);
    assert_eq!(store.count_runs(Some(RunStatus::Succeeded)).unwrap(), 5);
}

#[test]
fn with_max_parallel_one_loops_run_serially_in_next_run_order() {
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    for (name, secs) in [("third", 30), ("first", 10), ("second", 20)] {
        store
            .create_loop(&command_loop(name, once(at(secs))), t0())
            .unwrap();
    }
    let o = TickOptions {
        hooks: loops_scheduler::HookSettings::none(),
        on_hook_error: None,
        max_parallel: 1,
        ..opts(&clock, &fake)
    };
    let r = tick(&store, &o).unwrap();
    assert_eq!(r.completed.len(), 3);
    let order: Vec<String> = fake.calls().into_iter().map(|c| c.loop_name).collect();
    assert_eq!(order, ["first", "second", "third"]);
    assert_eq!(fake.max_concurrency(), 1);
}

#[test]
fn a_slow_loop_does_not_delay_another_loops_run() {
    // SPEC §9 item 1: the original awaits every slot in turn.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    // The slow loop is due first, so it is started first.
    let slow = store
        .create_loop(&command_loop("slow", once(at(10))), t0())
        .unwrap();
    let fast = store
        .create_loop(&command_loop("fast", once(at(20))), t0())
        .unwrap();
    fake.gate("slow");

    let r = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let ticking = s.spawn(|| tick(&fx.store(), &opts(&clock, &fake)));
        // The slow worker may reach its gate after the fast run is done.
        wait_until(
            "the slow run to block and the fast run to be finalized",
            || {
                fake.waiting("slow") == 1
                    && runs_of(&store, &fast.id)
                        .first()
                        .is_some_and(|r| r.status == RunStatus::Succeeded)
            },
        );
        assert_eq!(
            runs_of(&store, &slow.id)[0].status,
            RunStatus::Running,
            "the slow run is still running"
        );
        fake.release("slow");
        ticking.join().unwrap()
    })
    .unwrap();

    let names: Vec<&str> = r.completed.iter().map(|r| r.loop_name.as_str()).collect();
    assert_eq!(names, ["fast", "slow"], "completed in finishing order");
}

#[test]
fn slots_of_one_loop_run_in_order_and_never_concurrently() {
    // SPEC §3.1 step 5 under catchUp=all. Each slot blocks until the test
    // lets one call through; a second concurrent slot would show up as two
    // calls in flight for the loop.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(5));
    let fake = FakeExecutor::new(&clock);
    let mut new = command_loop("catching-up", every(1_000));
    new.catch_up = CatchUp::All;
    let lp = store.create_loop(&new, t0()).unwrap();
    fake.gate("catching-up");

    let r = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let ticking = s.spawn(|| tick(&fx.store(), &opts(&clock, &fake)));
        for done in 0..5 {
            wait_until("the next slot to start", || {
                fake.calls().len() == done + 1 && fake.waiting("catching-up") == 1
            });
            assert_eq!(fake.current(), 1);
            fake.release_one("catching-up");
        }
        ticking.join().unwrap()
    })
    .unwrap();

    let slots: Vec<_> = fake.calls().iter().map(|c| c.scheduled_for).collect();
    assert_eq!(slots, [at(1), at(2), at(3), at(4), at(5)]);
    assert_eq!(fake.max_per_loop("catching-up"), 1);
    assert_eq!(r.completed.len(), 5);
    assert_eq!(reload(&store, &lp).next_run_at, Some(at(6)));
}
