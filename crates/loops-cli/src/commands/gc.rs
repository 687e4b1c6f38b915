//! `loops gc [--max-age-days 30] [--keep-per-loop 20] [--dry-run | --apply]
//! [--vacuum] [--force]` (issue 14): delete finished runs older than the
//! age, keeping the newest runs of each loop, with their workflow runs,
//! steps and events; and (issue 27) remove the agent worktrees that runs
//! kept and no run has entered for as long (`loops_exec::sweep_worktrees`):
//! clean ones only, unless `--force`.
//!
//! New in loops; the flags follow later OpenLoops versions. A dry run is
//! the default and writes nothing. `--apply` deletes in short batches
//! (`loops_scheduler::collect_garbage`), so a daemon running alongside
//! waits a few milliseconds at most for each. The report says how much of
//! the file is free pages and whether a `VACUUM` would give them back.
//! gc runs one only when `--vacuum` asks (issue 28), because a `VACUUM`
//! holds the database for as long as it takes to rewrite the whole file:
//! it is refused while a daemon runs, and runs after the pass, whether or
//! not the pass deleted anything. On PostgreSQL `--vacuum` does nothing
//! but say so: autovacuum makes the space deleted rows leave reusable, and
//! giving it back (`VACUUM FULL`, which locks each table against every
//! host's daemon) is the server administrator's call.

use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use loops_exec::{ExecOptions, SweepWorktrees, WorktreeSweep};
use loops_scheduler::{DEFAULT_GC_KEEP_PER_LOOP, GcSettings};
use loops_store::{GcCounts, GcLoopTally, GcPolicy};
use serde::Serialize;

use super::now;
use crate::args::GcArgs;
use crate::args::daemon::GcFlags;
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::{self, Printer};
use crate::request::{self, Document, Request, Warnings};
use crate::resolve;

/// A long pass's live view on stderr: the rows so far, rewritten in place
/// at most every [`Live::EVERY`]; only on a terminal, so a script's stderr
/// gets the report alone.
struct Live {
    on: bool,
    verb: &'static str,
    shown: std::cell::Cell<Option<std::time::Instant>>,
}

impl Live {
    const EVERY: Duration = Duration::from_millis(250);

    fn new(apply: bool) -> Live {
        use std::io::IsTerminal;
        Live {
            on: std::io::stderr().is_terminal(),
            verb: if apply { "deleted" } else { "counted" },
            shown: std::cell::Cell::new(None),
        }
    }

    fn show(&self, so_far: &GcCounts) {
        let due = self
            .shown
            .get()
            .is_none_or(|at| at.elapsed() >= Live::EVERY);
        if self.on && due {
            self.shown.set(Some(std::time::Instant::now()));
            eprint!(
                "\r\x1b[Kgc: {} {} loop run(s) and {} workflow run(s) so far…",
                self.verb, so_far.loop_runs, so_far.workflow_runs
            );
        }
    }

    fn clear(&self) {
        if self.on && self.shown.get().is_some() {
            eprint!("\r\x1b[K");
        }
    }
}

/// Loops named in the report, those with the most runs deleted.
const TOP_LOOPS: usize = 5;
const DAY_MS: u64 = 86_400_000;
/// `--max-age-days`'s default in `GcArgs`.
const DEFAULT_MAX_AGE_DAYS: u32 = 30;
/// `--keep-per-loop`'s default.
const DEFAULT_KEEP_PER_LOOP: u32 = 20;

/// `gc`.
pub(crate) fn run(ctx: &Context, args: &GcArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(Gc {
            max_age_days: whole(&args.max_age_days, "--max-age-days", "30")?,
            keep_per_loop: whole(&args.keep_per_loop, "--keep-per-loop", "20")?,
            apply: args.apply && !args.dry_run,
            force: args.force,
            vacuum: args.vacuum,
        })
    })
}

/// The typed request of `gc`: the policy, and whether to delete.
struct Gc {
    max_age_days: u32,
    keep_per_loop: u32,
    /// `--apply` without `--dry-run`.
    apply: bool,
    /// `--force`: dirty worktrees go too.
    force: bool,
    /// `--vacuum`: give the free pages back afterwards.
    vacuum: bool,
}

