//! The daemon loop in-process: precise wake-ups, CLI wake-ups, concurrency
//! across loops, overlap within the daemon, graceful stop, the second
//! daemon, crash recovery and a lost lease (SPEC §7.6; §9 items 1, 2, 6,
//! 16, 17). A `ManualClock` and the fake executor stand in for time and
//! processes; `on_sleep` records every sleep the daemon plans.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use loops_core::{Clock, LeaseId, LoopStatus, ManualClock, Overlap, ProcessRef, RunStatus};
use loops_exec::CancelToken;
use loops_scheduler::{
    DaemonError, DaemonExit, DaemonOptions, DaemonPaths, RunExecutor, notify_daemon, request_stop,
    run_daemon,
};
use loops_store::{INTERRUPTED_BY_SHUTDOWN, LeaseAcquire, LeaseRequest};

use crate::common::*;

pub(crate) const HOST: &str = "test-host";

/// One daemon of a test, run on its own thread with [`Harness::run`].
pub(crate) struct Harness<'a> {
    fx: &'a Fixture,
    clock: &'a dyn Clock,
    executor: &'a dyn RunExecutor,
    stop: CancelToken,
    logs: Mutex<Vec<String>>,
    sleeps: Mutex<Vec<Duration>>,
    max_parallel: usize,
    grace: Duration,
    lease_ttl: Duration,
}

impl<'a> Harness<'a> {
    pub(crate) fn new(
        fx: &'a Fixture,
        clock: &'a dyn Clock,
        executor: &'a dyn RunExecutor,
    ) -> Self {
        Harness {
            fx,
            clock,
            executor,
            stop: CancelToken::new(),
            logs: Mutex::default(),
            sleeps: Mutex::default(),
            max_parallel: 8,
            grace: Duration::from_secs(10),
            lease_ttl: Duration::from_secs(600),
        }
    }

    pub(crate) fn run(&self) -> Result<DaemonExit, DaemonError> {
        let store = self.fx.store();
        let paths = DaemonPaths::new(data_dir(self.fx));
        let log = |line: &str| {
            eprintln!("LOG {line}");
            self.logs.lock().unwrap().push(line.to_owned())
        };
        let on_sleep = |d: Duration| self.sleeps.lock().unwrap().push(d);
        let opts = DaemonOptions {
            paths: &paths,
            clock: self.clock,
            executor: self.executor,
            stop: &self.stop,
            log: &log,
            on_sleep: Some(&on_sleep),
            host: HOST.to_owned(),
            pid: std::process::id(),
            max_parallel: self.max_parallel,
            lanes: loops_scheduler::Lanes::default(),
            hooks: Default::default(),
            grace: self.grace,
            max_sleep: Duration::from_secs(60),
            lease_ttl: self.lease_ttl,
            orphan_grace: Duration::from_millis(100),
            gc: None,
            clock_sync: None,
            poll_only: false,
        };
        run_daemon(&store, &opts)
    }

    /// What the CLI does after a write.
    fn wake(&self) {
        notify_daemon(&data_dir(self.fx));
    }

    fn sleeps(&self) -> Vec<Duration> {
        self.sleeps.lock().unwrap().clone()
    }

    fn logged(&self, text: &str) -> bool {
        self.logs.lock().unwrap().iter().any(|l| l.contains(text))
    }

    /// Stops the daemon when dropped, so a failing assertion ends the test
    /// instead of leaving the daemon thread running. Bind it first thing
    /// inside `thread::scope`.
    pub(crate) fn stop_on_drop(&self) -> StopOnDrop<'_> {
        StopOnDrop(&self.stop)
    }

    /// Waits until the daemon has planned `n` sleeps.
    pub(crate) fn wait_for_sleeps(&self, n: usize) {
        wait_until("the daemon to go to sleep", || self.sleeps().len() >= n);
    }
}

pub(crate) struct StopOnDrop<'a>(&'a CancelToken);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.cancel("test ended");
    }
}

