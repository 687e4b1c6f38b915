//! The operating-policy flags of `create` and `edit` (issue 17): labels,
//! expiry after runs, the circuit breaker, the retry backoff and skip exit
//! codes, and `loops labels`. Values stay strings for clap; `resolve::policy`
//! checks them, so a bad one exits 1 with a message naming the flag.

use clap::Args;

// The policy flags of `create` and `edit`: every one off by default, as in
// 0.3.1. (A plain comment: a doc comment would become the help's summary
// of every command that flattens the struct.)
#[derive(Debug, Default, Args)]
pub(crate) struct PolicyOptions {
    /// A label for `list --label` and `runs --label` (repeatable, or
    /// comma-separated): up to 64 characters of A-Z a-z 0-9 . _ : = / -
    /// [default: none].
    #[arg(
        long = "label",
        value_name = "LABEL",
        help_heading = "Labels",
        add = crate::complete::labels()
    )]
    pub(crate) labels: Vec<String>,

    /// Expire the loop after N successful runs in a row; a final failure
    /// starts the count again, skipped runs do not count [default: never].
    #[arg(long, value_name = "N", help_heading = "Policy")]
    pub(crate) expires_after_runs: Option<String>,

    /// Pause the loop after N final failures in a row (after retries);
    /// `loops resume` re-arms it [default: never].
    #[arg(long, value_name = "N", help_heading = "Policy")]
    pub(crate) pause_after_failures: Option<String>,

    /// How retries wait: fixed (--retry-delay each time) or exponential
    /// (--retry-delay × 2^(attempt−1) × a random 0.5–1.5) [default: fixed].
    #[arg(
        long,
        value_name = "POLICY",
        help_heading = "Policy",
        add = crate::complete::one_of(loops_core::Backoff::ALL)
    )]
    pub(crate) backoff: Option<String>,

    /// The longest an exponential retry waits [default: 6h].
    #[arg(long, value_name = "DURATION", help_heading = "Policy")]
    pub(crate) max_retry_delay: Option<String>,

    /// Record a run that exits with CODE as skipped: no failure, no retry,
    /// not counted (repeatable) [default: none].
    #[arg(long = "skip-exit-code", value_name = "CODE", help_heading = "Policy")]
    pub(crate) skip_exit_codes: Vec<String>,

    /// Pause the loop once its runs of the current local day have cost USD
    /// dollars, as its agents report costs; checked before each scheduled
    /// run. `off` removes it on edit [default: no cap].
    #[arg(long, value_name = "USD", help_heading = "Policy")]
    pub(crate) max_cost_per_day: Option<String>,

    /// Run only on daemons and hosts carrying LABEL (repeatable, or
    /// comma-separated; all must match). `''` clears it on edit
    /// [default: anywhere].
    #[arg(long = "runs-on", value_name = "LABEL", help_heading = "Placement")]
    pub(crate) runs_on: Vec<String>,

    /// Run only on host NAME: short for --runs-on host:NAME (repeatable
    /// with --runs-on).
    #[arg(long = "host", value_name = "NAME", help_heading = "Placement")]
    pub(crate) hosts: Vec<String>,

    /// Count the loop's runs against pool NAME, which limits how many of
    /// its members run at once on every host (`loops pools set`). `''`
    /// takes the loop out of its pool on edit [default: none].
    #[arg(
        long,
        value_name = "NAME",
        help_heading = "Placement",
        add = crate::complete::pools()
    )]
    pub(crate) pool: Option<String>,

    /// Run once after each run of LOOP that ended as OUTCOME: succeeded
    /// (the default), failed (after its last attempt) or finished
    /// (repeatable). `''` removes every edge on edit [default: none].
    #[arg(
        long,
        value_name = "LOOP[:OUTCOME]",
        help_heading = "Triggers",
        add = crate::complete::loops()
    )]
    pub(crate) after: Vec<String>,

    /// Run only on triggers (--after, loops trigger): no schedule of its
    /// own, so no --at, --every, --cron or --dynamic. On edit, a schedule
    /// flag puts the loop back on a schedule.
    #[arg(long, help_heading = "Triggers")]
    pub(crate) trigger_only: bool,

    /// Run when files under PATH change, once they stay unchanged for
    /// --debounce (repeatable). Only the daemon of the loop's host
    /// watches: without --host or --runs-on the loop is pinned to this
    /// host. `''` stops watching on edit [default: none].
    #[arg(
        long,
        value_name = "PATH",
        help_heading = "Triggers",
        value_hint = clap::ValueHint::AnyPath
    )]
    pub(crate) watch: Vec<String>,

    /// How long watched files must stay unchanged before the run, such as
    /// 500ms or 2s [default: 2s].
    #[arg(long, value_name = "DURATION", help_heading = "Triggers")]
    pub(crate) debounce: Option<String>,
}

impl PolicyOptions {
    /// Whether any policy flag was given.
    pub(crate) fn given(&self) -> bool {
        !self.labels.is_empty()
            || !self.skip_exit_codes.is_empty()
            || !self.runs_on.is_empty()
            || !self.hosts.is_empty()
            || self.pool.is_some()
            || !self.after.is_empty()
            || self.trigger_only
            || !self.watch.is_empty()
            || [
                &self.expires_after_runs,
                &self.pause_after_failures,
                &self.backoff,
                &self.max_retry_delay,
                &self.max_cost_per_day,
                &self.debounce,
            ]
            .iter()
            .any(|o| o.is_some())
    }
}

/// `loops labels set|add|remove|clear`.
#[derive(Debug, clap::Subcommand)]
#[command(defer = true)]
pub(crate) enum LabelsCommand {
    /// Replace a loop's labels with the ones given.
    #[command(after_help = crate::args::help::LABELS)]
    Set(LabelsArgs),
    /// Add labels to a loop, keeping the ones it has.
    #[command(after_help = crate::args::help::LABELS)]
    Add(LabelsArgs),
    /// Remove labels from a loop; labels it does not have are ignored.
    #[command(after_help = crate::args::help::LABELS)]
    Remove(LabelsArgs),
    /// Remove every label of a loop.
    #[command(after_help = crate::args::help::LABELS)]
    Clear(crate::args::LoopRef),
}

// A loop and labels (a plain comment, as above).
#[derive(Debug, Args)]
pub(crate) struct LabelsArgs {
    /// Loop id, or name (refused when several loops have it).
    #[arg(value_name = "LOOP", add = crate::complete::loops())]
    pub(crate) target: String,

    /// Labels (repeatable, or comma-separated): up to 64 characters of
    /// A-Z a-z 0-9 . _ : = / -.
    #[arg(value_name = "LABEL", required = true, add = crate::complete::labels())]
    pub(crate) labels: Vec<String>,
}
