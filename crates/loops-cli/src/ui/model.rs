//! What `loops ui` shows, read from the store, and what its keys change:
//! the rows of the loops table, the filters, the open loop, and a pending
//! confirmation.

use std::collections::HashMap;

use anyhow::Result;
use loops_core::{Loop, LoopId, LoopRun, LoopStatus, RunStatus};
use loops_store::{LoopFilter, RunFilter, Store};

use crate::args::{Command, LoopRef};
use crate::context::Context;
use crate::human;
use crate::render::{Printer, escape_controls};

/// The most loops the table reads.
const MOST_LOOPS: u32 = 1_000;

/// The runs a row's sparkline shows.
pub(crate) const SPARK_RUNS: u32 = 20;

/// The most runs in flight read for the counts.
const MOST_RUNNING: u32 = 1_000;

/// The status filters `f` cycles through, `None` for every loop.
const STATUS_FILTERS: [Option<LoopStatus>; 4] = [
    None,
    Some(LoopStatus::Active),
    Some(LoopStatus::Paused),
    Some(LoopStatus::Stopped),
];

/// One loop of the table, as shown.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) id: LoopId,
    pub(crate) name: String,
    pub(crate) labels: Vec<String>,
    /// `active`, `paused`, `done`…, as `list` says it.
    pub(crate) status: &'static str,
    pub(crate) loop_status: LoopStatus,
    pub(crate) schedule: String,
    pub(crate) next: String,
    pub(crate) last: String,
    /// How the last finished run ended.
    pub(crate) last_status: Option<RunStatus>,
    /// The last runs' statuses, oldest first.
    pub(crate) spark: Vec<RunStatus>,
    pub(crate) running: usize,
}

/// What the screen shows besides the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum View {
    Table,
    /// A loop's status card, scrolled down this many lines.
    Loop {
        name: String,
        lines: Vec<String>,
        scroll: u16,
    },
    Help,
    /// A run's output, followed while it runs: `title` says which run and
    /// how it stands.
    Output {
        run: Box<LoopRun>,
        title: String,
        lines: Vec<String>,
    },
}

/// A change that waits for `y`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pending {
    Pause,
    Resume,
    /// `loops run-now`, started beside the dashboard.
    RunNow,
    /// `loops cancel` of the loop's running runs, started beside it.
    Cancel,
}

/// A confirmed change, on the loop it was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Asked {
    pub(super) what: Pending,
    pub(super) id: LoopId,
    pub(super) name: String,
}

impl Asked {
    /// `pause`, `resume`, `run now` or `cancel the running run of`.
    pub(super) fn verb(&self) -> &'static str {
        match self.what {
            Pending::Pause => "pause",
            Pending::Resume => "resume",
            Pending::RunNow => "run now",
            Pending::Cancel => "cancel the running runs of",
        }
    }
}

/// The dashboard's state.
pub(super) struct Board {
    /// Every loop read, in `list`'s order.
    pub(super) rows: Vec<Row>,
    /// The lines about the daemons and the counts.
    pub(super) header: Vec<String>,
    /// The selected row among the shown ones.
    pub(super) selected: usize,
    pub(super) filter: String,
    /// Whether keys go into the filter (after `/`).
    pub(super) typing: bool,
    status_filter: usize,
    pub(super) view: View,
    pub(super) pending: Option<Asked>,
    /// What the last change did, or why it failed.
    pub(super) message: Option<String>,
}

impl Board {
    /// Reads the store for the first time; an error here ends `loops ui`
    /// before the terminal changes.
    pub(super) fn load(ctx: &Context) -> Result<Board> {
        let store = ctx.open_store()?;
        let (header, rows) = read(ctx, &store)?;
        Ok(Board::of(header, rows))
    }

    /// A board of these rows, on the table, nothing filtered or asked.
    fn of(header: Vec<String>, rows: Vec<Row>) -> Board {
        Board {
            rows,
            header,
            selected: 0,
            filter: String::new(),
            typing: false,
            status_filter: 0,
            view: View::Table,
            pending: None,
            message: None,
        }
    }

    /// Reads the store again; a failure is said on the message line and the
    /// screen keeps what it had.
    pub(super) fn reload(&mut self, ctx: &Context) {
        match ctx.open_store().and_then(|store| read(ctx, &store)) {
            Ok((header, rows)) => {
                self.header = header;
                self.rows = rows;
                self.clamp();
                // An open card follows the store too.
                if let View::Loop { .. } = self.view {
                    self.open(ctx);
                }
            }
            Err(e) => self.message = Some(format!("cannot read the store: {e}")),
        }
    }

