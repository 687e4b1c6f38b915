//! The enumerations of SPEC §1.1 and the state machines of §1.5.
//!
//! Each enum serializes as its snake_case SPEC spelling, parses from it with
//! an error that lists the accepted values, and carries its state-machine
//! predicates (`is_terminal` and the like) as methods.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A string that is not one of an enum's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what}: {input:?} (expected one of {expected})")]
pub struct EnumError {
    /// What was being parsed, for example `loop status`.
    pub what: &'static str,
    /// The rejected input.
    pub input: String,
    /// The accepted values, comma separated.
    pub expected: &'static str,
}

macro_rules! string_enum {
    (
        $(#[$doc:meta])*
        $name:ident, $what:literal, $expected:literal {
            $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)?
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every value, in SPEC order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The SPEC spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = EnumError;
            fn from_str(s: &str) -> Result<Self, EnumError> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(EnumError { what: $what, input: s.to_owned(), expected: $expected }),
                }
            }
        }
    };
}

pub(crate) use string_enum;

string_enum!(
    /// Loop status (SPEC §1.5).
    LoopStatus, "loop status", "active, paused, stopped, expired" {
        /// Scheduled: the tick plans its slots.
        Active => "active",
        /// Kept, not scheduled; `nextRunAt` is kept.
        Paused => "paused",
        /// Finished or stopped by the user; `nextRunAt` is cleared.
        Stopped => "stopped",
        /// Its `expiresAt` passed.
        Expired => "expired",
    }
);

string_enum!(
    /// How a loop's retry delay grows with the attempt (issue 17).
    Backoff, "backoff", "fixed, exponential" {
        /// Every retry waits `retryDelayMs`, as in 0.3.1.
        Fixed => "fixed",
        /// Retry n waits `retryDelayMs × 2^(n−1) × (0.5 + random)`, capped by
        /// `maxRetryDelayMs`.
        Exponential => "exponential",
    }
);

// string_enum! fixes the derives, so the default is written out.
#[expect(clippy::derivable_impls)]
impl Default for Backoff {
    fn default() -> Backoff {
        Backoff::Fixed
    }
}

impl Backoff {
    /// Whether this is the default, fixed, which the JSON leaves out.
    pub fn is_fixed(&self) -> bool {
        *self == Backoff::Fixed
    }
}

string_enum!(
    /// Loop run status (SPEC §1.5).
    RunStatus, "run status", "running, succeeded, failed, timed_out, abandoned, skipped, cancelled" {
        /// Claimed and executing under a lease.
        Running => "running",
        /// Exited 0. Terminal.
        Succeeded => "succeeded",
        /// Exited non-zero or could not run. Retryable.
        Failed => "failed",
        /// Killed at its timeout. Retryable.
        TimedOut => "timed_out",
        /// Its lease expired and its process was dead. Retryable.
        Abandoned => "abandoned",
        /// Not run because of the overlap policy. Terminal.
        Skipped => "skipped",
        /// Stopped by `loops cancel` (issue 28). Terminal: never retried,
        /// and counted toward neither streak.
        Cancelled => "cancelled",
    }
);

impl RunStatus {
    /// Succeeded, skipped or cancelled: the slot can never be claimed
    /// again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Succeeded | RunStatus::Skipped | RunStatus::Cancelled
        )
    }

    /// Failed, timed out or abandoned: re-claimable while attempts remain.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            RunStatus::Failed | RunStatus::TimedOut | RunStatus::Abandoned
        )
    }

    /// Anything but running.
    pub fn is_finished(self) -> bool {
        self != RunStatus::Running
    }
}

string_enum!(
    /// What a tick does with slots that were missed (SPEC §2.5).
    CatchUp, "catch-up policy", "none, latest, all" {
        /// Run the stale slot once.
        None => "none",
        /// Run only the latest missed slot.
        Latest => "latest",
        /// Run every missed slot, up to the loop's limit.
        All => "all",
    }
);

