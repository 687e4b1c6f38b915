//! The command line, stage one: clap parses raw values (SPEC §7).
//!
//! Every value with a SPEC error message (durations, counts, policies,
//! dates) is kept here as the string the user typed, so `resolve` can reject
//! it with that exact message and exit code 1; clap only catches what the
//! SPEC leaves to the parser (unknown flags, missing required options), and
//! those exit 2. Each flag's help text sits next to it and names its default.
//!
//! The subcommands are built only when used (`#[command(defer = true)]`,
//! `docs/perf.md#process-start`). The `Args` structs therefore carry `//`
//! comments, not doc comments: a deferred struct's doc comment would
//! replace the summary of the command it belongs to (a black-box test
//! checks every summary).

use clap::{Args, Parser, Subcommand};

pub(crate) mod agent;
pub(crate) mod apply;
pub(crate) mod cancel;
pub(crate) mod daemon;
pub(crate) mod edit;
pub(crate) mod help;
pub(crate) mod hook;
mod lists;
mod maintenance;
pub(crate) mod next;
pub(crate) mod policy;
pub(crate) mod pools;
pub(crate) mod report;
pub(crate) mod serve;
pub(crate) mod trigger;
pub(crate) mod workflow;

pub(crate) use lists::{ListArgs, RunsArgs};
pub(crate) use maintenance::{
    BackupArgs, CompletionsArgs, ExportArgs, ExportFormat, GcArgs, ImportArgs, ManArgs, RestoreArgs,
};

/// The version `--version` prints: the original's, bare (SPEC §7.1).
pub(crate) const VERSION: &str = "0.3.1";

/// Local-first scheduler for persistent loops: recurring or one-shot jobs
/// that survive restarts and record every run.
#[derive(Debug, Parser)]
#[command(
    name = "loops",
    version = VERSION,
    long_about = None,
    after_help = crate::args::help::ROOT,
    after_long_help = crate::args::help::ROOT_LONG,
    subcommand_required = true,
    arg_required_else_help = true,
    max_term_width = 100
)]
pub(crate) struct Cli {
    /// Print machine-readable JSON (pretty, camelCase) instead of text.
    #[arg(short = 'j', long, global = true)]
    pub(crate) json: bool,

    /// Say more in human output: a missing executable's message keeps the
    /// whole PATH runs get.
    #[arg(short = 'v', long, global = true)]
    pub(crate) verbose: bool,
    /// Print nothing on stdout when the command succeeds, and no hints or
    /// warnings; errors still go to stderr and exit codes do not change.
    #[arg(short = 'q', long, global = true)]
    pub(crate) quiet: bool,

