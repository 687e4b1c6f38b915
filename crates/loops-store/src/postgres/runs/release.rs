//! The PostgreSQL side of [`crate::runs::release`].

use loops_core::{ExecutorResult, Loop, LoopStatus, RunId, Timestamp};

use super::advance::advance_after;
use super::linked::release_linked_workflow_runs;
use super::{lock_loop_of_run, query_slot, run_returning};
use crate::backend::ReleaseOps;
use crate::error::Result;
use crate::postgres::Postgres;
use crate::postgres::loops::lock_loop;
use crate::postgres::rows::{self, ts};
use crate::postgres::workflow_runs::fail_linked_workflow_runs;
use crate::runs::{Advance, INTERRUPTED_BY_SHUTDOWN, Recovered, Released, may_run_again};
use crate::sqlite::rows::run_columns;

impl ReleaseOps for Postgres {
    fn release_run(
        &self,
        run_id: &RunId,
        result: &ExecutorResult,
        claimed_by: &str,
        now: Timestamp,
    ) -> Result<Option<Released>> {
        self.write_tx(|c| {
            // The loop first, as every writer of its runs, although it is
            // not advanced: a purge of the loop closes the same workflow
            // runs, and the two must not lock them in opposite orders.
            lock_loop_of_run(c, run_id)?;
            let Some(run) = run_returning(
                c,
                concat!(
                    "UPDATE loop_runs SET status = 'abandoned',
                       finished_at = $3, lease_expires_at = NULL,
                       pid_start_ms = CASE WHEN pid IS NOT DISTINCT FROM $4
                                           THEN pid_start_ms ELSE NULL END,
                       pid = $4, exit_code = $5, duration_ms = $6, stdout = $7, stderr = $8,
                       error = $9, updated_at = $3
                     WHERE id = $1 AND status = 'running' AND claimed_by = $2
                     RETURNING ",
                    run_columns!()
                ),
                &[
                    &run_id.as_str(),
                    &claimed_by,
                    &ts(result.finished_at.max(now)),
                    &result.pid.map(i64::from),
                    &result.exit_code.map(i64::from),
                    &result.duration_ms,
                    &result.stdout,
                    &result.stderr,
                    &INTERRUPTED_BY_SHUTDOWN,
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
        self.write_tx(|c| {
            lock_loop_of_run(c, run_id)?;
            let Some((run, process)) = c.query_opt(
                concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM loop_runs WHERE id = $1 AND status = 'running' AND claimed_by = $2
                     FOR NO KEY UPDATE"
                ),
                &[&run_id.as_str(), &claimed_by],
                ("loop_runs", "re-reading an orphaned run"),
                rows::run_and_process,
            )?
            else {
                return Ok(None);
            };
            // Only this host's processes can be known dead: another host's
            // run is recovered by lease expiry and grace instead.
            if !self.claimed_here(&run) {
                return Ok(None);
            }
            if process.is_some_and(|p| self.liveness.is_alive(p))
                || self.has_live_step_processes(c, run_id)?
            {
                return Ok(None);
            }
            let Some(run) = run_returning(
                c,
                concat!(
                    "UPDATE loop_runs SET status = 'abandoned', finished_at = $3,
                       lease_expires_at = NULL, error = $4, updated_at = $3
                     WHERE id = $1 AND status = 'running' AND claimed_by = $2
                     RETURNING ",
                    run_columns!()
                ),
                &[&run_id.as_str(), &claimed_by, &ts(now), &reason],
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
        self.write_tx(|c| {
            let Some(fresh) = lock_loop(c, &lp.id)? else {
                return Ok(None);
            };
            let due_slot = fresh.retry_scheduled_for.or(fresh.next_run_at);
            if fresh.status != LoopStatus::Active || due_slot.is_none_or(|d| d > slot) {
                return Ok(None);
            }
            let Some(run) = query_slot(c, &lp.id, slot)? else {
                return Ok(None);
            };
            // Over for good: succeeded or skipped, or failed with no attempt
            // left. Anything else is claimed again rather than settled.
            let over = run.status.is_terminal()
                || (run.status.is_retryable()
                    && !may_run_again(
                        run.status,
                        run.attempt,
                        run.error.as_deref(),
                        fresh.max_attempts,
                    ));
            if !over {
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
