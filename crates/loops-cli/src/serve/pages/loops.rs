//! The loops page (`/`: the `loops ui` table, with filters, search,
//! sorting and pages) and a loop's page (`/loops/{id}`: its card, next
//! fire times, a heat map of its runs by slot, its history, its buttons).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use loops_core::{Loop, LoopRun, LoopStatus, RunStatus, Target};
use loops_store::LoopFilter;
use maud::{Markup, html};
use serde_json::Value;

use super::layout::{self, Section, badge, path_segment, query_value, when};
use super::{Shared, doc, gather, workflows};
use crate::args::next::NextArgs;
use crate::args::{self, Command, LoopRef};
use crate::human;
use crate::ui::model::{self, Row};

/// Loops on one page of the table.
const PAGE: usize = 100;

/// The highest page number taken: beyond it, page 1 (the arithmetic of
/// offsets stays far from overflow).
const MOST_PAGES: usize = 10_000_000;

/// The most loops a search or a sort reads.
const MOST_SEARCHED: u32 = 10_000;

/// The fire times a loop's page lists.
const NEXT_TIMES: &str = "5";

/// The runs a loop's heat map shows.
const HEAT_RUNS: &str = "200";

/// The runs a loop's history table lists.
const HISTORY: usize = 20;

/// The sorts the table offers, by the name in `?sort=`.
const SORTS: [(&str, &str); 4] = [
    ("", "list order"),
    ("name", "name"),
    ("next", "next run"),
    ("status", "status"),
];

/// What the loops page was asked for.
#[derive(Debug, Clone, Default)]
struct Asked {
    status: Option<LoopStatus>,
    /// Only loops with this label.
    label: String,
    search: String,
    sort: String,
    page: usize,
}

impl Asked {
    fn of(params: &HashMap<String, String>) -> Asked {
        let given = |key: &str| params.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
        Asked {
            status: given("status").and_then(|s| crate::resolve::loop_status(s).ok()),
            label: given("label").unwrap_or_default().to_owned(),
            search: given("q").unwrap_or_default().to_owned(),
            sort: given("sort")
                .filter(|s| SORTS.iter().any(|(k, _)| k == s))
                .unwrap_or_default()
                .to_owned(),
            page: given("page")
                .and_then(|p| p.parse().ok())
                .filter(|p| (1..=MOST_PAGES).contains(p))
                .unwrap_or(1),
        }
    }

    /// The query string of this page with another page number.
    fn with_page(&self, page: usize) -> String {
        let mut query = format!("?page={page}");
        if let Some(status) = self.status {
            query.push_str(&format!("&status={status}"));
        }
        if !self.label.is_empty() {
            query.push_str(&format!("&label={}", query_value(&self.label)));
        }
        if !self.search.is_empty() {
            query.push_str(&format!("&q={}", query_value(&self.search)));
        }
        if !self.sort.is_empty() {
            query.push_str(&format!("&sort={}", self.sort));
        }
        query
    }

    /// Whether `lp` has the label asked for and matches the search, by
    /// name or label, whatever the case.
    fn matches(&self, lp: &Loop) -> bool {
        let needle = self.search.to_lowercase();
        (self.label.is_empty() || lp.policy.labels.contains(&self.label))
            && (needle.is_empty()
                || lp.name.to_lowercase().contains(&needle)
                || lp
                    .policy
                    .labels
                    .iter()
                    .any(|l| l.to_lowercase().contains(&needle)))
    }
}

/// What the loops page shows.
struct Table {
    header: Vec<String>,
    rows: Vec<Row>,
    /// Whether another page follows.
    more: bool,
    /// Whether the search or sort stopped at [`MOST_SEARCHED`] loops.
    cut: bool,
}

