//! Start-up recovery of what a dead daemon of this host left behind (SPEC
//! §9 items 16 and 18).
//!
//! The new daemon already holds the lease, so any other daemon of this host
//! that claimed a still-running run is either gone or no longer schedules.
//! A run whose claimant process is gone (or whose pid now belongs to a
//! process started after the claim) is recovered at once: its orphaned
//! process groups are torn down when their recorded identity matches, and
//! so are the processes that left those groups but carry the run's recorded
//! spawn id in `LOOPS_SPAWN_ID`; then
//! it is abandoned and its loop advanced as after a failure, so it retries
//! by the loop's policy. A run whose claimant still runs is left to its
//! lease, like a run of another host.

use loops_core::Timestamp;
use loops_exec::{OrphanKill, Orphans, kill_orphans, started_by};
use loops_store::Store;

use super::options::DaemonOptions;

/// Recovers the runs of dead daemons of this host; returns how many.
pub(super) fn recover_dead_daemons(
    store: &Store,
    opts: &DaemonOptions<'_>,
    runner_id: &str,
) -> usize {
    let log = opts.log;
    let runs = match store.running_runs_of_host(&opts.host, runner_id) {
        Ok(runs) => runs,
        Err(e) => {
            log(&format!("error: looking for runs of dead daemons: {e}"));
            return 0;
        }
    };
    let mut recovered = 0;
    for found in runs {
        let run = &found.run;
        let Some(claimant) = run.claimed_by.as_deref() else {
            continue;
        };
        let Some(pid) = claimant_pid(claimant) else {
            continue;
        };
        let claimed_at = run.started_at.unwrap_or(run.created_at);
        if pid == opts.pid || started_by(pid, claimed_at) {
            continue;
        }
        let steps = store.step_processes(&run.id).unwrap_or_else(|e| {
            log(&format!(
                "error: reading the step processes of run {}: {e}",
                run.id
            ));
            Vec::new()
        });
        for process in found.process.into_iter().chain(steps) {
            match kill_orphans(Orphans::Group(process), opts.orphan_grace) {
                OrphanKill::Killed { forced } => log(&format!(
                    "killed orphaned process group {} of run {}{}",
                    process.pid,
                    run.id,
                    if forced { " (SIGKILL)" } else { "" }
                )),
                OrphanKill::NotVerified => log(&format!(
                    "left process {} of run {} alone: its identity could not be verified",
                    process.pid, run.id
                )),
                OrphanKill::Survived => log(&format!(
                    "process group {} of run {} survived SIGKILL",
                    process.pid, run.id
                )),
                OrphanKill::Gone => {}
            }
        }
        // The processes that left the run's group (`setsid`, a double fork)
        // carry its spawn id. A run whose spawn the dead daemon had not yet
        // recorded still has its claim token, which is its spawn id (see
        // `Dispatcher::start`): the group may have started already.
        let spawn_id = found
            .spawn_id
            .as_deref()
            .or_else(|| crate::dispatch::claim_spawn_id(run));
        if let Some(spawn_id) = spawn_id {
            match kill_orphans(Orphans::Carriers(spawn_id), opts.orphan_grace) {
                OrphanKill::Killed { forced } => log(&format!(
                    "killed orphaned processes of run {} that left its process group{}",
                    run.id,
                    if forced { " (SIGKILL)" } else { "" }
                )),
                OrphanKill::Survived => log(&format!(
                    "processes of run {} that left its process group survived SIGKILL",
                    run.id
                )),
                OrphanKill::Gone | OrphanKill::NotVerified => {}
            }
        }
        let reason = format!(
            "daemon {} exited before the run completed",
            claimant_label(claimant)
        );
        let now: Timestamp = opts.clock.now();
        match store.abandon_orphaned_run(&run.id, claimant, &reason, now) {
            Ok(Some(r)) => {
                recovered += 1;
                log(&format!(
                    "run {} abandoned: {} slot={} attempt={} ({reason})",
                    r.run.id, r.run.loop_name, r.run.scheduled_for, r.run.attempt
                ));
            }
            Ok(None) => log(&format!(
                "run {} of dead daemon {} was left running: its process is still alive",
                run.id,
                claimant_label(claimant)
            )),
            Err(e) => log(&format!("error: recovering run {}: {e}", run.id)),
        }
    }
    recovered
}

/// The pid of a daemon runner id `<host>:<pid>:<leaseId>` (SPEC §0).
fn claimant_pid(claimant: &str) -> Option<u32> {
    let mut parts = claimant.rsplitn(3, ':');
    let _lease = parts.next()?;
    parts.next()?.parse().ok()
}

/// `<host>:<pid>`, without the lease id.
fn claimant_label(claimant: &str) -> &str {
    claimant.rsplit_once(':').map_or(claimant, |(head, _)| head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runner_ids_split_from_the_right() {
        assert_eq!(claimant_pid("host-a:123:0123456789ab"), Some(123));
        assert_eq!(claimant_pid("host-a:x:0123456789ab"), None);
        assert_eq!(claimant_pid("manual:12"), None);
        assert_eq!(claimant_label("host-a:123:0123456789ab"), "host-a:123");
    }
}