    /// Use this PostgreSQL database instead of SQLite [default: $LOOPS_DATABASE_URL]
    ///
    /// A libpq connection string: postgresql://user@host/dbname,
    /// postgresql:///dbname?host=/socket/dir, or 'host=/run/postgresql
    /// dbname=loops'. Daemons on several hosts may share one database.
    /// $LOOPS_DATA_DIR still holds this host's pid file, wake socket and log.
    #[arg(long, value_name = "URL")]
    pub(crate) database_url: Option<String>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum Command {
    /// Create a loop that runs a command, a coding agent or a workflow.
    #[command(subcommand, after_help = crate::args::help::CREATE)]
    Create(Create),
    /// List loops, grouped by status, soonest next run first.
    #[command(visible_alias = "ls", after_help = crate::args::help::LIST)]
    List(ListArgs),
    /// Show one loop: its status card on a terminal, else its JSON.
    #[command(after_help = crate::args::help::SHOW)]
    Show(LoopRef),
    /// Show a loop at a glance: state, schedule, next and last runs, output.
    #[command(after_help = crate::args::help::STATUS)]
    Status(LoopRef),
    /// List a loop's next fire times, or those of a --cron or --every schedule.
    #[command(after_help = next::NEXT_AFTER_HELP)]
    Next(next::NextArgs),
    /// Change a loop's schedule, target or options in place.
    Edit(crate::args::edit::EditArgs),
    /// Give a loop a new name.
    #[command(after_help = crate::args::help::RENAME)]
    Rename(crate::args::edit::RenameArgs),
    /// List recorded runs, newest first.
    #[command(after_help = crate::args::help::RUNS)]
    Runs(RunsArgs),
    /// Set, add, remove or clear a loop's labels.
    #[command(subcommand, after_help = crate::args::help::LABELS)]
    Labels(crate::args::policy::LabelsCommand),
    /// Create, list and remove pools: limits on how many member runs run at once.
    #[command(subcommand, after_help = pools::POOLS_AFTER_HELP)]
    Pools(pools::PoolsCommand),
    /// Print a run's output: a loop's latest run, or the run given; -f follows it live.
    #[command(after_help = LOGS_AFTER_HELP)]
    Logs(LogsArgs),
    /// List failing loops, grouped by failure class and fingerprint.
    #[command(after_help = report::HEALTH_AFTER_HELP)]
    Health(report::HealthArgs),
    /// Total what agent runs cost and the tokens they used, per loop, provider, day or label.
    #[command(after_help = report::COST_AFTER_HELP)]
    Cost(report::CostArgs),
    /// Pause an active loop; its next run is kept.
    #[command(after_help = crate::args::help::PAUSE)]
    Pause(LoopRef),
    /// Put a paused or stopped loop back on its schedule.
    #[command(after_help = crate::args::help::RESUME)]
    Resume(LoopRef),
    /// Stop a loop and clear its next run.
    #[command(after_help = crate::args::help::STOP)]
    Stop(cancel::StopArgs),
    /// Remove a loop; its run history is kept unless --purge is given.
    #[command(visible_alias = "rm", after_help = crate::args::help::REMOVE)]
    Remove(RemoveArgs),
    /// Cancel a running run, or a loop's running runs.
    #[command(after_help = cancel::CANCEL_AFTER_HELP)]
    Cancel(cancel::CancelArgs),
    /// Run a loop now, whatever its status, and wait for the result.
    #[command(after_help = crate::args::help::RUN_NOW)]
    RunNow(RunNowArgs),
    /// Start a loop's run soon, from a daemon that can run it, handing it a payload.
    #[command(after_help = trigger::TRIGGER_AFTER_HELP)]
    Trigger(trigger::TriggerArgs),
    /// Run every due slot once, then exit.
    #[command(after_help = crate::args::help::TICK)]
    Tick(TickArgs),
    /// Delete old finished runs, keeping each loop's newest (a dry run unless --apply).
    #[command(after_help = crate::args::help::GC)]
    Gc(GcArgs),
    /// Validate, store, run and inspect workflows: DAGs of command and agent steps.
    #[command(subcommand, visible_alias = "workflow", after_help = crate::args::help::WORKFLOWS)]
    Workflows(crate::args::workflow::Workflows),
    /// Run the scheduler as a daemon, and start, stop, inspect or install it.
    #[command(subcommand, after_help = crate::args::help::DAEMON)]
    Daemon(crate::args::daemon::Daemon),
    /// Check that the data dir, PATH, accounts and daemon are ready.
    #[command(after_help = crate::args::help::DOCTOR)]
    Doctor(crate::args::daemon::DoctorArgs),
    /// Back up the database into $LOOPS_DATA_DIR/backups, or list the backups.
    #[command(after_help = crate::args::help::BACKUP)]
    Backup(BackupArgs),
    /// Put a backup back in place of the database, keeping the current one as a backup.
    #[command(after_help = crate::args::help::RESTORE)]
    Restore(RestoreArgs),
    /// Write every loop and workflow, and the run history, to one JSON file.
    #[command(after_help = maintenance::EXPORT_AFTER_HELP)]
    Export(ExportArgs),
    /// Read a `loops export` file into this database (a dry run unless --apply).
    #[command(after_help = maintenance::IMPORT_AFTER_HELP)]
    Import(ImportArgs),
    /// Make the loops a file describes exist: create, update, and with --prune remove.
    #[command(after_help = apply::APPLY_AFTER_HELP)]
    Apply(apply::ApplyArgs),
    /// Print the JSON Schema of a loops file or a workflow file.
    #[command(
        after_help = "Examples:\n  loops schema loops-file > loops-file.schema.json\n  loops schema workflow"
    )]
    Schema(apply::SchemaArgs),
    /// Print a shell completion script: bash, zsh, fish, elvish or powershell.
    #[command(after_help = crate::args::help::COMPLETIONS)]
    Completions(CompletionsArgs),
    /// Write the man pages (loops.1 and one per subcommand) into a directory.
    #[command(after_help = crate::args::help::MAN)]
    Man(ManArgs),
    /// Serve the Model Context Protocol on stdin and stdout, for coding agents.
    #[command(after_help = crate::args::help::MCP)]
    Mcp(McpArgs),
    /// A live dashboard of every loop in this terminal.
    #[command(after_help = crate::args::help::UI)]
    Ui,
    /// Serve the JSON API over HTTP on this machine, with an access token.
    #[command(after_help = serve::SERVE_AFTER_HELP)]
    Serve(serve::ServeArgs),
}

