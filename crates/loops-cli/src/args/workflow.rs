//! The `loops workflows` command line (SPEC §7.4 "workflows"), stage one:
//! raw values, resolved in `commands::workflows`.
//!
//! As in `args`, counts stay strings here so `--limit 0` is rejected with
//! the SPEC wording and exit code 1; clap only catches usage errors (exit 2).

use clap::{Args, Subcommand};

/// `loops workflows <command>`.
// `workflows list --status`'s default, for `loops mcp` too.
pub(crate) const DEFAULT_LIST_STATUS: &str = "active";

/// `workflows runs --limit`'s default, for `loops serve` too.
pub(crate) const DEFAULT_RUNS_LIMIT: &str = "50";

#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub(crate) enum Workflows {
    /// Check a workflow file without storing it.
    #[command(after_help = crate::args::help::WORKFLOWS_VALIDATE)]
    Validate(ValidateArgs),
    /// Store a workflow file as an active workflow.
    #[command(after_help = crate::args::help::WORKFLOWS_CREATE)]
    Create(CreateArgs),
    /// List workflows, most recently changed first.
    #[command(visible_alias = "ls", after_help = crate::args::help::WORKFLOWS_LIST)]
    List(ListArgs),
    /// Print one workflow as JSON.
    #[command(after_help = crate::args::help::WORKFLOWS_SHOW)]
    Show(WorkflowRef),
    /// Run a workflow now and wait for it; exits 0 only when it succeeds.
    #[command(after_help = crate::args::help::WORKFLOWS_RUN)]
    Run(RunArgs),
    /// List workflow runs, newest first.
    #[command(after_help = crate::args::help::WORKFLOWS_RUNS)]
    Runs(RunsArgs),
    /// Show one workflow run with its steps and events.
    #[command(after_help = crate::args::help::WORKFLOWS_INSPECT)]
    Inspect(InspectArgs),
    /// List the event log of a workflow run.
    #[command(after_help = crate::args::help::WORKFLOWS_EVENTS)]
    Events(EventsArgs),
    /// Cancel a running workflow run; the process running it stops its step.
    #[command(after_help = crate::args::help::WORKFLOWS_CANCEL)]
    Cancel(CancelArgs),
    /// Reset the running steps of a run whose runner died, for `run --resume`.
    #[command(after_help = crate::args::help::WORKFLOWS_RECOVER)]
    Recover(RecoverArgs),
    /// Archive a workflow: its name is free again, loops that use it keep
    /// running it.
    #[command(after_help = crate::args::help::WORKFLOWS_ARCHIVE)]
    Archive(WorkflowRef),
    /// Print the JSON Schema of workflow files.
    #[command(after_help = crate::args::help::WORKFLOWS_SCHEMA)]
    Schema,
}

// A workflow file and the name to store it under.
#[derive(Debug, Args)]
pub(crate) struct FileArgs {
    /// The workflow file: JSON with name, description, maxParallel and steps.
    #[arg(value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub(crate) file: String,

    /// Use this name instead of the file's `name`.
    #[arg(long, value_name = "NAME")]
    pub(crate) name: Option<String>,
}

// `workflows validate`.
#[derive(Debug, Args)]
pub(crate) struct ValidateArgs {
    #[command(flatten)]
    pub(crate) file: FileArgs,

    /// Also check that each step could start: its working directory, its
    /// executable on PATH and its account (this runs `accounts env`).
    #[arg(long)]
    pub(crate) preflight: bool,
}

// `workflows create`.
#[derive(Debug, Args)]
pub(crate) struct CreateArgs {
    #[command(flatten)]
    pub(crate) file: FileArgs,

    /// Replace the active workflow of the same name: it is archived (its
    /// runs are kept) and the loops that ran it run the new one, all in one
    /// transaction [default: refuse a name an active workflow has].
    #[arg(long)]
    pub(crate) replace: bool,
}

// `workflows list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// Only workflows with this status: active or archived.
    #[arg(
        long,
        value_name = "STATUS",
        default_value = DEFAULT_LIST_STATUS,
        add = crate::complete::one_of(loops_core::WorkflowStatus::ALL)
    )]
    pub(crate) status: String,

    /// Show at most N workflows [default: all].
    #[arg(long, value_name = "N")]
    pub(crate) limit: Option<String>,
}

// A workflow, by id or name.
#[derive(Debug, Args)]
pub(crate) struct WorkflowRef {
    /// Workflow id (any status), or the name of an active workflow.
    #[arg(value_name = "WORKFLOW", add = crate::complete::workflows())]
    pub(crate) target: String,
}

// A workflow run, by id.
#[derive(Debug, Args)]
pub(crate) struct RunRef {
    /// Workflow run id (see `loops workflows runs`).
    #[arg(value_name = "RUN", add = crate::complete::workflow_runs())]
    pub(crate) run: String,
}

// `workflows run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) target: WorkflowRef,

    /// Print the steps' stdout and stderr [default: redacted, JSON shows
    /// their lengths].
    #[arg(long)]
    pub(crate) show_output: bool,

    /// Continue this run of the workflow from its first unfinished step
    /// instead of starting a new run (after `loops workflows recover`).
    #[arg(long, value_name = "RUN", add = crate::complete::workflow_runs())]
    pub(crate) resume: Option<String>,
}

// `workflows runs`.
#[derive(Debug, Args)]
pub(crate) struct RunsArgs {
    /// Only runs of this workflow (id, or name of an active workflow)
    /// [default: every workflow].
    #[arg(value_name = "WORKFLOW", add = crate::complete::workflows())]
    pub(crate) target: Option<String>,

    /// Show at most N runs.
    #[arg(long, value_name = "N", default_value = DEFAULT_RUNS_LIMIT)]
    pub(crate) limit: String,
}

// `workflows inspect`.
#[derive(Debug, Args)]
pub(crate) struct InspectArgs {
    #[command(flatten)]
    pub(crate) run: RunRef,

    /// Print the steps' stdout and stderr [default: redacted, JSON shows
    /// their lengths].
    #[arg(long)]
    pub(crate) show_output: bool,
}

// `workflows events`.
#[derive(Debug, Args)]
pub(crate) struct EventsArgs {
    #[command(flatten)]
    pub(crate) run: RunRef,

    /// Show at most N events, oldest first.
    #[arg(long, value_name = "N", default_value = "200")]
    pub(crate) limit: String,
}

// `workflows cancel`.
#[derive(Debug, Args)]
pub(crate) struct CancelArgs {
    #[command(flatten)]
    pub(crate) run: RunRef,

    /// Why, recorded as the run's and its open steps' error.
    #[arg(long, value_name = "TEXT", default_value = "cancelled by user")]
    pub(crate) reason: String,
}

// `workflows recover`.
#[derive(Debug, Args)]
pub(crate) struct RecoverArgs {
    #[command(flatten)]
    pub(crate) run: RunRef,

    /// Why, recorded as the reset steps' error and in the `recovered` event.
    #[arg(long, value_name = "TEXT", default_value = "manual recovery")]
    pub(crate) reason: String,
}
