//! `loops logs <loop|run-id> [-f]` (issue 16 §4): a run's output, the
//! latest run of a loop or the run given.
//!
//! It prints the run's log file (`logs/<run-id>.log`, stdout and stderr
//! interleaved as they arrived, written by the runner as the run goes;
//! see `loops_exec::RunLog`) when there is one, else the stored stdout
//! then stderr (a workflow loop's run, which has no log, as its steps:
//! `human::steps`). The log is opened without following links, and only when
//! it is this user's regular file. On a shared PostgreSQL database a run's
//! log lives on the host that ran it; elsewhere the stored output is
//! printed.
//!
//! `-f` follows a running run as `pueue follow` and `journalctl -f` do: it
//! polls the file and the run's status every [`POLL`], prints each line as
//! it arrives, and stops once the run has ended and the file is drained.
//! A retry starts the file over; the follower notices the new file and
//! goes on with it. Ctrl-C ends it quietly. On a finished run `-f` prints
//! the run and exits.
//!
//! `-f` on a loop follows the loop across its runs until Ctrl-C (issue 28):
//! each run gets a header line on stderr, its output as it comes and its
//! end line, then the follower waits for the loop's next run (a retry of
//! the same run included). It ends by itself only when the loop is
//! removed. With `--json` it prints each run's object on one line as the
//! run ends.
//!
//! Output reaches the terminal with its control characters escaped, tabs
//! and line breaks aside (`render::escape_controls`): it is whatever a
//! process printed. How the run ended goes to stderr.
//!
//! `--json` prints one object once the run has ended (at once without
//! `-f`): `{runId, loopId, loopName, status, attempt, exitCode, error,
//! stdout, stderr, log}`, where `stdout` and `stderr` are the stored
//! output and `log` the log file's text (`null` without one). All three
//! are scrubbed of the run's secrets by the runner.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, bail};
use loops_core::{Loop, LoopId, LoopRun, RunId, RunStatus};
use loops_exec::{CancelToken, SignalCancel};
use loops_store::{RunFilter, Store};
use serde_json::json;

use crate::args::LogsArgs;
use crate::context::Context;
use crate::exit::Outcome;
use crate::human::steps;
use crate::render::{self, Printer};
use crate::request::{self, Document, Request, Warnings};

/// How often `-f` looks at the file and the run.
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// `logs`.
pub(crate) fn run(ctx: &Context, args: &LogsArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(Logs {
            target: args.target.clone(),
            follow: args.follow,
        })
    })
}

/// The typed request of `logs`: one run's output, followed with `-f`.
struct Logs {
    /// A run id, else a loop (by id or name), whose latest run it is.
    target: String,
    follow: bool,
}

/// What `logs -f <loop>` returns: the loop to follow across its runs, in
/// the store.
struct LoopLogs {
    loop_id: LoopId,
    name: String,
    store: Store,
    logs: PathBuf,
}

/// What `logs` returns: one run, or a loop followed across its runs.
#[expect(
    clippy::large_enum_variant,
    reason = "one per command, matched at once"
)]
enum Followed {
    Run(RunLog),
    Loop(LoopLogs),
}

/// What `logs` returns: the run and where its log is on this host. With
/// `-f` on a running run, the store too: the render step follows the run
/// until it ends, printing its log as it grows (`--json` waits for the end
/// quietly, then prints the ended run).
struct RunLog {
    run: LoopRun,
    path: PathBuf,
    /// The store to follow the run in, with `-f` on a running run.
    follow: Option<Store>,
}

impl Request for Logs {
    type Document = Followed;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Followed> {
        let store = ctx.open_store()?;
        if self.follow
            && let Some(lp) = loop_target(&store, &self.target)?
        {
            return Ok(Followed::Loop(LoopLogs {
                loop_id: lp.id,
                name: lp.name,
                store,
                logs: ctx.data_dir()?.join(loops_exec::LOGS_DIR),
            }));
        }
        let run = find_run(&store, &self.target)?;
        let path = log_path(ctx, &run)?;
        let follow = (self.follow && run.status == RunStatus::Running).then_some(store);
        Ok(Followed::Run(RunLog { run, path, follow }))
    }
}

impl Document for Followed {
    fn json(&self, out: &mut Printer) -> Result<()> {
        match self {
            Followed::Run(run) => run.json(out),
            Followed::Loop(lp) => lp.follow(None, out),
        }
    }

    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        match self {
            Followed::Run(run) => run.human(ctx, out),
            Followed::Loop(lp) => lp.follow(Some(ctx), out),
        }
    }
}

