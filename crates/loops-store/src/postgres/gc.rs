//! The PostgreSQL side of `crate::gc` (not yet ported).

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

use crate::backend::GcOps;
use crate::postgres::Postgres;

impl GcOps for Postgres {
    fn plan_gc_batch(&self, policy: &GcPolicy, cursor: &mut GcCursor) -> Result<GcBatch> {
        Err(StoreError::Migration(
            "plan_gc_batch: not yet on PostgreSQL".into(),
        ))
    }
    fn count_gc_batch(&self, batch: &GcBatch) -> Result<GcCounts> {
        Err(StoreError::Migration(
            "count_gc_batch: not yet on PostgreSQL".into(),
        ))
    }
    fn apply_gc_batch(&self, batch: &GcBatch) -> Result<GcCounts> {
        Err(StoreError::Migration(
            "apply_gc_batch: not yet on PostgreSQL".into(),
        ))
    }
    fn checkpoint_wal(&self) -> Result<()> {
        Err(StoreError::Migration(
            "checkpoint_wal: not yet on PostgreSQL".into(),
        ))
    }
    fn space_usage(&self) -> Result<SpaceUsage> {
        Err(StoreError::Migration(
            "space_usage: not yet on PostgreSQL".into(),
        ))
    }
}