string_enum!(
    /// What happens to a slot that comes due while a run is active.
    Overlap, "overlap policy", "skip, allow" {
        /// Record a skipped run and advance.
        Skip => "skip",
        /// Run it anyway.
        Allow => "allow",
    }
);

string_enum!(
    /// What an interval counts from (SPEC §2.4).
    Anchor, "interval anchor", "fixed_rate, fixed_delay" {
        /// From the slot: the loop stays on its grid.
        FixedRate => "fixed_rate",
        /// From the finish of the previous run.
        FixedDelay => "fixed_delay",
    }
);

string_enum!(
    /// A headless coding-agent CLI (SPEC §5.1).
    AgentProvider, "provider", "claude, cursor, codewith, aicopilot, opencode, codex" {
        /// `claude`.
        Claude => "claude",
        /// `agent` (the Cursor Agent CLI), else `cursor-agent`.
        Cursor => "cursor",
        /// `codewith`.
        Codewith => "codewith",
        /// `aicopilot`.
        Aicopilot => "aicopilot",
        /// `opencode`.
        Opencode => "opencode",
        /// `codex`.
        Codex => "codex",
    }
);

impl AgentProvider {
    /// The provider's executable as 0.3.1 named it, which `doctor` probes:
    /// `cursor-agent` for cursor. Runs use [`AgentProvider::executable`].
    pub fn binary(self) -> &'static str {
        match self {
            AgentProvider::Cursor => "cursor-agent",
            other => other.as_str(),
        }
    }

    /// The executable a run starts (agents note §2.1): `agent` for cursor,
    /// as in 0.5.11; the provider's name for the others.
    pub fn executable(self) -> &'static str {
        match self {
            AgentProvider::Cursor => "agent",
            other => other.as_str(),
        }
    }

    /// The executable a run falls back to when [`executable`] is not on
    /// the PATH: `cursor-agent` for cursor, which 0.3.1 ran (agents note
    /// §15 item 2).
    ///
    /// [`executable`]: AgentProvider::executable
    pub fn fallback_executable(self) -> Option<&'static str> {
        match self {
            AgentProvider::Cursor => Some("cursor-agent"),
            _ => None,
        }
    }

    /// The `accounts` tool name of the provider.
    pub fn tool(self) -> &'static str {
        self.as_str()
    }
}

string_enum!(
    /// How much an agent may do without asking (agents note §2.2):
    /// `permissionMode`, `default` when unset.
    PermissionMode, "permission mode", "default, plan, auto, bypass" {
        /// The provider's own default.
        Default => "default",
        /// Plan only (claude, cursor).
        Plan => "plan",
        /// Claude's `auto` mode.
        Auto => "auto",
        /// Skip permission prompts; needs break-glass (§12.1 rule 16).
        Bypass => "bypass",
    }
);

string_enum!(
    /// Whether an agent runs in a git worktree of its own (agents note §8):
    /// `worktree`, `off` when unset.
    WorktreeMode, "worktree mode", "off, auto, required" {
        /// In the target's cwd, as always.
        Off => "off",
        /// In a worktree; in the cwd, with a note, when one cannot be
        /// prepared (§8.4).
        Auto => "auto",
        /// In a worktree, or not at all: the run fails (§8.4).
        Required => "required",
    }
);

string_enum!(
    /// Whether an agent runs with the provider's safe flags (SPEC §5.2).
    ConfigIsolation, "config isolation", "safe, none" {
        /// Add the provider's isolation flags.
        Safe => "safe",
        /// Add nothing.
        None => "none",
    }
);

string_enum!(
    /// Workflow spec status.
    WorkflowStatus, "workflow status", "active, archived" {
        /// Usable by name.
        Active => "active",
        /// Hidden from name lookups; still runnable by id.
        Archived => "archived",
    }
);

string_enum!(
    /// Workflow run status (SPEC §1.5).
    WorkflowRunStatus, "workflow run status", "running, succeeded, failed, timed_out, cancelled" {
        /// Steps may still start.
        Running => "running",
        /// Terminal.
        Succeeded => "succeeded",
        /// Terminal.
        Failed => "failed",
        /// Terminal.
        TimedOut => "timed_out",
        /// Terminal.
        Cancelled => "cancelled",
    }
);

