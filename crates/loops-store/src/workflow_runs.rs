//! Workflow runs: creation with idempotency keys, lookups, and the run-level
//! transitions finalize, cancel and recover (SPEC §4.3
//! "`createWorkflowRun`", "Workflow-run lookups", "Workflow-run
//! transitions"; §6.5).
//!
//! Invariants:
//! - Terminal runs (succeeded, failed, timed_out, cancelled) never change
//!   status: every run transition is guarded by
//!   `status NOT IN (<terminal>)` (SPEC §1.5).
//! - Each transition is one `BEGIN IMMEDIATE` transaction that writes the
//!   state change and its event together, so an event exists exactly when
//!   its change happened, and sequences stay gap-free under concurrent
//!   writers (SPEC §9 item 9).
//! - One `(workflow, idempotency key)` pair maps to one run, even when two
//!   processes create it at the same moment: the key is re-checked under
//!   the write lock.
//! - Recovery checks step liveness and resets steps in the same
//!   transaction, so a step cannot start between the check and the reset.

use loops_core::{
    LoopId, LoopRun, RunId, StepRun, Timestamp, WorkflowId, WorkflowRun, WorkflowRunId,
    WorkflowRunStatus, WorkflowSpec,
};

use crate::Store;
use crate::error::Result;

pub(crate) mod ops;

/// Default `limit` of [`Store::list_workflow_runs`].
pub const DEFAULT_WORKFLOW_RUN_LIST_LIMIT: u32 = 100;

/// The reason [`Store::cancel_workflow_run`] records when the user gives none.
pub const DEFAULT_CANCEL_REASON: &str = "cancelled by user";

/// The reason [`Store::recover_workflow_run`] records when the user gives none.
pub const DEFAULT_RECOVER_REASON: &str = "workflow run recovered for retry";

/// The input of [`Store::create_workflow_run`].
#[derive(Debug, Clone, PartialEq)]
pub struct NewWorkflowRun<'a> {
    /// The workflow to run; its steps become the run's step rows.
    pub workflow: &'a WorkflowSpec,
    /// The loop, for scheduled runs.
    pub loop_id: Option<LoopId>,
    /// The loop run, for scheduled runs.
    pub loop_run_id: Option<RunId>,
    /// The loop slot (SPEC: `scheduledFor ?? loopRun.scheduledFor`).
    pub scheduled_for: Option<Timestamp>,
    /// Deduplicates runs of this workflow: a second creation with the same
    /// key returns the first run, whatever its status.
    pub idempotency_key: Option<String>,
}

impl<'a> NewWorkflowRun<'a> {
    /// A manual run of `workflow`: no loop, no slot, no key.
    pub fn new(workflow: &'a WorkflowSpec) -> NewWorkflowRun<'a> {
        NewWorkflowRun {
            workflow,
            loop_id: None,
            loop_run_id: None,
            scheduled_for: None,
            idempotency_key: None,
        }
    }

    /// Links the run to a loop run: its loop, its id and, unless already
    /// set, its slot.
    pub fn for_loop_run(mut self, run: &LoopRun) -> NewWorkflowRun<'a> {
        self.loop_id = Some(run.loop_id);
        self.loop_run_id = Some(run.id);
        self.scheduled_for = self.scheduled_for.or(Some(run.scheduled_for));
        self
    }

    /// Sets the idempotency key.
    pub fn with_key(mut self, key: impl Into<String>) -> NewWorkflowRun<'a> {
        self.idempotency_key = Some(key.into());
        self
    }
}

/// Which workflow runs [`Store::list_workflow_runs`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkflowRunFilter {
    /// Only runs of this workflow. When set, `loop_run_id` is ignored, as in
    /// the original.
    pub workflow_id: Option<WorkflowId>,
    /// Only runs linked to this loop run.
    pub loop_run_id: Option<RunId>,
    /// At most this many; [`DEFAULT_WORKFLOW_RUN_LIST_LIMIT`] when unset.
    pub limit: Option<u32>,
}

/// The result fields [`Store::finalize_workflow_run`] writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkflowRunPatch {
    /// The finish; `now` when unset.
    pub finished_at: Option<Timestamp>,
    /// The duration.
    pub duration_ms: Option<i64>,
    /// Why the run did not succeed.
    pub error: Option<String>,
}

/// What [`Store::recover_workflow_run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredWorkflowRun {
    /// The run, whose own status recovery never touches.
    pub run: WorkflowRun,
    /// The steps that went from running back to pending, in sequence order.
    /// Empty when no step was running.
    pub recovered_steps: Vec<StepRun>,
}

