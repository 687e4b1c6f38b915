//! Each table's columns as an export reads them and an import writes
//! them, described once for both backends: the record a row of the shared
//! column lists (plus the additive columns the core records leave out)
//! decodes to, the cells a record writes ([`cells`], [`Cell`]), and the
//! columns an overwrite requires unchanged ([`over_guard`]).

use loops_core::{Timestamp, Usd};

use crate::columns::{
    self, EVENT_COLUMNS, LOOP_COLUMNS, RUN_COLUMNS, STEP_RUN_COLUMNS, WORKFLOW_COLUMNS,
    WORKFLOW_RUN_COLUMNS,
};
use crate::error::{Result, StoreError};
use crate::sql::{self, Col, Fields, Map, Value};
use crate::transfer::{ExportedPool, ExportedRun, ExportedStepRun, Record, Table};
use crate::triggers::ops::{TRIGGER_COLUMNS, trigger_row};

/// The stored columns of `pools`, in the order [`pool`] reads them.
pub(crate) const POOL_COLUMNS: &[&str] = &["name", "max_running", "created_at", "updated_at"];

/// Positions of the additive columns in the shared column lists; a test
/// checks them against the lists.
const LOOP_PAUSED_REASON: usize = 17;
const RUN_PID_START: usize = 18;
/// `pid_start_ms` follows the step run columns in the statements here.
const STEP_PID_START: usize = 17;
/// A run's `pool` and `trigger_id` (V13) follow the run columns in the
/// statements here.
const RUN_POOL: usize = RUN_COLUMNS.len();

/// What a row of `table`, selected with its column list (a step run's
/// followed by `pid_start_ms`, a run's by `pool` and `trigger_id`),
/// decodes to.
pub(crate) fn mapper(table: Table) -> Map<Record> {
    match table {
        Table::Pools => pool,
        Table::Triggers => trigger,
        Table::Workflows => workflow,
        Table::Loops => a_loop,
        Table::Runs => run,
        Table::WorkflowRuns => workflow_run,
        Table::StepRuns => step_run,
        Table::Events => event,
    }
}

fn pool(row: &dyn Fields) -> Col<Record> {
    let n = POOL_COLUMNS;
    Ok(Record::Pool(Box::new(ExportedPool {
        name: columns::text(row, n, 0)?,
        max_running: columns::int(row, n, 1)?,
        created_at: columns::instant(row, n, 2)?,
        updated_at: columns::instant(row, n, 3)?,
    })))
}

/// A trigger with its payload.
fn trigger(row: &dyn Fields) -> Col<Record> {
    trigger_row(row).map(|t| Record::Trigger(Box::new(t.into())))
}

fn workflow(row: &dyn Fields) -> Col<Record> {
    columns::workflow_row(row).map(|w| Record::Workflow(Box::new(w)))
}

/// A loop with its stored `paused_reason`, which the shared mapper shows
/// only while the loop is paused.
fn a_loop(row: &dyn Fields) -> Col<Record> {
    let mut lp = columns::loop_row(row)?;
    lp.paused_reason = columns::text_opt(row, LOOP_COLUMNS, LOOP_PAUSED_REASON)?;
    Ok(Record::Loop(Box::new(lp)))
}

/// A run with its process start and spawn id, without its claim token.
fn run(row: &dyn Fields) -> Col<Record> {
    let mut run = columns::run_row(row)?;
    run.claim_token = None;
    Ok(Record::Run(Box::new(ExportedRun {
        run,
        pid_start_ms: row.int(RUN_PID_START, RUN_COLUMNS[RUN_PID_START])?,
        spawn_id: columns::run_spawn_id(row)?,
        pool: row.text(RUN_POOL, "pool")?.map(str::to_owned),
        trigger_id: row.text(RUN_POOL + 1, "trigger_id")?.map(str::to_owned),
    })))
}

fn workflow_run(row: &dyn Fields) -> Col<Record> {
    columns::workflow_run_row(row).map(|r| Record::WorkflowRun(Box::new(r)))
}

fn step_run(row: &dyn Fields) -> Col<Record> {
    Ok(Record::StepRun(Box::new(ExportedStepRun {
        step: columns::step_run_row(row)?,
        pid_start_ms: row.int(STEP_PID_START, "pid_start_ms")?,
    })))
}

fn event(row: &dyn Fields) -> Col<Record> {
    columns::event_row(row).map(|e| Record::Event(Box::new(e)))
}

