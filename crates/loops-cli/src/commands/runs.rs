//! `loops runs [loop|run-id]` (SPEC §7.4): recorded runs, newest first,
//! with their output redacted unless `--show-output` is given (SPEC §7.2).
//!
//! Departures from 0.3.1 (issue 16): the human table has the run's exit
//! code, duration, local and relative time and the first line of its
//! error; when `--limit` cut the listing, a note on stderr says so (as
//! `list --limit` does); no runs is said on stderr with an empty stdout;
//! and a run id prints that one run (JSON: the same array, one element).
//!
//! Issue 28: the human table is sorted by start, newest first, and shows
//! the start; each run shows its loop's current name (a run keeps the name
//! it ran under, which a rename leaves behind), and a removed loop's runs
//! say `(removed)`. `--json` keeps the stored rows and their order.

use anstyle::Style;
use anyhow::Result;
use loops_core::{LoopId, LoopRun, RunFacts, RunId, RunStatus, Timestamp};
use loops_store::{RunFilter, Store, StoreError};

use crate::args::RunsArgs;
use crate::context::Context;
use crate::exit::Outcome;
use crate::human;
use crate::redact::{self, Output};
use crate::render::{self, Column, Printer, Table};
use crate::request::{self, Document, Request, Warnings};
use crate::resolve;

/// What the argument of `runs` names.
enum Subject {
    /// One loop's runs (a removed loop's kept history too).
    Loop(LoopId),
    /// One run.
    Run(Box<LoopRun>),
}

/// `runs`.
pub(crate) fn list(ctx: &Context, args: &RunsArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        let limit = resolve::positive_int(&args.limit, "--limit")?;
        let status = args
            .status
            .as_deref()
            .map(resolve::run_status)
            .transpose()?;
        Ok(Runs {
            target: args.target.clone(),
            limit,
            offset: resolve::offset(args.offset.as_deref())?,
            status,
            output: Output::from_flag(args.show_output),
            labels: crate::resolve::policy::labels(&args.labels)?,
        })
    })
}

/// The typed request of `runs`: the newest runs of every loop or of one,
/// or one run.
struct Runs {
    /// A loop (by id or name, or the id of a removed loop with kept runs)
    /// or a run id; `None` for every loop.
    target: Option<String>,
    limit: u32,
    /// How many of the newest to skip (paging).
    offset: Option<u32>,
    status: Option<RunStatus>,
    output: Output,
    /// The runs of loops with every one of these labels (issue 17).
    labels: Vec<String>,
}

/// Loops by id: the current name, or `None` for a removed loop.
type Names = std::collections::HashMap<LoopId, Option<String>>;

/// What started each triggered run (issue 30, T10): its trigger, and the
/// words `runs` shows (`after <loop>`, `manual`, `watch`).
type StartedBy = std::collections::HashMap<RunId, (loops_store::LoopTrigger, String)>;

/// [`StartedBy`] for `runs`.
fn started_by(store: &Store, runs: &[LoopRun]) -> Result<StartedBy> {
    let ids: Vec<RunId> = runs.iter().map(|r| r.id).collect();
    let mut by = StartedBy::new();
    for t in store.triggers_of_runs(&ids)? {
        let Some(run) = t.run_id else { continue };
        let words = match (t.kind, &t.source_loop_id) {
            (loops_core::TriggerKind::After, Some(up)) => {
                let name = store
                    .get_loop(up)?
                    .map_or_else(|| up.to_string(), |lp| lp.name);
                format!("after {name}")
            }
            (kind, _) => kind.to_string(),
        };
        by.insert(run, (t, words));
    }
    Ok(by)
}

/// What `runs` returns.
enum RunsListed {
    /// The run a run id named, and its loop's current name (`None` when
    /// the loop was removed).
    One(Box<LoopRun>, Output, Option<String>, StartedBy),
    /// The newest runs, newest first; `cut` when the limit hid older ones.
    Many {
        runs: Vec<LoopRun>,
        output: Output,
        cut: bool,
        /// Each run's loop's current name, `None` for a removed loop.
        names: Names,
        /// The pool the loop listed waits for (issue 30, Q4).
        waiting: Option<String>,
        by: StartedBy,
    },
}