/// What `gc` returns: the summary `--json` prints, and what the notes
/// after it need.
struct Collected {
    summary: Summary,
    /// Run logs removed with their runs.
    logs_removed: u64,
    /// `--vacuum` was given on PostgreSQL, where it does nothing.
    vacuum_skipped: bool,
    /// `--force` was given, for the hint that repeats the flags.
    force: bool,
}

impl Request for Gc {
    type Document = Collected;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Collected> {
        let (days, keep, apply) = (self.max_age_days, self.keep_per_loop, self.apply);
        let on_sqlite = ctx.database_url()?.is_none();
        if self.vacuum && on_sqlite {
            super::refuse_while_daemon_runs(
                ctx,
                "running gc --vacuum, which holds the database while it rewrites it",
            )?;
        }
        let store = ctx.open_store()?;
        let policy = GcPolicy::new(u64::from(days) * DAY_MS, keep, now());
        if apply {
            // Deleting cannot be undone: a backup first, at most one an hour;
            // when none can be taken, nothing is deleted.
            ctx.auto_backup(&store, now(), "before loops gc --apply")?;
        }
        // The live view prints on stderr while the pass runs, and only on a
        // terminal, so it stays here rather than in the render step.
        let live = Live::new(apply);
        let report =
            loops_scheduler::collect_garbage(&store, &policy, apply, &|| false, &|c| live.show(c));
        live.clear();
        let report = report?;
        // Run logs go with their runs (issue 16 §4).
        let logs_removed = if apply && report.counts.loop_runs > 0 {
            loops_scheduler::sweep_run_logs(&store, &ctx.data_dir()?)?
        } else {
            0
        };
        // Issue 27: the worktrees runs kept, by the same age.
        let worktrees = loops_exec::sweep_worktrees(
            &SweepWorktrees {
                older_than: policy.older_than,
                apply,
                force: self.force,
            },
            &ExecOptions::default(),
        );
        let file_bytes = store
            .path()
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len());
        let vacuumed = if self.vacuum { store.vacuum()? } else { None };
        let summary = Summary {
            applied: apply,
            max_age_days: days,
            keep_per_loop: keep,
            older_than: policy.older_than.to_string(),
            loop_runs: report.counts.loop_runs,
            workflow_runs: report.counts.workflow_runs,
            step_runs: report.counts.step_runs,
            events: report.counts.events,
            coalesced_triggers: report.counts.coalesced_triggers,
            batches: report.batches,
            longest_batch_ms: u64::try_from(report.longest_batch.as_millis()).unwrap_or(u64::MAX),
            lock_held_ms: u64::try_from(report.write_time.as_millis()).unwrap_or(u64::MAX),
            top_loops: report
                .per_loop
                .iter()
                .take(TOP_LOOPS)
                .map(TopLoop::from)
                .collect(),
            space: Space {
                file_bytes,
                page_size: report.after.page_size,
                page_count: report.after.page_count,
                free_bytes_before: report.before.free_bytes(),
                free_bytes_after: report.after.free_bytes(),
                vacuum_would_help: report.after.vacuum_would_help(),
            },
            worktrees: Worktrees::from(&worktrees),
            vacuum: vacuumed.map(|v| Vacuum {
                bytes_before: v.bytes_before,
                bytes_after: v.bytes_after,
            }),
        };
        Ok(Collected {
            summary,
            logs_removed,
            vacuum_skipped: self.vacuum && !on_sqlite,
            force: self.force,
        })
    }
}