/// `GET /`: the loops.
pub(in crate::serve) async fn index(
    State(shared): State<Arc<Shared>>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    let asked = Asked::of(&params);
    let wanted = asked.clone();
    let read = gather(&shared, move |ctx| {
        let store = ctx.open_store()?;
        let searching =
            !wanted.search.is_empty() || !wanted.label.is_empty() || !wanted.sort.is_empty();
        let first = (wanted.page - 1) * PAGE;
        // Without a search, a label or a sort, the store reads this page
        // only, and one loop more to know whether another follows; with
        // one, a bounded number of loops, paged here.
        let (most, offset, skip) = if searching {
            (MOST_SEARCHED, None, first)
        } else {
            let first = u32::try_from(first).unwrap_or(u32::MAX);
            (u32::try_from(PAGE + 1).unwrap_or(u32::MAX), Some(first), 0)
        };
        let mut loops = store.list_loops(&LoopFilter {
            status: wanted.status,
            limit: Some(most),
            offset,
        })?;
        let cut = searching && loops.len() >= MOST_SEARCHED as usize;
        loops.retain(|lp| wanted.matches(lp));
        sort(&mut loops, &wanted.sort);
        let more = loops.len() > skip + PAGE;
        let shown: Vec<Loop> = loops.into_iter().skip(skip).take(PAGE).collect();
        let running = model::running(&store)?;
        let rows = model::rows(&store, &shown, &running)?;
        let header = model::header(ctx, &store, running.len());
        Ok(Table {
            header,
            rows,
            more,
            cut,
        })
    })
    .await;
    match read {
        Ok(table) => layout::page("Loops", Section::Loops, true, loops_page(&asked, &table)),
        Err(page) => page,
    }
}

/// Sorts `loops` by `by` (a key of [`SORTS`]); list order stays as read.
fn sort(loops: &mut [Loop], by: &str) {
    match by {
        "name" => loops.sort_by_key(|lp| lp.name.to_lowercase()),
        // Loops with no next run go last.
        "next" => loops.sort_by_key(|lp| (lp.next_run_at.is_none(), lp.next_run_at)),
        "status" => loops.sort_by_key(|lp| lp.status.as_str()),
        _ => {}
    }
}

fn loops_page(asked: &Asked, table: &Table) -> Markup {
    let statuses = ["active", "paused", "stopped", "expired"];
    html! {
        h1 { "Loops" }
        form #filters method="get" action="/" {
            label { "Status "
                select name="status" {
                    option value="" { "any" }
                    @for s in statuses {
                        option value=(s) selected[asked.status.is_some_and(|a| a.as_str() == s)] { (s) }
                    }
                }
            }
            @if !asked.label.is_empty() {
                label { "Label "
                    input type="text" name="label" value=(asked.label);
                }
            }
            label { "Search "
                input type="search" name="q" value=(asked.search) placeholder="name or label";
            }
            label { "Sort "
                select name="sort" {
                    @for (key, name) in SORTS {
                        option value=(key) selected[asked.sort == key] { (name) }
                    }
                }
            }
            button type="submit" { "Show" }
        }
        div #loops-region data-region {
            @for line in &table.header { p.header { (line) } }
            @if table.cut {
                p.note { "Searched the first " (MOST_SEARCHED) " loops only." }
            }
            table #loops {
                thead { tr {
                    th { "Name" } th { "Status" } th { "Schedule" } th { "Next run" }
                    th { "Last run" } th { "Last 20 runs" } th { "Running" }
                } }
                tbody {
                    @for row in &table.rows { (loop_row(row)) }
                }
            }
            @if table.rows.is_empty() {
                p.empty { "No loops here. Create one with: loops create command <name> --every 5m --cmd '…'" }
            }
            nav.pages {
                @if asked.page > 1 {
                    a rel="prev" href=(asked.with_page(asked.page - 1)) { "← previous" }
                }
                span { "page " (asked.page) }
                @if table.more {
                    a rel="next" href=(asked.with_page(asked.page + 1)) { "next →" }
                }
            }
        }
    }
}

