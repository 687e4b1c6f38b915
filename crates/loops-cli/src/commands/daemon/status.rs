//! `daemon status` and `daemon logs` (SPEC §7.6): what the daemon is
//! doing, and the end of its log.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result};
use loops_core::{LoopRun, RunStatus, Timestamp};
use loops_store::RunFilter;

use super::daemon_paths;
use crate::commands::now;
use crate::context::Context;
use crate::human;
use crate::render::{self, Printer, escape_controls};
use crate::request::{Document, Request, Warnings};
use crate::service::control;
use crate::service::log;

/// How often `daemon logs -f` looks for new lines.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// The typed request of `daemon status`.
pub(super) struct DaemonStatus;

/// What `daemon status` returns: the daemon, its lease, the counts, and
/// for humans the runs in flight (`runs --status running --json` has them
/// for scripts).
pub(super) struct StatusReport(control::DaemonStatus, Vec<LoopRun>);

/// The most runs in flight `daemon status` lists.
const RUNNING_SHOWN: u32 = 20;

impl Request for DaemonStatus {
    type Document = StatusReport;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<StatusReport> {
        let paths = daemon_paths(ctx)?;
        let store = ctx.open_store()?;
        let status = control::daemon_status(&store, &paths, &loops_exec::hostname(), now())?;
        let running = store.list_runs(&RunFilter {
            loop_id: None,
            status: Some(RunStatus::Running),
            limit: Some(RUNNING_SHOWN),
            offset: None,
        })?;
        Ok(StatusReport(status, running))
    }
}

impl Document for StatusReport {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json(&serde_json::to_value(&self.0)?)?)
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        let now = human::display_now();
        for line in status_lines(&self.0, now) {
            out.line(&line)?;
        }
        for line in running_lines(&self.1, now) {
            out.line(&line)?;
        }
        Ok(())
    }
}

/// The human lines of `daemon status`, with local and relative times
/// (issue 16); `--json` keeps the SPEC's UTC instants.
fn status_lines(s: &control::DaemonStatus, now: Timestamp) -> Vec<String> {
    let daemon = if s.running {
        let mut line = format!("daemon: running pid={}", s.pid.unwrap_or_default());
        if let Some(lease) = &s.lease {
            line.push_str(&format!(
                " on {} since {} (lease {} until {})",
                escape_controls(&lease.hostname, &[]),
                human::when(lease.created_at, now),
                lease.id,
                human::when(lease.expires_at, now)
            ));
        }
        line
    } else if s.stale {
        format!(
            "daemon: not running (stale pid file names pid {})",
            s.pid.unwrap_or_default()
        )
    } else {
        "daemon: not running".to_owned()
    };
    let l = &s.loops;
    let r = &s.runs;
    let next = s
        .next_run_at
        .map_or_else(|| "-".to_owned(), |t| human::when(t, now));
    let mut lines = vec![
        daemon,
        format!(
            "loops: {} total, {} active, {} paused, {} stopped, {} expired; next run {next}",
            l.total, l.active, l.paused, l.stopped, l.expired
        ),
        format!(
            "runs: {} total, {} running, {} succeeded, {} failed, {} abandoned",
            r.total, r.running, r.succeeded, r.failed, r.abandoned
        ),
        format!("log: {}", s.log_path),
    ];
    // Issue 30, P1: the labels of the lease's daemon, while it runs.
    if let Some(labels) = s.labels.as_ref().filter(|_| s.running) {
        lines.insert(
            1,
            format!("labels: {}", escape_controls(&labels.join(", "), &[])),
        );
    }
    if let Some(daemons) = &s.daemons {
        lines.push(format!("database: {} {}", s.backend, s.database));
        if let Some(skew) = s.clock_skew_ms {
            lines.push(format!(
                "this host's clock: {} ms off the server's{}",
                skew,
                skew_warning(skew)
            ));
        }
        let live = daemons.iter().filter(|d| d.live).count();
        lines.push(format!(
            "daemons: {live} live of {} registered",
            daemons.len()
        ));
        for d in daemons {
            lines.push(format!(
                "  {} {} pid={} version {} since {}: {} run(s) in flight, clock {}{}; labels {}",
                if d.live { "live" } else { "gone" },
                escape_controls(&d.hostname, &[]),
                d.pid,
                escape_controls(d.version.as_deref().unwrap_or("?"), &[]),
                human::when(d.started_at, now),
                d.running_runs,
                d.clock_skew_ms
                    .map_or_else(|| "not measured".to_owned(), |ms| format!("{ms} ms off")),
                d.clock_skew_ms.map_or("", skew_warning),
                escape_controls(&d.labels.join(", "), &[]),
            ));
        }
    }
    lines
}

/// The runs in flight, newest first, each with how long it has been
/// silent as of its last heartbeat (issue 27).
fn running_lines(runs: &[LoopRun], now: Timestamp) -> Vec<String> {
    runs.iter()
        .map(|run| {
            let started = run.started_at.unwrap_or(run.created_at);
            let since = run.last_output_at.unwrap_or(started);
            let silent = human::duration(now.millis_since(since).max(0));
            format!(
                "running: {} {} started {}, silent {silent}",
                run.id,
                escape_controls(&run.loop_name, &[]),
                human::when(started, now),
            )
        })
        .collect()
}

