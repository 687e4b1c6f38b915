//! Ending a run on the daemon's behalf rather than the job's: releasing a
//! run that a shutdown interrupted, and abandoning the runs of a daemon
//! that died (SPEC §9 items 16–18).
//!
//! **Release.** SPEC §9 item 17: the original kills in-flight runs on stop
//! and records them as failed, which consumes an attempt. Here a run that
//! was still executing when the daemon's grace period ran out is recorded
//! as `abandoned` with the error [`INTERRUPTED_BY_SHUTDOWN`], keeping its
//! attempt number, and its loop is not advanced. The next claim of the slot
//! recognizes the released row by that error and runs it again under the
//! same attempt number, even when it was the last one. Linked
//! workflow runs are cancelled and their idempotency key for this attempt
//! is cleared, so the re-run starts a fresh workflow run instead of
//! returning the interrupted one.
//!
//! **Orphans.** A daemon killed with SIGKILL leaves its runs `running`
//! under leases that may last 30 minutes. The next daemon on the same host
//! knows the claimant is gone and abandons those runs at once with
//! [`Store::abandon_orphaned_run`], after it has torn down their process
//! groups. The usual recovery rules apply otherwise: the row must still be
//! running under that claimant, its recorded process and linked step
//! processes must be dead, linked workflow runs are failed, and the loop is
//! advanced as after a failure, so retries follow the loop's policy.
//!
//! **Settling.** A run that finishes while its loop is paused is recorded,
//! but the loop is not advanced (an advance never overwrites a pause, SPEC
//! §9 item 8). Resumed, the loop is due on the slot that already ran, which
//! no runner can claim again. [`Store::settle_finished_slot`] advances such
//! a loop past that slot, as the run's finalize would have.

use loops_core::{
    ExecutorResult, Loop, LoopRun, LoopStatus, ProcessRef, RunId, Timestamp, WorkflowRunId,
};

use super::advance::{Advance, advance_after, lock_loop};
use super::linked::release_linked_workflow_runs;
use super::ops::{RunHost, RunProcess, lock_loop_of_run, query_slot, run_returning};
use super::recover::Recovered;
use super::takeover::live_step_process;
use crate::Store;
use crate::backend::ReleaseOps;
use crate::columns::{self, run_columns};
use crate::error::Result;
use crate::runs::may_run_again;
use crate::workflow_runs::ops::fail_linked_workflow_runs;

/// The error recorded on a run released by a daemon shutdown.
pub const INTERRUPTED_BY_SHUTDOWN: &str =
    "interrupted by daemon shutdown; not counted as an attempt";

/// The result of [`Store::release_run`].
#[derive(Debug, Clone, PartialEq)]
pub struct Released {
    /// The run as stored: abandoned, with its attempt number.
    pub run: LoopRun,
    /// The linked workflow runs that were cancelled with it.
    pub workflow_runs_cancelled: Vec<WorkflowRunId>,
}

impl Store {
    /// Records that a shutdown interrupted `run_id` without counting the
    /// attempt (see the module docs), in one `BEGIN IMMEDIATE` transaction.
    ///
    /// `result` is what the cancelled executor returned; its output, exit
    /// code, pid and duration are kept for the record, and its error is
    /// replaced by [`INTERRUPTED_BY_SHUTDOWN`]. Applies only while the run
    /// is running and claimed by `claimed_by`; otherwise nothing is written
    /// and `None` is returned. The loop is never advanced.
    pub fn release_run(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        claimed_by: &str,
        now: Timestamp,
    ) -> Result<Option<Released>> {
        self.backend().release_run(run_id, result, claimed_by, now)
    }