pub(crate) fn data_dir(fx: &Fixture) -> PathBuf {
    fx.path().parent().unwrap().to_owned()
}

#[test]
fn the_daemon_sleeps_exactly_until_the_next_slot() {
    // SPEC §9 item 6: no polling; the sleep ends at the slot.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let lp = store
        .create_loop(&command_loop("every45", every(45_000)), t0())
        .unwrap();
    let h = Harness::new(&fx, &clock, &fake);

    let exit = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let _stop = h.stop_on_drop();
        let daemon = s.spawn(|| h.run());
        h.wait_for_sleeps(1);
        assert_eq!(h.sleeps()[0], Duration::from_secs(45));
        assert!(fake.calls().is_empty());

        clock.set(at(45));
        h.wake();
        wait_until("the slot to run and the loop to advance", || {
            reload(&store, &lp).next_run_at == Some(at(90))
        });
        // Then it sleeps until the next slot again.
        h.wait_for_sleeps(2);
        assert_eq!(*h.sleeps().last().unwrap(), Duration::from_secs(45));
        h.stop.cancel("test over");
        daemon.join().unwrap()
    })
    .unwrap();

    assert_eq!(exit.reason, "test over");
    assert_eq!(exit.interrupted, 0);
    let calls = fake.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].scheduled_for, at(45));
    let run = &runs_of(&store, &lp.id)[0];
    assert_eq!(run.status, RunStatus::Succeeded);
    assert!(
        run.claimed_by
            .as_deref()
            .unwrap()
            .starts_with(&format!("{HOST}:{}:", std::process::id()))
    );
    assert!(h.logged("started pid="));
    assert!(h.logged("stopped"));
    // The lease and the pid file are gone.
    assert_eq!(store.get_daemon_lease().unwrap(), None);
    assert!(!data_dir(&fx).join("daemon.pid").exists());
}

#[test]
fn a_cli_write_wakes_an_idle_daemon_at_once() {
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let h = Harness::new(&fx, &clock, &fake);

    std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let _stop = h.stop_on_drop();
        let daemon = s.spawn(|| h.run());
        h.wait_for_sleeps(1);
        // Nothing to do: the daemon sleeps the longest it may.
        assert_eq!(h.sleeps()[0], Duration::from_secs(60));
        let lp = store
            .create_loop(&command_loop("now", once(t0())), t0())
            .unwrap();
        h.wake();
        wait_until("the new loop's run", || {
            reload(&store, &lp).status == LoopStatus::Stopped
        });
        h.stop.cancel("test over");
        daemon.join().unwrap().unwrap();
    });
    assert_eq!(fake.calls().len(), 1);
}

#[test]
fn a_long_run_neither_delays_another_loop_nor_overlaps_itself() {
    // SPEC §9 items 1 and 2: another loop's slot runs while a slow run is
    // in flight, and the slow loop's own next slot is skipped (overlap
    // skip) instead of waiting or running twice.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let slow = store
        .create_loop(&command_loop("slow", every(10_000)), t0())
        .unwrap();
    let fast = store
        .create_loop(&command_loop("fast", once(at(15))), t0())
        .unwrap();
    fake.gate("slow");
    let h = Harness::new(&fx, &clock, &fake);

    std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let _stop = h.stop_on_drop();
        let daemon = s.spawn(|| h.run());
        h.wait_for_sleeps(1);
        clock.set(at(10));
        h.wake();
        wait_until("the slow run to start", || fake.waiting("slow") == 1);

        clock.set(at(15));
        h.wake();
        wait_until("the fast loop to run", || {
            reload(&store, &fast).status == LoopStatus::Stopped
        });
        assert_eq!(fake.waiting("slow"), 1, "the slow run is still in flight");

        clock.set(at(20));
        h.wake();
        wait_until("the overlapping slot to be skipped", || {
            runs_of(&store, &slow.id)
                .iter()
                .any(|r| r.status == RunStatus::Skipped)
        });
        fake.release("slow");
        wait_until("the slow run to finish", || {
            runs_of(&store, &slow.id)
                .iter()
                .all(|r| r.status != RunStatus::Running)
        });
        h.stop.cancel("test over");
        daemon.join().unwrap().unwrap();
    });

    let runs = runs_of(&store, &slow.id);
    let skipped = runs
        .iter()
        .find(|r| r.status == RunStatus::Skipped)
        .unwrap();
    assert_eq!(skipped.scheduled_for, at(20));
    assert_eq!(skipped.error.as_deref(), Some("previous run still active"));
    let ran = runs.iter().find(|r| r.scheduled_for == at(10)).unwrap();
    assert_eq!(ran.status, RunStatus::Succeeded);
    assert_eq!(fake.max_per_loop("slow"), 1);
    assert_eq!(reload(&store, &slow).next_run_at, Some(at(30)));
}