    /// The status the table is filtered to, if any.
    pub(super) fn status_filter(&self) -> Option<LoopStatus> {
        STATUS_FILTERS[self.status_filter % STATUS_FILTERS.len()]
    }

    /// The rows the filters keep.
    pub(super) fn shown(&self) -> Vec<&Row> {
        let needle = self.filter.to_lowercase();
        self.rows
            .iter()
            .filter(|row| self.status_filter().is_none_or(|s| row.loop_status == s))
            .filter(|row| {
                needle.is_empty()
                    || row.name.to_lowercase().contains(&needle)
                    || row
                        .labels
                        .iter()
                        .any(|l| l.to_lowercase().contains(&needle))
            })
            .collect()
    }

    /// Keeps the selection on a shown row.
    pub(super) fn clamp(&mut self) {
        let shown = self.shown().len();
        self.selected = self.selected.min(shown.saturating_sub(1));
    }

    pub(super) fn move_by(&mut self, delta: isize) {
        self.selected = self.selected.saturating_add_signed(delta);
        self.clamp();
    }

    pub(super) fn cycle_status(&mut self) {
        self.status_filter = (self.status_filter + 1) % STATUS_FILTERS.len();
        self.selected = 0;
    }

    pub(super) fn scroll(&mut self, delta: i32) {
        if let View::Loop { scroll, lines, .. } = &mut self.view {
            let most = u16::try_from(lines.len()).unwrap_or(u16::MAX);
            *scroll = scroll.saturating_add_signed(delta as i16).min(most);
        }
    }

    /// The selected loop: the open one, else the table's selected row.
    pub(super) fn target(&self) -> Option<(LoopId, String)> {
        let shown = self.shown();
        let row = shown.get(self.selected)?;
        Some((row.id, row.name.clone()))
    }

    /// Asks to confirm `what` on the selected loop.
    pub(super) fn ask(&mut self, what: Pending) {
        if let Some((id, name)) = self.target() {
            self.pending = Some(Asked { what, id, name });
        }
    }

    /// Carries out a confirmed change through the command's own request,
    /// then reads the store again.
    pub(super) fn apply(&mut self, ctx: &Context, asked: &Asked) {
        let target = LoopRef {
            target: asked.id.to_string(),
        };
        let command = match asked.what {
            Pending::Pause => Command::Pause(target),
            Pending::Resume => Command::Resume(target),
            // A run or a cancel takes as long as it takes: each goes on in
            // a `loops` process of its own, and the table shows it.
            Pending::RunNow => return self.beside(ctx, asked, "run-now"),
            Pending::Cancel => return self.beside(ctx, asked, "cancel"),
        };
        let done = crate::app::run_request(ctx, command);
        self.message = Some(match done.error {
            None => format!("{}d {}", asked.verb(), asked.name),
            Some(error) => format!("{} {}: {error}", asked.verb(), asked.name),
        });
        self.reload(ctx);
    }

    /// Starts `loops <verb> <loop>` beside the dashboard, quietly, with
    /// this dashboard's database; the table shows what it does.
    fn beside(&mut self, ctx: &Context, asked: &Asked, verb: &str) {
        let started = crate::app::start_beside(ctx, verb, &asked.id.to_string());
        self.message = Some(match started {
            Ok(()) => format!("{verb} {}: started", asked.name),
            Err(e) => format!("{verb} {}: cannot start loops: {e}", asked.name),
        });
        self.reload(ctx);
    }

    /// Opens the output of the selected loop's latest run, followed live
    /// while it runs ([`Board::follow`]).
    pub(super) fn open_output(&mut self, ctx: &Context) {
        let Some((id, name)) = self.target() else {
            return;
        };
        let latest = ctx.open_store().and_then(|store| {
            Ok(store
                .list_runs(&RunFilter {
                    loop_id: Some(id),
                    status: None,
                    limit: Some(1),
                    offset: None,
                })?
                .into_iter()
                .next())
        });
        match latest {
            Ok(Some(run)) => {
                self.view = View::Output {
                    run: Box::new(run),
                    title: String::new(),
                    lines: Vec::new(),
                };
                self.follow(ctx);
            }
            Ok(None) => self.message = Some(format!("{name} has no runs yet; n runs it now")),
            Err(e) => self.message = Some(format!("cannot read {name}'s runs: {e}")),
        }
    }

