//! Tearing down the process group of a run whose runner died (SPEC §9 item
//! 18): only when the recorded identity matches, and the grandchildren go
//! too.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use loops_core::{Liveness, ProcessRef};
use loops_exec::{OrphanKill, Orphans, SystemProbe, kill_orphans, process_start_ms};

use crate::support::*;

#[test]
fn an_orphaned_group_is_killed_grandchildren_included() {
    let fx = Fixture::new();
    let script = fx.script("orphan.sh", "sleep 30 &\ntrap '' TERM\nsleep 30\n");
    let mut leader = Command::new(&script)
        .process_group(0)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = leader.id();
    assert!(eventually(Duration::from_secs(5), || live_group_members(
        pid
    )
    .len()
        >= 2));
    let recorded = ProcessRef {
        pid,
        start: process_start_ms(pid),
    };
    assert!(SystemProbe.is_alive(recorded));

    // Not the recorded process: the same pid with another start time.
    let stranger = ProcessRef {
        pid,
        start: recorded.start.map(|s| s - 3_600_000),
    };
    assert_eq!(
        kill_orphans(Orphans::Group(stranger), Duration::ZERO),
        OrphanKill::NotVerified
    );
    assert_eq!(
        kill_orphans(Orphans::Group(ProcessRef::pid(pid)), Duration::ZERO),
        OrphanKill::NotVerified
    );
    assert!(live_group_members(pid).len() >= 2, "nothing was signalled");

    // The leader ignores SIGTERM, so SIGKILL follows the grace period.
    let outcome = kill_orphans(Orphans::Group(recorded), Duration::from_millis(200));
    assert_eq!(outcome, OrphanKill::Killed { forced: true });
    assert_eq!(live_group_members(pid), Vec::<u32>::new());
    // Not reaped yet (this test is its parent), but dead to the probe.
    assert!(!SystemProbe.is_alive(recorded));
    leader.wait().unwrap();
    assert_eq!(
        kill_orphans(Orphans::Group(recorded), Duration::ZERO),
        OrphanKill::Gone
    );
}
