//! What a tick did ([`TickResult`], SPEC §3.1 step 7): the runs it left
//! running, completed, skipped and recovered, and the loops that expired.
//! `loops tick --json` prints it as is.

use loops_core::{Loop, LoopRun, RunStatus};
use serde::Serialize;

/// What a tick did (SPEC §3.1 step 7). The JSON has exactly these keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TickResult {
    /// Runs left running (only in fence and skip edge cases).
    pub claimed: Vec<LoopRun>,
    /// Runs that finished.
    pub completed: Vec<LoopRun>,
    /// Overlap skips.
    pub skipped: Vec<LoopRun>,
    /// Runs abandoned by lease recovery.
    pub recovered: Vec<LoopRun>,
    /// Loops that expired.
    pub expired: Vec<Loop>,
}

impl TickResult {
    /// True when the tick changed nothing.
    pub fn is_empty(&self) -> bool {
        self.claimed.is_empty()
            && self.completed.is_empty()
            && self.skipped.is_empty()
            && self.recovered.is_empty()
            && self.expired.is_empty()
    }

    /// Sorts a run into the result (SPEC §3.1 step 5).
    pub(crate) fn sort(&mut self, run: LoopRun) {
        match run.status {
            RunStatus::Running => self.claimed.push(run),
            RunStatus::Skipped => self.skipped.push(run),
            _ => self.completed.push(run),
        }
    }
}
