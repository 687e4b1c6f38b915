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
use loops_core::{Loop, LoopId, LoopRun, LoopStatus, Target};
use loops_store::{DeleteHistory, DeleteOutcome, LoopChange, LoopFilter, RunFilter, Store};
use serde_json::json;

use super::now;
use crate::args::{ListArgs, LoopRef, RemoveArgs};
use crate::context::Context;
use crate::exit::Outcome;
use crate::hint;
use crate::human;
use crate::redact;
use crate::render::{self, Printer, Table};
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
    let store = ctx.open_store()?;
    let filter = LoopFilter {
        status,
        limit: Some(limit.unwrap_or(u32::MAX)),
    };
    if out.json {
        // Each loop is printed as its row is read: a thousand loops never
        // sit in memory at once. A damaged row found partway ends the
        // output there, and the command fails with the error.
        let mut list = out.json_array();
        let mut failed = None;
        store.for_each_labeled_loop(&filter, &labels, |lp| {
            match list.push(&redact::into_loop_json(lp)) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    failed = Some(e);
                    ControlFlow::Break(())
                }
            }
        })?;
        if let Some(e) = failed {
            return Err(e.into());
        }
        Printer::end_json_array(list)?;
        return Ok(Outcome::Success);
    }
    let mut loops = Vec::new();
    store.for_each_labeled_loop(&filter, &labels, |lp| {
        loops.push(lp);
        ControlFlow::Continue(())
    })?;
    if loops.is_empty() {
        ctx.hint(&match status {
            _ if !labels.is_empty() => format!("no loops labeled {}", labels.join(", ")),
            None => "no loops yet — loops create --help".to_owned(),
            Some(status) => format!("no {status} loops"),
        });
        return Ok(Outcome::Success);
    }
    let now = human::display_now();
    let mut table =
        Table::with_headers(&["ID", "NAME", "STATUS", "SCHEDULE", "NEXT RUN", "LAST RUN"]);
    for lp in &loops {
        let active = lp.status == LoopStatus::Active;
        let (next, overdue) = human::next_run(lp.next_run_at, active, now);
        let last = last_run(&store, &lp.id)?;
        table.styled_row(vec![
            (lp.id.to_string(), Style::new()),
            (name_with_labels(lp), Style::new()),
            (
                lp.status.to_string(),
                render::status_style(lp.status.as_str()),
            ),
            (human::schedule(&lp.schedule), Style::new()),
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
    // Said on stderr, as the empty state is: stdout holds the table alone,
    // so a pipe into `wc -l` or `grep` sees only loops (issue 16).
    if let Some(limit) = limit {
        let total = store.count_loops(status)?;
        if total > u64::from(limit) {
            ctx.hint(&format!(
                "showing {} of {total} loops; raise --limit to see more",
                loops.len()
            ));
        }
    }
    if loops.iter().any(|lp| lp.status == LoopStatus::Active) {
        // The real clock: a lease is live or not whatever the display says.
        hint::no_daemon(ctx, &store, out.json, super::now());
    }
    Ok(Outcome::Success)
}

/// A loop's newest run: one indexed lookup (`idx_runs_loop`), whatever
/// the length of its history.
fn last_run(store: &Store, id: &LoopId) -> Result<Option<LoopRun>> {
    let mut runs = store.list_runs(&RunFilter {
        loop_id: Some(*id),
        status: None,
        limit: Some(1),
    })?;
    Ok(runs.pop())
}

/// `show`: always JSON (SPEC §7.1).
pub(crate) fn show(ctx: &Context, args: &LoopRef, out: &mut Printer) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let mut lp = store.require_loop(&args.target)?;
    // Issue 17: with a prompt file, `prompt` shows what the next run sends,
    // the file's text now (redacted as any prompt), not the text at create;
    // read as a run reads it (issue 25 §1): bounded, never waiting on a pipe.
    if let Target::Agent(a) = &mut lp.target
        && let Some(text) = a.prompt_file.as_deref().and_then(|path| {
            let path = std::path::Path::new(path);
            loops_exec::read_user_file(path, "prompt file", loops_exec::PROMPT_FILE_MAX_BYTES).ok()
        })
    {
        a.prompt = text;
    }
    out.json_of(&redact::loop_json(&lp))?;
    Ok(Outcome::Success)
}

/// `pause`: active → paused, next run kept.
pub(crate) fn pause(ctx: &Context, args: &LoopRef, out: &mut Printer) -> Result<Outcome> {
    change(ctx, args, out, "pause", Store::pause_loop)
}

/// `resume`: back on schedule; prints the next run.
pub(crate) fn resume(ctx: &Context, args: &LoopRef, out: &mut Printer) -> Result<Outcome> {
    change(ctx, args, out, "resume", Store::resume_loop)
}

/// `stop`: stopped, next run cleared.
pub(crate) fn stop(ctx: &Context, args: &LoopRef, out: &mut Printer) -> Result<Outcome> {
    change(ctx, args, out, "stop", Store::stop_loop)
}

type ChangeFn = fn(&Store, &LoopId, loops_core::Timestamp) -> loops_store::Result<LoopChange>;

/// The typed request of `pause`, `resume` and `stop`: one loop's status
/// change. Its document is the changed loop (what `--json` prints, through
/// `redact::loop_json`); [`print_status`] renders it for humans.
struct ChangeStatus<'a> {
    /// The loop, by id or name.
    target: &'a str,
    /// `pause`, `resume` or `stop`, for the refusal's message.
    verb: &'static str,
    apply: ChangeFn,
}

