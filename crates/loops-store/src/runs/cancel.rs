//! `loops cancel` in the store (issue 28): a cancel request written on the
//! running run's row, and the requests a runner reads back.
//!
//! The request goes through the database so that it reaches the runner
//! holding the run wherever it runs (PostgreSQL: any host). The runner
//! reads the requests on its runs ([`Store::cancel_requests`]) at each
//! turn, stops the run's process group, and finalizes it; the finalize,
//! and a lease recovery, record a run with a request as `cancelled`
//! (`runs/ops.rs`, `runs/recover/ops.rs`), which is never retried and
//! counts toward neither streak (`loops_core::plan_advance`).
//!
//! Invariants: only a running run takes a request; a second request
//! keeps the first one's time and requester (the grace is the latest).

use loops_core::{LoopId, LoopRun, RunId, Timestamp};

use crate::Store;
use crate::backend::CancelOps;
use crate::columns::{self, run_columns};
use crate::error::Result;
use crate::runs::ops::{query_run, run_returning};
use crate::sql::{Col, Db, Fields};

/// What a cancel request of one run found.
#[derive(Debug, Clone, PartialEq)]
pub enum CancelOutcome {
    /// The run was running: the request is recorded on it.
    Requested(LoopRun),
    /// The run had already finished; nothing was written.
    NotRunning(LoopRun),
}

/// A cancel request on a run the runner holds: what it must act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelRequest {
    /// The run to stop.
    pub run_id: RunId,
    /// Who asked: `user@host` or `mcp`.
    pub by: String,
    /// The grace between SIGTERM and SIGKILL the request asks for, in
    /// milliseconds; `None` leaves the runner's own.
    pub grace_ms: Option<u64>,
}

/// The outcome of a request, from the row the guarded write returned
/// (`written`, when the run was running) and, when it wrote nothing, the
/// row as stored: `None` when there is no such run.
pub(crate) fn outcome(written: Option<LoopRun>, stored: Option<LoopRun>) -> Option<CancelOutcome> {
    match written {
        Some(run) => Some(CancelOutcome::Requested(run)),
        None => stored.map(CancelOutcome::NotRunning),
    }
}

/// The `SET` of a request: `?2` now, `?3` who asks, `?4` the grace; a
/// second request keeps the first one's time and author.
macro_rules! request_set {
    () => {
        "UPDATE loop_runs SET cancel_requested_at = COALESCE(cancel_requested_at, ?2),
           cancelled_by = COALESCE(cancelled_by, ?3), cancel_grace_ms = ?4, updated_at = ?2"
    };
}

/// Records a request on running run `?1`.
const REQUEST_RUN: &str = concat!(
    request_set!(),
    " WHERE id = ?1 AND status = 'running' RETURNING ",
    run_columns!()
);

/// Records a request on every running run of loop `?1`.
const REQUEST_LOOP: &str = concat!(
    request_set!(),
    " WHERE loop_id = ?1 AND status = 'running' RETURNING ",
    run_columns!()
);

/// The requests on the running runs claimed by `?1`.
const REQUESTS: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM loop_runs WHERE status = 'running' AND claimed_by = ?1
       AND cancel_requested_at IS NOT NULL"
);

/// A [`run_columns!`] row with a request → the request.
fn request_row(row: &dyn Fields) -> Col<CancelRequest> {
    let run = columns::run_row(row)?;
    Ok(CancelRequest {
        run_id: run.id,
        by: run.cancelled_by.unwrap_or_else(|| "unknown".to_owned()),
        grace_ms: columns::run_cancel_grace_ms(row)?,
    })
}

impl<D: Db> CancelOps for D {
    fn request_cancel(
        &self,
        id: &RunId,
        by: &str,
        grace_ms: u64,
        now: Timestamp,
    ) -> Result<Option<CancelOutcome>> {
        self.write(|c| {
            let written = run_returning(
                c,
                REQUEST_RUN,
                &[id.as_str().into(), now.into(), by.into(), grace_ms.into()],
                "requesting a run's cancel",
            )?;
            let stored = match written {
                Some(_) => None,
                None => query_run(c, id)?,
            };
            let decided = outcome(written, stored);
            if let Some(CancelOutcome::Requested(run)) = &decided {
                c.notify(run.loop_id.as_str())?;
            }
            Ok(decided)
        })
    }

    fn request_cancel_loop(
        &self,
        loop_id: &LoopId,
        by: &str,
        grace_ms: u64,
        now: Timestamp,
    ) -> Result<Vec<LoopRun>> {
        self.write(|c| {
            let runs = c.query_vec(
                REQUEST_LOOP,
                &[
                    loop_id.as_str().into(),
                    now.into(),
                    by.into(),
                    grace_ms.into(),
                ],
                ("loop_runs", "requesting the cancel of a loop's runs"),
                columns::run_row,
            )?;
            if !runs.is_empty() {
                c.notify(loop_id.as_str())?;
            }
            Ok(runs)
        })
    }

    fn cancel_requests(&self, claimed_by: &str) -> Result<Vec<CancelRequest>> {
        self.read(|c| {
            c.query_vec(
                REQUESTS,
                &[claimed_by.into()],
                ("loop_runs", "reading cancel requests"),
                request_row,
            )
        })
    }
}

impl Store {
    /// Asks for running run `id` to be cancelled (issue 28), by `by`
    /// (`user@host` or `mcp`), with `grace_ms` between SIGTERM and
    /// SIGKILL. The runner holding the run, on any host, sees the request
    /// at its next turn, stops the run and records it `cancelled`.
    ///
    /// `None` when there is no such run; [`CancelOutcome::NotRunning`]
    /// when it has finished, and nothing is written.
    pub fn request_cancel(
        &self,
        id: &RunId,
        by: &str,
        grace_ms: u64,
        now: Timestamp,
    ) -> Result<Option<CancelOutcome>> {
        self.backend().request_cancel(id, by, grace_ms, now)
    }

    /// [`Store::request_cancel`] for every running run of `loop_id`: the
    /// runs the request was recorded on.
    pub fn request_cancel_loop(
        &self,
        loop_id: &LoopId,
        by: &str,
        grace_ms: u64,
        now: Timestamp,
    ) -> Result<Vec<LoopRun>> {
        self.backend()
            .request_cancel_loop(loop_id, by, grace_ms, now)
    }

    /// The cancel requests on the running runs `claimed_by` holds: what a
    /// runner reads at each turn while it has runs in flight.
    pub fn cancel_requests(&self, claimed_by: &str) -> Result<Vec<CancelRequest>> {
        self.backend().cancel_requests(claimed_by)
    }
}

#[cfg(test)]
mod tests {
    use loops_core::RunStatus;

    use super::{CancelOutcome, outcome};
    use crate::runs::advance::tests::a_run;

    #[test]
    fn only_a_running_run_takes_a_request() {
        let running = a_run(1, RunStatus::Running);
        let done = a_run(1, RunStatus::Succeeded);
        assert_eq!(
            outcome(Some(running.clone()), None),
            Some(CancelOutcome::Requested(running))
        );
        assert_eq!(
            outcome(None, Some(done.clone())),
            Some(CancelOutcome::NotRunning(done))
        );
        assert_eq!(outcome(None, None), None);
    }
}
