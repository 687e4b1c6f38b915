//! Trying a turn or the run's end again after a transient store error: the
//! backoff, and the runner's state saved before a turn to go back to.

use std::collections::HashMap;
use std::time::Duration;

use loops_core::{WorkflowRun, WorkflowRunStatus};
use loops_exec::CancelToken;

use super::super::plan::PlanSnapshot;
use super::{InFlight, Runner};

/// The first wait before a turn or the run's end whose write failed on a
/// transient store error is tried again; it doubles up to
/// [`RETRY_MAX`].
pub(super) const RETRY_FIRST: Duration = Duration::from_millis(100);
/// The longest wait between two attempts.
pub(super) const RETRY_MAX: Duration = Duration::from_secs(5);

/// The runner's state before a turn, restored when the turn's transaction
/// did not commit, so the turn can be applied again.
pub(super) struct Snapshot {
    plan: PlanSnapshot,
    inflight: HashMap<usize, InFlight>,
    run: WorkflowRun,
    outcome: WorkflowRunStatus,
    reason: Option<String>,
    halted: bool,
    ended: bool,
    stopped: bool,
    timed_out: bool,
}

impl Runner<'_> {
    /// The state a turn starts from (see [`Snapshot`]).
    pub(super) fn snapshot(&self) -> Snapshot {
        Snapshot {
            plan: self.plan.snapshot(),
            inflight: self.inflight.clone(),
            run: self.run.clone(),
            outcome: self.outcome,
            reason: self.reason.clone(),
            halted: self.halted,
            ended: self.ended,
            stopped: self.stopped,
            timed_out: self.timed_out,
        }
    }

    /// Goes back to `snapshot` after a turn that did not commit. A kill the
    /// turn already sent stays sent; its step reports as killed.
    pub(super) fn restore(&mut self, snapshot: Snapshot) {
        self.plan.restore(snapshot.plan);
        self.inflight = snapshot.inflight;
        self.run = snapshot.run;
        self.outcome = snapshot.outcome;
        self.reason = snapshot.reason;
        self.halted = snapshot.halted;
        self.ended = snapshot.ended;
        self.stopped = snapshot.stopped;
        self.timed_out = snapshot.timed_out;
    }

    /// The stop token fired: a write that keeps failing is given up then,
    /// and the run ends with the error.
    pub(super) fn stop_fired(&self) -> bool {
        self.opts.stop.is_some_and(CancelToken::is_cancelled)
    }
}