impl RunLog {
    fn json(&self, out: &mut Printer) -> Result<()> {
        let run = match &self.follow {
            None => Cow::Borrowed(&self.run),
            Some(store) => match self.follow(store, None)? {
                Some(run) => Cow::Owned(run),
                // Ctrl-C: quietly, with nothing printed.
                None => return Ok(()),
            },
        };
        out.json(&run_json(&run, &self.path))?;
        Ok(())
    }

    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        let run = match &self.follow {
            None => {
                match read_log(&self.path) {
                    Some(text) => print_text(&text, out)?,
                    None => print_stored(ctx, &self.run, out)?,
                }
                Cow::Borrowed(&self.run)
            }
            Some(store) => match self.follow(store, Some((ctx, out)))? {
                Some(run) => Cow::Owned(run),
                // Ctrl-C: quietly, with what was printed so far.
                None => return Ok(()),
            },
        };
        say_end(ctx, &run);
        Ok(())
    }
}

impl RunLog {
    /// Follows the running run in `store` until it ends, as [`follow_run`]
    /// does, until Ctrl-C.
    fn follow(
        &self,
        store: &Store,
        print: Option<(&Context, &mut Printer)>,
    ) -> Result<Option<LoopRun>> {
        let signals = SignalCancel::install()?;
        follow_run(store, &self.run, &self.path, signals.token(), print)
    }
}

/// What `logs --json` prints of `run`, whose log is at `path`.
fn run_json(run: &LoopRun, path: &Path) -> serde_json::Value {
    json!({
        "runId": run.id,
        "loopId": run.loop_id,
        "loopName": run.loop_name,
        "status": run.status,
        "attempt": run.attempt,
        "exitCode": run.exit_code,
        "error": run.error,
        "stdout": run.stdout.as_deref().unwrap_or(""),
        "stderr": run.stderr.as_deref().unwrap_or(""),
        "log": read_log(path),
    })
}

/// Follows `run` in `store` until it ends: with `print`, its log (at
/// `path`) is printed as it grows, then the stored output when no log was
/// found; without, it waits quietly. Returns the ended run, or `None` when
/// `stop` (Ctrl-C) ended the wait.
fn follow_run(
    store: &Store,
    run: &LoopRun,
    path: &Path,
    stop: &CancelToken,
    mut print: Option<(&Context, &mut Printer)>,
) -> Result<Option<LoopRun>> {
    let mut run = run.clone();
    let mut tail = Tail::new(path.to_owned());
    let mut said_missing = false;
    loop {
        if stop.is_cancelled() {
            if let Some((ctx, out)) = &mut print {
                tail.finish(ctx, *out)?;
            }
            return Ok(None);
        }
        // The status first: a run seen finished has written its log.
        let current = store.get_run(&run.id)?;
        let finished = current
            .as_ref()
            .is_none_or(|r| r.status != RunStatus::Running);
        if let Some((ctx, out)) = &mut print {
            tail.pump(ctx, *out)?;
        }
        if let Some(current) = current {
            run = current;
        }
        if finished {
            break;
        }
        if let Some((ctx, _)) = &print
            && !said_missing
            && !tail.seen_file()
        {
            said_missing = true;
            ctx.note(
                "note",
                &format!(
                    "no log for run {} here yet (it may run on another host); \
                     waiting for it to end",
                    run.id
                ),
            );
        }
        std::thread::sleep(POLL);
    }
    if let Some((ctx, out)) = print {
        tail.finish(ctx, out)?;
        if !tail.seen_file() {
            print_stored(ctx, &run, out)?;
        }
    }
    Ok(Some(run))
}