fn loop_row(row: &Row) -> Markup {
    let id = row.id.to_string();
    html! {
        tr.loop data-id=(id) data-status=(row.status) {
            td {
                a href={ "/loops/" (id) } { (row.name) }
                @for label in &row.labels {
                    " " a.label href={ "/?label=" (query_value(label)) } { (label) }
                }
            }
            td { (badge(row.status)) }
            td { (row.schedule) }
            td { (row.next) }
            td {
                @if let Some(status) = row.last_status { span class={ "dot s-" (status) } {} " " }
                (row.last)
            }
            td { (spark(&row.spark)) }
            td.num { @if row.running > 0 { (row.running) } }
        }
    }
}

/// The last runs as a row of small bars, oldest first, their counts on
/// hover. A bar is one letter of class (`k` succeeded, `f` failed or
/// timed out, `s`
/// skipped, `c` cancelled, `r` running, `a` abandoned): 100 rows of 20
/// bars stay light.
fn spark(runs: &[RunStatus]) -> Markup {
    let mut counts: Vec<(RunStatus, usize)> = Vec::new();
    for status in runs {
        match counts.iter_mut().find(|(s, _)| s == status) {
            Some((_, n)) => *n += 1,
            None => counts.push((*status, 1)),
        }
    }
    let title = counts
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(", ");
    html! {
        span.spark title=(title) {
            @for status in runs { i class=(bar(*status)) {} }
        }
    }
}

/// The one-letter class of a sparkline bar.
fn bar(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Succeeded => "k",
        RunStatus::Failed | RunStatus::TimedOut => "f",
        RunStatus::Skipped => "s",
        RunStatus::Cancelled => "c",
        RunStatus::Running => "r",
        RunStatus::Abandoned => "a",
    }
}

/// What a loop's page shows.
struct OneLoop {
    lp: Loop,
    times: Vec<String>,
    runs: Vec<LoopRun>,
    workflow: Option<Value>,
}