impl Document for Collected {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json(&serde_json::to_value(&self.summary)?)?)
    }

    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        for line in human(&self.summary) {
            out.line(&line)?;
        }
        if self.logs_removed > 0 {
            ctx.note(
                "gc",
                &format!("removed {} run log(s) with their runs", self.logs_removed),
            );
        }
        Ok(())
    }

    fn notes(&self, ctx: &Context) {
        if self.vacuum_skipped {
            ctx.note(
                "note",
                "--vacuum does nothing on PostgreSQL: autovacuum makes the space of deleted rows \
                 reusable, and giving it back (VACUUM FULL) is the server administrator's call",
            );
        }
        if self.summary.applied {
            return;
        }
        let worktrees = self.summary.worktrees.removed > 0;
        let apply = self.apply_command();
        match (self.summary.total() > 0, worktrees) {
            (true, false) => ctx.note(
                "hint",
                &format!("nothing was deleted; run `{apply}` to delete these runs"),
            ),
            (true, true) => ctx.note(
                "hint",
                &format!("nothing was deleted; run `{apply}` to delete these runs and worktrees"),
            ),
            (false, true) => ctx.note(
                "hint",
                &format!("nothing was removed; run `{apply}` to remove these worktrees"),
            ),
            (false, false) => {}
        }
    }
}

impl Collected {
    /// The command that deletes what this dry run counted: `loops gc` with
    /// the policy it was given and `--apply` (issue 28). Defaults are left
    /// out, and so is `--database-url`, which may hold a password.
    fn apply_command(&self) -> String {
        let mut line = String::from("loops gc");
        if self.summary.max_age_days != DEFAULT_MAX_AGE_DAYS {
            line.push_str(&format!(" --max-age-days {}", self.summary.max_age_days));
        }
        if self.summary.keep_per_loop != DEFAULT_KEEP_PER_LOOP {
            line.push_str(&format!(" --keep-per-loop {}", self.summary.keep_per_loop));
        }
        if self.force {
            line.push_str(" --force");
        }
        line.push_str(" --apply");
        line
    }
}

/// The daemon's gc from `--gc-max-age` and `--gc-keep-per-loop`: `None`
/// without `--gc-max-age`.
pub(crate) fn daemon_settings(flags: &GcFlags) -> Result<Option<GcSettings>> {
    let Some(age) = &flags.gc_max_age else {
        return Ok(None);
    };
    let ms = resolve::duration(age, "--gc-max-age")?;
    if ms == 0 {
        bail!("--gc-max-age must be greater than zero (such as 30d)");
    }
    let keep = match &flags.gc_keep_per_loop {
        Some(n) => whole(n, "--gc-keep-per-loop", "20")?,
        None => DEFAULT_GC_KEEP_PER_LOOP,
    };
    Ok(Some(GcSettings {
        max_age: Duration::from_millis(ms),
        keep_per_loop: keep,
        backup_first: crate::auto_backup::automatic_at(now()).is_some(),
    }))
}

/// The gc flags as given, for the `daemon run` that `daemon start` spawns
/// and the one a service file runs.
pub(crate) fn daemon_args(flags: &GcFlags) -> Vec<String> {
    let mut args = Vec::new();
    if let Some(age) = &flags.gc_max_age {
        args.extend(["--gc-max-age".to_owned(), age.clone()]);
    }
    if let Some(keep) = &flags.gc_keep_per_loop {
        args.extend(["--gc-keep-per-loop".to_owned(), keep.clone()]);
    }
    args
}

/// A whole number, 0 or more.
fn whole(value: &str, flag: &str, example: &str) -> Result<u32> {
    value.trim().parse::<u32>().map_err(|_| {
        anyhow!(
            "{flag} must be a whole number, 0 or more (such as {example}), not {:?}",
            value
        )
    })
}

/// What `gc --json` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    /// False for a dry run: the counts are what would be deleted.
    applied: bool,
    max_age_days: u32,
    keep_per_loop: u32,
    /// Runs created before this instant were candidates.
    older_than: String,
    loop_runs: u64,
    workflow_runs: u64,
    step_runs: u64,
    events: u64,
    /// Triggers that catch-up folded into others before the cutoff.
    coalesced_triggers: u64,
    /// Batches that deleted (or would delete) something.
    batches: u64,
    /// The longest one batch held the write lock (0 in a dry run).
    longest_batch_ms: u64,
    /// All batches together.
    lock_held_ms: u64,
    /// The loops with the most runs deleted, most first.
    top_loops: Vec<TopLoop>,
    space: Space,
    /// The agent worktrees removed and kept (issue 27).
    worktrees: Worktrees,
    /// What `--vacuum` gave back (issue 28); absent without it, and on
    /// PostgreSQL.
    #[serde(skip_serializing_if = "Option::is_none")]
    vacuum: Option<Vacuum>,
}