// `loops mcp`: the server has no options of its own; the environment
// decides what it allows (see the help's text after the options).
#[derive(Debug, Args)]
pub(crate) struct McpArgs {}

#[expect(
    clippy::large_enum_variant,
    reason = "parsed once per process; an agent's options outweigh a command's"
)]
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum Create {
    /// Create a loop that runs a command.
    #[command(after_help = crate::args::help::CREATE_COMMAND)]
    Command(CreateCommand),
    /// Create a loop that runs a headless coding agent.
    #[command(after_help = crate::args::help::CREATE_AGENT)]
    Agent(CreateAgent),
    /// Create a loop that runs a stored workflow.
    #[command(after_help = crate::args::help::CREATE_WORKFLOW)]
    Workflow(CreateWorkflow),
}

// The defaults of the `create` options, for `loops mcp` too, which builds
// the same structs without clap.
pub(crate) const DEFAULT_CATCH_UP: &str = "latest";
pub(crate) const DEFAULT_CATCH_UP_LIMIT: &str = "50";
pub(crate) const DEFAULT_OVERLAP: &str = "skip";
pub(crate) const DEFAULT_ATTEMPTS: &str = "1";
pub(crate) const DEFAULT_RETRY_DELAY: &str = "1m";
pub(crate) const DEFAULT_LEASE: &str = "30m";
// `loops runs --limit`'s default.
pub(crate) const DEFAULT_RUNS_LIMIT: &str = "50";

// The options every `create` command shares (SPEC §7.3).
#[derive(Debug, Args)]
pub(crate) struct LoopOptions {
    /// Name of the loop. Names need not be unique, but a command given a
    /// name several loops share refuses it and lists their ids.
    pub(crate) name: String,

