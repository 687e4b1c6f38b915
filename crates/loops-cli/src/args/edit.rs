//! The `loops edit` and `loops rename` command lines (issue 16), stage one:
//! raw values, resolved in `commands::edit` with the same functions that
//! resolve `create`'s.
//!
//! Every flag is optional and has no default: what is not given stays as
//! stored. The flags are the ones of `create command|agent|workflow`, under
//! the same names; one that does not fit the loop's target is refused.

use clap::Args;

// `loops edit <loop> [flags]`.
#[derive(Debug, Args)]
#[command(after_help = EDIT_AFTER_HELP)]
pub(crate) struct EditArgs {
    /// Loop id, or name (refused when several loops have it).
    #[arg(value_name = "LOOP", add = crate::complete::loops())]
    pub(crate) target: String,

    /// Run once, at TIME (as in create).
    #[arg(long, value_name = "TIME", help_heading = "Schedule (at most one)")]
    pub(crate) at: Option<String>,

    /// Run every DURATION on a fixed-rate grid (as in create).
    #[arg(long, value_name = "DURATION", help_heading = "Schedule (at most one)")]
    pub(crate) every: Option<String>,

    /// Run on a 5-field cron expression (as in create).
    #[arg(long, value_name = "EXPR", help_heading = "Schedule (at most one)")]
    pub(crate) cron: Option<String>,

    /// Run again one minute after each run finishes.
    #[arg(long, help_heading = "Schedule (at most one)")]
    pub(crate) dynamic: bool,