    /// Abandons a running run whose claimant, a daemon, is known to be
    /// gone, without waiting for its lease to expire (SPEC §9 item 16), in
    /// one `BEGIN IMMEDIATE` transaction.
    ///
    /// Applies only while the row is running and claimed by `claimed_by`,
    /// and only when neither its recorded process nor a linked step process
    /// is alive; the caller tears those down first. The run becomes
    /// abandoned with error `reason`, its linked workflow runs are failed
    /// with the same reason, and its loop is advanced as after a failure.
    /// Returns `None` when nothing was written. On PostgreSQL only a
    /// claimant of this host (the first part of its runner id, or the host
    /// its claim recorded when the runner id names none) can be known
    /// gone; another host's runs are left to lease recovery.
    pub fn abandon_orphaned_run(
        &self,
        run_id: &RunId,
        claimed_by: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<Option<Recovered>> {
        self.backend()
            .abandon_orphaned_run(run_id, claimed_by, reason, now)
    }

    /// Advances `lp` past `slot` when the slot's run is already over for
    /// good (succeeded, skipped, or failed on its last attempt), as the
    /// run's own finalize would have, in one `BEGIN IMMEDIATE` transaction.
    ///
    /// Applies only while the loop is active and still due on that slot
    /// (its pending retry or its `nextRunAt`). Returns the advanced loop,
    /// or `None` when nothing was written.
    pub fn settle_finished_slot(
        &self,
        lp: &Loop,
        slot: Timestamp,
        now: Timestamp,
    ) -> Result<Option<Loop>> {
        self.backend().settle_finished_slot(lp, slot, now)
    }
}

/// What a shutdown makes of a run it interrupted: abandoned at the later
/// of the executor's finish and `now`, keeping the executor's output, exit
/// code, pid and duration for the record, with the error
/// [`INTERRUPTED_BY_SHUTDOWN`] in place of the executor's, and its attempt
/// number (SPEC §9 item 17).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Release<'a> {
    /// `finished_at`, also the row's `updated_at`.
    pub(crate) finished_at: Timestamp,
    /// The error recorded: always [`INTERRUPTED_BY_SHUTDOWN`].
    pub(crate) error: &'static str,
    /// The cancelled executor's result, whose output is kept.
    pub(crate) result: &'a ExecutorResult,
}

/// The [`Release`] of a run interrupted with `result` at `now`.
pub(crate) fn release_of(result: &ExecutorResult, now: Timestamp) -> Release<'_> {
    Release {
        finished_at: result.finished_at.max(now),
        error: INTERRUPTED_BY_SHUTDOWN,
        result,
    }
}

/// Whether an orphaned run, claimed by a daemon known to be gone, may be
/// abandoned now: only when its processes can be judged here (`visible`),
/// and neither its recorded process nor a linked step process is alive.
/// Each probe is asked only while the answer is still open, the steps
/// last, as they read the database.
pub(crate) fn may_abandon(
    visible: bool,
    process_alive: impl FnOnce() -> bool,
    steps_alive: impl FnOnce() -> Result<bool>,
) -> Result<bool> {
    Ok(visible && !process_alive() && !steps_alive()?)
}

/// Whether `fresh` is still due on `slot`: active, with its pending retry
/// (else its `nextRunAt`) at or before the slot.
pub(crate) fn due_on(fresh: &Loop, slot: Timestamp) -> bool {
    let due_slot = fresh.retry_scheduled_for.or(fresh.next_run_at);
    fresh.status == LoopStatus::Active && due_slot.is_some_and(|d| d <= slot)
}

/// Whether `run` is over for good under `max_attempts`: succeeded or
/// skipped, or failed with no attempt left. Anything else is claimed again
/// rather than settled.
pub(crate) fn over_for_good(run: &LoopRun, max_attempts: u32) -> bool {
    run.status.is_terminal()
        || (run.status.is_retryable()
            && !may_run_again(run.status, run.attempt, run.error.as_deref(), max_attempts))
}

/// A running run held by `claimed_by`, with its process; on PostgreSQL its
/// row is locked until the transaction ends.
macro_rules! held_run_sql {
    ($lock:literal) => {
        concat!(
            "SELECT ",
            run_columns!(),
            " FROM loop_runs WHERE id = ?1 AND status = 'running' AND claimed_by = ?2",
            $lock
        )
    };
}