/// The columns, with their values in `stored`, that an import's
/// overwrite of `stored` requires unchanged (issue 25 item 3): those an
/// import decides by (`transfer::history::stored_is_newer`), a run's
/// status, attempt and last change, a workflow run's or step run's status
/// and last change. Every claim, retry, finish and recovery changes one of
/// them, so an overwrite decided on a row that a runner has since moved on
/// writes nothing, also on PostgreSQL, which reads without a lock and
/// re-checks the guard against the newest row. A trigger's are whether it
/// started a run or was folded into another, which a claim or a catch-up
/// here sets (as expressions, since both columns may be NULL).
/// Definitions and events have none: `replace` overwrites them as they
/// are.
pub(crate) fn over_guard(stored: &Record) -> Vec<(&'static str, Cell)> {
    match stored {
        Record::Run(r) => vec![
            ("status", text(r.run.status.as_str())),
            ("attempt", int(r.run.attempt)),
            ("updated_at", instant(r.run.updated_at)),
        ],
        Record::WorkflowRun(r) => vec![
            ("status", text(r.status.as_str())),
            ("updated_at", instant(r.updated_at)),
        ],
        Record::StepRun(s) => vec![
            ("status", text(s.step.status.as_str())),
            ("updated_at", instant(s.step.updated_at)),
        ],
        Record::Trigger(t) => vec![
            (
                "COALESCE(run_id, '')",
                text(t.run_id.as_ref().map_or("", |r| r.as_str())),
            ),
            (
                "(CASE WHEN coalesced_at IS NULL THEN 'no' ELSE 'yes' END)",
                text(if t.coalesced_at.is_some() {
                    "yes"
                } else {
                    "no"
                }),
            ),
        ],
        Record::Pool(_) | Record::Workflow(_) | Record::Loop(_) | Record::Event(_) => Vec::new(),
    }
}

/// One column value of an imported row, of one of the column types loops
/// uses, bound as its [`Value`] (SQLite: instants and JSON as TEXT;
/// PostgreSQL: `timestamptz` and `json`).
#[derive(Debug)]
pub(crate) enum Cell {
    Text(Option<String>),
    Int(Option<i64>),
    Instant(Option<Timestamp>),
    Json(Option<String>),
}

impl Cell {
    /// The value as a statement's parameter.
    pub(crate) fn value(&self) -> Value<'_> {
        match self {
            Cell::Text(v) => v.as_deref().into(),
            Cell::Int(v) => (*v).into(),
            Cell::Instant(v) => (*v).into(),
            Cell::Json(v) => sql::json(v.as_deref()),
        }
    }
}

fn text(s: &str) -> Cell {
    Cell::Text(Some(s.to_owned()))
}

fn text_opt(s: Option<&str>) -> Cell {
    Cell::Text(s.map(str::to_owned))
}

fn int(n: impl Into<i64>) -> Cell {
    Cell::Int(Some(n.into()))
}

fn int_opt<T: Into<i64>>(n: Option<T>) -> Cell {
    Cell::Int(n.map(Into::into))
}

fn instant(t: Timestamp) -> Cell {
    Cell::Instant(Some(t))
}

fn instant_opt(t: Option<Timestamp>) -> Cell {
    Cell::Instant(t)
}

/// A `u64` column (milliseconds) as a signed 64-bit integer.
fn big(n: u64, what: &str) -> Result<Cell> {
    i64::try_from(n)
        .map(|n| Cell::Int(Some(n)))
        .map_err(|_| StoreError::Encode(format!("{what}: {n} is too large")))
}

fn json<T: serde::Serialize>(v: &T, what: &str) -> Result<Cell> {
    serde_json::to_string(v)
        .map(|s| Cell::Json(Some(s)))
        .map_err(|e| StoreError::Encode(format!("{what}: {e}")))
}

