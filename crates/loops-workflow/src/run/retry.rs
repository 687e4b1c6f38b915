//! Trying a turn or the run's end again after a transient store error: the
//! backoff, and the runner's state saved before a turn to go back to.

use std::collections::HashMap;
use std::time::Duration;

use loops_core::WorkflowRun;
use loops_exec::CancelToken;

use super::ending::{Deadline, Ending};
use super::{InFlight, Runner};
use crate::plan::PlanSnapshot;

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
    ending: Ending,
    deadline: Deadline,
}

impl Runner<'_> {
    /// The state a turn starts from (see [`Snapshot`]).
    pub(super) fn snapshot(&self) -> Snapshot {
        Snapshot {
            plan: self.plan.snapshot(),
            inflight: self.inflight.clone(),
            run: self.run.clone(),
            ending: self.ending.clone(),
            deadline: self.deadline,
        }
    }

    /// Goes back to `snapshot` after a turn that did not commit. A kill the
    /// turn already sent stays sent; its step reports as killed.
    pub(super) fn restore(&mut self, snapshot: Snapshot) {
        self.plan.restore(snapshot.plan);
        self.inflight = snapshot.inflight;
        self.run = snapshot.run;
        self.ending = snapshot.ending;
        self.deadline = snapshot.deadline;
    }

    /// The stop token fired: a write that keeps failing is given up then,
    /// and the run ends with the error.
    pub(super) fn stop_fired(&self) -> bool {
        self.opts.stop.is_some_and(CancelToken::is_cancelled)
    }
}