impl<D: RunHost> ReleaseOps for D {
    fn release_run(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        claimed_by: &str,
        now: Timestamp,
    ) -> Result<Option<Released>> {
        let release = release_of(result, now);
        self.write(|c| {
            // The loop first, as every writer of its runs, although it is
            // not advanced: a purge of the loop closes the same workflow
            // runs, and the two must not lock them in opposite orders.
            lock_loop_of_run(c, run_id)?;
            let Some(run) = run_returning(
                c,
                concat!(
                    "UPDATE loop_runs SET status = 'abandoned',
                       finished_at = ?3, lease_expires_at = NULL,
                       pid_start_ms = CASE WHEN pid IS NOT DISTINCT FROM ?4
                                           THEN pid_start_ms ELSE NULL END,
                       pid = ?4, exit_code = ?5, duration_ms = ?6, stdout = ?7, stderr = ?8,
                       error = ?9, updated_at = ?3
                     WHERE id = ?1 AND status = 'running' AND claimed_by = ?2
                     RETURNING ",
                    run_columns!()
                ),
                &[
                    run_id.as_str().into(),
                    claimed_by.into(),
                    release.finished_at.into(),
                    release.result.pid.into(),
                    release.result.exit_code.into(),
                    release.result.duration_ms.into(),
                    (&release.result.stdout).into(),
                    (&release.result.stderr).into(),
                    release.error.into(),
                ],
                "releasing an interrupted run",
            )?
            else {
                return Ok(None);
            };
            let workflow_runs_cancelled = release_linked_workflow_runs(c, &run, now)?;
            // The slot may be claimed again at once, by any daemon.
            c.notify(run.loop_id.as_str())?;
            Ok(Some(Released {
                run,
                workflow_runs_cancelled,
            }))
        })
    }