#[test]
fn overlap_allow_runs_the_next_slot_beside_the_first() {
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(10));
    let fake = FakeExecutor::new(&clock);
    let mut new = command_loop("par", every(10_000));
    new.overlap = Overlap::Allow;
    let lp = store.create_loop(&new, t0()).unwrap();
    fake.gate("par");
    let h = Harness::new(&fx, &clock, &fake);

    std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let _stop = h.stop_on_drop();
        let daemon = s.spawn(|| h.run());
        wait_until("the first run", || fake.waiting("par") == 1);
        clock.set(at(20));
        h.wake();
        wait_until("the second run beside it", || fake.waiting("par") == 2);
        fake.release("par");
        wait_until("both runs to finish", || {
            let runs = runs_of(&store, &lp.id);
            runs.len() == 2 && runs.iter().all(|r| r.status == RunStatus::Succeeded)
        });
        h.stop.cancel("test over");
        daemon.join().unwrap().unwrap();
    });
    assert_eq!(fake.max_per_loop("par"), 2);
}

#[test]
fn a_stop_past_the_grace_period_releases_runs_without_counting_the_attempt() {
    // SPEC §9 item 17: the interrupted run does not consume an attempt, and
    // the slot that was due but queued is never started.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(10));
    let fake = FakeExecutor::new(&clock);
    let long = store
        .create_loop(&command_loop("long", once(at(10))), t0())
        .unwrap();
    let queued = store
        .create_loop(&command_loop("queued", once(at(10))), t0())
        .unwrap();
    fake.gate("long");
    // A cancelled run ends the way a killed process does.
    fake.script("long", [Outcome::Fail(143)]);
    let mut h = Harness::new(&fx, &clock, &fake);
    h.max_parallel = 1;
    h.grace = Duration::from_millis(50);

    let exit = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let _stop = h.stop_on_drop();
        let daemon = s.spawn(|| h.run());
        wait_until("the long run", || fake.waiting("long") == 1);
        h.stop.cancel("cancelled by SIGTERM");
        daemon.join().unwrap()
    })
    .unwrap();

    assert_eq!(exit.interrupted, 1);
    assert_eq!(
        fake.cancellations(),
        [(
            "long".to_owned(),
            "interrupted by daemon shutdown".to_owned()
        )]
    );
    let run = runs_of(&store, &long.id).remove(0);
    assert_eq!(run.status, RunStatus::Abandoned);
    assert_eq!(run.attempt, 1, "the released run keeps its attempt number");
    assert_eq!(run.error.as_deref(), Some(INTERRUPTED_BY_SHUTDOWN));
    assert_eq!(run.stdout.as_deref(), Some("long attempt 1"));
    let lp = reload(&store, &long);
    assert_eq!(lp.status, LoopStatus::Active, "not advanced");
    assert_eq!(lp.next_run_at, Some(at(10)));
    assert!(runs_of(&store, &queued.id).is_empty(), "never spawned");
    assert!(fake.calls_for("queued").is_empty());
    assert!(h.logged("grace period over: interrupting 1 run(s)"));

    // The next daemon runs the slot again, as the same attempt.
    fake.release("long");
    let h2 = Harness::new(&fx, &clock, &fake);
    std::thread::scope(|s| {
        let _stop = h2.stop_on_drop();
        let daemon = s.spawn(|| h2.run());
        wait_until("both loops to run", || {
            reload(&store, &long).status == LoopStatus::Stopped
                && reload(&store, &queued).status == LoopStatus::Stopped
        });
        h2.stop.cancel("test over");
        daemon.join().unwrap().unwrap();
    });
    let run = runs_of(&store, &long.id).remove(0);
    assert_eq!(run.status, RunStatus::Succeeded);
    assert_eq!(run.attempt, 1);
    assert_eq!(fake.calls_for("long").len(), 2);
}

