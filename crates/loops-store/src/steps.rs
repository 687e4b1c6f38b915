//! Workflow step runs: lookups and the step transitions start, mark pid,
//! finalize and skip (SPEC §4.3 "Step transitions", §1.5 StepRun).
//!
//! Invariants:
//! - Every transition is a conditional `UPDATE` whose `WHERE` clause is the
//!   state machine of SPEC §1.5, run in a `BEGIN IMMEDIATE` transaction
//!   together with the event it records. A transition that does not apply
//!   changes nothing and writes no event.
//! - A step starts only while its run is running, and only from pending,
//!   failed or timed_out. Starting it twice fails the second time with
//!   [`StoreError::StepNotClaimable`]: this is the double-run guard of SPEC
//!   §6.3 step 5.
//! - A step's pid (and its start time, `pid_start_ms`) is set only while
//!   the step is running, and cleared by every transition out of running.

use loops_core::{ExecutorResult, ExecutorStatus, ProcessRef, StepRun, Timestamp, WorkflowRunId};

use crate::Store;
use crate::error::Result;

pub(crate) mod ops;

/// What [`Store::start_pooled_step_run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum StepStart {
    /// The step is running, as stored.
    Started(Box<StepRun>),
    /// The step's pool has `max_running` loop runs and steps running
    /// already (issue 30, `docs/triggers.md` Q2): nothing was written, and
    /// the step stays as it was, to be started when a place frees.
    PoolFull {
        /// The pool's name.
        pool: String,
        /// Its limit.
        max_running: u32,
    },
}

/// The result fields [`Store::finalize_step_run`] writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepOutcome {
    /// How the step ended; the event is `step_<status>`.
    pub status: ExecutorStatus,
    /// The finish; `now` when unset.
    pub finished_at: Option<Timestamp>,
    /// The exit code, when the process exited.
    pub exit_code: Option<i32>,
    /// The duration.
    pub duration_ms: Option<i64>,
    /// Captured stdout.
    pub stdout: Option<String>,
    /// Captured stderr.
    pub stderr: Option<String>,
    /// Why the step did not succeed.
    pub error: Option<String>,
}

impl StepOutcome {
    /// An outcome with only a status.
    pub fn new(status: ExecutorStatus) -> StepOutcome {
        StepOutcome {
            status,
            finished_at: None,
            exit_code: None,
            duration_ms: None,
            stdout: None,
            stderr: None,
            error: None,
        }
    }
}

impl From<&ExecutorResult> for StepOutcome {
    fn from(r: &ExecutorResult) -> StepOutcome {
        StepOutcome {
            status: r.status,
            finished_at: Some(r.finished_at),
            exit_code: r.exit_code,
            duration_ms: Some(r.duration_ms),
            stdout: Some(r.stdout.clone()),
            stderr: Some(r.stderr.clone()),
            error: r.error.clone(),
        }
    }
}

impl Store {
    /// The steps of a run in sequence (declaration) order.
    pub fn list_step_runs(&self, run_id: &WorkflowRunId) -> Result<Vec<StepRun>> {
        self.backend().list_step_runs(run_id)
    }

    /// One step of a run.
    pub fn get_step_run(&self, run_id: &WorkflowRunId, step_id: &str) -> Result<Option<StepRun>> {
        self.backend().get_step_run(run_id, step_id)
    }

    /// Starts a step (SPEC §4.3 "Start"): pending, failed or timed_out →
    /// running, only while the run is running. The start becomes `now`, the
    /// previous results and pid are cleared, and `step_started` is appended.
    ///
    /// Fails with [`StoreError::StepNotFound`](crate::StoreError::StepNotFound)
    /// when the step does not exist and with
    /// [`StoreError::StepNotClaimable`](crate::StoreError::StepNotClaimable)
    /// (`workflow step is not claimable: <r>/<s> status=<current>`) when it is in
    /// another state or its run is not running; nothing changes then.
    pub fn start_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        now: Timestamp,
    ) -> Result<StepRun> {
        match self.start_pooled_step_run(run_id, step_id, None, now)? {
            StepStart::Started(step) => Ok(*step),
            StepStart::PoolFull { .. } => {
                unreachable!("a step in no pool is never refused for one")
            }
        }
    }

    /// [`Store::start_step_run`] for a step that holds a place in `pool`
    /// while it runs (issue 30, `docs/triggers.md` Q2). In the start's
    /// transaction it locks the pool's row (PostgreSQL; SQLite's write
    /// lock), counts the pool's running loop runs and steps, and answers
    /// [`StepStart::PoolFull`] without writing anything when they reach
    /// its limit. Otherwise the step starts as [`Store::start_step_run`]
    /// starts it and records `pool`, so loop claims and step starts of the
    /// pool count it until it leaves running (or its workflow run ends).
    /// A pool that does not exist limits nothing.
    pub fn start_pooled_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        pool: Option<&str>,
        now: Timestamp,
    ) -> Result<StepStart> {
        self.backend().start_step_run(run_id, step_id, pool, now)
    }

    /// Records the child process of a running step (SPEC §4.3 "Mark pid"),
    /// with its start time so a reused pid is not mistaken for it (SPEC §9
    /// item 14). A step that is no longer running is left unchanged.
    ///
    /// Returns whether the pid was recorded, without reading the step back: a
    /// runner records one for every step it spawns and has no use for the row.
    /// Fails with [`StoreError::StepNotFound`](crate::StoreError::StepNotFound).
    pub fn mark_step_pid(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        process: ProcessRef,
        now: Timestamp,
    ) -> Result<bool> {
        self.backend().mark_step_pid(run_id, step_id, process, now)
    }

    /// Finishes a running step with `outcome` (SPEC §4.3 "Finalize") and
    /// clears its pid. When the row changed, `step_<status>` is appended
    /// with `{exitCode?, error?}`; a step that is not running is left
    /// unchanged and no event is written.
    ///
    /// Returns the stored step; fails with
    /// [`StoreError::StepNotFound`](crate::StoreError::StepNotFound).
    pub fn finalize_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        outcome: &StepOutcome,
        now: Timestamp,
    ) -> Result<StepRun> {
        self.backend()
            .finalize_step_run(run_id, step_id, outcome, now)
    }

    /// Skips a pending or running step (SPEC §4.3 "Skip"): it becomes
    /// skipped with `error = reason` and no pid, and `step_skipped`
    /// `{reason}` is appended. A step in another state is left unchanged and
    /// no event is written.
    ///
    /// Returns the stored step; fails with
    /// [`StoreError::StepNotFound`](crate::StoreError::StepNotFound).
    pub fn skip_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<StepRun> {
        self.backend().skip_step_run(run_id, step_id, reason, now)
    }

    /// Skips every pending or running step of a run in sequence order, each
    /// with its own `step_skipped` event, in one transaction (SPEC §6.3
    /// step 3). Returns the steps it skipped.
    pub fn skip_open_steps(
        &self,
        run_id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<Vec<StepRun>> {
        self.backend().skip_open_steps(run_id, reason, now)
    }
}