/// `GET /loops/{id}`: one loop, by id or name.
pub(in crate::serve) async fn one(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> Response {
    let read = gather(&shared, move |ctx| {
        let shown = doc(ctx, Command::Show(LoopRef { target: id.clone() }))?;
        let lp: Loop = serde_json::from_value(shown)?;
        let target = lp.id.to_string();
        let next = doc(
            ctx,
            Command::Next(NextArgs {
                target: Some(target.clone()),
                iterations: NEXT_TIMES.to_owned(),
                cron: None,
                tz: None,
                every: None,
            }),
        )?;
        let times = next["times"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let runs = doc(
            ctx,
            Command::Runs(args::RunsArgs {
                target: Some(target),
                limit: HEAT_RUNS.to_owned(),
                offset: None,
                status: None,
                show_output: false,
                labels: Vec::new(),
            }),
        )?;
        let runs: Vec<LoopRun> = serde_json::from_value(runs)?;
        let workflow = match &lp.target {
            Target::Workflow(w) => Some(workflows::definition(ctx, &w.workflow_id.to_string())?),
            _ => None,
        };
        Ok(OneLoop {
            lp,
            times,
            runs,
            workflow,
        })
    })
    .await;
    match read {
        Ok(one) => layout::page(&one.lp.name, Section::Loops, true, loop_page(&one)),
        Err(page) => page,
    }
}

fn loop_page(one: &OneLoop) -> Markup {
    let lp = &one.lp;
    let now = human::display_now();
    let id = lp.id.to_string();
    let shown = crate::commands::manage::shown_status(lp, one.runs.first());
    let running = one.runs.iter().any(|r| r.status == RunStatus::Running);
    let action = |name: &str, label: &str| {
        html! {
            form.action method="post" action={ "/loops/" (path_segment(&id)) "/" (name) } {
                button id=(name) type="submit" { (label) }
            }
        }
    };
    html! {
        h1 { (lp.name) " " small.id { (id) } }
        @if let Some(description) = &lp.description { p.description { (description) } }
        div.actions {
            @if lp.status == LoopStatus::Active { (action("pause", "Pause")) }
            @if lp.status == LoopStatus::Paused { (action("resume", "Resume")) }
            (action("run-now", "Run now"))
            @if running { (action("cancel", "Cancel running run")) }
        }
        div #card-region data-region {
            dl #card {
                dt { "Status" }
                dd data-field="status" {
                    (badge(shown))
                    @if let Some(reason) = &lp.paused_reason { " " span.reason { (reason) } }
                }
                dt { "Schedule" } dd data-field="schedule" { (human::schedule_in_words(&lp.schedule)) }
                dt { "Runs" } dd data-field="target" { (target(&lp.target)) }
                dt { "Next run" } dd data-field="next" { (when(lp.next_run_at, now)) }
                @if !lp.policy.labels.is_empty() {
                    dt { "Labels" }
                    dd data-field="labels" { @for l in &lp.policy.labels { span.label { (l) } " " } }
                }
                dt { "Policy" }
                dd data-field="policy" {
                    "overlap " (lp.overlap) ", catch-up " (lp.catch_up)
                    ", " (lp.max_attempts) " attempt" @if lp.max_attempts != 1 { "s" }
                }
                @if let Some(failures) = lp.consecutive_failures.filter(|f| *f > 0) {
                    dt { "Failing" } dd data-field="failures" { (failures) " in a row" }
                }
                dt { "Created" } dd { (when(Some(lp.created_at), now)) }
            }
            h2 { "Next fire times" }
            ol #next-runs {
                @for t in &one.times {
                    li { time datetime=(t) { (loops_core::Timestamp::parse(t).map_or_else(|_| t.clone(), human::local)) } }
                }
            }
            h2 { "Runs by slot" }
            (heatmap(&one.runs))
            @if let Some(workflow) = &one.workflow {
                h2 { "Workflow " a href={ "/workflows/" (layout::text(workflow, "id")) } { (layout::text(workflow, "name")) } }
                (workflows::graph(workflow, None))
            }
            h2 { "History" }
            table #runs {
                thead { tr {
                    th { "Run" } th { "Slot" } th { "Status" } th { "Attempt" }
                    th { "Exit" } th { "Duration" } th { "Started" }
                } }
                tbody {
                    @for run in one.runs.iter().take(HISTORY) {
                        tr data-run=(run.id) {
                            td { a href={ "/runs/" (run.id) } { (run.id) } }
                            td { (human::local(run.scheduled_for)) }
                            td { (badge(run.status.as_str())) }
                            td.num { (run.attempt) }
                            td.num { @if let Some(code) = run.exit_code { (code) } @else { "-" } }
                            td.num { (run.duration_ms.map_or_else(|| "-".to_owned(), human::duration)) }
                            td { (when(run.started_at, now)) }
                        }
                    }
                }
            }
        }
    }
}

/// What a target runs, in a line.
fn target(target: &Target) -> Markup {
    match target {
        Target::Command(c) => html! { "command " code { (c.command) } },
        Target::Agent(a) => html! { "agent " (a.provider) },
        Target::Workflow(w) => html! {
            "workflow " a href={ "/workflows/" (w.workflow_id) } { (w.workflow_id) }
        },
    }
}

/// The runs as cells by slot, oldest first: the status's colour, and on
/// hover the slot, the exit code and the duration.
fn heatmap(runs: &[LoopRun]) -> Markup {
    html! {
        div #heatmap {
            @for run in runs.iter().rev() {
                a class={ "cell s-" (run.status) } href={ "/runs/" (run.id) }
                    title=(cell_title(run)) {}
            }
            @if runs.is_empty() { span.empty { "no runs yet" } }
        }
    }
}

fn cell_title(run: &LoopRun) -> String {
    let mut title = format!("{} · {}", human::local(run.scheduled_for), run.status);
    if let Some(code) = run.exit_code {
        title.push_str(&format!(" · exit {code}"));
    }
    if let Some(ms) = run.duration_ms {
        title.push_str(&format!(" · {}", human::duration(ms)));
    }
    title
}