impl Store {
    /// Creates a workflow run with one pending step row per step, or returns
    /// the existing run for the same `(workflow, idempotency key)` as it is,
    /// whatever its status (SPEC §4.3 `createWorkflowRun`).
    ///
    /// A new run is running, started at `now`, and its event log starts with
    /// `created` (sequence 1). Two concurrent creators with the same key get
    /// the same run.
    pub fn create_workflow_run(
        &self,
        input: &NewWorkflowRun<'_>,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        self.backend().create_workflow_run(input, now)
    }

    /// The workflow run with this id.
    pub fn get_workflow_run(&self, id: &WorkflowRunId) -> Result<Option<WorkflowRun>> {
        self.backend().get_workflow_run(id)
    }

    /// The workflow run with this id, or `workflow run not found: <id>`.
    pub fn require_workflow_run(&self, id: &WorkflowRunId) -> Result<WorkflowRun> {
        self.backend().require_workflow_run(id)
    }

    /// Lists workflow runs, newest first (SPEC §4.3 `listWorkflowRuns`).
    pub fn list_workflow_runs(&self, filter: &WorkflowRunFilter) -> Result<Vec<WorkflowRun>> {
        self.backend().list_workflow_runs(filter)
    }

    /// The run's status alone, or `None` when the run does not exist.
    ///
    /// One primary-key lookup that decodes a single column: cheap enough for
    /// a runner to poll every few tens of milliseconds to notice a cancel
    /// written by another process (SPEC §6.5, §9 item 21).
    pub fn workflow_run_status(&self, id: &WorkflowRunId) -> Result<Option<WorkflowRunStatus>> {
        self.backend().workflow_run_status(id)
    }

    /// Whether the run is terminal (succeeded, failed, timed_out or
    /// cancelled). Fails with `workflow run not found: <id>`.
    pub fn is_workflow_run_terminal(&self, id: &WorkflowRunId) -> Result<bool> {
        Ok(self.require_workflow_run(id)?.status.is_terminal())
    }

    /// Finishes a run as `status` unless it is already terminal (SPEC §4.3
    /// "Finalize"), appending the event `<status>` with `{error?}` only when
    /// the row changed.
    ///
    /// Returns the stored run, so a finalize that lost to a cancel reports
    /// cancelled. `status` must be terminal: finalizing as running fails with
    /// [`StoreError::InvalidTransition`](crate::StoreError::InvalidTransition).
    pub fn finalize_workflow_run(
        &self,
        id: &WorkflowRunId,
        status: WorkflowRunStatus,
        patch: &WorkflowRunPatch,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        self.backend().finalize_workflow_run(id, status, patch, now)
    }

    /// Cancels a run (SPEC §4.3 "Cancel", §6.5): a non-terminal run becomes
    /// cancelled with `error = reason`, its pending and running steps become
    /// cancelled, and the event `cancelled` `{reason}` is appended. A
    /// terminal run is returned unchanged.
    ///
    /// This only writes rows and sends no signal; the process executing the
    /// run notices the cancel and stops its child. Fails with
    /// `workflow run not found: <id>`.
    pub fn cancel_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        self.backend().cancel_workflow_run(id, reason, now)
    }

    /// Fails a run whose runner must stop it, such as a workflow loop run
    /// whose lease was lost (SPEC §10 item 98): as
    /// [`Store::cancel_workflow_run`], but the run becomes failed, and the
    /// event `failed` `{error}` is appended. Its pending and running steps
    /// become cancelled, since they are killed. A terminal run is returned
    /// unchanged.
    pub fn fail_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<WorkflowRun> {
        self.backend().fail_workflow_run(id, reason, now)
    }

    /// Puts the running steps of a run whose processes are dead back to
    /// pending, so a later execution with the same key resumes them (SPEC
    /// §4.3 "Recover", §6.5). Results, pid and start are cleared and
    /// `error = reason`; the run's own status is not touched. The event
    /// `recovered` `{reason, recoveredSteps}` is appended when at least one
    /// step was reset.
    ///
    /// If any running step's process is alive, nothing changes and it fails with
    /// [`StoreError::StepsAlive`](crate::StoreError::StepsAlive). The liveness
    /// check and the reset are one transaction. Fails with `workflow run not found:
    /// <id>`.
    pub fn recover_workflow_run(
        &self,
        id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<RecoveredWorkflowRun> {
        self.backend().recover_workflow_run(id, reason, now)
    }
}