impl WorkflowRunStatus {
    /// Terminal states never change.
    pub fn is_terminal(self) -> bool {
        self != WorkflowRunStatus::Running
    }
}

string_enum!(
    /// Workflow step run status (SPEC §1.5).
    StepRunStatus, "step status", "pending, running, succeeded, failed, timed_out, skipped, cancelled" {
        /// Not started yet.
        Pending => "pending",
        /// Executing.
        Running => "running",
        /// Finished with exit 0.
        Succeeded => "succeeded",
        /// Finished unsuccessfully; may be started again.
        Failed => "failed",
        /// Killed at its timeout; may be started again.
        TimedOut => "timed_out",
        /// Never ran.
        Skipped => "skipped",
        /// Cancelled with its run.
        Cancelled => "cancelled",
    }
);

impl StepRunStatus {
    /// States a step may be started from (the run must also be running).
    pub fn is_startable(self) -> bool {
        matches!(
            self,
            StepRunStatus::Pending | StepRunStatus::Failed | StepRunStatus::TimedOut
        )
    }

    /// Pending or running: the states a skip or cancel applies to.
    pub fn is_open(self) -> bool {
        matches!(self, StepRunStatus::Pending | StepRunStatus::Running)
    }

    /// Succeeded, skipped or cancelled: a resumed run moves past these.
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            StepRunStatus::Succeeded | StepRunStatus::Skipped | StepRunStatus::Cancelled
        )
    }
}

string_enum!(
    /// The status an executor reports for one process (SPEC §1.4).
    ExecutorStatus, "executor status", "succeeded, failed, timed_out" {
        /// Exit 0.
        Succeeded => "succeeded",
        /// Anything else.
        Failed => "failed",
        /// Killed at its timeout.
        TimedOut => "timed_out",
    }
);

impl From<ExecutorStatus> for RunStatus {
    fn from(s: ExecutorStatus) -> RunStatus {
        match s {
            ExecutorStatus::Succeeded => RunStatus::Succeeded,
            ExecutorStatus::Failed => RunStatus::Failed,
            ExecutorStatus::TimedOut => RunStatus::TimedOut,
        }
    }
}

impl From<ExecutorStatus> for StepRunStatus {
    fn from(s: ExecutorStatus) -> StepRunStatus {
        match s {
            ExecutorStatus::Succeeded => StepRunStatus::Succeeded,
            ExecutorStatus::Failed => StepRunStatus::Failed,
            ExecutorStatus::TimedOut => StepRunStatus::TimedOut,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip() {
        for s in RunStatus::ALL {
            assert_eq!(s.as_str().parse::<RunStatus>().unwrap(), *s);
            assert_eq!(
                serde_json::to_string(s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
        }
        assert_eq!(Anchor::FixedDelay.as_str(), "fixed_delay");
        assert_eq!(AgentProvider::Cursor.binary(), "cursor-agent");
    }

    #[test]
    fn parse_error_lists_values() {
        let err = "sometimes".parse::<Overlap>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid overlap policy: \"sometimes\" (expected one of skip, allow)"
        );
    }

    #[test]
    fn state_machine_predicates() {
        assert!(RunStatus::Succeeded.is_terminal() && RunStatus::Skipped.is_terminal());
        assert!(RunStatus::Cancelled.is_terminal() && !RunStatus::Cancelled.is_retryable());
        assert!(!RunStatus::Failed.is_terminal() && RunStatus::Abandoned.is_retryable());
        assert!(WorkflowRunStatus::Cancelled.is_terminal());
        assert!(!WorkflowRunStatus::Running.is_terminal());
        assert!(StepRunStatus::TimedOut.is_startable() && !StepRunStatus::Running.is_startable());
        assert!(StepRunStatus::Running.is_open() && StepRunStatus::Cancelled.is_settled());
    }
}
