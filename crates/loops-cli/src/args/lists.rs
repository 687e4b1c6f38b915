//! The command lines of `loops list` and `loops runs`: the listings, with
//! their filters and paging (`--limit`, `--offset`).

use clap::Args;

use super::DEFAULT_RUNS_LIMIT;

// `loops list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// Only loops with this status: active, paused, stopped or expired.
    #[arg(long, value_name = "STATUS", add = crate::complete::one_of(loops_core::LoopStatus::ALL))]
    pub(crate) status: Option<String>,

    /// Show at most N loops [default: all].
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<String>,

    /// Skip the first N loops, for paging with --limit [default: 0].
    #[arg(long, value_name = "N")]
    pub(crate) offset: Option<String>,

    /// Only loops with this label; repeated, with all of them [default: any].
    #[arg(long = "label", value_name = "LABEL", add = crate::complete::labels())]
    pub(crate) labels: Vec<String>,
}

// `loops runs`.
#[derive(Debug, Args)]
pub(crate) struct RunsArgs {
    /// Only runs of this loop (id or name; the id of a removed loop whose
    /// history was kept works too) [default: every loop].
    #[arg(value_name = "LOOP", add = crate::complete::loops_and_runs())]
    pub(crate) target: Option<String>,

    /// Show at most N runs.
    #[arg(long, value_name = "N", default_value = DEFAULT_RUNS_LIMIT)]
    pub(crate) limit: String,

    /// Skip the N newest runs first, for paging with --limit [default: 0].
    #[arg(long, value_name = "N")]
    pub(crate) offset: Option<String>,

    /// Only runs with this status: running, succeeded, failed, timed_out,
    /// abandoned or skipped.
    #[arg(long, value_name = "STATUS", add = crate::complete::one_of(loops_core::RunStatus::ALL))]
    pub(crate) status: Option<String>,

    /// Print the runs' stdout and stderr instead of their lengths.
    #[arg(long)]
    pub(crate) show_output: bool,

    /// Only runs of loops with this label; repeated, with all [default: any].
    #[arg(long = "label", value_name = "LABEL", add = crate::complete::labels())]
    pub(crate) labels: Vec<String>,
}