    fn abandon_orphaned_run(
        &self,
        run_id: &RunId,
        claimed_by: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<Option<Recovered>> {
        self.write(|c| {
            lock_loop_of_run(c, run_id)?;
            let sql = c
                .dialect()
                .pick(held_run_sql!(""), held_run_sql!(" FOR NO KEY UPDATE"));
            let held: Option<RunProcess> = c.query_opt(
                sql,
                &[run_id.as_str().into(), claimed_by.into()],
                ("loop_runs", "re-reading an orphaned run"),
                columns::run_and_process,
            )?;
            let Some((run, process)) = held else {
                return Ok(None);
            };
            let visible = self.sees_processes_of(&run);
            let process_alive = || process.is_some_and(|p: ProcessRef| self.liveness().is_alive(p));
            if !may_abandon(visible, process_alive, || {
                live_step_process(c, self.liveness(), run_id)
            })? {
                return Ok(None);
            }
            let Some(run) = run_returning(
                c,
                concat!(
                    "UPDATE loop_runs SET status = 'abandoned', finished_at = ?3,
                       lease_expires_at = NULL, error = ?4, updated_at = ?3
                     WHERE id = ?1 AND status = 'running' AND claimed_by = ?2
                     RETURNING ",
                    run_columns!()
                ),
                &[
                    run_id.as_str().into(),
                    claimed_by.into(),
                    now.into(),
                    reason.into(),
                ],
                "abandoning an orphaned run",
            )?
            else {
                return Ok(None);
            };
            let workflow_runs_failed = fail_linked_workflow_runs(c, &run.id, reason, now)?;
            let (advance, loop_) = advance_after(c, &run, now)?;
            c.notify(run.loop_id.as_str())?;
            Ok(Some(Recovered {
                run,
                workflow_runs_failed,
                loop_,
                advance,
            }))
        })
    }

    fn settle_finished_slot(
        &self,
        lp: &Loop,
        slot: Timestamp,
        now: Timestamp,
    ) -> Result<Option<Loop>> {
        self.write(|c| {
            let Some(fresh) = lock_loop(c, &lp.id)? else {
                return Ok(None);
            };
            if !due_on(&fresh, slot) {
                return Ok(None);
            }
            let Some(run) = query_slot(c, &lp.id, slot)? else {
                return Ok(None);
            };
            if !over_for_good(&run, fresh.max_attempts) {
                return Ok(None);
            }
            match advance_after(c, &run, now)? {
                (Advance::Advanced(_), stored) => {
                    c.notify(lp.id.as_str())?;
                    Ok(stored)
                }
                _ => Ok(None),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use loops_core::{ExecutorStatus, RunStatus};

    use super::*;
    use crate::runs::advance::tests::{a_loop, a_run, at};

    #[test]
    fn a_release_keeps_the_output_and_records_the_shutdown() {
        let result = ExecutorResult {
            status: ExecutorStatus::Failed,
            exit_code: Some(143),
            stdout: "partial".into(),
            stderr: String::new(),
            error: Some("cancelled".into()),
            pid: Some(42),
            started_at: at("2026-01-01T00:01:00Z"),
            finished_at: at("2026-01-01T00:01:30Z"),
            duration_ms: 30_000,
            facts: Default::default(),
        };
        let late = release_of(&result, at("2026-01-01T00:02:00Z"));
        assert_eq!(late.finished_at, at("2026-01-01T00:02:00Z"));
        assert_eq!(late.error, INTERRUPTED_BY_SHUTDOWN);
        assert_eq!(late.result.stdout, "partial");
        let early = release_of(&result, at("2026-01-01T00:01:00Z"));
        assert_eq!(early.finished_at, at("2026-01-01T00:01:30Z"));
    }

    #[test]
    fn a_released_run_runs_again_as_the_same_attempt() {
        let mut run = a_run(3, RunStatus::Abandoned);
        run.error = Some(INTERRUPTED_BY_SHUTDOWN.into());
        assert!(may_run_again(
            run.status,
            run.attempt,
            run.error.as_deref(),
            3
        ));
        run.error = Some("run lease expired before completion".into());
        assert!(!may_run_again(
            run.status,
            run.attempt,
            run.error.as_deref(),
            3
        ));
    }

    #[test]
    fn an_orphan_is_abandoned_only_when_nothing_of_it_is_alive() {
        let steps = |alive| move || Ok(alive);
        assert!(may_abandon(true, || false, steps(false)).unwrap());
        assert!(!may_abandon(true, || true, steps(false)).unwrap());
        assert!(!may_abandon(true, || false, steps(true)).unwrap());
        assert!(!may_abandon(false, || false, steps(false)).unwrap());
        // A probe is not asked once the answer is known: another host's
        // pid means nothing here, and the steps cost a read.
        let unasked = || -> bool { panic!("probed the process") };
        let unread = || -> Result<bool> { panic!("read the steps") };
        assert!(!may_abandon(false, unasked, unread).unwrap());
        assert!(!may_abandon(true, || true, unread).unwrap());
    }

    fn settles(lp: &Loop, slot: Timestamp, run: &LoopRun) -> bool {
        due_on(lp, slot) && over_for_good(run, lp.max_attempts)
    }

    #[test]
    fn a_slot_settles_only_when_its_run_is_over_for_good() {
        let slot = at("2026-01-01T00:01:00Z");
        let mut lp = a_loop();
        lp.next_run_at = Some(slot);
        lp.max_attempts = 2;
        assert!(settles(&lp, slot, &a_run(1, RunStatus::Succeeded)));
        assert!(settles(&lp, slot, &a_run(1, RunStatus::Skipped)));
        assert!(settles(&lp, slot, &a_run(2, RunStatus::Failed)));
        // Attempts left, or still running: claimed again instead.
        assert!(!settles(&lp, slot, &a_run(1, RunStatus::Failed)));
        assert!(!settles(&lp, slot, &a_run(1, RunStatus::Running)));
        let mut released = a_run(2, RunStatus::Abandoned);
        released.error = Some(INTERRUPTED_BY_SHUTDOWN.into());
        assert!(!settles(&lp, slot, &released));
        // Not due on that slot, or not active.
        lp.next_run_at = Some(at("2026-01-01T00:02:00Z"));
        assert!(!settles(&lp, slot, &a_run(1, RunStatus::Succeeded)));
        lp.retry_scheduled_for = Some(slot);
        assert!(settles(&lp, slot, &a_run(1, RunStatus::Succeeded)));
        lp.status = LoopStatus::Paused;
        assert!(!settles(&lp, slot, &a_run(1, RunStatus::Succeeded)));
        lp.status = LoopStatus::Active;
        lp.retry_scheduled_for = None;
        lp.next_run_at = None;
        assert!(!settles(&lp, slot, &a_run(1, RunStatus::Succeeded)));
    }
}