    /// Run once, at TIME. ISO-8601 with Z or an offset is exact, a bare date
    /// is UTC midnight, a date-time without an offset is host local time.
    #[arg(
        long,
        value_name = "TIME",
        help_heading = "Schedule (choose exactly one)"
    )]
    pub(crate) at: Option<String>,

    /// Run every DURATION on a fixed-rate grid (500ms, 30s, 5m, 1h, 1d; a
    /// bare number of 1000 or more is milliseconds).
    #[arg(
        long,
        value_name = "DURATION",
        help_heading = "Schedule (choose exactly one)"
    )]
    pub(crate) every: Option<String>,

    /// Run on a 5-field cron expression: minute hour day-of-month month
    /// day-of-week, e.g. "0 9 * * 1-5".
    #[arg(
        long,
        value_name = "EXPR",
        help_heading = "Schedule (choose exactly one)"
    )]
    pub(crate) cron: Option<String>,

    /// Run again one minute after each run finishes.
    #[arg(long, help_heading = "Schedule (choose exactly one)")]
    pub(crate) dynamic: bool,

    /// Evaluate --cron in this IANA time zone, e.g. Europe/Berlin [default:
    /// host local time].
    #[arg(
        long,
        value_name = "ZONE",
        help_heading = "Schedule (choose exactly one)",
        add = crate::complete::zones()
    )]
    pub(crate) tz: Option<String>,

    /// What a runner does with missed slots: none (run the stale slot once),
    /// latest (run only the newest), all (run each, up to --catch-up-limit).
    #[arg(
        long,
        value_name = "POLICY",
        default_value = DEFAULT_CATCH_UP,
        help_heading = "Policy",
        add = crate::complete::one_of(loops_core::CatchUp::ALL)
    )]
    pub(crate) catch_up: String,

    /// Most missed slots one tick runs under --catch-up all (1 to 10000).
    #[arg(long, value_name = "N", default_value = DEFAULT_CATCH_UP_LIMIT, help_heading = "Policy")]
    pub(crate) catch_up_limit: String,

    /// What happens to a slot that comes due while a run is still active:
    /// skip (record it as skipped) or allow (run it anyway).
    #[arg(
        long,
        value_name = "POLICY",
        default_value = DEFAULT_OVERLAP,
        help_heading = "Policy",
        add = crate::complete::one_of(loops_core::Overlap::ALL)
    )]
    pub(crate) overlap: String,

    /// Attempts per slot; a failed run is retried until they are used up.
    #[arg(long, value_name = "N", default_value = DEFAULT_ATTEMPTS, help_heading = "Policy")]
    pub(crate) attempts: String,

    /// Delay before a retry.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = DEFAULT_RETRY_DELAY,
        help_heading = "Policy"
    )]
    pub(crate) retry_delay: String,

    /// How long a runner owns a run without a heartbeat before another
    /// runner may recover it.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = DEFAULT_LEASE,
        help_heading = "Policy"
    )]
    pub(crate) lease: String,

    /// Stop scheduling the loop at TIME (same formats as --at) [default:
    /// never].
    #[arg(long, value_name = "TIME", help_heading = "Policy")]
    pub(crate) expires_at: Option<String>,

    /// Free-text description.
    #[arg(short = 'd', long, value_name = "TEXT")]
    pub(crate) description: Option<String>,

    /// Check the loop and print it with its next 3 fire times, storing
    /// nothing (no data directory or database is created either).
    #[arg(long)]
    pub(crate) dry_run: bool,

    #[command(flatten)]
    pub(crate) policy: crate::args::policy::PolicyOptions,

    #[command(flatten)]
    pub(crate) hooks: crate::args::hook::HookOptions,
}

// The account options of command and agent targets (SPEC §5.4).
#[derive(Debug, Args)]
pub(crate) struct AccountOptions {
    /// Run under this `accounts` profile (its environment comes from
    /// `accounts env <profile> --tool <tool>`).
    #[arg(long, value_name = "PROFILE", help_heading = "Account")]
    pub(crate) account: Option<String>,

    /// The `accounts` tool of --account [default: the agent's provider].
    #[arg(long, value_name = "TOOL", help_heading = "Account")]
    pub(crate) account_tool: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct CreateCommand {
    #[command(flatten)]
    pub(crate) options: LoopOptions,

    /// The command line to run, through /bin/sh -c unless --no-shell.
    #[arg(
        long = "cmd",
        value_name = "COMMAND",
        allow_hyphen_values = true,
        help_heading = "Target"
    )]
    pub(crate) command: String,

    /// An argument to append to the command (repeatable).
    #[arg(
        long = "arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        help_heading = "Target"
    )]
    pub(crate) args: Vec<String>,

    /// Run the command directly instead of through a shell: --cmd is then a
    /// single executable and its arguments go in --arg.
    #[arg(long, help_heading = "Target")]
    pub(crate) no_shell: bool,

    /// Working directory of the run; ~ and a relative path are made
    /// absolute [default: the directory create runs in].
    #[arg(long, value_name = "DIR", help_heading = "Target", value_hint = clap::ValueHint::DirPath)]
    pub(crate) cwd: Option<String>,

    /// Environment variables of the run. The help text is an attribute
    /// because its brackets would read as a rustdoc link.
    #[arg(
        long = "env",
        value_name = "KEY=VALUE",
        help_heading = "Target",
        help = "An environment variable for the run, KEY=VALUE (repeatable). Values are stored \
                in the database and always printed as \"[redacted]\""
    )]
    pub(crate) env: Vec<String>,

    /// Kill the run after DURATION [default: 30m].
    #[arg(long, value_name = "DURATION", help_heading = "Target")]
    pub(crate) timeout: Option<String>,

    #[command(flatten)]
    pub(crate) account: AccountOptions,
}