/// A record's columns and values, in the order of its table's column
/// list (which starts with its key: `id`, a pool's `name`), for both
/// backends.
pub(crate) fn cells(record: &Record) -> Result<(Vec<&'static str>, Vec<Cell>)> {
    Ok(match record {
        Record::Pool(p) => (
            POOL_COLUMNS.to_vec(),
            vec![
                text(&p.name),
                int(p.max_running),
                instant(p.created_at),
                instant(p.updated_at),
            ],
        ),
        Record::Trigger(t) => (
            TRIGGER_COLUMNS.to_vec(),
            vec![
                text(&t.id),
                text(t.loop_id.as_str()),
                text(t.kind.as_str()),
                text_opt(t.source_run_id.as_ref().map(|id| id.as_str())),
                text_opt(t.source_loop_id.as_ref().map(|id| id.as_str())),
                text_opt(t.idempotency_key.as_deref()),
                text_opt(t.payload.as_deref()),
                instant(t.created_at),
                text_opt(t.run_id.as_ref().map(|id| id.as_str())),
                instant_opt(t.coalesced_at),
            ],
        ),
        Record::Workflow(w) => (
            WORKFLOW_COLUMNS.to_vec(),
            vec![
                text(w.id.as_str()),
                text(&w.name),
                text_opt(w.description.as_deref()),
                int(w.version),
                text(w.status.as_str()),
                json(&w.steps, "workflow steps")?,
                int_opt(w.max_parallel),
                instant(w.created_at),
                instant(w.updated_at),
            ],
        ),
        Record::Loop(lp) => {
            let p = crate::loops::PolicyColumns::of(&lp.policy)?;
            (
                LOOP_COLUMNS.to_vec(),
                vec![
                    text(lp.id.as_str()),
                    text(&lp.name),
                    text_opt(lp.description.as_deref()),
                    text(lp.status.as_str()),
                    json(&lp.schedule, "loop schedule")?,
                    json(&lp.target, "loop target")?,
                    instant_opt(lp.next_run_at),
                    instant_opt(lp.retry_scheduled_for),
                    text(lp.catch_up.as_str()),
                    int(lp.catch_up_limit),
                    text(lp.overlap.as_str()),
                    int(lp.max_attempts),
                    big(lp.retry_delay_ms, "retryDelayMs")?,
                    big(lp.lease_ms, "leaseMs")?,
                    instant_opt(lp.expires_at),
                    instant(lp.created_at),
                    instant(lp.updated_at),
                    text_opt(lp.paused_reason.as_deref()),
                    // Issue 17's policy columns (V8), in loop_columns! order.
                    Cell::Json(p.labels.clone()),
                    int_opt(p.expires_after_runs),
                    int(lp.consecutive_successes.unwrap_or(0)),
                    int_opt(p.pause_after_failures),
                    int(lp.consecutive_failures.unwrap_or(0)),
                    text_opt(p.backoff),
                    int_opt(p.max_retry_delay_ms),
                    Cell::Json(p.skip_exit_codes.clone()),
                    // The hooks (V9).
                    text_opt(lp.hooks.on_failure.as_deref()),
                    text_opt(lp.hooks.on_success.as_deref()),
                    int(lp.hooks.hook_show_output),
                    // The daily cost cap (V11).
                    int_opt(p.max_cost_per_day_nanos),
                    // Placement and pool (V13).
                    Cell::Json(p.runs_on.clone()),
                    text_opt(p.pool.as_deref()),
                    Cell::Json(p.after.clone()),
                    int(lp.policy.trigger_only),
                    // File watches (V14).
                    Cell::Json(p.watch.clone()),
                    // The apply scope (V15).
                    text_opt(p.scope.as_deref()),
                ],
            )
        }
        Record::Run(r) => {
            let run = &r.run;
            let mut names = RUN_COLUMNS.to_vec();
            names.extend(["pool", "trigger_id"]);
            (
                names,
                vec![
                    text(run.id.as_str()),
                    text(run.loop_id.as_str()),
                    text(&run.loop_name),
                    instant(run.scheduled_for),
                    int(run.attempt),
                    text(run.status.as_str()),
                    instant_opt(run.started_at),
                    instant_opt(run.finished_at),
                    text_opt(run.claimed_by.as_deref()),
                    instant_opt(run.lease_expires_at),
                    int_opt(run.pid),
                    int_opt(run.exit_code),
                    int_opt(run.duration_ms),
                    text_opt(run.stdout.as_deref()),
                    text_opt(run.stderr.as_deref()),
                    text_opt(run.error.as_deref()),
                    instant(run.created_at),
                    instant(run.updated_at),
                    int_opt(r.pid_start_ms),
                    text_opt(r.spawn_id.as_deref()),
                    // The claim token fenced a claim on the other database.
                    Cell::Text(None),
                    text_opt(run.claimed_host.as_deref()),
                    // What the run said and cost, and why it failed (V11).
                    text_opt(run.facts.failure_class.map(|c| c.as_str())),
                    text_opt(run.facts.failure_fingerprint.as_deref()),
                    text_opt(run.facts.session_id.as_deref()),
                    text_opt(run.facts.result.as_deref()),
                    int_opt(run.facts.cost_usd.map(Usd::nanos)),
                    match &run.facts.usage {
                        Some(usage) => json(usage, "run usage")?,
                        None => Cell::Json(None),
                    },
                    int_opt(run.facts.is_error),
                    text_opt(run.facts.worktree.as_deref()),
                    text_opt(run.facts.worktree_branch.as_deref()),
                    instant_opt(run.last_output_at),
                    // The cancel request (V12); its grace is spent.
                    instant_opt(run.cancel_requested_at),
                    text_opt(run.cancelled_by.as_deref()),
                    Cell::Int(None),
                    // Its pool and trigger (V13).
                    text_opt(r.pool.as_deref()),
                    text_opt(r.trigger_id.as_deref()),
                ],
            )
        }
        Record::WorkflowRun(r) => (
            WORKFLOW_RUN_COLUMNS.to_vec(),
            vec![
                text(r.id.as_str()),
                text(r.workflow_id.as_str()),
                text(&r.workflow_name),
                text_opt(r.loop_id.as_ref().map(|id| id.as_str())),
                text_opt(r.loop_run_id.as_ref().map(|id| id.as_str())),
                instant_opt(r.scheduled_for),
                text_opt(r.idempotency_key.as_deref()),
                text(r.status.as_str()),
                instant_opt(r.started_at),
                instant_opt(r.finished_at),
                int_opt(r.duration_ms),
                text_opt(r.error.as_deref()),
                instant(r.created_at),
                instant(r.updated_at),
            ],
        ),
        Record::StepRun(s) => {
            let step = &s.step;
            let mut names = STEP_RUN_COLUMNS.to_vec();
            names.push("pid_start_ms");
            (
                names,
                vec![
                    text(step.id.as_str()),
                    text(step.workflow_run_id.as_str()),
                    text(&step.step_id),
                    int(step.sequence),
                    text(step.status.as_str()),
                    instant_opt(step.started_at),
                    instant_opt(step.finished_at),
                    int_opt(step.exit_code),
                    int_opt(step.pid),
                    int_opt(step.duration_ms),
                    text_opt(step.stdout.as_deref()),
                    text_opt(step.stderr.as_deref()),
                    text_opt(step.error.as_deref()),
                    text_opt(step.account_profile.as_deref()),
                    text_opt(step.account_tool.as_deref()),
                    instant(step.created_at),
                    instant(step.updated_at),
                    int_opt(s.pid_start_ms),
                ],
            )
        }
        Record::Event(e) => (
            EVENT_COLUMNS.to_vec(),
            vec![
                text(e.id.as_str()),
                text(e.workflow_run_id.as_str()),
                int(e.sequence),
                text(&e.event_type),
                text_opt(e.step_id.as_deref()),
                match &e.payload {
                    Some(p) => json(p, "event payload")?,
                    None => Cell::Json(None),
                },
                instant(e.created_at),
            ],
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_additive_columns_sit_where_the_mappers_read_them() {
        assert_eq!(LOOP_COLUMNS[LOOP_PAUSED_REASON], "paused_reason");
        assert_eq!(RUN_COLUMNS[RUN_PID_START], "pid_start_ms");
        assert_eq!(STEP_RUN_COLUMNS.len(), STEP_PID_START);
    }

    #[test]
    fn every_column_list_starts_with_the_id() {
        assert_eq!(POOL_COLUMNS[0], "name");
        for names in [
            TRIGGER_COLUMNS,
            LOOP_COLUMNS,
            RUN_COLUMNS,
            WORKFLOW_COLUMNS,
            WORKFLOW_RUN_COLUMNS,
            STEP_RUN_COLUMNS,
            EVENT_COLUMNS,
        ] {
            assert_eq!(names[0], "id");
        }
    }

    #[test]
    fn cells_bind_as_their_column_types() {
        let t: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(Cell::Text(Some("a".into())).value(), Value::Text("a"));
        assert_eq!(Cell::Int(Some(3)).value(), Value::Int(3));
        assert_eq!(Cell::Instant(Some(t)).value(), Value::Ts(t));
        assert_eq!(Cell::Json(Some("[]".into())).value(), Value::Json("[]"));
        for none in [
            Cell::Text(None),
            Cell::Int(None),
            Cell::Instant(None),
            Cell::Json(None),
        ] {
            assert_eq!(none.value(), Value::Null);
        }
    }
}
