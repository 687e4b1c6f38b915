//! Workflows (SPEC §1.4, §6): steps, stored specs and their creation input,
//! and the records of their execution (workflow runs, step runs, events).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Account, ProcessTarget};
use crate::id::{EventId, LoopId, RunId, StepRunId, WorkflowId, WorkflowRunId};
use crate::status::{StepRunStatus, WorkflowRunStatus, WorkflowStatus};
use crate::time::Timestamp;

/// One workflow step (SPEC §1.4). Unknown keys are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// Unique within the workflow.
    #[schemars(length(min = 1))]
    pub id: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What the step runs.
    pub target: ProcessTarget,
    /// Steps that must finish first; normalized to `[]`.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// Whether dependents run even if this step fails; normalized to false.
    #[serde(default)]
    pub continue_on_failure: bool,
    /// The step's own timeout, over the target's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_ms: Option<u64>,
    /// The step's account, over the target's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<Account>,
    /// The pool whose places the step holds while it runs (issue 30,
    /// `docs/triggers.md` Q2): a ready step waits while its pool is full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub pool: Option<String>,
    /// Keys this version does not know, kept as they were.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl Step {
    /// `step.account ?? target.account`.
    pub fn effective_account(&self) -> Option<&Account> {
        self.account.as_ref().or_else(|| self.target.account())
    }

    /// `step.timeoutMs ?? target.timeoutMs`.
    pub fn effective_timeout_ms(&self) -> Option<u64> {
        self.timeout_ms.or_else(|| self.target.timeout_ms())
    }
}

/// A stored workflow definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowSpec {
    /// Id.
    pub id: WorkflowId,
    /// Name; unique among active workflows.
    pub name: String,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Defaults to 1 and never changes.
    pub version: u32,
    /// Status.
    pub status: WorkflowStatus,
    /// The steps, in declaration order.
    pub steps: Vec<Step>,
    /// Most steps that run at once; unset means 1, the original's serial
    /// order (SPEC §6.3). New in loops: stored in the additive
    /// `workflow_specs.max_parallel` column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<u32>,
    /// Creation instant.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}

/// The input of workflow creation: a validated workflow body.
#[derive(Debug, Clone, PartialEq)]
pub struct NewWorkflow {
    /// Name, trimmed.
    pub name: String,
    /// Free text.
    pub description: Option<String>,
    /// Defaults to 1.
    pub version: u32,
    /// The steps.
    pub steps: Vec<Step>,
    /// Most steps that run at once; unset means 1 (serial).
    pub max_parallel: Option<u32>,
}

impl WorkflowSpec {
    /// The effective step parallelism: `maxParallel`, else 1, the original's
    /// serial order.
    pub fn parallelism(&self) -> u32 {
        self.max_parallel.unwrap_or(1).max(1)
    }
}

/// The idempotency key of the workflow run a loop run executes (SPEC §6.8):
/// `<loopId>:<scheduledFor>:attempt:<attempt>`. Each retry (a new attempt)
/// therefore gets a new workflow run, and a re-claim of the same attempt
/// resumes the existing one.
///
/// ```
/// use loops_core::{loop_workflow_key, LoopId};
/// let id: LoopId = "0123456789ab".parse().unwrap();
/// let slot = "2026-01-01T00:15:00Z".parse().unwrap();
/// assert_eq!(
///     loop_workflow_key(&id, slot, 2),
///     "0123456789ab:2026-01-01T00:15:00.000Z:attempt:2"
/// );
/// ```
pub fn loop_workflow_key(loop_id: &LoopId, scheduled_for: Timestamp, attempt: u32) -> String {
    format!("{loop_id}:{scheduled_for}:attempt:{attempt}")
}

/// One execution of a workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowRun {
    /// Id.
    pub id: WorkflowRunId,
    /// The workflow.
    pub workflow_id: WorkflowId,
    /// The workflow's name at creation.
    pub workflow_name: String,
    /// The loop, for scheduled runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_id: Option<LoopId>,
    /// The loop run, for scheduled runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_run_id: Option<RunId>,
    /// The loop slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_for: Option<Timestamp>,
    /// Deduplicates runs per workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Status.
    pub status: WorkflowRunStatus,
    /// Start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// Finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    /// Duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    /// Error text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Creation instant.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}

/// One step of one workflow run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepRun {
    /// Id.
    pub id: StepRunId,
    /// The workflow run.
    pub workflow_run_id: WorkflowRunId,
    /// The step id.
    pub step_id: String,
    /// The step's 0-based position in the declaration.
    pub sequence: u32,
    /// Status.
    pub status: StepRunStatus,
    /// Start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// Finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    /// Exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The child's pid while running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    /// Captured stdout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    /// Captured stderr.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// Error text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The account profile the step runs under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_profile: Option<String>,
    /// The account tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_tool: Option<String>,
    /// Creation instant.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}

/// One entry of a workflow run's event log (SPEC §6.6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowEvent {
    /// Id.
    pub id: EventId,
    /// The workflow run.
    pub workflow_run_id: WorkflowRunId,
    /// Starts at 1 for each run, without gaps.
    pub sequence: u32,
    /// For example `created`, `step_started`, `failed`.
    pub event_type: String,
    /// The step, for step events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    /// Event data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<serde_json::Value>,
    /// Creation instant.
    pub created_at: Timestamp,
}
