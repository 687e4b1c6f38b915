//! Loop management: `list`, `show`, `pause`, `resume`, `stop`, `remove`
//! (SPEC §7.4).
//!
//! Departures from 0.3.1, on purpose:
//! - `list` shows every loop unless `--limit` is given; the original
//!   silently stops at 200.
//! - `resume` puts a stopped or expired loop back on its schedule with a
//!   fresh next run (SPEC §9 item 33); a paused loop keeps its next run.
//!   `pause` refuses a loop that is not active instead of making a stopped
//!   loop "paused".
//! - `remove` says what happens to the loop's history (SPEC §9 item 34):
//!   kept by default (as the original, which orphans the runs silently),
//!   deleted with `--purge`.

use std::ops::ControlFlow;

use anstyle::Style;
use anyhow::{Result, bail};
use loops_core::{Loop, LoopId, LoopRun, LoopStatus, RunStatus, Schedule, Target};
use loops_store::{DeleteHistory, DeleteOutcome, LoopChange, LoopFilter, RunFilter, Store};
use serde_json::json;

use super::now;
use crate::args::cancel::{CancelFlags, StopArgs};
use crate::args::{ListArgs, LoopRef, RemoveArgs};
use crate::context::Context;
use crate::exit::Outcome;
use crate::hint;
use crate::human;
use crate::placement::{LiveDaemons, UNPLACEABLE};
use crate::redact;
use crate::render::{self, Column, Printer, Table};
use crate::request::{self, Document, Request, Warnings};
use crate::resolve;

/// A loop's NAME cell: its name, then its labels in brackets, if any
/// (issue 17), so the table keeps its columns.
fn name_with_labels(lp: &Loop) -> String {
    match lp.policy.labels.as_slice() {
        [] => lp.name.clone(),
        labels => format!("{} [{}]", lp.name, labels.join(",")),
    }
}

/// `list` / `ls`.
pub(crate) fn list(ctx: &Context, args: &ListArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        let status = args
            .status
            .as_deref()
            .map(resolve::loop_status)
            .transpose()?;
        let limit = args
            .limit
            .as_deref()
            .map(|l| resolve::positive_int(l, "--limit"))
            .transpose()?;
        let labels = crate::resolve::policy::labels(&args.labels)?;
        Ok(List {
            status,
            limit,
            offset: resolve::offset(args.offset.as_deref())?,
            labels,
        })
    })
}

/// The typed request of `list`: the loops of a status and labels, at most
/// `limit` of them after the first `offset`.
struct List {
    status: Option<LoopStatus>,
    limit: Option<u32>,
    offset: Option<u32>,
    /// Every one of them, when any (issue 17).
    labels: Vec<String>,
}

/// What `list` returns: the opened store and the filter, not the loops.
/// They are read as they are printed, in the render step: a thousand loops
/// never sit in memory at once under `--json`.
struct Listed {
    store: Store,
    request: List,
}

impl Request for List {
    type Document = Listed;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Listed> {
        Ok(Listed {
            store: ctx.open_store()?,
            request: self,
        })
    }
}

impl Listed {
    fn filter(&self) -> LoopFilter {
        LoopFilter {
            status: self.request.status,
            limit: Some(self.request.limit.unwrap_or(u32::MAX)),
            offset: self.request.offset,
        }
    }
}

