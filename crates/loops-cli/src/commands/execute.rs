//! The runners: `run-now` and `tick` (SPEC §3.1, §3.5, §7.4).
//!
//! Both run targets as real processes, under the runner ids of SPEC §0
//! (`manual:<pid>`, `manual-tick:<pid>`). SIGINT and SIGTERM cancel the
//! runs in flight (SPEC §9 item 19): each run's process group is torn down,
//! the run is recorded as failed with `cancelled by SIGINT`, no further slot
//! starts, and the command exits 1.
//!
//! Exit codes: `run-now` exits 0 only when its run succeeded (the original
//! exits 0 after a failed run until 0.3.2); `tick` exits 0 whatever its runs
//! did, unless a signal interrupted it.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use anyhow::{Context as _, Result, bail};
use loops_core::{Loop, LoopRun, RunId, RunStatus};
use loops_exec::{CancelToken, SignalCancel, SystemClock};
use loops_scheduler::{ProcessExecutor, SchedulerError, TickOptions, TickResult};
use loops_store::{ManualClaim, Store};

use crate::args::{RunNowArgs, TickArgs};
use crate::commands::logs::{self, RawStdout, Tail};
use crate::context::Context;
use crate::exit::Outcome;
use crate::redact::{self, Output};
use crate::render::{self, Printer};
use crate::request::{self, Document, Request, Warnings};
use crate::resolve;

/// What stops a runner's runs: SIGINT and SIGTERM, through handlers it
/// installs, or the token of the MCP call it runs for.
struct Stop {
    /// The handlers, kept until the runner ends; `None` inside an MCP call.
    _signals: Option<SignalCancel>,
    token: CancelToken,
}

impl Stop {
    fn token(&self) -> &CancelToken {
        &self.token
    }
}

fn install_signals(ctx: &Context) -> Result<Stop> {
    if let Some(token) = ctx.stop.clone() {
        return Ok(Stop {
            _signals: None,
            token,
        });
    }
    let signals = SignalCancel::install().context("installing the SIGINT/SIGTERM handlers")?;
    Ok(Stop {
        token: signals.token().clone(),
        _signals: Some(signals),
    })
}

/// A hook's failure, or a run's log that could not be kept, on stderr: the
/// run goes on and is recorded as it ended.
fn runner_warning(ctx: &Context, message: &str) {
    ctx.note("warning", message);
}

