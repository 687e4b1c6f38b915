//! The PostgreSQL side of `crate::daemon` (not yet ported).

#![allow(unused_variables, unused_imports)]

use std::ops::ControlFlow;

use loops_core::{
    DaemonLease, ExecutorResult, LeaseId, Loop, LoopId, LoopRun, LoopStatus, NewLoop, NewWorkflow,
    ProcessRef, RunId, RunStatus, StepRun, Timestamp, WorkflowEvent, WorkflowId, WorkflowRun,
    WorkflowRunId, WorkflowRunStatus, WorkflowSpec,
};

use crate::daemon::{HostRun, NextWake};
use crate::error::{Result, StoreError};
use crate::gc::{GcBatch, GcCounts, GcCursor, GcPolicy, SpaceUsage};
use crate::lease::{LeaseAcquire, LeaseHeartbeat, LeaseRelease, LeaseRequest};
use crate::loops::{DeleteHistory, DeleteOutcome, LoopChange, LoopFilter};
use crate::runs::{Claim, Fence, Finalized, Recovered, Released, RunFilter, SkipOutcome};
use crate::steps::StepOutcome;
use crate::workflow_runs::{
    NewWorkflowRun, RecoveredWorkflowRun, WorkflowRunFilter, WorkflowRunPatch,
};
use crate::workflows::WorkflowFilter;

use crate::backend::DaemonOps;
use crate::postgres::Postgres;

impl DaemonOps for Postgres {
    fn next_wake(&self, now: Timestamp, runner_id: &str, exclude: &[LoopId]) -> Result<NextWake> {
        Err(StoreError::Migration(
            "next_wake: not yet on PostgreSQL".into(),
        ))
    }
    fn running_runs_of_host(&self, host: &str, except_runner: &str) -> Result<Vec<HostRun>> {
        Err(StoreError::Migration(
            "running_runs_of_host: not yet on PostgreSQL".into(),
        ))
    }
    fn step_processes(&self, run_id: &RunId) -> Result<Vec<ProcessRef>> {
        Err(StoreError::Migration(
            "step_processes: not yet on PostgreSQL".into(),
        ))
    }
}
