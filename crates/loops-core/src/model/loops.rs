//! Loops and their runs (SPEC §1.4): the stored [`Loop`], the [`NewLoop`]
//! creation input with its defaults, and the [`LoopRun`] of one slot.

use serde::{Deserialize, Serialize};

use super::{
    DEFAULT_CATCH_UP_LIMIT, DEFAULT_LEASE_MS, DEFAULT_MAX_ATTEMPTS, DEFAULT_RETRY_DELAY_MS,
    LoopPolicy, RunFacts, Schedule, Target,
};
use crate::id::{LoopId, RunId};
use crate::status::{CatchUp, LoopStatus, Overlap, RunStatus};
use crate::time::Timestamp;

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
    /// Labels, expiry after runs, breaker, backoff, skip exit codes (issue
    /// 17), flattened into the loop's JSON.
    #[serde(flatten)]
    pub policy: LoopPolicy,
    /// Successful runs in a row so far, toward `expiresAfterRuns`; set only
    /// while that is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_successes: Option<u32>,
    /// Final failures in a row so far, toward `pauseAfterFailures`; set
    /// only while that is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_failures: Option<u32>,
    /// The loop's failure and success hooks (issue 17): `onFailure`,
    /// `onSuccess` and `hookShowOutput`, each omitted when unset.
    #[serde(flatten)]
    pub hooks: Hooks,
}

/// The shell commands a runner starts after a run of the loop is finally
/// recorded (issue 17). New in loops: the original has no hooks, and a loop
/// without them keeps its JSON shape.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hooks {
    /// Run through `/bin/sh -c` after a final `failed` or `timed_out`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<String>,
    /// Run through `/bin/sh -c` after a `succeeded` run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_success: Option<String>,
    /// Whether the hook's stdin carries the run's output unredacted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hook_show_output: bool,
}

impl Hooks {
    /// Whether no hook is set.
    pub fn is_empty(&self) -> bool {
        self.on_failure.is_none() && self.on_success.is_none() && !self.hook_show_output
    }
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
    /// Operating policies (issue 17); all off by default.
    pub policy: LoopPolicy,
    /// Failure and success hooks (issue 17); none by default.
    pub hooks: Hooks,
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
            policy: LoopPolicy::default(),
            hooks: Hooks::default(),
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
    /// The host the claim was made on, recorded with every claim: a runner
    /// id such as `manual-tick:<pid>` names none. Unset on rows claimed
    /// before it was recorded, or by the original.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_host: Option<String>,
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
    /// When the running process last printed anything, as of its last
    /// heartbeat (issue 27): how long an agent has been silent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_output_at: Option<Timestamp>,
    /// Why it failed, what the agent said of itself, and where it worked
    /// (issue 27); flattened into the run's JSON.
    #[serde(flatten)]
    pub facts: RunFacts,
    /// When `loops cancel` asked for the run to stop (issue 28): the
    /// runner holding it stops it and records it cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_requested_at: Option<Timestamp>,
    /// Who asked for the cancel: `user@host`, or `mcp` (issue 28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled_by: Option<String>,
    /// The token of the claim that holds the run: a heartbeat or finalize
    /// fenced on it must carry the same (issue 15). Never serialized: it is
    /// a fencing value, not part of the run's record.
    #[serde(skip)]
    pub claim_token: Option<String>,
}
