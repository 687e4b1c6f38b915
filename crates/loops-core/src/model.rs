//! The records of SPEC §1: schedules, targets, loops, runs, workflows.
//!
//! Serde here is a contract: it reads and writes exactly the JSON the
//! original writes (camelCase keys, unset optional fields omitted), both in
//! the `*_json` columns and on `--json` surfaces.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::id::{EventId, LeaseId, LoopId, RunId, StepRunId, WorkflowId, WorkflowRunId};
use crate::status::{
    AgentProvider, Anchor, CatchUp, ConfigIsolation, ExecutorStatus, LoopStatus, Overlap,
    RunStatus, StepRunStatus, WorkflowRunStatus, WorkflowStatus,
};
use crate::tagged::{self, Tagged};
use crate::time::Timestamp;

/// Default run timeout for command and agent targets: 30 minutes.
pub const DEFAULT_TIMEOUT_MS: u64 = 1_800_000;
/// Default `minIntervalMs` of a dynamic schedule: 60 s.
pub const DEFAULT_DYNAMIC_INTERVAL_MS: u64 = 60_000;
/// Default `catchUpLimit`.
pub const DEFAULT_CATCH_UP_LIMIT: u32 = 50;
/// The largest `catchUpLimit`: a tick plans at most this many missed slots
/// of one loop, so a huge limit after a long downtime cannot make it build
/// an enormous list (the original accepts any positive limit).
pub const MAX_CATCH_UP_LIMIT: u32 = 10_000;
/// Default `maxAttempts`.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 1;
/// Default `retryDelayMs`: 1 minute.
pub const DEFAULT_RETRY_DELAY_MS: u64 = 60_000;
/// Default `leaseMs`: 30 minutes.
pub const DEFAULT_LEASE_MS: u64 = 1_800_000;

/// When a loop runs (SPEC §1.2).
///
/// Deserialized by hand (`tagged.rs`): when `type` comes first, the rest of
/// the object goes straight to the variant, without serde's buffering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum Schedule {
    /// Once, at an instant.
    Once {
        /// The instant.
        at: Timestamp,
    },
    /// Every `everyMs` milliseconds.
    Interval {
        /// The period, > 0.
        every_ms: u64,
        /// What the period counts from; fixed_rate when unset.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor: Option<Anchor>,
    },
    /// On a 5-field cron expression.
    Cron {
        /// The expression, as the user wrote it.
        expression: String,
        /// An IANA time zone to evaluate it in; host local time when unset.
        /// New in loops (the original has only host local time, SPEC §9.5).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timezone: Option<String>,
    },
    /// At least `minIntervalMs` after each finish.
    Dynamic {
        /// The gap after a finish; 60 s when unset.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min_interval_ms: Option<u64>,
    },
}

impl Schedule {
    /// The SPEC name of the schedule kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Schedule::Once { .. } => "once",
            Schedule::Interval { .. } => "interval",
            Schedule::Cron { .. } => "cron",
            Schedule::Dynamic { .. } => "dynamic",
        }
    }
}

impl<'de> Deserialize<'de> for Schedule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        tagged::deserialize(d)
    }
}

impl Tagged for Schedule {
    const EXPECTING: &'static str = "a schedule object with a type";
    const VARIANTS: &'static [&'static str] = &["once", "interval", "cron", "dynamic"];

    fn from_rest<'de, D: Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error> {
        // The fields of each variant, as the derived `Serialize` writes them.
        #[derive(Deserialize)]
        struct Once {
            at: Timestamp,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Interval {
            every_ms: u64,
            #[serde(default)]
            anchor: Option<Anchor>,
        }
        #[derive(Deserialize)]
        struct Cron {
            expression: String,
            #[serde(default)]
            timezone: Option<String>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Dynamic {
            #[serde(default)]
            min_interval_ms: Option<u64>,
        }
        Ok(match tag {
            "once" => Schedule::Once {
                at: Once::deserialize(rest)?.at,
            },
            "interval" => {
                let Interval { every_ms, anchor } = Interval::deserialize(rest)?;
                Schedule::Interval { every_ms, anchor }
            }
            "cron" => {
                let Cron {
                    expression,
                    timezone,
                } = Cron::deserialize(rest)?;
                Schedule::Cron {
                    expression,
                    timezone,
                }
            }
            "dynamic" => Schedule::Dynamic {
                min_interval_ms: Dynamic::deserialize(rest)?.min_interval_ms,
            },
            other => return Err(tagged::unknown::<Self, _>(other)),
        })
    }
}

/// An account profile to run under, resolved through `accounts env`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    /// The profile name.
    pub profile: String,
    /// The tool; inferred from an agent's provider when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

/// A command to run (SPEC §1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandTarget {
    /// The program, or the shell text when `shell` is true.
    #[schemars(length(min = 1))]
    pub command: String,
    /// Arguments; empty when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Run through `/bin/sh -c`; false when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<bool>,
    /// Extra environment variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// Timeout; 30 minutes when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_ms: Option<u64>,
    /// Account to run under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<Account>,
}

