//! Dispatch: one parsed command line to the function that carries it out.

use crate::args::{Cli, Command, Create};
use crate::commands::daemon::Binary;
use crate::commands::{
    backup, cancel, cost, create, daemon, docs, doctor, edit, execute, gc, health, labels, logs,
    manage, next, pools, restore, runs, status, transfer, workflows,
};
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::Printer;
use anyhow::Result;

/// The one context every command runs in: the global options
/// (`--database-url`, `--json`, `-v`, `-q`) and the warnings to come.
pub(crate) fn context(cli: &Cli) -> Context {
    Context::new(cli.database_url.clone(), cli.json, cli.verbose, cli.quiet)
}

/// Runs the command in `ctx`; the outcome becomes the exit code in `exit`.
pub(crate) fn run(ctx: &Context, command: Command) -> Result<Outcome> {
    let mut out = ctx.printer();
    let outcome = execute(ctx, command, &mut out);
    if outcome.is_ok() {
        ctx.print_warnings();
    }
    // Whatever the command printed reaches stdout even when it failed; a
    // failed flush (a full disk, a closed pipe) is the command's error too.
    let flushed = out.flush();
    let outcome = outcome?;
    flushed?;
    Ok(outcome)
}

/// Runs a command, then wakes the daemon when it changed what the daemon
/// schedules.
fn execute(ctx: &Context, command: Command, out: &mut Printer) -> Result<Outcome> {
    let wakes_daemon = changes_loops(&command);
    let outcome = dispatch(ctx, command, out);
    // SPEC §9 item 6: the daemon sleeps until its next deadline, so a change
    // to the loops wakes it at once. Best effort: no daemon, no effect.
    if wakes_daemon
        && outcome.is_ok()
        && let Ok(dir) = ctx.data_dir()
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

/// Runs `command` in a context of its own (the settings of `ctx`, which
/// `loops mcp` was started with) with a printer that keeps its output.
pub(crate) fn capture(
    ctx: &Context,
    command: impl FnOnce(&Context, &mut Printer) -> Result<Outcome>,
) -> Captured {
    let call = ctx.for_call();
    let mut out = Printer::memory(true);
    // A command that failed may have queued warnings; they go with it.
    let outcome = command(&call, &mut out);
    let warnings = call.take_warnings();
    let (text, error) = match (outcome, out.text()) {
        (Ok(_), Ok(text)) => (text, None),
        (Err(err), text) => (
            text.unwrap_or_default(),
            Some(crate::exit::message(&err, call.verbose)),
        ),
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

/// Runs one typed request, built by clap or by a `loops mcp` tool straight
/// from its JSON arguments, as [`capture`] does: its document (what
/// `--json` prints), its error, its warnings. The settings
/// (`--database-url`, `-v`, `-q`) stay those of `ctx`, which `loops mcp`
/// was started with.
pub(crate) fn run_request(ctx: &Context, request: Command) -> Captured {
    capture(ctx, |call, out| execute(call, request, out))
}

/// [`run_request`] for `loops serve`, which also needs to know what kind
/// of error a failed request met, for its HTTP status.
pub(crate) fn run_request_classified(
    ctx: &Context,
    request: Command,
) -> (Captured, Option<crate::fault::Fault>) {
    let mut fault = None;
    let captured = capture(ctx, |call, out| {
        execute(call, request, out).inspect_err(|err| fault = Some(crate::fault::Fault::of(err)))
    });
    (captured, fault)
}

fn dispatch(ctx: &Context, command: Command, out: &mut Printer) -> Result<Outcome> {
    match command {
        Command::Create(Create::Command(args)) => create::command(ctx, &args, out),
        Command::Create(Create::Agent(args)) => create::agent(ctx, &args, out),
        Command::Create(Create::Workflow(args)) => create::workflow(ctx, &args, out),
        Command::List(args) => manage::list(ctx, &args, out),
        Command::Show(args) => manage::show(ctx, &args, out),
        Command::Next(args) => next::run(ctx, &args, out),
        Command::Status(args) => status::run(ctx, &args, out),
        Command::Edit(args) => edit::edit(ctx, &args, out),
        Command::Rename(args) => edit::rename(ctx, &args, out),
        Command::Runs(args) => runs::list(ctx, &args, out),
        Command::Labels(cmd) => labels::run(ctx, &cmd, out),
        Command::Pools(cmd) => pools::run(ctx, &cmd, out),
        Command::Apply(args) => crate::commands::apply::run(ctx, &args, out),
        Command::Schema(args) => crate::commands::apply::schema(ctx, args.what, out),
        Command::Logs(args) => logs::run(ctx, &args, out),
        Command::Health(args) => health::run(ctx, &args, out),
        Command::Cost(args) => cost::run(ctx, &args, out),
        Command::Pause(args) => manage::pause(ctx, &args, out),
        Command::Resume(args) => manage::resume(ctx, &args, out),
        Command::Stop(args) => manage::stop(ctx, &args, out),
        Command::Remove(args) => manage::remove(ctx, &args, out),
        Command::Cancel(args) => cancel::run(ctx, &args, out),
        Command::RunNow(args) => execute::run_now(ctx, &args, out),
        Command::Trigger(args) => crate::commands::trigger::trigger(ctx, &args, out),
        Command::Tick(args) => execute::tick(ctx, &args, out),
        Command::Gc(args) => gc::run(ctx, &args, out),
        Command::Workflows(cmd) => workflows::run(ctx, cmd, out),
        Command::Daemon(cmd) => daemon::run(ctx, cmd, out, Binary::Loops),
        Command::Doctor(args) => doctor::doctor(ctx, &args, out),
        Command::Backup(args) => backup::run(ctx, &args, out),
        Command::Restore(args) => restore::run(ctx, &args, out),
        Command::Export(args) => transfer::export(ctx, &args, out),
        Command::Import(args) => transfer::import(ctx, &args, out),
        Command::Completions(args) => docs::completions(ctx, &args, out),
        Command::Man(args) => docs::man(ctx, &args, out),
        // `loops_main` serves it before any printer locks stdout.
        Command::Mcp(_) => anyhow::bail!("loops mcp runs only as a command of its own"),
        Command::Ui => anyhow::bail!("loops ui runs only as a command of its own"),
        Command::Serve(_) => anyhow::bail!("loops serve runs only as a command of its own"),
    }
}

/// Whether a command changes what the daemon schedules: loops, their
/// status, or their runs.
fn changes_loops(command: &Command) -> bool {
    if let Command::Import(args) = command {
        return args.apply;
    }
    if let Command::Apply(args) = command {
        return !args.dry_run;
    }
    // A dry run stores nothing (issue 28).
    if let Command::Create(create) = command {
        let options = match create {
            Create::Command(args) => &args.options,
            Create::Agent(args) => &args.options,
            Create::Workflow(args) => &args.options,
        };
        return !options.dry_run;
    }
    // A pool's new limit may let waiting members start (Q4).
    if let Command::Pools(crate::args::pools::PoolsCommand::Set(_)) = command {
        return true;
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
            | Command::Cancel(_)
            | Command::RunNow(_)
            | Command::Trigger(_)
            | Command::Tick(_)
    )
}

/// Starts `loops --quiet <verb> <target>` beside this process, with its
/// database, for a change that takes as long as it takes (`run-now`,
/// `cancel`) asked from `loops ui` or a `loops serve` page; a thread reaps
/// it when it ends.
pub(crate) fn start_beside(ctx: &Context, verb: &str, target: &str) -> std::io::Result<()> {
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    // Through the environment, never the command line, where `ps` would
    // show a password.
    if let Some(url) = ctx.database_url_flag() {
        cmd.env(crate::paths::DATABASE_URL_VAR, url);
    }
    let mut child = cmd
        // `--`: a target is never taken for a flag.
        .args(["--quiet", verb, "--", target])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    std::thread::Builder::new()
        .name("loops-beside".to_owned())
        .spawn(move || child.wait())?;
    Ok(())
}