impl Request for Runs {
    type Document = RunsListed;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<RunsListed> {
        let store = ctx.open_store()?;
        let loop_id = match self.target.as_deref() {
            None => None,
            Some(target) => match subject(&store, target)? {
                Subject::Loop(id) => Some(id),
                Subject::Run(run) => {
                    let name = store.get_loop(&run.loop_id)?.map(|lp| lp.name);
                    let by = started_by(&store, std::slice::from_ref(&run))?;
                    return Ok(RunsListed::One(run, self.output, name, by));
                }
            },
        };
        // One row more than shown tells whether the limit cut the listing,
        // without counting a long history.
        let mut runs = store.list_labeled_runs(
            &RunFilter {
                loop_id,
                status: self.status,
                limit: Some(self.limit.saturating_add(1)),
                offset: self.offset,
            },
            &self.labels,
        )?;
        let cut = runs.len() > self.limit as usize;
        runs.truncate(self.limit as usize);
        let mut names = Names::new();
        for run in &runs {
            if let std::collections::hash_map::Entry::Vacant(name) = names.entry(run.loop_id) {
                name.insert(store.get_loop(&run.loop_id)?.map(|lp| lp.name));
            }
        }
        let waiting = match loop_id {
            Some(id) => match store.get_loop(&id)? {
                Some(lp) => super::pools::waiting_for(&store, &lp, super::now())?.map(|p| p.name),
                None => None,
            },
            None => None,
        };
        let by = started_by(&store, &runs)?;
        Ok(RunsListed::Many {
            runs,
            output: self.output,
            cut,
            names,
            waiting,
            by,
        })
    }
}

impl Document for RunsListed {
    /// The runs' array; one run is an array of one.
    fn json(&self, out: &mut Printer) -> Result<()> {
        match self {
            RunsListed::One(run, output, _, by) => {
                print_json(std::slice::from_ref(run), *output, by, out)
            }
            RunsListed::Many {
                runs, output, by, ..
            } => print_json(runs, *output, by, out),
        }
    }

    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        let (runs, output, cut, names, waiting, by) = match self {
            RunsListed::One(run, output, name, by) => {
                let names = Names::from([(run.loop_id, name.clone())]);
                print_one(ctx, run, &names, *output, out)?;
                if let Some((t, words)) = by.get(&run.id) {
                    let source = t
                        .source_run_id
                        .map(|r| format!(", run {r}"))
                        .unwrap_or_default();
                    out.line(&format!("trigger:   {words}{source} (trigger {})", t.id))?;
                }
                return Ok(());
            }
            RunsListed::Many {
                runs,
                output,
                cut,
                names,
                waiting,
                by,
            } => (runs, *output, *cut, names, waiting, by),
        };
        // Above the runs: the next one cannot start yet (Q4).
        if let Some(pool) = waiting {
            out.line(&format!("waiting for pool {pool}"))?;
        }
        print_table(ctx, runs, names, by, output, out)?;
        if runs.is_empty() {
            ctx.hint("no runs yet");
        } else if cut {
            // On stderr, as `list --limit` says it: stdout holds the table
            // alone.
            let n = runs.len();
            let noun = if n == 1 { "run" } else { "runs" };
            ctx.hint(&format!(
                "showing the newest {n} {noun}; raise --limit to see more"
            ));
        }
        Ok(())
    }
}

/// Prints runs as a JSON array; a triggered run also has `trigger`, its
/// trigger without the payload (issue 30, T10).
fn print_json(runs: &[LoopRun], output: Output, by: &StartedBy, out: &mut Printer) -> Result<()> {
    let mut all = Vec::with_capacity(runs.len());
    for run in runs {
        let mut doc = redact::run_json(run, output);
        if let (Some((t, _)), Some(fields)) = (by.get(&run.id), doc.as_object_mut()) {
            fields.insert("trigger".to_owned(), serde_json::to_value(t)?);
        }
        all.push(doc);
    }
    out.json(&serde_json::Value::Array(all))?;
    Ok(())
}

/// `runs`' columns. On a terminal the table fits its width (issue 28):
/// below 80 columns ATTEMPT is dropped first, then COST, CLASS, DURATION
/// and EXIT; then LOOP and ERROR are cut with `…`. RUN, STATUS and
/// STARTED are never cut.
fn runs_table(classes: bool, costs: bool) -> Table {
    let mut columns = vec![
        Column::keep("RUN"),
        Column::shrink("LOOP"),
        Column::keep("STATUS"),
    ];
    columns.extend(classes.then_some(Column::keep("CLASS").optional(2)));
    columns.extend([
        Column::keep("ATTEMPT").optional(0),
        Column::keep("EXIT").optional(4),
        Column::keep("DURATION").optional(3),
    ]);
    columns.extend(costs.then_some(Column::keep("COST").optional(1)));
    columns.extend([Column::keep("STARTED"), Column::shrink("ERROR")]);
    Table::new(columns)
}