impl LoopLogs {
    /// Follows the loop across its runs until Ctrl-C or its removal. For a
    /// human (`ctx` given) each run gets a header, its output as it comes
    /// and its end line; for `--json` each ended run's object is one line.
    fn follow(&self, ctx: Option<&Context>, out: &mut Printer) -> Result<()> {
        let signals = SignalCancel::install()?;
        let stop = signals.token();
        // The run last shown and its attempt: a retry of it is shown anew.
        let mut shown: Option<(RunId, u32)> = None;
        let mut waiting = false;
        let mut polls: u32 = 0;
        let filter = RunFilter {
            loop_id: Some(self.loop_id),
            status: None,
            limit: Some(1),
            offset: None,
        };
        while !stop.is_cancelled() {
            let latest = self.store.list_runs(&filter)?.into_iter().next();
            let Some(run) = latest.filter(|r| shown != Some((r.id, r.attempt))) else {
                if !waiting && let Some(ctx) = ctx {
                    ctx.hint(&format!(
                        "-- waiting for the next run of {}; Ctrl-C stops --",
                        render::escape_controls(&self.name, &[])
                    ));
                }
                waiting = true;
                polls = polls.wrapping_add(1);
                // Once a second: a removed loop has no more runs to wait for.
                if polls.is_multiple_of(10) && self.store.get_loop(&self.loop_id)?.is_none() {
                    if let Some(ctx) = ctx {
                        ctx.hint("-- the loop was removed; nothing more to follow --");
                    }
                    return Ok(());
                }
                std::thread::sleep(POLL);
                continue;
            };
            waiting = false;
            let path = loops_exec::run_log_path(&self.logs, &run.id.to_string());
            if let Some(ctx) = ctx {
                ctx.hint(&format!(
                    "-- run {} of {}, attempt {}, started {} --",
                    run.id,
                    render::escape_controls(&run.loop_name, &[]),
                    run.attempt,
                    crate::human::local(run.started_at.unwrap_or(run.created_at)),
                ));
            }
            let ended = if run.status == RunStatus::Running {
                let print = ctx.map(|ctx| (ctx, &mut *out));
                match follow_run(&self.store, &run, &path, stop, print)? {
                    Some(ended) => ended,
                    None => return Ok(()),
                }
            } else {
                if let Some(ctx) = ctx {
                    match read_log(&path) {
                        Some(text) => print_text(&text, out)?,
                        None => print_stored(ctx, &run, out)?,
                    }
                }
                run
            };
            shown = Some((ended.id, ended.attempt));
            match ctx {
                Some(ctx) => say_end(ctx, &ended),
                None => out.line(&serde_json::to_string(&run_json(&ended, &path))?)?,
            }
            out.flush()?;
        }
        Ok(())
    }
}

/// The loop `target` names when it names no run: what `logs -f` follows
/// across its runs.
fn loop_target(store: &Store, target: &str) -> Result<Option<Loop>> {
    if let Ok(id) = RunId::parse(target.trim())
        && store.get_run(&id)?.is_some()
    {
        return Ok(None);
    }
    match store.require_loop(target) {
        Ok(lp) => Ok(Some(lp)),
        Err(e) => bail!("{e} (loops logs takes a loop id or name, or a run id)"),
    }
}

/// The run `target` names: a run id, else the latest run of a loop (by id
/// or name).
pub(crate) fn find_run(store: &Store, target: &str) -> Result<LoopRun> {
    if let Ok(id) = RunId::parse(target.trim())
        && let Some(run) = store.get_run(&id)?
    {
        return Ok(run);
    }
    let lp = match store.require_loop(target) {
        Ok(lp) => lp,
        Err(e) => bail!("{e} (loops logs takes a loop id or name, or a run id)"),
    };
    let filter = RunFilter {
        loop_id: Some(lp.id),
        status: None,
        limit: Some(1),
        offset: None,
    };
    match store.list_runs(&filter)?.into_iter().next() {
        Some(run) => Ok(run),
        None => bail!(
            "loop {} has no runs yet; `loops run-now {}` runs it now",
            render::escape_controls(&lp.name, &[]),
            lp.id
        ),
    }
}

/// Where the log of `run` is on this host.
pub(crate) fn log_path(ctx: &Context, run: &LoopRun) -> Result<PathBuf> {
    let logs = ctx.data_dir()?.join(loops_exec::LOGS_DIR);
    Ok(loops_exec::run_log_path(&logs, &run.id.to_string()))
}