#[derive(Debug, Args)]
pub(crate) struct CreateAgent {
    #[command(flatten)]
    pub(crate) options: LoopOptions,

    /// The agent CLI: claude, cursor, codewith, aicopilot, opencode or codex.
    #[arg(
        long,
        value_name = "PROVIDER",
        help_heading = "Target",
        add = crate::complete::one_of(loops_core::AgentProvider::ALL)
    )]
    pub(crate) provider: String,

    /// The prompt, written to the agent's stdin (never on its command
    /// line, where `ps` would show it).
    #[arg(
        long,
        value_name = "TEXT",
        allow_hyphen_values = true,
        required_unless_present = "prompt_file",
        conflicts_with = "prompt_file",
        help_heading = "Target"
    )]
    pub(crate) prompt: Option<String>,

    /// A file whose text is the prompt, read again at each run (so editing
    /// it changes the next run); stored as an absolute path. Instead of
    /// --prompt.
    #[arg(long, value_name = "PATH", help_heading = "Target", value_hint = clap::ValueHint::FilePath)]
    pub(crate) prompt_file: Option<String>,

    /// Working directory of the run; ~ and a relative path are made
    /// absolute [default: the directory create runs in].
    #[arg(long, value_name = "DIR", help_heading = "Target", value_hint = clap::ValueHint::DirPath)]
    pub(crate) cwd: Option<String>,

    /// The model to ask the provider for [default: the provider's].
    #[arg(long, value_name = "MODEL", help_heading = "Target")]
    pub(crate) model: Option<String>,

    /// The provider's named agent to run (not for codex).
    #[arg(long, value_name = "AGENT", help_heading = "Target")]
    pub(crate) agent: Option<String>,

    /// Kill the run after DURATION; none for no wall clock and no default
    /// idle watchdog [default: no wall clock, the idle watchdog only].
    #[arg(long, value_name = "DURATION|none", help_heading = "Target")]
    pub(crate) timeout: Option<String>,

    /// Environment variables of the run. The help text is an attribute
    /// because its brackets would read as a rustdoc link.
    #[arg(
        long = "env",
        value_name = "KEY=VALUE",
        help_heading = "Target",
        help = "An environment variable for the run, KEY=VALUE (repeatable). Values are stored \
                in the database and always printed as \"[redacted]\""
    )]
    pub(crate) env: Vec<String>,

    /// safe runs the agent with the provider's isolation flags (no user
    /// settings, no session persistence); none adds nothing.
    #[arg(
        long,
        value_name = "MODE",
        default_value = "safe",
        help_heading = "Target",
        add = crate::complete::one_of(loops_core::ConfigIsolation::ALL)
    )]
    pub(crate) config_isolation: String,

    #[command(flatten)]
    pub(crate) agent_options: agent::AgentOptions,

    #[command(flatten)]
    pub(crate) account: AccountOptions,
}

#[derive(Debug, Args)]
pub(crate) struct CreateWorkflow {
    #[command(flatten)]
    pub(crate) options: LoopOptions,

    /// The workflow to run: its id, or the name of an active workflow. The
    /// id is stored, so renaming or archiving the workflow does not change
    /// what the loop runs.
    #[arg(long, value_name = "WORKFLOW", help_heading = "Target", add = crate::complete::workflows())]
    pub(crate) workflow: String,

    /// Stop the whole workflow run after DURATION; 0 means no limit
    /// [default: no limit; each step still has its own timeout].
    #[arg(long, value_name = "DURATION", help_heading = "Target")]
    pub(crate) timeout: Option<String>,
}

// A loop, by id or name.
#[derive(Debug, Args)]
pub(crate) struct LoopRef {
    /// Loop id, or name (refused when several loops have it).
    #[arg(value_name = "LOOP", add = crate::complete::loops())]
    pub(crate) target: String,
}

#[derive(Debug, Args)]
pub(crate) struct RemoveArgs {
    #[command(flatten)]
    pub(crate) target: LoopRef,