impl Document for Listed {
    /// Each loop is printed as its row is read. A damaged row found
    /// partway ends the output there, and the command fails with the error.
    fn json(&self, out: &mut Printer) -> Result<()> {
        let mut list = out.json_array();
        let mut failed = None;
        let daemons = LiveDaemons::read(&self.store, now());
        self.store.for_each_labeled_loop(
            &self.filter(),
            &self.request.labels,
            |lp| match push_loop(&mut list, lp, &daemons) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    failed = Some(e);
                    ControlFlow::Break(())
                }
            },
        )?;
        if let Some(e) = failed {
            return Err(e.into());
        }
        Printer::end_json_array(list)?;
        Ok(())
    }

    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        let List {
            status,
            limit,
            labels,
            offset: _,
        } = &self.request;
        let store = &self.store;
        let mut loops = Vec::new();
        store.for_each_labeled_loop(&self.filter(), labels, |lp| {
            loops.push(lp);
            ControlFlow::Continue(())
        })?;
        if loops.is_empty() {
            ctx.hint(&match status {
                _ if !labels.is_empty() => format!("no loops labeled {}", labels.join(", ")),
                None => "no loops yet — loops create --help".to_owned(),
                Some(status) => format!("no {status} loops"),
            });
            return Ok(());
        }
        let now = human::display_now();
        let mut table = list_table();
        let daemons = LiveDaemons::read(store, super::now());
        for lp in &loops {
            let last = last_run(store, &lp.id)?;
            let status = shown_status(lp, last.as_ref());
            // Issue 30, P7: a placed loop no live daemon can run.
            let shown = if daemons.flags(lp) {
                format!("{status} ({UNPLACEABLE})")
            } else {
                status.to_owned()
            };
            let (next, overdue) = match lp.status {
                LoopStatus::Paused => ("paused".to_owned(), false),
                status => human::next_run(lp.next_run_at, status == LoopStatus::Active, now),
            };
            table.styled_row(vec![
                (lp.id.to_string(), Style::new()),
                (name_with_labels(lp), Style::new()),
                (shown, render::status_style(status)),
                (human::loop_schedule(lp), Style::new()),
                (
                    next,
                    if overdue {
                        render::overdue_style()
                    } else {
                        Style::new()
                    },
                ),
                match &last {
                    Some(run) => (
                        human::last_run(run, now),
                        render::status_style(run.status.as_str()),
                    ),
                    None => ("-".to_owned(), Style::new()),
                },
            ]);
        }
        out.table(&table, |_| Vec::new())?;
        // Said on stderr, as the empty state is: stdout holds the table
        // alone, so a pipe into `wc -l` or `grep` sees only loops (issue 16).
        if let Some(limit) = limit {
            let total = store.count_loops(*status)?;
            if total > u64::from(*limit) {
                ctx.hint(&format!(
                    "showing {} of {total} loops; raise --limit to see more",
                    loops.len()
                ));
            }
        }
        if loops.iter().any(|lp| lp.status == LoopStatus::Active) {
            // The real clock: a lease is live or not whatever the display
            // says.
            hint::no_daemon(ctx, store, super::now());
        }
        Ok(())
    }
}

/// Pushes `lp` onto `list` as `list --json` prints it: with
/// `"unplaceable": true` when no live daemon can run it (issue 30, P7).
fn push_loop(
    list: &mut crate::pretty::ArrayWriter<&mut dyn std::io::Write>,
    lp: Loop,
    daemons: &LiveDaemons,
) -> std::io::Result<()> {
    let flagged = daemons.flags(&lp);
    let lp = redact::into_loop_json(lp);
    if !flagged {
        return list.push(&lp);
    }
    let mut doc = serde_json::to_value(&lp).map_err(std::io::Error::other)?;
    if let serde_json::Value::Object(fields) = &mut doc {
        fields.insert("unplaceable".to_owned(), serde_json::Value::Bool(true));
    }
    list.push(&doc)
}

/// `list`'s columns. On a terminal the table fits its width (issue 28):
/// below 80 columns LAST RUN is dropped first, then SCHEDULE; then NAME
/// (with its labels), SCHEDULE and LAST RUN are cut with `…`. ID, STATUS
/// and NEXT RUN are never cut.
fn list_table() -> Table {
    Table::new(vec![
        Column::keep("ID"),
        Column::shrink("NAME"),
        Column::keep("STATUS"),
        Column::shrink("SCHEDULE").optional(1),
        Column::keep("NEXT RUN"),
        Column::shrink("LAST RUN").optional(0),
    ])
}

/// A loop's status as `list` shows it: `done` for a once-loop that ran and
/// so stopped (issue 28), else its stored status (`--json` keeps that).
pub(crate) fn shown_status(lp: &Loop, last: Option<&LoopRun>) -> &'static str {
    let ran = last.is_some_and(|run| run.status != RunStatus::Running);
    match (&lp.schedule, lp.status) {
        (Schedule::Once { .. }, LoopStatus::Stopped) if ran => "done",
        _ => lp.status.as_str(),
    }
}

/// A loop's newest run: one indexed lookup (`idx_runs_loop`), whatever
/// the length of its history.
fn last_run(store: &Store, id: &LoopId) -> Result<Option<LoopRun>> {
    let mut runs = store.list_runs(&RunFilter {
        loop_id: Some(*id),
        status: None,
        limit: Some(1),
        offset: None,
    })?;
    Ok(runs.pop())
}

/// The typed request of `show`: one loop, by id or name.
struct Show {
    target: String,
}

/// `show`'s document: the loop, its prompt as the next run sends it.
/// JSON (SPEC §7.1), for humans too when stdout is not a terminal.
struct Shown(Loop);

impl Request for Show {
    type Document = Shown;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Shown> {
        Ok(Shown(shown_loop(&ctx.open_store()?, &self.target)?))
    }
}