/// The hook settings of a runner: `default_on_failure` (`daemon run
/// --on-failure`) and the hooks' timeout, 60 s. `LOOPS_HOOK_TIMEOUT_MS`, a
/// hidden variable, shortens it for tests.
pub(crate) fn hook_settings(
    default_on_failure: Option<&str>,
) -> Result<loops_scheduler::HookSettings> {
    let mut settings = loops_scheduler::HookSettings::default();
    if let Some(command) = default_on_failure {
        settings.default_on_failure =
            Some(crate::resolve::hooks::command(command, "--on-failure")?);
    }
    if let Some(ms) = std::env::var("LOOPS_HOOK_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| *ms > 0)
    {
        settings.timeout = std::time::Duration::from_millis(ms);
    }
    Ok(settings)
}

/// `run-now <loop>`.
pub(crate) fn run_now(ctx: &Context, args: &RunNowArgs, out: &mut Printer) -> Result<Outcome> {
    let json = out.json;
    request::serve(ctx, out, |_| {
        Ok(RunNow {
            target: args.target.target.clone(),
            output: Output::from_flag(args.show_output),
            live: args.show_output && !json && !ctx.quiet && std::io::stdout().is_terminal(),
            how: ManualClaim {
                anywhere: args.anywhere,
                ignore_pool: args.ignore_pool,
            },
        })
    })
}

/// The typed request of `run-now`: one run of one loop, now.
struct RunNow {
    /// The loop, by id or name.
    target: String,
    output: Output,
    /// Human output on a terminal with `--show-output`, not `--quiet`: the
    /// output is printed live as the run goes (from its log file, followed
    /// on a thread of its own) and not again at the end.
    live: bool,
    /// `--anywhere`, `--ignore-pool` (issue 30, P6, Q6).
    how: ManualClaim,
}

/// What `run-now` returns: the ended run, and how its output is shown
/// (`None`: it was printed live already).
struct RanNow {
    run: LoopRun,
    output: Option<Output>,
}

impl Request for RunNow {
    type Document = RanNow;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<RanNow> {
        let store = manual_store(ctx, self.how.anywhere, super::now())?;
        let lp = store.require_loop(&self.target)?;
        let signals = install_signals(ctx)?;
        let clock = SystemClock;
        let warn = |text: &str| runner_warning(ctx, text);
        let executor =
            ProcessExecutor::for_store(&clock, &store).with_logs(&ctx.data_dir()?, Some(&warn));
        let runner_id = format!("manual:{}", std::process::id());
        let hooks = hook_settings(None)?;
        let live = self.live;
        let (started, claimed) = mpsc::channel::<RunId>();
        let on_run = move |run: &LoopRun| {
            if run.status == RunStatus::Running {
                let _ = started.send(run.id);
            }
        };
        let opts = TickOptions {
            runner_id: &runner_id,
            clock: &clock,
            executor: &executor,
            max_parallel: 1,
            stop: Some(signals.token()),
            on_run: live.then_some(&on_run as &dyn Fn(&LoopRun)),
            on_error: None,
            hooks: &hooks,
            on_hook_error: Some(&warn),
        };
        // The live view prints while the run goes, so it cannot wait for
        // the render step; it is human output on a terminal only.
        let done = AtomicBool::new(false);
        let (run, streamed) = std::thread::scope(|scope| {
            let done = &done;
            let follower = live.then(|| scope.spawn(move || follow_live(ctx, &claimed, done)));
            let run = run_when_placed(ctx, &store, &lp, &opts, self.how, signals.token());
            done.store(true, Ordering::Relaxed);
            let streamed = follower.is_some_and(|f| f.join().unwrap_or(false));
            (run, streamed)
        });
        let run = run?;
        let output = match self.output {
            // Printed already, as it came.
            Output::Shown if streamed => None,
            output => Some(output),
        };
        Ok(RanNow { run, output })
    }
}

impl Document for RanNow {
    fn json(&self, out: &mut Printer) -> Result<()> {
        let output = self.output.unwrap_or(Output::Shown);
        Ok(out.json(&redact::run_json(&self.run, output))?)
    }

    /// `<runId> <status>`, the error, then the output blocks or their
    /// lengths (nothing when the output was printed live).
    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        let run = &self.run;
        out.line(&format!("{} {}", run.id, run.status))?;
        if let Some(error) = &run.error {
            // One line, whatever the error holds (a cwd with a line break).
            out.line(&format!("  error: {}", ctx.error_line(error)))?;
        }
        // Issue 28: the end of a failed run's stderr, unless the whole of
        // it is printed (below, or live already).
        if self.output == Some(Output::Redacted) {
            print_stderr_tail(run, "  stderr, ", "    ", out)?;
        }
        match self.output {
            None => {}
            Some(Output::Shown) => {
                for line in crate::human::steps::output_blocks(ctx, run) {
                    out.line(&line)?;
                }
            }
            Some(Output::Redacted) => {
                for (label, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
                    if let Some(text) = text.as_deref().filter(|t| !t.is_empty()) {
                        out.line(&format!(
                            "  {label}: {} (--show-output prints it)",
                            redact::redacted_len(text)
                        ))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// 0 only when the run succeeded.
    fn outcome(&self) -> Outcome {
        if self.run.status == RunStatus::Succeeded {
            Outcome::Success
        } else {
            Outcome::Failure
        }
    }
}

/// Runs `lp` now as `how` allows (issue 30): refused in the P6 form when
/// it is placed elsewhere; while its pool is full, said once on stderr
/// and tried again about every second until it claims or `stop` fires.
fn run_when_placed(
    ctx: &Context,
    store: &Store,
    lp: &Loop,
    opts: &TickOptions<'_>,
    how: ManualClaim,
    stop: &CancelToken,
) -> Result<LoopRun> {
    let mut waiting = false;
    loop {
        match loops_scheduler::run_now_with(store, lp, opts, how) {
            Err(SchedulerError::NotPlacedHere(_)) => {
                bail!("{}", crate::placement::refusal(lp, store))
            }
            Err(SchedulerError::PoolFull { pool, max_running }) => {
                if !waiting {
                    waiting = true;
                    ctx.hint(&format!(
                        "waiting for pool {pool} ({max_running} running); Ctrl-C stops, \
                         --ignore-pool runs it now"
                    ));
                }
                if stop.wait_timeout(POOL_POLL) {
                    let reason = stop.reason().unwrap_or_else(|| "a signal".to_owned());
                    bail!("stopped waiting for pool {pool} ({reason}); the loop did not run");
                }
            }
            run => return Ok(run?),
        }
    }
}

/// How often `run-now` tries again while the loop's pool is full.
const POOL_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// The store `tick` and `run-now` claim with (P6): this host's label and
/// those of its live daemons, or every label with `anywhere`.
fn manual_store(ctx: &Context, anywhere: bool, now: loops_core::Timestamp) -> Result<Store> {
    let store = ctx.open_store()?;
    if anywhere {
        return Ok(store.with_labels(&[loops_core::ANY_PLACEMENT.to_owned()]));
    }
    let host = loops_exec::hostname();
    // A daemon list that cannot be read leaves the host's label alone.
    let daemons = store.list_daemons(now).unwrap_or_default();
    let labels = crate::placement::local_daemon_labels(&daemons, &host);
    Ok(store.with_labels(&labels))
}

/// The last lines of a failed run's stderr: `<key>last <n> lines:`, then
/// the lines `indent` in, each cut to the terminal's width.
pub(crate) fn print_stderr_tail(
    run: &LoopRun,
    key: &str,
    indent: &str,
    out: &mut Printer,
) -> Result<()> {
    let tail = render::stderr_tail(run);
    if tail.is_empty() {
        return Ok(());
    }
    let lines = if tail.len() == 1 { "line" } else { "lines" };
    out.fitted_line(&format!("{key}last {} {lines}:", tail.len()))?;
    for line in &tail {
        out.fitted_line(&format!("{indent}{}", render::expand_tabs(line)))?;
    }
    Ok(())
}

/// Follows the log of the run `claimed` names until `done`; returns
/// whether it found the log (and so printed the output).
fn follow_live(ctx: &Context, claimed: &mpsc::Receiver<RunId>, done: &AtomicBool) -> bool {
    let id = loop {
        match claimed.recv_timeout(logs::POLL) {
            Ok(id) => break id,
            Err(_) if done.load(Ordering::Relaxed) => return false,
            Err(_) => {}
        }
    };
    let (Ok(dir), Ok(mut stdout)) = (ctx.data_dir(), RawStdout::new()) else {
        return false;
    };
    let path = loops_exec::run_log_path(&dir.join(loops_exec::LOGS_DIR), &id.to_string());
    let mut tail = Tail::new(path);
    while !done.load(Ordering::Relaxed) {
        if tail.pump(ctx, &mut stdout).is_err() {
            return tail.seen_file();
        }
        std::thread::sleep(logs::POLL);
    }
    let _ = tail.finish(ctx, &mut stdout);
    tail.seen_file()
}

/// `tick`.
pub(crate) fn tick(ctx: &Context, args: &TickArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(Tick {
            max_parallel: resolve::positive_int(&args.max_parallel, "--max-parallel")?,
            output: Output::from_flag(args.show_output),
            anywhere: args.anywhere,
        })
    })
}

/// The typed request of `tick`: one tick of every due loop.
struct Tick {
    /// How many runs at once.
    max_parallel: u32,
    output: Output,
    /// `--anywhere`: run the loops placed elsewhere too (issue 30, P6).
    anywhere: bool,
}

/// What `tick` returns: what the tick did, and the signal that interrupted
/// it, if one did.
struct Ticked {
    result: TickResult,
    output: Output,
    interrupted: Option<String>,
}

impl Request for Tick {
    type Document = Ticked;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Ticked> {
        let store = manual_store(ctx, self.anywhere, super::now())?;
        let signals = install_signals(ctx)?;
        let clock = SystemClock;
        let warn = |text: &str| runner_warning(ctx, text);
        let executor =
            ProcessExecutor::for_store(&clock, &store).with_logs(&ctx.data_dir()?, Some(&warn));
        let runner_id = format!("manual-tick:{}", std::process::id());
        let hooks = hook_settings(None)?;
        let on_error = |lp: &Loop, message: &str| {
            // A loop's failure does not stop the tick; say which loop it was.
            ctx.note(
                "warning",
                &format!("loop {} ({}): {message}", lp.name, lp.id),
            );
        };
        let opts = TickOptions {
            runner_id: &runner_id,
            clock: &clock,
            executor: &executor,
            max_parallel: usize::try_from(self.max_parallel).unwrap_or(usize::MAX),
            stop: Some(signals.token()),
            on_run: None,
            on_error: Some(&on_error),
            hooks: &hooks,
            on_hook_error: Some(&warn),
        };
        let result = loops_scheduler::tick(&store, &opts)?;
        Ok(Ticked {
            result,
            output: self.output,
            interrupted: signals.token().reason(),
        })
    }
}

impl Document for Ticked {
    /// Says on stderr, after the output, that a signal cut the tick short:
    /// an error, so said under `--quiet` too.
    fn notes(&self, ctx: &Context) {
        if let Some(reason) = &self.interrupted {
            ctx.note("error", &format!("tick interrupted ({reason})"));
        }
    }

    fn json(&self, out: &mut Printer) -> Result<()> {
        out.json(&redact::tick_json(&self.result, self.output))?;
        Ok(())
    }

    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        let result = &self.result;
        out.line(&format!(
            "completed={} skipped={} recovered={} expired={}",
            result.completed.len(),
            result.skipped.len(),
            result.recovered.len(),
            result.expired.len()
        ))?;
        if self.output == Output::Shown {
            for run in &result.completed {
                out.line(&format!("{} {} {}", run.id, run.status, run.loop_name))?;
                for line in crate::human::steps::output_blocks(ctx, run) {
                    out.line(&line)?;
                }
            }
        }
        Ok(())
    }

    /// 1 when a signal interrupted the tick, whatever its runs did.
    fn outcome(&self) -> Outcome {
        if self.interrupted.is_some() {
            Outcome::Failure
        } else {
            Outcome::Success
        }
    }
}
