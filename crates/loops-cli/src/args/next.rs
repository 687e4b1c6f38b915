//! The command line of `loops next` (issue 28): a loop's next fire times,
//! or those of a `--cron` or `--every` schedule given on the command line,
//! as `systemd-analyze calendar --iterations` lists them. As in the parent
//! module, values stay strings until `resolve` checks them.

use clap::Args;

/// How many fire times `next` lists unless `-n` says.
pub(crate) const DEFAULT_ITERATIONS: &str = "5";

/// The most fire times `next` lists.
pub(crate) const MAX_ITERATIONS: u32 = 1000;

/// `loops next --help`, after the flags.
pub(super) const NEXT_AFTER_HELP: &str = "Times are host local time (TZ decides); a cron \
    schedule in another zone also shows its own wall time. A paused loop lists the times it \
    would fire once resumed; a stopped or expired loop has none. Each run is taken to end at \
    its slot, so a dynamic loop's times are the earliest it could fire. --json prints {loop, \
    schedule, times} with the times as UTC ISO-8601 (no loop without one).

Examples:
  loops next backup                        # its next 5 fire times
  loops next report -n 10
  loops next --cron '0 9 * * MON-FRI' --tz Asia/Kolkata
  loops next --every 90m -n 3";

// `loops next`.
#[derive(Debug, Args)]
pub(crate) struct NextArgs {
    /// Loop id, or name (refused when several loops have it).
    #[arg(
        value_name = "LOOP",
        add = crate::complete::loops(),
        required_unless_present_any = ["cron", "every"],
        conflicts_with_all = ["cron", "every"]
    )]
    pub(crate) target: Option<String>,

    /// List N fire times (1 to 1000).
    #[arg(short = 'n', long, value_name = "N", default_value = DEFAULT_ITERATIONS)]
    pub(crate) iterations: String,

    /// The fire times of this 5-field cron expression instead of a loop's.
    #[arg(long, value_name = "EXPR", conflicts_with = "every")]
    pub(crate) cron: Option<String>,

    /// Evaluate --cron in this IANA time zone, e.g. Europe/Berlin [default:
    /// host local time].
    #[arg(long, value_name = "ZONE", requires = "cron", add = crate::complete::zones())]
    pub(crate) tz: Option<String>,

    /// The fire times of an interval of DURATION from now instead of a
    /// loop's (500ms, 30s, 5m, 1h, 1d).
    #[arg(long, value_name = "DURATION")]
    pub(crate) every: Option<String>,
}