    /// Reads the open run and its output again: its log file as it grows,
    /// else its stored output, as `loops logs` prints it.
    pub(super) fn follow(&mut self, ctx: &Context) {
        let View::Output { run, title, lines } = &mut self.view else {
            return;
        };
        if let Ok(Some(now)) = ctx.open_store().and_then(|s| Ok(s.get_run(&run.id)?)) {
            **run = now;
        }
        *title = format!(
            "output of run {} of {}, attempt {}: {}",
            run.id,
            escape_controls(&run.loop_name, &[]),
            run.attempt,
            human::run_result(run)
        );
        *lines = match crate::commands::logs::output_text(ctx, run) {
            Ok(text) => text
                .lines()
                .map(|l| escape_controls(l.trim_end_matches('\r'), &['\t']).into_owned())
                .collect(),
            Err(e) => vec![format!("cannot read the output: {e}")],
        };
    }

    /// Whether the open view follows a run that is still going.
    pub(super) fn following(&self) -> bool {
        matches!(&self.view, View::Output { run, .. } if run.status == RunStatus::Running)
    }

    /// Opens the selected loop's card: the text `loops status` prints.
    pub(super) fn open(&mut self, ctx: &Context) {
        let Some((id, name)) = self.target() else {
            return;
        };
        let mut out = Printer::memory(false);
        let args = LoopRef {
            target: id.to_string(),
        };
        let lines = match crate::commands::status::run(&ctx.for_call(), &args, &mut out)
            .and_then(|_| Ok(out.text()?))
        {
            Ok(text) => text.lines().map(str::to_owned).collect(),
            Err(e) => vec![format!("cannot show {name}: {e}")],
        };
        let scroll = match &self.view {
            View::Loop { scroll, .. } => *scroll,
            _ => 0,
        };
        self.view = View::Loop {
            name,
            lines,
            scroll,
        };
    }
}

/// The header and the rows, from `store`.
fn read(ctx: &Context, store: &Store) -> Result<(Vec<String>, Vec<Row>)> {
    let loops = store.list_loops(&LoopFilter {
        status: None,
        limit: Some(MOST_LOOPS),
        offset: None,
    })?;
    let running = running(store)?;
    let rows = rows(store, &loops, &running)?;
    Ok((header(ctx, store, running.len()), rows))
}

/// The runs in flight, on every host.
pub(crate) fn running(store: &Store) -> Result<Vec<LoopRun>> {
    Ok(store.list_runs(&RunFilter {
        loop_id: None,
        status: Some(RunStatus::Running),
        limit: Some(MOST_RUNNING),
        offset: None,
    })?)
}

/// The rows of `loops` (the `loops ui` table, and the loops page of
/// `loops serve`), given the runs in flight: one read of each loop's last
/// runs.
pub(crate) fn rows(store: &Store, loops: &[Loop], running: &[LoopRun]) -> Result<Vec<Row>> {
    let now = human::display_now();
    let mut in_flight: HashMap<LoopId, usize> = HashMap::new();
    for run in running {
        *in_flight.entry(run.loop_id).or_default() += 1;
    }
    let mut rows = Vec::with_capacity(loops.len());
    for lp in loops {
        let runs = store.list_runs(&RunFilter {
            loop_id: Some(lp.id),
            status: None,
            limit: Some(SPARK_RUNS),
            offset: None,
        })?;
        let last = runs.iter().find(|r| r.status != RunStatus::Running);
        let active = lp.status == LoopStatus::Active;
        let (next, _) = human::next_run(lp.next_run_at, active, now);
        rows.push(Row {
            id: lp.id,
            name: lp.name.clone(),
            labels: lp.policy.labels.clone(),
            status: crate::commands::manage::shown_status(lp, runs.first()),
            loop_status: lp.status,
            schedule: human::loop_schedule(lp),
            next: if lp.status == LoopStatus::Paused {
                "paused".to_owned()
            } else {
                next
            },
            last: last.map_or_else(|| "-".to_owned(), |r: &LoopRun| human::last_run(r, now)),
            last_status: last.map(|r| r.status),
            spark: runs.iter().rev().map(|r| r.status).collect(),
            running: in_flight.get(&lp.id).copied().unwrap_or(0),
        });
    }
    Ok(rows)
}