    /// Also delete the loop's run history [default: keep it].
    #[arg(long)]
    pub(crate) purge: bool,

    #[command(flatten)]
    pub(crate) cancel: cancel::CancelFlags,
}

#[derive(Debug, Args)]
pub(crate) struct RunNowArgs {
    #[command(flatten)]
    pub(crate) target: LoopRef,

    /// Print the run's stdout and stderr instead of their lengths.
    #[arg(long)]
    pub(crate) show_output: bool,

    /// Run the loop here even though it is placed (--runs-on) on labels
    /// this host and its daemons lack.
    #[arg(long)]
    pub(crate) anywhere: bool,

    /// Run the loop now even though its pool is full, instead of waiting
    /// for a run of the pool to end; the run still counts in the pool.
    #[arg(long)]
    pub(crate) ignore_pool: bool,
}

/// `loops logs --help`, after the flags.
const LOGS_AFTER_HELP: &str = "\
Each run's output is kept, as it is produced, in $LOOPS_DATA_DIR/logs/<run-id>.log
(stdout and stderr interleaved, at most 256 KiB of each; gc deletes it with its run).
Without that file (a run of another host, a workflow run) the stored output is printed.
--json prints {runId, loopId, loopName, status, attempt, exitCode, error, stdout,
stderr, log} once the run has ended; with -f on a loop, one such line per run.

Examples:
  loops logs nightly-backup        the latest run of a loop, by name or id
  loops logs 3f2a9c0d1e4b          one run, by its id (see loops runs)
  loops logs -f nightly-backup     follow a loop across its runs until Ctrl-C
  loops logs -f 3f2a9c0d1e4b       follow one run live until it ends";

#[derive(Debug, Args)]
pub(crate) struct LogsArgs {
    /// A loop's id or name (its latest run), or a run id.
    #[arg(value_name = "LOOP|RUN", add = crate::complete::loops_and_runs())]
    pub(crate) target: String,

    /// Follow live: a run until it ends, a loop across its runs until Ctrl-C [default: print and exit].
    #[arg(short = 'f', long)]
    pub(crate) follow: bool,
}

#[derive(Debug, Args)]
pub(crate) struct TickArgs {
    /// Most runs executing at once (the slots of one loop always run one
    /// after another).
    #[arg(long, value_name = "N", default_value = "32")]
    pub(crate) max_parallel: String,

    /// Print the runs' stdout and stderr instead of their lengths.
    #[arg(long)]
    pub(crate) show_output: bool,

    /// Also run the due loops placed (--runs-on) on labels this host and
    /// its daemons lack; without it they are skipped with a warning.
    #[arg(long)]
    pub(crate) anywhere: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_backup_keep_default_is_the_stores() {
        let cli = Cli::try_parse_from(["loops", "backup"]).unwrap();
        let Command::Backup(backup) = cli.command else {
            panic!("parsed as {:?}", cli.command);
        };
        assert_eq!(backup.keep, loops_store::DEFAULT_BACKUP_KEEP.to_string());
    }

    #[test]
    fn the_tick_default_is_the_schedulers() {
        let cli = Cli::try_parse_from(["loops", "tick"]).unwrap();
        let Command::Tick(tick) = cli.command else {
            panic!("parsed as {:?}", cli.command);
        };
        assert_eq!(
            tick.max_parallel,
            loops_scheduler::DEFAULT_MAX_PARALLEL.to_string()
        );
    }

    #[test]
    fn the_daemon_default_is_the_schedulers() {
        for verb in ["run", "start"] {
            let cli = Cli::try_parse_from(["loops", "daemon", verb]).unwrap();
            let Command::Daemon(
                crate::args::daemon::Daemon::Run(run) | crate::args::daemon::Daemon::Start(run),
            ) = cli.command
            else {
                panic!("parsed as {:?}", cli.command);
            };
            assert_eq!(
                run.max_parallel,
                loops_scheduler::DEFAULT_MAX_PARALLEL.to_string()
            );
            // `daemon install` leaves the default out of the service.
            assert_eq!(run.grace, crate::args::daemon::DEFAULT_GRACE_FLAG);
        }
    }
}