/// The whole log, when there is one this user owns (never through a link).
fn read_log(path: &Path) -> Option<String> {
    let mut file = loops_exec::owner_only::open_no_follow(path).ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// A run's output as `logs` prints it (for `status`'s tail): its log file
/// on this host when there is one, else the stored stdout then stderr (a
/// workflow loop's steps, `human::steps`).
pub(crate) fn output_text(ctx: &Context, run: &LoopRun) -> Result<String> {
    if let Some(text) = read_log(&log_path(ctx, run)?) {
        return Ok(text);
    }
    Ok(steps::stored_text(ctx, run))
}

/// The stored stdout, then the stored stderr; a workflow loop's steps.
fn print_stored(ctx: &Context, run: &LoopRun, out: &mut dyn Lines) -> io::Result<()> {
    print_text(&steps::stored_text(ctx, run), out)
}

/// Where followed lines go: the command's [`Printer`], or (for `run-now`,
/// whose printer holds stdout's lock meanwhile) a [`RawStdout`].
pub(crate) trait Lines {
    /// One line, without its line break; its control characters other than
    /// tabs are escaped.
    fn line(&mut self, text: &str) -> io::Result<()>;
    /// Shows what was written so far.
    fn flush(&mut self) -> io::Result<()>;
}

impl Lines for Printer {
    fn line(&mut self, text: &str) -> io::Result<()> {
        Printer::line(self, text)
    }
    fn flush(&mut self) -> io::Result<()> {
        Printer::flush(self)
    }
}

/// Stdout through a duplicate of its descriptor, which needs no lock.
pub(crate) struct RawStdout(File);

impl RawStdout {
    pub(crate) fn new() -> io::Result<RawStdout> {
        use std::os::fd::AsFd;
        Ok(RawStdout(File::from(
            io::stdout().as_fd().try_clone_to_owned()?,
        )))
    }
}

impl Lines for RawStdout {
    fn line(&mut self, text: &str) -> io::Result<()> {
        use std::io::Write;
        writeln!(self.0, "{}", render::escape_controls(text, &['\t']))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `text` line by line, escaped; a CRLF ending is a line ending.
fn print_text(text: &str, out: &mut dyn Lines) -> io::Result<()> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    if text.is_empty() {
        return Ok(());
    }
    for line in text.split('\n') {
        out.line(line.strip_suffix('\r').unwrap_or(line))?;
    }
    Ok(())
}

/// How the run ended, on stderr; nothing for a run still going.
fn say_end(ctx: &Context, run: &LoopRun) {
    if run.status == RunStatus::Running {
        return;
    }
    // Marked off like journalctl's `-- Boot … --` lines, so it does not
    // read as the run's own output.
    let mut line = format!("-- run {} {}", run.id, run.status);
    if let Some(code) = run.exit_code {
        line.push_str(&format!(", exit code {code}"));
    }
    if let Some(error) = run.error.as_deref().and_then(|e| e.lines().next()) {
        line.push_str(&format!(": {}", ctx.error_line(error)));
    }
    line.push_str(" --");
    ctx.hint(&line);
}

/// A log file followed as it grows: what was read and not yet printed,
/// and the file's inode, so a retry's new file is noticed.
pub(crate) struct Tail {
    path: PathBuf,
    file: Option<(File, u64)>,
    pending: Vec<u8>,
    seen: bool,
}

impl Tail {
    pub(crate) fn new(path: PathBuf) -> Tail {
        Tail {
            path,
            file: None,
            pending: Vec::new(),
            seen: false,
        }
    }

    /// Whether a log file was found at all.
    pub(crate) fn seen_file(&self) -> bool {
        self.seen
    }

    /// Prints the complete lines written since the last call; switches to
    /// a new file when a retry replaced it.
    pub(crate) fn pump(&mut self, ctx: &Context, out: &mut dyn Lines) -> io::Result<()> {
        let now = std::fs::symlink_metadata(&self.path).ok().map(|m| m.ino());
        if let Some((_, ino)) = &self.file
            && now != Some(*ino)
        {
            // Replaced (a retry) or removed: drain the old one first.
            self.read_more()?;
            self.flush_pending(out)?;
            self.file = None;
        }
        if self.file.is_none()
            && let Ok(file) = loops_exec::owner_only::open_no_follow(&self.path)
        {
            let ino = file.metadata()?.ino();
            if self.seen {
                ctx.hint("-- a new attempt started --");
            }
            self.seen = true;
            self.file = Some((file, ino));
        }
        self.read_more()?;
        let Some(end) = self.pending.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        let lines: Vec<u8> = self.pending.drain(..=end).collect();
        print_text(&String::from_utf8_lossy(&lines), out)?;
        out.flush()
    }

    /// Prints what is left, a last line without a line break included.
    pub(crate) fn finish(&mut self, ctx: &Context, out: &mut dyn Lines) -> io::Result<()> {
        self.pump(ctx, out)?;
        self.flush_pending(out)?;
        out.flush()
    }

    fn flush_pending(&mut self, out: &mut dyn Lines) -> io::Result<()> {
        let rest = std::mem::take(&mut self.pending);
        print_text(&String::from_utf8_lossy(&rest), out)
    }

    fn read_more(&mut self) -> io::Result<()> {
        if let Some((file, _)) = &mut self.file {
            file.read_to_end(&mut self.pending)?;
        }
        Ok(())
    }
}