#[test]
fn a_run_that_finishes_within_the_grace_period_is_recorded_as_usual() {
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(10));
    let fake = FakeExecutor::new(&clock);
    let lp = store
        .create_loop(&command_loop("finishing", once(at(10))), t0())
        .unwrap();
    fake.gate("finishing");
    let h = Harness::new(&fx, &clock, &fake);

    let exit = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let _stop = h.stop_on_drop();
        let daemon = s.spawn(|| h.run());
        wait_until("the run", || fake.waiting("finishing") == 1);
        h.stop.cancel("cancelled by SIGTERM");
        wait_until("the stop to begin", || {
            h.logged("waiting up to 10000ms for 1 run(s) to finish")
        });
        fake.release("finishing");
        daemon.join().unwrap()
    })
    .unwrap();

    assert_eq!(exit.interrupted, 0);
    assert!(fake.cancellations().is_empty());
    assert_eq!(runs_of(&store, &lp.id)[0].status, RunStatus::Succeeded);
    assert_eq!(reload(&store, &lp).status, LoopStatus::Stopped);
}

#[test]
fn a_second_daemon_is_refused_with_the_holder_named() {
    let fx = Fixture::new();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let first = Harness::new(&fx, &clock, &fake);
    let second = Harness::new(&fx, &clock, &fake);

    std::thread::scope(|s| {
        let _stop = first.stop_on_drop();
        let daemon = s.spawn(|| first.run());
        first.wait_for_sleeps(1);
        let err = second.run().unwrap_err();
        let DaemonError::LeaseHeld { pid, host, since } = &err else {
            panic!("{err}");
        };
        assert_eq!(*pid, std::process::id());
        assert_eq!(host, HOST);
        assert_eq!(*since, t0());
        assert_eq!(
            err.to_string(),
            format!(
                "another loops daemon holds the database lease: pid {} on {HOST} since {}",
                std::process::id(),
                t0()
            )
        );
        first.stop.cancel("test over");
        daemon.join().unwrap().unwrap();
    });
}

