//! The command line of `loops cancel` (issue 28), and the `--cancel`
//! flags `stop` and `remove` share. As in the parent module, values stay
//! strings until `resolve` checks them.

use clap::Args;

/// `--grace`'s default: between SIGTERM and SIGKILL.
pub(crate) const DEFAULT_CANCEL_GRACE: &str = "5s";

/// `loops cancel --help`, after the flags.
pub(super) const CANCEL_AFTER_HELP: &str = "The run's process group gets SIGTERM, then SIGKILL \
    after --grace. The run is recorded as cancelled, with who cancelled it (cancelledBy: \
    user@host, or mcp); it is not retried and does not count toward --pause-after-failures. \
    The request goes through the database, so on PostgreSQL it reaches the daemon holding the \
    run on any host; cancel waits until the run has ended. A run that already ended is \
    reported as not running (exit 0). --json prints {cancelled: [runs], notRunning: [runs]}.

Examples:
  loops cancel 3f2a9c0d1e4b               # one run, by its id (see loops runs)
  loops cancel nightly-backup             # every running run of a loop
  loops cancel nightly-backup --grace 30s # give it 30 s to clean up
  loops stop nightly-backup --cancel      # stop the loop and its running run";

// `loops cancel`.
#[derive(Debug, Args)]
pub(crate) struct CancelArgs {
    /// A run id, or a loop's id or name (its running runs).
    #[arg(value_name = "RUN|LOOP", add = crate::complete::loops_and_runs())]
    pub(crate) target: String,

    /// Between SIGTERM and SIGKILL.
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_CANCEL_GRACE)]
    pub(crate) grace: String,

    /// Who cancels, when not the user at this host (`loops mcp`).
    #[arg(skip)]
    pub(crate) by: Option<String>,
}

// `--cancel` of `stop` and `remove` (a `//` comment: a doc comment here
// would replace the command's summary, see the parent module).
#[derive(Debug, Clone, Args)]
pub(crate) struct CancelFlags {
    /// Cancel the loop's running runs first (see loops cancel) [default:
    /// leave them running, with a warning].
    #[arg(long)]
    pub(crate) cancel: bool,

    /// With --cancel: between SIGTERM and SIGKILL.
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_CANCEL_GRACE, requires = "cancel")]
    pub(crate) grace: String,
}

impl CancelFlags {
    /// No `--cancel`, as a surface without the flags asks.
    pub(crate) fn none() -> CancelFlags {
        CancelFlags {
            cancel: false,
            grace: DEFAULT_CANCEL_GRACE.to_owned(),
        }
    }
}

// `loops stop`.
#[derive(Debug, Args)]
pub(crate) struct StopArgs {
    #[command(flatten)]
    pub(crate) target: super::LoopRef,

    #[command(flatten)]
    pub(crate) cancel: CancelFlags,
}

impl StopArgs {
    /// `stop` of `target` without `--cancel`.
    pub(crate) fn of(target: super::LoopRef) -> StopArgs {
        StopArgs {
            target,
            cancel: CancelFlags::none(),
        }
    }
}