/// The warning a clock skew above the daemon's limit gets.
fn skew_warning(ms: i64) -> &'static str {
    if ms.abs() > loops_scheduler::SKEW_WARN_MS {
        " (warning: over 2000 ms; fix the host's time)"
    } else {
        ""
    }
}

/// The typed request of `daemon logs [-n N] [-f]`.
pub(super) struct DaemonLogs {
    /// How many lines from the end.
    pub(super) lines: usize,
    /// `-f`: then follow the log.
    pub(super) follow: bool,
    /// `--loop`: only the lines of this loop's runs.
    pub(super) loop_ref: Option<String>,
}

/// The lines of one loop's runs in the daemon log (`daemon logs --loop`):
/// those that name its id (`loop=<id>`), and the older ones, written
/// before lines named the id, that name it as it is called now.
struct LoopLines {
    id: String,
    name: String,
}

impl LoopLines {
    fn matches(&self, line: &str) -> bool {
        line.contains(&self.id) || line.contains(&self.name)
    }

    /// The last `lines` matching lines of `text` (all with 0).
    fn tail(&self, text: &str, lines: usize) -> String {
        let kept: Vec<&str> = text.lines().filter(|l| self.matches(l)).collect();
        let from = if lines == 0 {
            0
        } else {
            kept.len().saturating_sub(lines)
        };
        kept[from..].join("\n")
    }
}

/// What `daemon logs` returns: the tail, and where to follow from. The
/// log is plain text in either format.
pub(super) struct LogTail {
    path: PathBuf,
    text: String,
    /// The offset the tail ends at, where following starts.
    read: u64,
    follow: bool,
    only: Option<LoopLines>,
}

impl Request for DaemonLogs {
    type Document = LogTail;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<LogTail> {
        let path = daemon_paths(ctx)?.log_file();
        let only = match &self.loop_ref {
            Some(loop_ref) => {
                let lp = ctx.open_store()?.require_loop(loop_ref)?;
                Some(LoopLines {
                    id: format!(" loop={}", lp.id),
                    name: format!(": {} slot=", escape_controls(&lp.name, &[])),
                })
            }
            None => None,
        };
        // A filtered tail looks through the whole log (it is rotated, so
        // bounded) for the last lines that match.
        let whole = if only.is_some() { 0 } else { self.lines };
        let (text, read) =
            log::tail_lines(&path, whole).with_context(|| format!("reading {}", path.display()))?;
        let text = match &only {
            Some(only) => only.tail(&text, self.lines),
            None => text,
        };
        Ok(LogTail {
            path,
            text,
            read,
            follow: self.follow,
            only,
        })
    }
}

impl Document for LogTail {
    /// The tail, then with `-f` the lines as they come, streamed here in
    /// the render step.
    fn json(&self, out: &mut Printer) -> Result<()> {
        out.line(&self.text)?;
        if !self.follow {
            return Ok(());
        }
        out.flush()?;
        // Ends only when stdout closes (a broken pipe exits quietly) or on
        // Ctrl-C, which ends the process.
        self.follow_lines(&|line| line.to_owned())
    }

    /// The same lines, their instants in local time (issue 28), each cut
    /// to a terminal's width with `…` (whole when piped).
    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        if self.text.is_empty() {
            out.line("")?;
        }
        for line in self.text.lines() {
            out.fitted_line(&human::localize_instants(line))?;
        }
        if !self.follow {
            return Ok(());
        }
        out.flush()?;
        let layout = out.layout();
        self.follow_lines(&|line| {
            render::fit_line(&human::localize_instants(line), layout).into_owned()
        })
    }
}

impl LogTail {
    /// Follows the log from where the tail ended, printing what comes as
    /// `shown` writes a line. Unfiltered, text goes out as it comes (the
    /// rest of a line the writer had not finished when it was read
    /// included); with `--loop`, a line waits for its end, then shows if
    /// it is the loop's. Ends only when stdout closes (a broken pipe exits
    /// quietly) or on Ctrl-C, which ends the process.
    fn follow_lines(&self, shown: &dyn Fn(&str) -> String) -> Result<()> {
        let mut stdout = std::io::stdout().lock();
        let mut partial = String::new();
        let mut at_start = true;
        log::follow(&self.path, self.read, FOLLOW_POLL, &mut |chunk| {
            for piece in chunk.split_inclusive('\n') {
                let (body, end) = match piece.strip_suffix('\n') {
                    Some(body) => (body, "\n"),
                    None => (piece, ""),
                };
                match &self.only {
                    Some(only) => {
                        partial.push_str(body);
                        if !end.is_empty() {
                            let line = std::mem::take(&mut partial);
                            if only.matches(&line) {
                                writeln!(stdout, "{}", shown(&line))?;
                            }
                        }
                    }
                    None if at_start => write!(stdout, "{}{end}", shown(body))?,
                    None => write!(stdout, "{body}{end}")?,
                }
                at_start = !end.is_empty();
            }
            stdout.flush()
        })?;
        Ok(())
    }
}
