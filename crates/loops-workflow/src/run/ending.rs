//! How a run is ending ([`Ending`]) and where its workflow timeout is
//! ([`Deadline`]): the store thread's decisions about the run as a whole,
//! each one value instead of a set of flags.

use std::time::Instant;

use loops_core::WorkflowRunStatus;

/// The reason a run's remaining steps are skipped with when it stopped
/// because another process made it terminal (SPEC §6.3 step 2.1).
const ENDED_ELSEWHERE: &str = "workflow run was cancelled";

/// How the run ends unless something else ends it first. It moves from
/// succeeding towards the later variants, never back (a turn that did not
/// commit restores the one it started from).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ending {
    /// Nothing has failed: the run succeeds once every step has run.
    Succeeding,
    /// A step was skipped because a dependency did not succeed (SPEC §6.3
    /// step 2.4): the run fails with this reason, but the steps that do not
    /// depend on it still start.
    Failing(String),
    /// A step failed without `continueOnFailure`, or the workflow timeout
    /// fired: no further step starts, and the run ends with this status and
    /// reason (SPEC §6.3 "Stop", §6.4).
    Halted(WorkflowRunStatus, String),
    /// Another process made the run terminal, with this status (a cancel, a
    /// lease cascade): its running steps were killed, nothing more starts,
    /// and the run is returned as stored, never finalized again.
    EndedElsewhere(WorkflowRunStatus),
    /// The stop token ended the run: as [`Ending::EndedElsewhere`], and the
    /// token has been handled.
    Stopped(WorkflowRunStatus),
}

impl Ending {
    /// No further step starts.
    pub(super) fn is_halted(&self) -> bool {
        !matches!(self, Ending::Succeeding | Ending::Failing(_))
    }

    /// The run became terminal outside this runner's finalize.
    pub(super) fn is_ended(&self) -> bool {
        matches!(self, Ending::EndedElsewhere(_) | Ending::Stopped(_))
    }

    /// The status the run ends with.
    pub(super) fn status(&self) -> WorkflowRunStatus {
        match self {
            Ending::Succeeding => WorkflowRunStatus::Succeeded,
            Ending::Failing(_) => WorkflowRunStatus::Failed,
            Ending::Halted(status, _)
            | Ending::EndedElsewhere(status)
            | Ending::Stopped(status) => *status,
        }
    }

    /// The run's error, and the reason its remaining steps are skipped.
    pub(super) fn reason(&self) -> Option<&str> {
        match self {
            Ending::Succeeding => None,
            Ending::Failing(reason) | Ending::Halted(_, reason) => Some(reason),
            Ending::EndedElsewhere(_) | Ending::Stopped(_) => Some(ENDED_ELSEWHERE),
        }
    }
}

/// The workflow timeout (SPEC §6.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Deadline {
    /// The run has none (or one too long to add to an instant).
    Never,
    /// It fires at `at`; `ms` is its length, for the messages.
    Pending { at: Instant, ms: u64 },
    /// It fired, and killed the steps running then.
    Fired { ms: u64 },
}

impl Deadline {
    /// The timeout's length, for `workflow timed out after <ms>ms`; 0 when
    /// the run has none.
    pub(super) fn ms(self) -> u64 {
        match self {
            Deadline::Never => 0,
            Deadline::Pending { ms, .. } | Deadline::Fired { ms } => ms,
        }
    }
}