#[test]
fn a_dead_daemons_lease_and_runs_are_recovered_at_once() {
    // SPEC §9 item 16: no waiting out the dead daemon's leases. The pid
    // cannot exist (above Linux's pid_max).
    let dead_pid = 4_194_305;
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(at(60));
    let fake = FakeExecutor::new(&clock);
    let mut new = command_loop("orphaned", every(60_000));
    new.max_attempts = 2;
    new.retry_delay_ms = 5_000;
    let lp = store.create_loop(&new, t0()).unwrap();
    let dead_lease = LeaseId::from_bytes([0xaa; 6]);
    let acquired = store
        .acquire_daemon_lease(
            &LeaseRequest {
                id: dead_lease,
                pid: dead_pid,
                hostname: HOST.to_owned(),
                ttl_ms: 600_000,
            },
            at(60),
        )
        .unwrap();
    assert!(matches!(acquired, LeaseAcquire::Acquired(_)));
    let dead_runner = format!("{HOST}:{dead_pid}:{dead_lease}");
    let claimed = store
        .claim_run(&lp, at(60), &dead_runner, at(60))
        .unwrap()
        .run()
        .unwrap()
        .clone();
    store
        .mark_run_pid(
            &claimed.id,
            ProcessRef {
                pid: dead_pid + 1,
                start: Some(0),
            },
            Some(&dead_runner),
            at(60),
        )
        .unwrap();
    clock.set(at(61));
    let h = Harness::new(&fx, &clock, &fake);

    std::thread::scope(|s| {
        let _stop = h.stop_on_drop();
        let daemon = s.spawn(|| h.run());
        h.wait_for_sleeps(1);
        let run = store.get_run(&claimed.id).unwrap().unwrap();
        assert_eq!(run.status, RunStatus::Abandoned);
        assert_eq!(
            run.error.as_deref(),
            Some(format!("daemon {HOST}:{dead_pid} exited before the run completed").as_str())
        );
        let after = reload(&store, &lp);
        assert_eq!(after.retry_scheduled_for, Some(at(60)));
        assert_eq!(after.next_run_at, Some(at(66)));
        // The retry wakes the daemon at its time.
        assert_eq!(h.sleeps()[0], Duration::from_secs(5));
        clock.set(at(66));
        h.wake();
        wait_until("the retry", || {
            store.get_run(&claimed.id).unwrap().unwrap().status == RunStatus::Succeeded
        });
        h.stop.cancel("test over");
        daemon.join().unwrap().unwrap();
    });
    let run = store.get_run(&claimed.id).unwrap().unwrap();
    assert_eq!(run.attempt, 2);
    assert_eq!(fake.calls().len(), 1);
}

#[test]
fn a_daemon_whose_lease_was_taken_over_stops() {
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let mut h = Harness::new(&fx, &clock, &fake);
    h.lease_ttl = Duration::from_millis(300);

    let exit = std::thread::scope(|s| {
        let _stop = h.stop_on_drop();
        let daemon = s.spawn(|| h.run());
        h.wait_for_sleeps(1);
        // Its lease has expired by the clock another host reads.
        let taken = store
            .acquire_daemon_lease(
                &LeaseRequest {
                    id: LeaseId::from_bytes([0xbb; 6]),
                    pid: 1,
                    hostname: "other-host".to_owned(),
                    ttl_ms: 60_000,
                },
                at(10),
            )
            .unwrap();
        assert!(matches!(taken, LeaseAcquire::Acquired(_)));
        daemon.join().unwrap()
    })
    .unwrap();
    assert_eq!(exit.reason, "daemon lease lost");
    assert!(h.logged("daemon lease lost"));
    // The other host's lease is left alone.
    assert_eq!(
        store.get_daemon_lease().unwrap().unwrap().hostname,
        "other-host"
    );
}

#[test]
fn a_database_file_replaced_under_the_daemon_stops_it() {
    // Issue 12 §3: the daemon would have kept writing into the deleted
    // file; it notices at its next wake-up instead.
    let fx = Fixture::new();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let h = Harness::new(&fx, &clock, &fake);

    let exit = std::thread::scope(|s| {
        let _stop = h.stop_on_drop();
        let daemon = s.spawn(|| h.run());
        h.wait_for_sleeps(1);
        let db = fx.path();
        let copy = db.with_extension("copy");
        std::fs::copy(&db, &copy).unwrap();
        std::fs::rename(&copy, &db).unwrap();
        h.wake();
        wait_until("the daemon to stop", || daemon.is_finished());
        daemon.join().unwrap().unwrap()
    });
    assert_eq!(exit.reason, "database file replaced");
    assert!(h.logged("loops.db was deleted or replaced while the daemon ran; stopping"));
    assert!(!data_dir(&fx).join("daemon.pid").exists());
}