/// When a run started, else when its row was written (a run that never
/// started).
fn start(run: &LoopRun) -> Timestamp {
    run.started_at.unwrap_or(run.created_at)
}

/// The name a run's row shows: its loop's current name, or the name it
/// ran under and `(removed)` when the loop is gone.
fn loop_cell(run: &LoopRun, names: &Names) -> String {
    match names.get(&run.loop_id) {
        Some(Some(name)) => name.clone(),
        Some(None) => format!("{} (removed)", run.loop_name),
        None => run.loop_name.clone(),
    }
}

/// Prints runs as a table, newest start first, each row followed by its
/// output blocks with `--show-output`.
fn print_table(
    ctx: &Context,
    runs: &[LoopRun],
    names: &Names,
    by: &StartedBy,
    output: Output,
    out: &mut Printer,
) -> Result<()> {
    let now = human::display_now();
    let mut runs: Vec<&LoopRun> = runs.iter().collect();
    runs.sort_by_key(|run| std::cmp::Reverse(start(run)));
    // Issue 27: the class and the cost columns appear when a run listed
    // has one, so a listing of plain commands reads as before.
    let classes = runs.iter().any(|r| r.facts.failure_class.is_some());
    let costs = runs.iter().any(|r| r.facts.cost_usd.is_some());
    let mut table = runs_table(classes, costs);
    for run in &runs {
        let mut row = vec![
            (run.id.to_string(), Style::new()),
            (loop_cell(run, names), Style::new()),
            (
                match by.get(&run.id) {
                    // What started it, beside what it did (T10).
                    Some((_, words)) => format!("{} ({words})", run.status),
                    None => run.status.to_string(),
                },
                render::status_style(run.status.as_str()),
            ),
        ];
        if classes {
            let class = run.facts.failure_class.map(|c| c.as_str());
            row.push((class.unwrap_or("-").to_owned(), Style::new()));
        }
        row.extend([
            (run.attempt.to_string(), Style::new()),
            (
                run.exit_code
                    .map_or_else(|| "-".to_owned(), |c| c.to_string()),
                Style::new(),
            ),
            (
                run.duration_ms
                    .map_or_else(|| "-".to_owned(), human::duration),
                Style::new(),
            ),
        ]);
        if costs {
            let cost = run.facts.cost_usd.map(|c| c.to_string());
            row.push((cost.unwrap_or_else(|| "-".to_owned()), Style::new()));
        }
        row.extend([
            (human::when(start(run), now), Style::new()),
            (
                run.error
                    .as_deref()
                    .map(|e| human::first_line(&ctx.error_text(e), usize::MAX))
                    .unwrap_or_default(),
                render::status_style("failed"),
            ),
        ]);
        table.styled_row(row);
    }
    out.table(&table, |i| match (output, runs.get(i)) {
        (Output::Shown, Some(run)) => human::steps::output_blocks(ctx, run),
        _ => Vec::new(),
    })?;
    Ok(())
}