/// The loop `target` names as `show` prints it: with a prompt file, its
/// prompt is what the next run sends.
pub(crate) fn shown_loop(store: &Store, target: &str) -> Result<Loop> {
    let mut lp = store.require_loop(target)?;
    // Issue 17: with a prompt file, `prompt` shows what the next run
    // sends, the file's text now (redacted as any prompt), not the text
    // at create; read as a run reads it (issue 25 §1): bounded, never
    // waiting on a pipe.
    if let Target::Agent(a) = &mut lp.target
        && let Some(text) = a.prompt_file.as_deref().and_then(|path| {
            let path = std::path::Path::new(path);
            loops_exec::read_user_file(path, "prompt file", loops_exec::PROMPT_FILE_MAX_BYTES).ok()
        })
    {
        a.prompt = text;
    }
    Ok(lp)
}

impl Document for Shown {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json_of(&redact::loop_json(&self.0))?)
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        self.json(out)
    }
}

/// `show`: on a terminal, `status`'s card (issue 28); else, and with
/// `--json`, the loop's JSON, as the original prints it.
pub(crate) fn show(ctx: &Context, args: &LoopRef, out: &mut Printer) -> Result<Outcome> {
    if !out.json && out.layout().width().is_some() {
        return super::status::run(ctx, args, out);
    }
    request::serve(ctx, out, |_| {
        Ok(Show {
            target: args.target.clone(),
        })
    })
}

/// `pause`: active → paused, next run kept.
pub(crate) fn pause(ctx: &Context, args: &LoopRef, out: &mut Printer) -> Result<Outcome> {
    change(ctx, args, out, Change::Pause)
}

/// `resume`: back on schedule; prints the next run.
pub(crate) fn resume(ctx: &Context, args: &LoopRef, out: &mut Printer) -> Result<Outcome> {
    change(ctx, args, out, Change::Resume)
}

/// `stop`: stopped, next run cleared; with `--cancel`, its running runs
/// cancelled (issue 28).
pub(crate) fn stop(ctx: &Context, args: &StopArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(ChangeStatus {
            target: args.target.target.clone(),
            change: Change::Stop,
            cancel: args.cancel.clone(),
        })
    })
}

fn change(ctx: &Context, args: &LoopRef, out: &mut Printer, change: Change) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(ChangeStatus {
            target: args.target.clone(),
            change,
            cancel: CancelFlags::none(),
        })
    })
}

/// A status change of `pause`, `resume` or `stop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Pause,
    Resume,
    Stop,
}

impl Change {
    /// The verb, for the refusal's message.
    fn verb(self) -> &'static str {
        match self {
            Change::Pause => "pause",
            Change::Resume => "resume",
            Change::Stop => "stop",
        }
    }
}

/// The typed request of `pause`, `resume` and `stop`: one loop's status
/// change.
struct ChangeStatus {
    /// The loop, by id or name.
    target: String,
    change: Change,
    /// `stop --cancel` (issue 28).
    cancel: CancelFlags,
}

/// What a status change returns: the changed loop, and the store, for the
/// daemon hint after a resume.
struct StatusChanged {
    lp: Loop,
    change: Change,
    /// The loop was already so, and nothing was written.
    already: bool,
    store: Store,
}

impl Request for ChangeStatus {
    type Document = StatusChanged;

    /// Applies the change; a loop already so is no error.
    fn run(self, ctx: &Context, warnings: &mut Warnings) -> Result<StatusChanged> {
        let store = ctx.open_store()?;
        let lp = store.require_loop(&self.target)?;
        let changed = match self.change {
            Change::Pause => store.pause_loop(&lp.id, now())?,
            Change::Resume => store.resume_loop(&lp.id, now())?,
            Change::Stop => store.stop_loop(&lp.id, now())?,
        };
        let (lp, already) = match changed {
            LoopChange::Changed(lp) => (lp, false),
            LoopChange::Already(lp) => (lp, true),
            LoopChange::Refused { loop_, reason } => bail!(
                "cannot {} {} ({}): it is {}, and {reason}",
                self.change.verb(),
                loop_.name,
                loop_.id,
                loop_.status
            ),
        };
        if self.change == Change::Stop {
            // Stopped first, so no new run starts while these end.
            super::cancel::settle_running(ctx, &store, &lp, &self.cancel, false, warnings)?;
        }
        Ok(StatusChanged {
            lp,
            change: self.change,
            already,
            store,
        })
    }
}