impl CommandTarget {
    /// A target for `command` with every option unset.
    pub fn new(command: impl Into<String>) -> CommandTarget {
        CommandTarget {
            command: command.into(),
            args: None,
            cwd: None,
            shell: None,
            env: None,
            timeout_ms: None,
            account: None,
        }
    }

    /// The arguments, empty when unset.
    pub fn args(&self) -> &[String] {
        self.args.as_deref().unwrap_or(&[])
    }

    /// Whether the command runs through a shell (false when unset).
    pub fn is_shell(&self) -> bool {
        self.shell.unwrap_or(false)
    }

    /// The effective timeout.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)
    }
}

/// A headless coding-agent run (SPEC §1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentTarget {
    /// The agent CLI.
    pub provider: AgentProvider,
    /// The prompt, always the last argv element.
    #[schemars(length(min = 1))]
    pub prompt: String,
    /// Working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `--model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `--agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Extra arguments, placed before the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_args: Option<Vec<String>>,
    /// Timeout; 30 minutes when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_ms: Option<u64>,
    /// safe when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_isolation: Option<ConfigIsolation>,
    /// Account to run under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<Account>,
}

impl AgentTarget {
    /// A target for `provider` with every option unset.
    pub fn new(provider: AgentProvider, prompt: impl Into<String>) -> AgentTarget {
        AgentTarget {
            provider,
            prompt: prompt.into(),
            cwd: None,
            model: None,
            agent: None,
            extra_args: None,
            timeout_ms: None,
            config_isolation: None,
            account: None,
        }
    }

    /// The effective timeout.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)
    }

    /// The effective isolation mode.
    pub fn config_isolation(&self) -> ConfigIsolation {
        self.config_isolation.unwrap_or(ConfigIsolation::Safe)
    }
}

/// A loop that runs a stored workflow (SPEC §1.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowTarget {
    /// Always stored as an id.
    pub workflow_id: WorkflowId,
    /// Stored, never used (SPEC §9.34).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<serde_json::Value>,
    /// A timeout for the whole workflow; absent or 0 means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// What a loop runs.
///
/// Deserialized by hand (`tagged.rs`): when `type` comes first, the rest of
/// the object goes straight to the variant, without serde's buffering.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Target {
    /// A command.
    Command(CommandTarget),
    /// A coding agent.
    Agent(AgentTarget),
    /// A stored workflow.
    Workflow(WorkflowTarget),
}

/// What one process runs: a command or an agent. Workflow steps and the
/// executor accept only these.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ProcessTarget {
    /// A command.
    Command(CommandTarget),
    /// A coding agent.
    Agent(AgentTarget),
}

impl ProcessTarget {
    /// The target's own account.
    pub fn account(&self) -> Option<&Account> {
        match self {
            ProcessTarget::Command(c) => c.account.as_ref(),
            ProcessTarget::Agent(a) => a.account.as_ref(),
        }
    }

    /// The target's own timeout, if set.
    pub fn timeout_ms(&self) -> Option<u64> {
        match self {
            ProcessTarget::Command(c) => c.timeout_ms,
            ProcessTarget::Agent(a) => a.timeout_ms,
        }
    }
}

impl Target {
    /// The process target, unless this is a workflow.
    pub fn to_process(&self) -> Option<ProcessTarget> {
        match self {
            Target::Command(c) => Some(ProcessTarget::Command(c.clone())),
            Target::Agent(a) => Some(ProcessTarget::Agent(a.clone())),
            Target::Workflow(_) => None,
        }
    }

    /// The SPEC name of the target kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Target::Command(_) => "command",
            Target::Agent(_) => "agent",
            Target::Workflow(_) => "workflow",
        }
    }
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        tagged::deserialize(d)
    }
}

impl Tagged for Target {
    const EXPECTING: &'static str = "a target object with a type";
    const VARIANTS: &'static [&'static str] = &["command", "agent", "workflow"];

    fn from_rest<'de, D: Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error> {
        match tag {
            "command" => CommandTarget::deserialize(rest).map(Target::Command),
            "agent" => AgentTarget::deserialize(rest).map(Target::Agent),
            "workflow" => WorkflowTarget::deserialize(rest).map(Target::Workflow),
            other => Err(tagged::unknown::<Self, _>(other)),
        }
    }
}

impl From<ProcessTarget> for Target {
    fn from(t: ProcessTarget) -> Target {
        match t {
            ProcessTarget::Command(c) => Target::Command(c),
            ProcessTarget::Agent(a) => Target::Agent(a),
        }
    }
}

/// A persistent loop (SPEC §1.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Loop {
    /// Id.
    pub id: LoopId,
    /// Name; not unique.
    pub name: String,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Status.
    pub status: LoopStatus,
    /// When it runs.
    pub schedule: Schedule,
    /// What it runs.
    pub target: Target,
    /// The next slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at: Option<Timestamp>,
    /// The slot a pending retry re-runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_scheduled_for: Option<Timestamp>,
    /// Missed-slot policy.
    pub catch_up: CatchUp,
    /// Most slots one tick runs under `all`.
    pub catch_up_limit: u32,
    /// Overlap policy.
    pub overlap: Overlap,
    /// Attempts per slot.
    pub max_attempts: u32,
    /// Delay before a retry.
    pub retry_delay_ms: u64,
    /// Run lease length.
    pub lease_ms: u64,
    /// When the loop expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// Creation instant.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
    /// Why loops paused the loop by itself (its stored schedule can no
    /// longer be planned); unset for a loop a user paused. New in loops:
    /// the original neither writes nor reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_reason: Option<String>,
}