/// One run, field by field, then its output blocks with `--show-output`.
fn print_one(
    ctx: &Context,
    run: &LoopRun,
    names: &Names,
    output: Output,
    out: &mut Printer,
) -> Result<()> {
    let now = human::display_now();
    let at = |t: Option<Timestamp>| t.map_or_else(|| "-".to_owned(), |t| human::when(t, now));
    let mut lines = vec![
        format!("run:       {}", run.id),
        // One line each, whatever the stored name or error holds.
        format!(
            "loop:      {} ({})",
            render::escape_controls(&loop_cell(run, names), &[]),
            run.loop_id
        ),
        format!("status:    {}", human::run_result(run)),
        format!("attempt:   {}", run.attempt),
        format!("slot:      {}", human::when(run.scheduled_for, now)),
        format!("started:   {}", at(run.started_at)),
        format!("finished:  {}", at(run.finished_at)),
        format!(
            "duration:  {}",
            run.duration_ms
                .map_or_else(|| "-".to_owned(), human::duration)
        ),
    ];
    if let Some(error) = &run.error {
        lines.push(format!("error:     {}", ctx.error_line(error)));
    }
    for line in lines.drain(..) {
        out.line(&line)?;
    }
    // Issue 28: the end of a failed run's stderr, unless --show-output
    // prints the whole of it below.
    if output == Output::Redacted {
        super::execute::print_stderr_tail(run, "stderr:    ", "           ", out)?;
    }
    lines.extend(silence_line(run, now));
    lines.extend(fact_lines(&run.facts));
    lines.extend(worktree_lines(run));
    match output {
        Output::Shown => lines.extend(human::steps::output_blocks(ctx, run)),
        Output::Redacted => {
            let len = |s: &Option<String>| s.as_deref().map_or(0, str::len);
            lines.push(format!(
                "output:    {} B stdout, {} B stderr (--show-output prints it)",
                len(&run.stdout),
                len(&run.stderr)
            ));
        }
    }
    for line in lines {
        out.line(&line)?;
    }
    Ok(())
}

/// How long a running run has printed nothing (issue 27), as of its last
/// heartbeat: since its last output, else since it started.
fn silence_line(run: &LoopRun, now: Timestamp) -> Option<String> {
    if run.status != RunStatus::Running {
        return None;
    }
    let (since, what) = match run.last_output_at {
        Some(at) => (at, format!("last output {}", human::when(at, now))),
        None => (run.started_at?, "no output yet".to_owned()),
    };
    let silent = now.millis_since(since).max(0);
    Some(format!("silent:    {} ({what})", human::duration(silent)))
}

/// What a run said and cost, and why it failed (issue 27), a line each
/// for what is known. Stored text is escaped: an agent wrote it.
fn fact_lines(facts: &RunFacts) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(class) = facts.failure_class {
        let print = facts.failure_fingerprint.as_deref().unwrap_or("-");
        lines.push(format!("class:     {class} (fingerprint {print})"));
    }
    if let Some(session) = &facts.session_id {
        lines.push(format!(
            "session:   {}",
            render::escape_controls(session, &[])
        ));
    }
    if facts.cost_usd.is_some() || facts.usage.is_some() {
        let cost = facts
            .cost_usd
            .map_or_else(|| "cost not reported".to_owned(), |c| c.to_string());
        let tokens = facts.usage.map_or_else(String::new, |u| {
            format!(
                " ({} in, {} out, {} cache read, {} cache write tokens)",
                u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens
            )
        });
        lines.push(format!("cost:      {cost}{tokens}"));
    }
    if facts.is_error == Some(true) {
        lines.push("reported:  the agent's output says the run failed".to_owned());
    }
    lines
}

/// The worktree a run worked in and its branch (issue 27; agents note §8),
/// and whether the worktree is gone: a succeeded run's clean one is
/// removed, while its branch keeps the commits.
fn worktree_lines(run: &LoopRun) -> Vec<String> {
    let Some(path) = &run.facts.worktree else {
        return Vec::new();
    };
    let gone = if std::path::Path::new(path).exists() {
        ""
    } else {
        " (removed)"
    };
    let mut lines = vec![format!(
        "worktree:  {}{gone}",
        render::escape_controls(path, &[])
    )];
    if let Some(branch) = &run.facts.worktree_branch {
        lines.push(format!(
            "branch:    {}",
            render::escape_controls(branch, &[])
        ));
    }
    lines
}

/// What `runs <target>` lists: a loop by id or name, the id of a removed
/// loop whose history was kept (SPEC §9 item 34), or else one run by its
/// id.
fn subject(store: &Store, target: &str) -> Result<Subject> {
    let missing = match store.require_loop(target) {
        Ok(lp) => return Ok(Subject::Loop(lp.id)),
        Err(e @ StoreError::NotFound { .. }) => e,
        Err(e) => return Err(e.into()),
    };
    if let Ok(id) = LoopId::parse(target) {
        let kept = store.list_runs(&RunFilter {
            loop_id: Some(id),
            status: None,
            limit: Some(1),
            offset: None,
        })?;
        if !kept.is_empty() {
            return Ok(Subject::Loop(id));
        }
    }
    if let Ok(id) = RunId::parse(target)
        && let Some(run) = store.get_run(&id)?
    {
        return Ok(Subject::Run(Box::new(run)));
    }
    Err(missing.into())
}
