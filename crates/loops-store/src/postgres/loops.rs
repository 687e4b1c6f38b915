//! The PostgreSQL side of `crate::loops` (not yet ported).

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

use crate::backend::LoopOps;
use crate::postgres::Postgres;

impl LoopOps for Postgres {
    fn create_loop(&self, new: &NewLoop, now: Timestamp) -> Result<Loop> {
        Err(StoreError::Migration(
            "create_loop: not yet on PostgreSQL".into(),
        ))
    }
    fn get_loop(&self, id: &LoopId) -> Result<Option<Loop>> {
        Err(StoreError::Migration(
            "get_loop: not yet on PostgreSQL".into(),
        ))
    }
    fn require_loop(&self, id_or_name: &str) -> Result<Loop> {
        Err(StoreError::Migration(
            "require_loop: not yet on PostgreSQL".into(),
        ))
    }
    fn for_each_loop(
        &self,
        filter: &LoopFilter,
        each: &mut dyn FnMut(Loop) -> ControlFlow<()>,
    ) -> Result<()> {
        Err(StoreError::Migration(
            "for_each_loop: not yet on PostgreSQL".into(),
        ))
    }
    fn count_loops(&self, status: Option<LoopStatus>) -> Result<u64> {
        Err(StoreError::Migration(
            "count_loops: not yet on PostgreSQL".into(),
        ))
    }
    fn count_runs(&self, status: Option<RunStatus>) -> Result<u64> {
        Err(StoreError::Migration(
            "count_runs: not yet on PostgreSQL".into(),
        ))
    }
    fn recount_statuses(&self) -> Result<bool> {
        Err(StoreError::Migration(
            "recount_statuses: not yet on PostgreSQL".into(),
        ))
    }
    fn has_running_run(&self, loop_id: &LoopId) -> Result<bool> {
        Err(StoreError::Migration(
            "has_running_run: not yet on PostgreSQL".into(),
        ))
    }
    fn due_loops(&self, now: Timestamp, limit: u32) -> Result<Vec<Loop>> {
        Err(StoreError::Migration(
            "due_loops: not yet on PostgreSQL".into(),
        ))
    }
    fn pause_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange> {
        Err(StoreError::Migration(
            "pause_loop: not yet on PostgreSQL".into(),
        ))
    }
    fn pause_loop_with_reason(
        &self,
        id: &LoopId,
        reason: &str,
        now: Timestamp,
    ) -> Result<Option<Loop>> {
        Err(StoreError::Migration(
            "pause_loop_with_reason: not yet on PostgreSQL".into(),
        ))
    }
    fn resume_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange> {
        Err(StoreError::Migration(
            "resume_loop: not yet on PostgreSQL".into(),
        ))
    }
    fn stop_loop(&self, id: &LoopId, now: Timestamp) -> Result<LoopChange> {
        Err(StoreError::Migration(
            "stop_loop: not yet on PostgreSQL".into(),
        ))
    }
    fn expire_loops(&self, now: Timestamp) -> Result<Vec<Loop>> {
        Err(StoreError::Migration(
            "expire_loops: not yet on PostgreSQL".into(),
        ))
    }
    fn delete_loop(&self, id: &LoopId, history: DeleteHistory) -> Result<DeleteOutcome> {
        Err(StoreError::Migration(
            "delete_loop: not yet on PostgreSQL".into(),
        ))
    }
}