    /// Evaluate the cron schedule in this IANA time zone; alone, it changes
    /// the zone of a cron loop and keeps its expression [default: as stored].
    #[arg(
        long,
        value_name = "ZONE",
        help_heading = "Schedule (at most one)",
        add = crate::complete::zones()
    )]
    pub(crate) tz: Option<String>,

    /// Missed-slot policy: none, latest or all [default: as stored].
    #[arg(
        long,
        value_name = "POLICY",
        help_heading = "Policy",
        add = crate::complete::one_of(loops_core::CatchUp::ALL)
    )]
    pub(crate) catch_up: Option<String>,

    /// Most missed slots one tick runs under --catch-up all [default: as
    /// stored].
    #[arg(long, value_name = "N", help_heading = "Policy")]
    pub(crate) catch_up_limit: Option<String>,

    /// Overlap policy: skip or allow [default: as stored].
    #[arg(
        long,
        value_name = "POLICY",
        help_heading = "Policy",
        add = crate::complete::one_of(loops_core::Overlap::ALL)
    )]
    pub(crate) overlap: Option<String>,

    /// Attempts per slot [default: as stored].
    #[arg(long, value_name = "N", help_heading = "Policy")]
    pub(crate) attempts: Option<String>,

    /// Delay before a retry [default: as stored].
    #[arg(long, value_name = "DURATION", help_heading = "Policy")]
    pub(crate) retry_delay: Option<String>,

    /// Run lease length [default: as stored].
    #[arg(long, value_name = "DURATION", help_heading = "Policy")]
    pub(crate) lease: Option<String>,

    /// Stop scheduling the loop at TIME; `never` removes the expiry
    /// [default: as stored].
    #[arg(long, value_name = "TIME", help_heading = "Policy")]
    pub(crate) expires_at: Option<String>,

    /// Free-text description; '' removes it [default: as stored].
    #[arg(short = 'd', long, value_name = "TEXT")]
    pub(crate) description: Option<String>,

    /// Labels, the counts (`off` removes one), backoff and skip exit codes
    /// (issue 17); a list given replaces the stored one, '' clears it.
    #[command(flatten)]
    pub(crate) policy: crate::args::policy::PolicyOptions,

    /// Command loops: the command line to run.
    #[arg(
        long = "cmd",
        value_name = "COMMAND",
        allow_hyphen_values = true,
        help_heading = "Command target"
    )]
    pub(crate) command: Option<String>,

    /// Command loops: the arguments, replacing the stored ones (repeatable).
    #[arg(
        long = "arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        help_heading = "Command target"
    )]
    pub(crate) args: Vec<String>,

    /// Command loops: remove every stored argument.
    #[arg(long, conflicts_with = "args", help_heading = "Command target")]
    pub(crate) no_args: bool,

    /// Command loops: run the command directly, not through a shell.
    #[arg(long, help_heading = "Command target")]
    pub(crate) no_shell: bool,

    /// Command loops: run the command through /bin/sh -c again.
    #[arg(long, conflicts_with = "no_shell", help_heading = "Command target")]
    pub(crate) shell: bool,

    /// Command and agent loops: the environment, KEY=VALUE, replacing the
    /// stored one (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE", help_heading = "Any target")]
    pub(crate) env: Vec<String>,

    /// Command and agent loops: remove every stored environment variable.
    #[arg(long, conflicts_with = "env", help_heading = "Any target")]
    pub(crate) no_env: bool,

    /// Agent loops: the agent CLI (claude, cursor, codewith, aicopilot,
    /// opencode or codex).
    #[arg(
        long,
        value_name = "PROVIDER",
        help_heading = "Agent target",
        add = crate::complete::one_of(loops_core::AgentProvider::ALL)
    )]
    pub(crate) provider: Option<String>,

    /// Agent loops: the prompt.
    #[arg(
        long,
        value_name = "TEXT",
        allow_hyphen_values = true,
        help_heading = "Agent target"
    )]
    pub(crate) prompt: Option<String>,

    /// Agent loops: read the prompt from this file at each run, as `create
    /// agent --prompt-file` does; replaces a stored --prompt.
    #[arg(
        long,
        value_name = "PATH",
        conflicts_with = "prompt",
        help_heading = "Agent target",
        value_hint = clap::ValueHint::FilePath
    )]
    pub(crate) prompt_file: Option<String>,

    /// Agent loops: the model; '' returns to the provider's.
    #[arg(long, value_name = "MODEL", help_heading = "Agent target")]
    pub(crate) model: Option<String>,

    /// Agent loops: the provider's named agent; '' removes it.
    #[arg(long, value_name = "AGENT", help_heading = "Agent target")]
    pub(crate) agent: Option<String>,

    /// Agent loops: safe or none.
    #[arg(
        long,
        value_name = "MODE",
        help_heading = "Agent target",
        add = crate::complete::one_of(loops_core::ConfigIsolation::ALL)
    )]
    pub(crate) config_isolation: Option<String>,

    #[command(flatten)]
    pub(crate) agent_options: crate::args::agent::EditAgentOptions,

    /// Workflow loops: the workflow to run, by id or active name.
    #[arg(
        long,
        value_name = "WORKFLOW",
        help_heading = "Workflow target",
        add = crate::complete::workflows()
    )]
    pub(crate) workflow: Option<String>,

    /// Command and agent loops: the working directory (~ and relative
    /// paths are made absolute).
    #[arg(
        long,
        value_name = "DIR",
        help_heading = "Any target",
        value_hint = clap::ValueHint::DirPath
    )]
    pub(crate) cwd: Option<String>,

    /// Kill the run after DURATION; '' returns to the default (workflow
    /// loops: 0 means no limit; agent loops: none for no wall clock and no
    /// default idle watchdog).
    #[arg(long, value_name = "DURATION", help_heading = "Any target")]
    pub(crate) timeout: Option<String>,

    /// Command and agent loops: the `accounts` profile; '' removes the
    /// account.
    #[arg(long, value_name = "PROFILE", help_heading = "Any target")]
    pub(crate) account: Option<String>,

    /// Command and agent loops: the `accounts` tool of the account.
    #[arg(long, value_name = "TOOL", help_heading = "Any target")]
    pub(crate) account_tool: Option<String>,

    #[command(flatten)]
    pub(crate) hooks: crate::args::hook::EditHookOptions,
}

const EDIT_AFTER_HELP: &str = "Only what is given changes; the loop keeps its id, status, \
    creation time and runs. A new schedule gets its next run from now, as create computes it \
    (a paused loop stays paused, a stopped or expired one gets its next run when resumed). \
    Values are checked as create checks them.\n\nExamples:\n  loops edit nightly --every 2h\n  \
    loops edit nightly --cron '0 9 * * 1-5' --tz Europe/Berlin\n  loops edit 1a2b3c4d5e6f \
    --cmd ./build.sh --timeout 10m\n  loops edit nightly --expires-at never -d ''\n  \
    loops edit nightly --on-failure 'notify-send \"$LOOPS_LOOP_NAME failed\"'\n  \
    loops edit review --effort high --idle-timeout 20m --add-dir ''";

// `loops rename <loop> <new-name>`.
#[derive(Debug, Args)]
pub(crate) struct RenameArgs {
    /// Loop id, or name (refused when several loops have it).
    #[arg(value_name = "LOOP", add = crate::complete::loops())]
    pub(crate) target: String,

    /// The new name.
    #[arg(value_name = "NEW_NAME")]
    pub(crate) name: String,
}
