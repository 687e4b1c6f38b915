//! Dispatch: one parsed command line to the function that carries it out.

use anyhow::Result;
use clap::Parser;

use crate::args::{Cli, Command, Create};
use crate::commands::daemon::Binary;
use crate::commands::{
    backup, create, daemon, docs, doctor, edit, execute, gc, labels, logs, manage, runs, transfer,
    workflows,
};
use crate::exit::Outcome;
use crate::render::Printer;

/// Runs the command; the outcome becomes the exit code in `exit`.
pub(crate) fn run(cli: Cli) -> Result<Outcome> {
    configure(&cli);
    let mut out = Printer::stdout(cli.json);
    let outcome = execute(cli.command, &mut out);
    if outcome.is_ok() {
        crate::render::print_warnings();
    }
    // Whatever the command printed reaches stdout even when it failed; a
    // failed flush (a full disk, a closed pipe) is the command's error too.
    let flushed = out.flush();
    let outcome = outcome?;
    flushed?;
    Ok(outcome)
}

/// Records the global options (`--database-url`, `-v`, `-q`) for the
/// command about to run.
pub(crate) fn configure(cli: &Cli) {
    crate::paths::set_database_url(cli.database_url.clone());
    crate::brief::set_verbose(cli.verbose);
    crate::render::set_quiet(cli.quiet);
}

/// Runs a command, then wakes the daemon when it changed what the daemon
/// schedules.
fn execute(command: Command, out: &mut Printer) -> Result<Outcome> {
    let wakes_daemon = changes_loops(&command);
    let outcome = dispatch(command, out);
    // SPEC §9 item 6: the daemon sleeps until its next deadline, so a change
    // to the loops wakes it at once. Best effort: no daemon, no effect.
    if wakes_daemon
        && outcome.is_ok()
        && let Ok(dir) = crate::paths::data_dir()
    {
        loops_scheduler::notify_daemon(&dir);
    }
    outcome
}

/// What a command printed, for `loops mcp`.
#[derive(Debug)]
pub(crate) struct Captured {
    /// Its stdout: the `--json` document.
    pub(crate) text: String,
    /// Its error, as the command line prints it after `error: `.
    pub(crate) error: Option<String>,
    /// The warnings it queued, when it succeeded.
    pub(crate) warnings: Vec<String>,
}

/// Runs `command` with a printer that keeps its output, on this thread.
pub(crate) fn capture(command: impl FnOnce(&mut Printer) -> Result<Outcome>) -> Captured {
    let mut out = Printer::memory(true);
    // Warnings a command that panicked on this thread left behind are not
    // this command's.
    drop(crate::render::take_warnings());
    // A command that failed may have queued warnings; they go with it.
    let outcome = command(&mut out);
    let warnings = crate::render::take_warnings();
    let (text, error) = match (outcome, out.text()) {
        (Ok(_), Ok(text)) => (text, None),
        (Err(err), text) => (text.unwrap_or_default(), Some(crate::exit::message(&err))),
        (Ok(_), Err(err)) => (String::new(), Some(err.to_string())),
    };
    Captured {
        text,
        warnings: if error.is_none() {
            warnings
        } else {
            Vec::new()
        },
        error,
    }
}

/// Parses a command line (`loops --json …`) and runs it as [`capture`]
/// does. The process-wide settings (`--database-url`, `-v`, `-q`) stay
/// those `loops mcp` was started with.
pub(crate) fn run_captured(argv: Vec<String>) -> Captured {
    match Cli::try_parse_from(argv) {
        Ok(cli) => capture(|out| execute(cli.command, out)),
        Err(err) => capture(|_| Err(err.into())),
    }
}

fn dispatch(command: Command, out: &mut Printer) -> Result<Outcome> {
    match command {
        Command::Create(Create::Command(args)) => create::command(&args, out),
        Command::Create(Create::Agent(args)) => create::agent(&args, out),
        Command::Create(Create::Workflow(args)) => create::workflow(&args, out),
        Command::List(args) => manage::list(&args, out),
        Command::Show(args) => manage::show(&args, out),
        Command::Edit(args) => edit::edit(&args, out),
        Command::Rename(args) => edit::rename(&args, out),
        Command::Runs(args) => runs::list(&args, out),
        Command::Labels(cmd) => labels::run(&cmd, out),
        Command::Logs(args) => logs::run(&args, out),
        Command::Pause(args) => manage::pause(&args, out),
        Command::Resume(args) => manage::resume(&args, out),
        Command::Stop(args) => manage::stop(&args, out),
        Command::Remove(args) => manage::remove(&args, out),
        Command::RunNow(args) => execute::run_now(&args, out),
        Command::Tick(args) => execute::tick(&args, out),
        Command::Gc(args) => gc::run(&args, out),
        Command::Workflows(cmd) => workflows::run(cmd, out),
        Command::Daemon(cmd) => daemon::run(cmd, out, Binary::Loops),
        Command::Doctor(args) => doctor::doctor(&args, out),
        Command::Backup(args) => backup::run(&args, out),
        Command::Export(args) => transfer::export(&args, out),
        Command::Import(args) => transfer::import(&args, out),
        Command::Completions(args) => docs::completions(&args, out),
        Command::Man(args) => docs::man(&args, out),
        // `loops_main` serves it before any printer locks stdout.
        Command::Mcp(_) => anyhow::bail!("loops mcp runs only as a command of its own"),
    }
}

/// Whether a command changes what the daemon schedules: loops, their
/// status, or their runs.
fn changes_loops(command: &Command) -> bool {
    if let Command::Import(args) = command {
        return args.apply;
    }
    matches!(
        command,
        Command::Create(_)
            | Command::Edit(_)
            | Command::Rename(_)
            | Command::Pause(_)
            | Command::Resume(_)
            | Command::Stop(_)
            | Command::Remove(_)
            | Command::RunNow(_)
            | Command::Tick(_)
    )
}
