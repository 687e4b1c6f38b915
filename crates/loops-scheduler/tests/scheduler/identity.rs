//! A daemon identity no wall-clock step moves (issue 32): the lease holder
//! named by the pid file's boot id and start tick stays alive however far
//! the injected clock reads from the time `/proc` and `btime` give its
//! start, while a pid file in the original's format (a bare pid) keeps the
//! wall-clock check.

use std::process::{Child, Command};

use loops_core::{LeaseId, ManualClock};
use loops_scheduler::{DaemonError, PID_FILE};
use loops_store::{LeaseAcquire, LeaseRequest};

use crate::common::*;
use crate::daemon::{HOST, Harness, data_dir};

/// A live process standing in for a daemon that took the lease at `t0()`,
/// by a clock that has since stepped: `t0()` lies long before its start as
/// `/proc` tells it, which the wall-clock check reads as a reused pid.
struct Holder(Child);

impl Holder {
    fn new(fx: &Fixture) -> Holder {
        let child = Holder(Command::new("sleep").arg("60").spawn().unwrap());
        let acquired = fx
            .store()
            .acquire_daemon_lease(
                &LeaseRequest {
                    id: LeaseId::from_bytes([0xcc; 6]),
                    pid: child.pid(),
                    hostname: HOST.to_owned(),
                    ttl_ms: 600_000,
                },
                t0(),
            )
            .unwrap();
        assert!(matches!(acquired, LeaseAcquire::Acquired(_)));
        child
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[cfg(target_os = "linux")]
fn a_stepped_clock_does_not_let_a_second_daemon_take_a_live_holders_lease() {
    let fx = Fixture::new();
    let holder = Holder::new(&fx);
    let identity = loops_exec::process_identity(holder.pid()).unwrap();
    std::fs::write(
        data_dir(&fx).join(PID_FILE),
        format!("{}\n{identity}\n", holder.pid()),
    )
    .unwrap();
    // The new daemon's clock reads an hour past the lease's creation.
    let clock = ManualClock::new(at(3600));
    let fake = FakeExecutor::new(&clock);
    let second = Harness::new(&fx, &clock, &fake);
    // Stopped before it starts: a daemon that wrongly took the lease
    // returns at once instead of running on.
    drop(second.stop_on_drop());
    let err = second.run().expect_err("the live holder's lease was taken");
    let DaemonError::LeaseHeld { pid, host, since } = &err else {
        panic!("{err}");
    };
    assert_eq!((*pid, host.as_str(), *since), (holder.pid(), HOST, t0()));
    let lease = fx.store().get_daemon_lease().unwrap().unwrap();
    assert_eq!(lease.pid, holder.pid(), "the holder keeps its lease");
}

#[test]
#[cfg(target_os = "linux")]
fn a_bare_pid_file_keeps_the_wall_clock_check() {
    // The original's pid file: the holder is judged by its start time
    // against the lease's creation, so the stepped clock makes it a reused
    // pid and the new daemon takes over, as before issue 32.
    let fx = Fixture::new();
    let holder = Holder::new(&fx);
    std::fs::write(data_dir(&fx).join(PID_FILE), holder.pid().to_string()).unwrap();
    let clock = ManualClock::new(at(3600));
    let fake = FakeExecutor::new(&clock);
    let second = Harness::new(&fx, &clock, &fake);
    std::thread::scope(|s| {
        let stop = second.stop_on_drop();
        let daemon = s.spawn(|| second.run());
        second.wait_for_sleeps(1);
        let lease = fx.store().get_daemon_lease().unwrap().unwrap();
        assert_eq!(lease.pid, std::process::id(), "the new daemon took over");
        drop(stop);
        daemon.join().unwrap().unwrap();
    });
}
