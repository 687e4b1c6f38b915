//! What running a workflow can fail with: [`WorkflowError`].

use loops_core::WorkflowRunId;
use loops_exec::ExecError;
use loops_store::StoreError;

/// What running a workflow can fail with. A step that fails, including one
/// whose account cannot be resolved, is a failed step, not an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowError {
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
    /// A step could not be started because it is running or finished
    /// elsewhere, or its run stopped running: the double-run guard of SPEC
    /// §6.3 step 5 (§10 items 79, 84). Another runner is executing the run,
    /// or its runner died; `workflows recover` resets the steps of a dead
    /// runner.
    #[error("workflow step is not claimable: {run_id}/{step_id} status={status}")]
    StepNotClaimable {
        /// The workflow run.
        run_id: String,
        /// The step.
        step_id: String,
        /// The step's current status.
        status: String,
    },
    /// [`WorkflowRunOptions::resume`](crate::WorkflowRunOptions::resume) named a run that is not running.
    #[error(
        "workflow run {run_id} is {status}, not running; only a running run can be resumed \
         (`workflows recover` resets the steps of a running run whose runner died)"
    )]
    NotRunning {
        /// The run.
        run_id: WorkflowRunId,
        /// Its status.
        status: String,
    },
    /// [`WorkflowRunOptions::resume`](crate::WorkflowRunOptions::resume) named a run of another workflow.
    #[error("workflow run {run_id} belongs to workflow {actual}, not {expected}")]
    WrongWorkflow {
        /// The run.
        run_id: WorkflowRunId,
        /// The workflow it belongs to.
        actual: String,
        /// The workflow that was to be run.
        expected: String,
    },
    /// A step would not start (SPEC §6.8 preflight): its executable is
    /// missing, its working directory is unusable, or its account does not
    /// resolve.
    /// The message includes the reason, so the reason is not also its
    /// `source`: an error chain (`{:#}`) would say it twice.
    #[error("workflow step {step_id}: {error}")]
    Preflight {
        /// The first step that failed, in execution order.
        step_id: String,
        /// Why.
        error: ExecError,
    },
}

impl From<StoreError> for WorkflowError {
    fn from(e: StoreError) -> WorkflowError {
        match e {
            StoreError::StepNotClaimable {
                run_id,
                step_id,
                status,
            } => WorkflowError::StepNotClaimable {
                run_id,
                step_id,
                status,
            },
            other => WorkflowError::Store(other),
        }
    }
}