impl Document for StatusChanged {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json_of(&redact::loop_json(&self.lp))?)
    }

    /// `<id> <status>`, or `<id> already <status>` when nothing changed
    /// (issue 28), plus `next=<nextRunAt>` after a resume, in local time
    /// with its offset (`--json` keeps UTC).
    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        let lp = &self.lp;
        let already = if self.already { "already " } else { "" };
        let mut line = format!("{} {already}{}", lp.id, lp.status);
        if self.change == Change::Resume {
            let next = lp
                .next_run_at
                .map_or_else(|| "-".to_owned(), human::local_iso);
            line.push_str(&format!(" next={next}"));
        }
        out.line(&line)?;
        if self.change == Change::Resume && lp.status == LoopStatus::Active {
            hint::no_daemon(ctx, &self.store, now());
        }
        Ok(())
    }
}

/// `remove` / `rm`.
pub(crate) fn remove(ctx: &Context, args: &RemoveArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(Remove {
            target: args.target.target.clone(),
            history: if args.purge {
                DeleteHistory::Purge
            } else {
                DeleteHistory::Keep
            },
            cancel: args.cancel.clone(),
        })
    })
}

/// The typed request of `remove`: one loop, and what becomes of its runs.
struct Remove {
    target: String,
    history: DeleteHistory,
    /// `--cancel` (issue 28).
    cancel: CancelFlags,
}

/// What `remove` returns: the loop removed and its runs kept or deleted,
/// or `None` when someone else removed it between the lookup and the
/// delete.
struct Removed(Option<RemovedLoop>);

struct RemovedLoop {
    lp: Loop,
    history: DeleteHistory,
    kept: u64,
    deleted: u64,
}

impl Request for Remove {
    type Document = Removed;

    fn run(self, ctx: &Context, warnings: &mut Warnings) -> Result<Removed> {
        let store = ctx.open_store()?;
        let lp = store.require_loop(&self.target)?;
        if self.cancel.cancel {
            // Stopped first, so no new run starts while these end.
            store.stop_loop(&lp.id, now())?;
        }
        let purge = self.history == DeleteHistory::Purge;
        super::cancel::settle_running(ctx, &store, &lp, &self.cancel, purge, warnings)?;
        let kept = match self.history {
            DeleteHistory::Keep => count_runs(&store, &lp.id)?,
            DeleteHistory::Purge => 0,
        };
        let deleted = match store.delete_loop(&lp.id, self.history)? {
            DeleteOutcome::Deleted { runs_deleted, .. } => {
                if runs_deleted > 0 {
                    // Their logs go with them (issue 16 §4).
                    loops_scheduler::sweep_run_logs(&store, &ctx.data_dir()?)?;
                }
                runs_deleted
            }
            DeleteOutcome::NotFound => return Ok(Removed(None)),
        };
        Ok(Removed(Some(RemovedLoop {
            lp,
            history: self.history,
            kept,
            deleted,
        })))
    }
}

impl Document for Removed {
    fn json(&self, out: &mut Printer) -> Result<()> {
        let Some(r) = &self.0 else {
            return Ok(out.json(&json!({ "removed": false }))?);
        };
        Ok(out.json(&json!({
            "removed": true,
            "id": r.lp.id,
            "name": r.lp.name,
            "history": match r.history {
                DeleteHistory::Purge => "purged",
                DeleteHistory::Keep => "kept",
            },
            "runsKept": r.kept,
            "runsDeleted": r.deleted,
        }))?)
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        let Some(r) = &self.0 else {
            return Ok(out.line("not removed")?);
        };
        out.line("removed")?;
        let runs = |n: u64| if n == 1 { "run" } else { "runs" };
        let name = &r.lp.name;
        match r.history {
            DeleteHistory::Purge => {
                out.line(&format!(
                    "deleted {} {} of {name}",
                    r.deleted,
                    runs(r.deleted)
                ))?;
            }
            DeleteHistory::Keep if r.kept > 0 => out.line(&format!(
                "kept {} {} of {name}; list them with `loops runs {}` (remove --purge deletes a \
                 loop's runs with it)",
                r.kept,
                runs(r.kept),
                r.lp.id
            ))?,
            DeleteHistory::Keep => out.line(&format!("{name} had no runs"))?,
        }
        Ok(())
    }
}

/// How many runs a loop has.
fn count_runs(store: &Store, id: &LoopId) -> Result<u64> {
    // The store has no per-loop count, so the runs are listed; a CLI
    // command that runs once can afford it.
    let runs = store.list_runs(&RunFilter {
        loop_id: Some(*id),
        status: None,
        limit: Some(u32::MAX),
        offset: None,
    })?;
    Ok(runs.len() as u64)
}
