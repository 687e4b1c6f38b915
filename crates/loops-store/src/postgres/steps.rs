//! The PostgreSQL side of `crate::steps` (not yet ported).

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

use crate::backend::StepOps;
use crate::postgres::Postgres;

impl StepOps for Postgres {
    fn list_step_runs(&self, run_id: &WorkflowRunId) -> Result<Vec<StepRun>> {
        Err(StoreError::Migration(
            "list_step_runs: not yet on PostgreSQL".into(),
        ))
    }
    fn get_step_run(&self, run_id: &WorkflowRunId, step_id: &str) -> Result<Option<StepRun>> {
        Err(StoreError::Migration(
            "get_step_run: not yet on PostgreSQL".into(),
        ))
    }
    fn start_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        now: Timestamp,
    ) -> Result<StepRun> {
        Err(StoreError::Migration(
            "start_step_run: not yet on PostgreSQL".into(),
        ))
    }
    fn mark_step_pid(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        process: ProcessRef,
        now: Timestamp,
    ) -> Result<bool> {
        Err(StoreError::Migration(
            "mark_step_pid: not yet on PostgreSQL".into(),
        ))
    }
    fn finalize_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        outcome: &StepOutcome,
        now: Timestamp,
    ) -> Result<StepRun> {
        Err(StoreError::Migration(
            "finalize_step_run: not yet on PostgreSQL".into(),
        ))
    }
    fn skip_step_run(
        &self,
        run_id: &WorkflowRunId,
        step_id: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<StepRun> {
        Err(StoreError::Migration(
            "skip_step_run: not yet on PostgreSQL".into(),
        ))
    }
    fn skip_open_steps(
        &self,
        run_id: &WorkflowRunId,
        reason: &str,
        now: Timestamp,
    ) -> Result<Vec<StepRun>> {
        Err(StoreError::Migration(
            "skip_open_steps: not yet on PostgreSQL".into(),
        ))
    }
}
