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

/// A long flag of `loops edit`, as [`edit_flags`] lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EditFlag {
    /// Its name without the dashes: `catch-up`.
    pub(crate) long: String,
    /// Whether it takes a value (`--every 5m`), or is a switch (`--shell`).
    pub(crate) takes_value: bool,
}

/// Every long flag `loops edit` takes, but the global ones, in the order
/// of `loops edit --help`.
pub(crate) fn edit_flags() -> Vec<EditFlag> {
    use clap::Args as _;
    EditArgs::augment_args(clap::Command::new("edit").disable_help_flag(true))
        .get_arguments()
        .filter_map(|arg| {
            Some(EditFlag {
                long: arg.get_long()?.to_owned(),
                takes_value: arg.get_action().takes_values(),
            })
        })
        .collect()
}

/// `loops edit <target> <flags>`, parsed as the command line parses it,
/// for the edits that do not come from a command line (`PATCH` of
/// `loops serve`, `e` in `loops ui`). The error is clap's first line,
/// without its `error: `.
pub(crate) fn parse_edit(target: &str, flags: &[String]) -> Result<EditArgs, String> {
    use clap::{Args as _, FromArgMatches as _};
    let command = EditArgs::augment_args(
        clap::Command::new("loops edit")
            .no_binary_name(true)
            .disable_help_flag(true),
    );
    // `--` first keeps a target that begins with `-` the loop.
    let argv = flags
        .iter()
        .map(String::as_str)
        .chain(["--", target])
        .collect::<Vec<_>>();
    let matches = command.try_get_matches_from(argv).map_err(clap_message)?;
    EditArgs::from_arg_matches(&matches).map_err(clap_message)
}

/// The first line of clap's message, without its `error: `.
fn clap_message(err: clap::Error) -> String {
    let text = err.to_string();
    let line = text.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_flags_parse_as_the_command_line_does() {
        let flags = ["--every", "5m", "--label=a", "--label=b", "--shell"].map(String::from);
        let args = parse_edit("-odd", &flags).unwrap();
        assert_eq!(args.target, "-odd");
        assert_eq!(args.every.as_deref(), Some("5m"));
        assert_eq!(args.policy.labels, ["a", "b"]);
        assert!(args.shell);
        let err = parse_edit("x", &["--evry=5m".to_owned()]).unwrap_err();
        assert!(err.contains("--evry"), "{err}");
        assert!(!err.starts_with("error"), "{err}");
    }

    #[test]
    fn the_flag_list_knows_values_from_switches() {
        let flags = edit_flags();
        let find = |long: &str| flags.iter().find(|f| f.long == long).cloned();
        assert_eq!(find("catch-up").map(|f| f.takes_value), Some(true));
        assert_eq!(find("no-args").map(|f| f.takes_value), Some(false));
        assert_eq!(find("json"), None);
        assert!(find("on-failure").is_some() && find("effort").is_some());
    }
}