impl Summary {
    /// Records deleted, or that a dry run would delete.
    fn total(&self) -> u64 {
        self.loop_runs + self.workflow_runs + self.step_runs + self.events + self.coalesced_triggers
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct TopLoop {
    loop_id: String,
    loop_name: String,
    runs: u64,
}

impl From<&GcLoopTally> for TopLoop {
    fn from(t: &GcLoopTally) -> TopLoop {
        TopLoop {
            loop_id: t.loop_id.clone(),
            loop_name: t.loop_name.clone(),
            runs: t.runs,
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Space {
    /// The database file's size (its WAL aside).
    file_bytes: u64,
    page_size: u64,
    page_count: u64,
    /// Bytes of free pages before and after the pass (page size × free
    /// pages).
    free_bytes_before: u64,
    free_bytes_after: u64,
    /// More than a fifth of the pages are free.
    vacuum_would_help: bool,
}

/// What `gc --vacuum` did: the size on disk of the database file and its
/// WAL before and after the `VACUUM`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Vacuum {
    bytes_before: u64,
    bytes_after: u64,
}

/// What `gc` did with the worktrees runs kept (issue 27).
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Worktrees {
    /// The root looked under; absent without a HOME.
    #[serde(skip_serializing_if = "Option::is_none")]
    root: Option<String>,
    /// Removed (in a dry run: to be removed).
    removed: u64,
    /// Old enough, but kept; each item says why.
    kept: u64,
    /// Each old worktree, removed ones first, in path order.
    items: Vec<WorktreeItem>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct WorktreeItem {
    path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    branch: Option<String>,
    removed: bool,
    /// Why it was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl From<&WorktreeSweep> for Worktrees {
    fn from(sweep: &WorktreeSweep) -> Worktrees {
        let item = |removed: bool| {
            move |w: &loops_exec::SweptWorktree| WorktreeItem {
                path: w.path.display().to_string(),
                branch: w.branch.clone(),
                removed,
                reason: w.reason.clone(),
            }
        };
        Worktrees {
            root: sweep.root.as_ref().map(|r| r.display().to_string()),
            removed: sweep.removed.len() as u64,
            kept: sweep.kept.len() as u64,
            items: sweep
                .removed
                .iter()
                .map(item(true))
                .chain(sweep.kept.iter().map(item(false)))
                .collect(),
        }
    }
}

/// The human lines about worktrees: none when no worktree is old enough.
fn worktree_lines(s: &Summary) -> Vec<String> {
    let w = &s.worktrees;
    if w.removed == 0 && w.kept == 0 {
        return Vec::new();
    }
    let (remove, keep) = if s.applied {
        ("removed", "kept")
    } else {
        ("would remove", "would keep")
    };
    let mut lines = vec![format!(
        "worktrees: {remove} {} and {keep} {} of those no run entered for {} days",
        w.removed, w.kept, s.max_age_days
    )];
    for item in &w.items {
        let path = render::escape_controls(&item.path, &[]);
        lines.push(match &item.reason {
            Some(reason) => format!("  {keep} {path}: {}", render::escape_controls(reason, &[])),
            None => format!("  {remove} {path}"),
        });
    }
    lines
}

/// The human report.
fn human(s: &Summary) -> Vec<String> {
    let mut counts = format!(
        "{} loop run(s), {} workflow run(s), {} step run(s), {} event(s)",
        s.loop_runs, s.workflow_runs, s.step_runs, s.events
    );
    if s.coalesced_triggers > 0 {
        counts.push_str(&format!(", {} coalesced trigger(s)", s.coalesced_triggers));
    }
    let mut lines = vec![if s.applied {
        format!(
            "deleted {counts} in {} batch(es); the longest held the write lock {} ms",
            s.batches, s.longest_batch_ms
        )
    } else {
        format!("dry run: would delete {counts}")
    }];
    let kept = match s.keep_per_loop {
        0 | 1 => "the newest run".to_owned(),
        n => format!("the newest {n} runs"),
    };
    lines.push(format!(
        "policy: finished runs created before {} ({} days ago), keeping {kept} of each loop",
        s.older_than, s.max_age_days
    ));
    if !s.top_loops.is_empty() {
        let top: Vec<String> = s
            .top_loops
            .iter()
            .map(|t| {
                format!(
                    "{} ({})",
                    render::escape_controls(&t.loop_name, &[]),
                    t.runs
                )
            })
            .collect();
        lines.push(format!("most from: {}", top.join(", ")));
    }
    let sp = &s.space;
    let share = |free: u64| {
        (free * 100)
            .checked_div(sp.page_size * sp.page_count)
            .unwrap_or(0)
    };
    lines.push(if s.applied {
        format!(
            "space: {} file; free pages {} before, {} after ({}% of the database)",
            render::bytes(sp.file_bytes),
            render::bytes(sp.free_bytes_before),
            render::bytes(sp.free_bytes_after),
            share(sp.free_bytes_after)
        )
    } else {
        format!(
            "space: {} file; free pages {} ({}% of the database)",
            render::bytes(sp.file_bytes),
            render::bytes(sp.free_bytes_after),
            share(sp.free_bytes_after)
        )
    });
    lines.push(if let Some(v) = &s.vacuum {
        format!(
            "vacuum: the database took {} before and takes {} now ({} given back)",
            render::bytes(v.bytes_before),
            render::bytes(v.bytes_after),
            render::bytes(v.bytes_before.saturating_sub(v.bytes_after))
        )
    } else if sp.vacuum_would_help {
        format!(
            "vacuum: would give about {} back to the file system; stop the daemon \
             (loops daemon stop), then run: loops gc --vacuum",
            render::bytes(sp.free_bytes_after),
        )
    } else {
        "vacuum: not needed; new runs reuse the free pages".to_owned()
    });
    lines.extend(worktree_lines(s));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_whole_numbers_with_a_message_naming_the_flag() {
        assert_eq!(whole(" 30 ", "--max-age-days", "30").unwrap(), 30);
        assert_eq!(whole("0", "--keep-per-loop", "20").unwrap(), 0);
        for bad in ["-1", "1.5", "30d", ""] {
            let e = whole(bad, "--max-age-days", "30").unwrap_err().to_string();
            assert!(
                e.starts_with("--max-age-days must be a whole number"),
                "{e}"
            );
        }
    }

    fn summary(max_age_days: u32, keep_per_loop: u32) -> Summary {
        Summary {
            applied: false,
            max_age_days,
            keep_per_loop,
            older_than: String::new(),
            loop_runs: 1,
            workflow_runs: 20,
            step_runs: 300,
            events: 4000,
            coalesced_triggers: 0,
            batches: 0,
            longest_batch_ms: 0,
            lock_held_ms: 0,
            top_loops: Vec::new(),
            space: Space {
                file_bytes: 0,
                page_size: 0,
                page_count: 0,
                free_bytes_before: 0,
                free_bytes_after: 0,
                vacuum_would_help: false,
            },
            worktrees: Worktrees::default(),
            vacuum: None,
        }
    }

    #[test]
    fn the_total_counts_every_kind_of_record() {
        assert_eq!(summary(30, 20).total(), 4321);
    }

    #[test]
    fn the_hint_repeats_the_policy_given() {
        let collected = |days, keep, force| Collected {
            summary: summary(days, keep),
            logs_removed: 0,
            vacuum_skipped: false,
            force,
        };
        assert_eq!(collected(30, 20, false).apply_command(), "loops gc --apply");
        assert_eq!(
            collected(7, 0, true).apply_command(),
            "loops gc --max-age-days 7 --keep-per-loop 0 --force --apply"
        );
    }
}