impl ChangeStatus<'_> {
    /// Applies the change in `store`; a loop already so is no error.
    fn run(&self, store: &Store) -> Result<Loop> {
        let lp = store.require_loop(self.target)?;
        match (self.apply)(store, &lp.id, now())? {
            LoopChange::Changed(lp) | LoopChange::Already(lp) => Ok(lp),
            LoopChange::Refused { loop_, reason } => bail!(
                "cannot {} {} ({}): it is {}, and {reason}",
                self.verb,
                loop_.name,
                loop_.id,
                loop_.status
            ),
        }
    }
}

fn change(
    ctx: &Context,
    args: &LoopRef,
    out: &mut Printer,
    verb: &'static str,
    apply: ChangeFn,
) -> Result<Outcome> {
    let request = ChangeStatus {
        target: &args.target,
        verb,
        apply,
    };
    let store = ctx.open_store()?;
    let lp = request.run(&store)?;
    print_status(&lp, verb == "resume", out)?;
    if verb == "resume" && lp.status == LoopStatus::Active {
        hint::no_daemon(ctx, &store, out.json, now());
    }
    Ok(Outcome::Success)
}

/// `<id> <status>`, plus `next=<nextRunAt>` after a resume.
fn print_status(lp: &Loop, with_next: bool, out: &mut Printer) -> std::io::Result<()> {
    if out.json {
        return out.json_of(&redact::loop_json(lp));
    }
    let mut line = format!("{} {}", lp.id, lp.status);
    if with_next {
        let next = lp
            .next_run_at
            .map_or_else(|| "-".to_owned(), |t| t.to_string());
        line.push_str(&format!(" next={next}"));
    }
    out.line(&line)
}

/// `remove` / `rm`.
pub(crate) fn remove(ctx: &Context, args: &RemoveArgs, out: &mut Printer) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let lp = store.require_loop(&args.target.target)?;
    let history = if args.purge {
        DeleteHistory::Purge
    } else {
        DeleteHistory::Keep
    };
    let kept = match history {
        DeleteHistory::Keep => count_runs(&store, &lp.id)?,
        DeleteHistory::Purge => 0,
    };
    let runs_deleted = match store.delete_loop(&lp.id, history)? {
        DeleteOutcome::Deleted { runs_deleted, .. } => {
            if runs_deleted > 0 {
                // Their logs go with them (issue 16 §4).
                loops_scheduler::sweep_run_logs(&store, &ctx.data_dir()?)?;
            }
            runs_deleted
        }
        DeleteOutcome::NotFound => {
            // Removed by someone else between the lookup and the delete.
            if out.json {
                out.json(&json!({ "removed": false }))?;
            } else {
                out.line("not removed")?;
            }
            return Ok(Outcome::Success);
        }
    };
    if out.json {
        out.json(&json!({
            "removed": true,
            "id": lp.id,
            "name": lp.name,
            "history": if args.purge { "purged" } else { "kept" },
            "runsKept": kept,
            "runsDeleted": runs_deleted,
        }))?;
        return Ok(Outcome::Success);
    }
    out.line("removed")?;
    let runs = |n: u64| if n == 1 { "run" } else { "runs" };
    match history {
        DeleteHistory::Purge => out.line(&format!(
            "deleted {runs_deleted} {} of {}",
            runs(runs_deleted),
            lp.name
        ))?,
        DeleteHistory::Keep if kept > 0 => out.line(&format!(
            "kept {kept} {} of {}; list them with `loops runs {}` (remove --purge deletes a loop's runs with it)",
            runs(kept),
            lp.name,
            lp.id
        ))?,
        DeleteHistory::Keep => out.line(&format!("{} had no runs", lp.name))?,
    }
    Ok(Outcome::Success)
}

/// How many runs a loop has.
fn count_runs(store: &Store, id: &LoopId) -> Result<u64> {
    // The store has no per-loop count, so the runs are listed; a CLI
    // command that runs once can afford it.
    let runs = store.list_runs(&RunFilter {
        loop_id: Some(*id),
        status: None,
        limit: Some(u32::MAX),
    })?;
    Ok(runs.len() as u64)
}