#[test]
fn a_stop_request_on_the_socket_stops_the_daemon_within_its_grace() {
    // `loops daemon stop --grace 0`: the request alone stops the daemon, and
    // its grace wins over the daemon's own.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let lp = store
        .create_loop(&command_loop("long", once(t0())), t0())
        .unwrap();
    fake.gate("long");
    fake.script("long", [Outcome::Fail(143)]);
    let mut h = Harness::new(&fx, &clock, &fake);
    h.grace = Duration::from_secs(3600);

    let exit = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let _stop = h.stop_on_drop();
        let daemon = s.spawn(|| h.run());
        wait_until("the long run", || fake.waiting("long") == 1);
        assert!(request_stop(&data_dir(&fx), Duration::ZERO));
        daemon.join().unwrap()
    })
    .unwrap();

    assert_eq!(exit.reason, "stop requested by `loops daemon stop`");
    assert_eq!(exit.interrupted, 1);
    assert!(h.logged("stop signal received (stop requested by `loops daemon stop`)"));
    assert!(h.logged("waiting up to 0ms for 1 run(s) to finish"));
    let run = runs_of(&store, &lp.id).remove(0);
    assert_eq!(run.status, RunStatus::Abandoned);
    assert_eq!(run.error.as_deref(), Some(INTERRUPTED_BY_SHUTDOWN));
}

#[test]
fn a_stop_request_after_the_signal_still_sets_the_grace() {
    // The request and the SIGTERM of `loops daemon stop` travel separately;
    // when the signal wins the race, the requested grace still applies.
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let lp = store
        .create_loop(&command_loop("long", once(t0())), t0())
        .unwrap();
    fake.gate("long");
    fake.script("long", [Outcome::Fail(143)]);
    let mut h = Harness::new(&fx, &clock, &fake);
    h.grace = Duration::from_secs(3600);

    let exit = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let _stop = h.stop_on_drop();
        let daemon = s.spawn(|| h.run());
        wait_until("the long run", || fake.waiting("long") == 1);
        h.stop.cancel("cancelled by SIGTERM");
        wait_until("the stop to begin", || {
            h.logged("waiting up to 3600000ms for 1 run(s) to finish")
        });
        assert!(request_stop(&data_dir(&fx), Duration::ZERO));
        daemon.join().unwrap()
    })
    .unwrap();

    assert_eq!(exit.reason, "cancelled by SIGTERM");
    assert_eq!(exit.interrupted, 1);
    assert!(h.logged("grace period over: interrupting 1 run(s)"));
    let run = runs_of(&store, &lp.id).remove(0);
    assert_eq!(run.status, RunStatus::Abandoned);
}

#[test]
fn a_grace_beyond_any_instant_is_capped() {
    // Issue 12 §3: `stop grace_ms=<u64::MAX>` on the socket overflowed the
    // daemon's deadline (a panic) instead of meaning "wait for the run".
    let fx = Fixture::new();
    let store = fx.store();
    let clock = ManualClock::new(t0());
    let fake = FakeExecutor::new(&clock);
    let lp = store
        .create_loop(&command_loop("slow", once(t0())), t0())
        .unwrap();
    fake.gate("slow");
    let h = Harness::new(&fx, &clock, &fake);

    let exit = std::thread::scope(|s| {
        let _open = fake.open_on_drop();
        let _stop = h.stop_on_drop();
        let daemon = s.spawn(|| h.run());
        wait_until("the run to start", || fake.calls().len() == 1);
        let sock = std::os::unix::net::UnixDatagram::unbound().unwrap();
        sock.send_to(
            format!("stop grace_ms={}", u64::MAX).as_bytes(),
            data_dir(&fx).join("daemon.sock"),
        )
        .unwrap();
        wait_until("the capped grace", || {
            h.logged("waiting up to 3153600000000ms for 1 run(s) to finish")
        });
        fake.release("slow");
        daemon.join().unwrap().unwrap()
    });
    assert_eq!(exit.interrupted, 0);
    // The run finished and was recorded: the one-shot loop is done.
    assert_eq!(reload(&store, &lp).status, LoopStatus::Stopped);
}