/// `daemon: running pid 123 · 12 loops, 9 active, 2 paused · 1 run in
/// flight`, then on PostgreSQL a line naming every live daemon with its
/// uptime, runs in flight and clock skew.
pub(crate) fn header(ctx: &Context, store: &Store, running: usize) -> Vec<String> {
    let now = human::display_now();
    let mut members = None;
    let daemon = match ctx.data_dir() {
        Ok(dir) => {
            let paths = loops_scheduler::DaemonPaths::new(&dir);
            match crate::service::control::daemon_status(
                store,
                &paths,
                &loops_exec::hostname(),
                human::display_now(),
            ) {
                Ok(s) if s.running || s.daemons.iter().flatten().any(|d| d.live) => {
                    members = s.daemons.clone();
                    match &s.lease {
                        Some(lease) if s.running => format!(
                            "daemon: running pid {} on {}",
                            s.pid.unwrap_or_default(),
                            crate::render::escape_controls(&lease.hostname, &[])
                        ),
                        _ if s.running => {
                            format!("daemon: running pid {}", s.pid.unwrap_or_default())
                        }
                        _ => "daemon: none on this host".to_owned(),
                    }
                }
                Ok(_) => "daemon: not running".to_owned(),
                Err(e) => format!("daemon: unknown ({e})"),
            }
        }
        Err(_) => "daemon: unknown".to_owned(),
    };
    // Every loop of the store, not only those read: the status counts
    // are kept by the store, so this costs three lookups.
    let count = |status| {
        store
            .count_loops(status)
            .map_or_else(|_| "?".to_owned(), |n| n.to_string())
    };
    let plural = if running == 1 { "run" } else { "runs" };
    let mut lines = vec![format!(
        "{daemon} · {} loops, {} active, {} paused · {running} {plural} in flight",
        count(None),
        count(Some(LoopStatus::Active)),
        count(Some(LoopStatus::Paused)),
    )];
    let live: Vec<String> = members
        .unwrap_or_default()
        .iter()
        .filter(|d| d.live)
        .map(|d| {
            let skew = d
                .clock_skew_ms
                .map_or_else(String::new, |ms| format!(", skew {ms} ms"));
            format!(
                "{} up {}, {} in flight{skew}",
                crate::render::escape_controls(&d.hostname, &[]),
                human::relative(d.started_at, now).trim_end_matches(" ago"),
                d.running_runs
            )
        })
        .collect();
    if !live.is_empty() {
        lines.push(format!("daemons: {}", live.join(" · ")));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, labels: &[&str], status: LoopStatus) -> Row {
        Row {
            id: LoopId::from_bytes([name.len() as u8; 6]),
            name: name.to_owned(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            status: "active",
            loop_status: status,
            schedule: String::new(),
            next: String::new(),
            last: String::new(),
            last_status: None,
            spark: Vec::new(),
            running: 0,
        }
    }

    fn board(rows: Vec<Row>) -> Board {
        Board::of(Vec::new(), rows)
    }

    fn names(board: &Board) -> Vec<&str> {
        board.shown().iter().map(|r| r.name.as_str()).collect()
    }

    #[test]
    fn the_filter_matches_names_and_labels_whatever_their_case() {
        let mut b = board(vec![
            row("Backup", &["prod"], LoopStatus::Active),
            row("report", &["Nightly"], LoopStatus::Paused),
        ]);
        assert_eq!(names(&b), ["Backup", "report"]);
        b.filter = "back".to_owned();
        assert_eq!(names(&b), ["Backup"]);
        b.filter = "NIGHT".to_owned();
        assert_eq!(names(&b), ["report"]);
        b.filter = "nothing".to_owned();
        assert!(names(&b).is_empty());
    }

    #[test]
    fn f_cycles_all_active_paused_stopped_and_back() {
        let mut b = board(vec![
            row("a", &[], LoopStatus::Active),
            row("p", &[], LoopStatus::Paused),
            row("s", &[], LoopStatus::Stopped),
        ]);
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(names(&b).join(","));
            b.cycle_status();
        }
        assert_eq!(seen, ["a,p,s", "a", "p", "s"]);
        assert_eq!(names(&b), ["a", "p", "s"]);
    }

    #[test]
    fn the_selection_stays_on_a_shown_row() {
        let mut b = board(vec![
            row("a", &[], LoopStatus::Active),
            row("bb", &[], LoopStatus::Active),
            row("ccc", &[], LoopStatus::Active),
        ]);
        b.move_by(5);
        assert_eq!(b.selected, 2);
        b.move_by(-1);
        assert_eq!(b.selected, 1);
        b.move_by(-7);
        assert_eq!(b.selected, 0);
        b.selected = 2;
        b.filter = "bb".to_owned();
        b.clamp();
        assert_eq!(b.selected, 0);
        // A change asked for goes to the selected, shown loop.
        b.ask(Pending::Pause);
        let asked = b.pending.clone().unwrap();
        assert_eq!((asked.name.as_str(), asked.verb()), ("bb", "pause"));
        // Nothing shown, nothing asked.
        b.pending = None;
        b.filter = "zzz".to_owned();
        b.ask(Pending::Resume);
        assert_eq!(b.pending, None);
    }
}