/// The input of loop creation: a [`Loop`] without its id, status, computed
/// next run and instants. [`NewLoop::new`] fills in the SPEC defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct NewLoop {
    /// Name.
    pub name: String,
    /// Free text.
    pub description: Option<String>,
    /// When it runs.
    pub schedule: Schedule,
    /// What it runs.
    pub target: Target,
    /// Missed-slot policy.
    pub catch_up: CatchUp,
    /// Most slots one tick runs under `all`.
    pub catch_up_limit: u32,
    /// Overlap policy.
    pub overlap: Overlap,
    /// Attempts per slot.
    pub max_attempts: u32,
    /// Delay before a retry.
    pub retry_delay_ms: u64,
    /// Run lease length.
    pub lease_ms: u64,
    /// When the loop expires.
    pub expires_at: Option<Timestamp>,
}

impl NewLoop {
    /// A loop with the SPEC §1.4 defaults.
    pub fn new(name: impl Into<String>, schedule: Schedule, target: Target) -> NewLoop {
        NewLoop {
            name: name.into(),
            description: None,
            schedule,
            target,
            catch_up: CatchUp::Latest,
            catch_up_limit: DEFAULT_CATCH_UP_LIMIT,
            overlap: Overlap::Skip,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            retry_delay_ms: DEFAULT_RETRY_DELAY_MS,
            lease_ms: DEFAULT_LEASE_MS,
            expires_at: None,
        }
    }
}

/// One execution of one loop slot (SPEC §1.4). A retry rewrites the row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoopRun {
    /// Id.
    pub id: RunId,
    /// The loop.
    pub loop_id: LoopId,
    /// The loop's name at claim time.
    pub loop_name: String,
    /// The slot.
    pub scheduled_for: Timestamp,
    /// Starts at 1.
    pub attempt: u32,
    /// Status.
    pub status: RunStatus,
    /// Start of the current attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// Finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    /// The runner id that holds or held the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_by: Option<String>,
    /// Lease expiry while running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<Timestamp>,
    /// The child's pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
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
    /// Creation instant.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}

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

/// The single daemon lease of a database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonLease {
    /// The lease id.
    pub id: LeaseId,
    /// The holder's pid.
    pub pid: u32,
    /// The holder's host.
    pub hostname: String,
    /// Last heartbeat.
    pub heartbeat_at: Timestamp,
    /// Expiry.
    pub expires_at: Timestamp,
    /// Creation instant.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}

/// What an executor reports for one process (SPEC §1.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorResult {
    /// Outcome.
    pub status: ExecutorStatus,
    /// Exit code, when the process exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Captured stdout, bounded.
    pub stdout: String,
    /// Captured stderr, bounded.
    pub stderr: String,
    /// Why it did not succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The child's pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Start.
    pub started_at: Timestamp,
    /// Finish.
    pub finished_at: Timestamp,
    /// Duration.
    pub duration_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schedule_json_matches_the_original() {
        let s: Schedule = serde_json::from_value(
            json!({"type":"interval","everyMs":60000,"anchor":"fixed_rate"}),
        )
        .unwrap();
        assert_eq!(
            s,
            Schedule::Interval {
                every_ms: 60000,
                anchor: Some(Anchor::FixedRate)
            }
        );
        let s = Schedule::Dynamic {
            min_interval_ms: None,
        };
        assert_eq!(serde_json::to_value(&s).unwrap(), json!({"type":"dynamic"}));
        let s = Schedule::Cron {
            expression: "0 9 * * 1".into(),
            timezone: None,
        };
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({"type":"cron","expression":"0 9 * * 1"})
        );
    }

    #[test]
    fn targets_omit_unset_fields() {
        let mut c = CommandTarget::new("printf");
        c.args = Some(vec!["hello".into()]);
        c.shell = Some(true);
        let t = Target::Command(c);
        assert_eq!(
            serde_json::to_value(&t).unwrap(),
            json!({"type":"command","command":"printf","args":["hello"],"shell":true})
        );
        let t: Target = serde_json::from_value(
            json!({"type":"workflow","workflowId":"0123456789ab","timeoutMs":50}),
        )
        .unwrap();
        assert_eq!(t.kind(), "workflow");
    }

    #[test]
    fn step_keeps_unknown_keys_and_normalizes() {
        let v = json!({"id":"a","target":{"type":"command","command":"true"},"x-note":"kept"});
        let step: Step = serde_json::from_value(v).unwrap();
        assert_eq!(step.extra.get("x-note"), Some(&json!("kept")));
        let out = serde_json::to_value(&step).unwrap();
        assert_eq!(out["dependsOn"], json!([]));
        assert_eq!(out["continueOnFailure"], json!(false));
        assert_eq!(out["x-note"], json!("kept"));
    }
}
