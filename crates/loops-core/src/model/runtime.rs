//! Records of the runtime itself: the daemon's lease and what an executor
//! reports for one process.

use serde::{Deserialize, Serialize};

use super::RunFacts;
use crate::id::LeaseId;
use crate::status::ExecutorStatus;
use crate::time::Timestamp;

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
    /// What the agent's output said of itself and the worktree it ran in
    /// (issue 27); the store adds the failure class.
    #[serde(flatten)]
    pub facts: RunFacts,
}

impl ExecutorResult {
    /// A failed result for a run or step that produced no process: an
    /// error of loops itself (SPEC §3.3 "thrown error", §6.3 step 2.6), or
    /// a target refused before anything was spawned. No exit code, no
    /// output, no pid; the duration is the time between the two instants,
    /// never negative.
    pub fn failed(
        error: impl Into<String>,
        started_at: Timestamp,
        finished_at: Timestamp,
    ) -> ExecutorResult {
        ExecutorResult {
            status: ExecutorStatus::Failed,
            exit_code: None,
            stdout: String::new(),
            stderr: String::new(),
            error: Some(error.into()),
            pid: None,
            started_at,
            finished_at,
            duration_ms: finished_at.millis_since(started_at).max(0),
            facts: RunFacts::default(),
        }
    }
}
