//! The SQLite side of [`crate::transfer`]: whole rows, ids kept.
//!
//! An export reads every table inside one deferred read transaction, so
//! the document is one snapshot while writers go on (WAL). Rows are read
//! through the shared column lists of `rows`, plus the additive columns
//! the core records leave out. Writes are plain `INSERT … ON CONFLICT DO
//! NOTHING` and `UPDATE … WHERE id` (for the run tables also guarded by
//! what the import read, [`over_guard`]), so the `status_counts` triggers
//! count them; SQLite does not enforce the schema's foreign keys (the original
//! never turned them on), so a row is written as it is.

use std::ops::ControlFlow;

use loops_core::{Timestamp, WorkflowStatus};
use rusqlite::types::{ToSqlOutput, Value};
use rusqlite::{Connection, Row, params, params_from_iter};

use crate::backend::TransferOps;
use crate::error::{Result, StoreError};
use crate::sqlite::Sqlite;
use crate::sqlite::rows::{
    self, EVENT_COLUMNS, LOOP_COLUMNS, RUN_COLUMNS, STEP_RUN_COLUMNS, WORKFLOW_COLUMNS,
    WORKFLOW_RUN_COLUMNS, event_columns, loop_columns, run_columns, step_run_columns,
    workflow_columns, workflow_run_columns,
};
use crate::transfer::{ExportedRun, ExportedStepRun, Record, Table};

/// Positions of the additive columns in the shared column lists; a test
/// checks them against the lists.
const LOOP_PAUSED_REASON: usize = 17;
const RUN_PID_START: usize = 18;
/// `pid_start_ms` follows the step run columns in the statements here.
const STEP_PID_START: usize = 17;

impl TransferOps for Sqlite {
    fn export_rows(
        &self,
        tables: &[Table],
        each: &mut dyn FnMut(Record) -> ControlFlow<()>,
    ) -> Result<()> {
        let own = self.conn.is_autocommit();
        if own {
            self.conn
                .execute_batch("BEGIN")
                .map_err(StoreError::db("starting a read snapshot"))?;
        }
        let out = export_tables(&self.conn, tables, each);
        if own {
            let end = if out.is_ok() { "COMMIT" } else { "ROLLBACK" };
            let ended = self
                .conn
                .execute_batch(end)
                .map_err(StoreError::db("ending a read snapshot"));
            return out.and(ended);
        }
        out
    }

    fn matching_rows(&self, record: &Record) -> Result<Vec<Record>> {
        let conn = &self.conn;
        let what = (
            record.table().sql_name(),
            "reading the rows an import would change",
        );
        let id = record.id();
        match record {
            Record::Workflow(w) => rows::query_vec(
                conn,
                concat!(
                    "SELECT ",
                    workflow_columns!(),
                    " FROM workflow_specs
                     WHERE id = ?1 OR (?3 AND status = 'active' AND name = ?2)"
                ),
                params![id, w.name, w.status == WorkflowStatus::Active],
                what,
                workflow,
            ),
            Record::Loop(lp) => {
                let mut found = rows::query_vec(
                    conn,
                    concat!("SELECT ", loop_columns!(), " FROM loops WHERE id = ?1"),
                    [id],
                    what,
                    a_loop,
                )?;
                found.extend(rows::query_opt(
                    conn,
                    concat!(
                        "SELECT ",
                        loop_columns!(),
                        " FROM loops WHERE name = ?1 AND id <> ?2 LIMIT 1"
                    ),
                    params![lp.name, id],
                    what,
                    a_loop,
                )?);
                Ok(found)
            }
            Record::Run(r) => rows::query_vec(
                conn,
                concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM loop_runs WHERE id = ?1 OR (loop_id = ?2 AND scheduled_for = ?3)"
                ),
                params![id, r.run.loop_id.as_str(), ts(r.run.scheduled_for)],
                what,
                run,
            ),
            Record::WorkflowRun(r) => rows::query_vec(
                conn,
                concat!(
                    "SELECT ",
                    workflow_run_columns!(),
                    " FROM workflow_runs
                     WHERE id = ?1 OR (workflow_id = ?2 AND idempotency_key = ?3)"
                ),
                params![id, r.workflow_id.as_str(), r.idempotency_key],
                what,
                workflow_run,
            ),
            Record::StepRun(s) => rows::query_vec(
                conn,
                concat!(
                    "SELECT ",
                    step_run_columns!(),
                    ", pid_start_ms",
                    " FROM workflow_step_runs
                     WHERE id = ?1 OR (workflow_run_id = ?2 AND step_id = ?3)"
                ),
                params![id, s.step.workflow_run_id.as_str(), s.step.step_id],
                what,
                step_run,
            ),
            Record::Event(e) => rows::query_vec(
                conn,
                concat!(
                    "SELECT ",
                    event_columns!(),
                    " FROM workflow_events
                     WHERE id = ?1 OR (workflow_run_id = ?2 AND sequence = ?3)"
                ),
                params![id, e.workflow_run_id.as_str(), e.sequence],
                what,
                event,
            ),
        }
    }

    fn write_record(&self, record: &Record, over: Option<&Record>) -> Result<bool> {
        let (names, mut values) = cells(record)?;
        let table = record.table().sql_name();
        let (sql, context) = match over {
            Some(stored) => {
                let (guard, observed): (Vec<_>, Vec<_>) = over_guard(stored).into_iter().unzip();
                values.extend(observed);
                (
                    update_sql(table, &names, &guard),
                    "replacing an imported row",
                )
            }
            None => (insert_sql(table, &names), "inserting an imported row"),
        };
        self.write_tx(|conn| {
            let changed = rows::exec(conn, &sql, params_from_iter(values))
                .map_err(StoreError::db(context))?;
            Ok(changed == 1)
        })
    }
}

fn export_tables(
    conn: &Connection,
    tables: &[Table],
    each: &mut dyn FnMut(Record) -> ControlFlow<()>,
) -> Result<()> {
    for table in tables {
        let what = (table.sql_name(), "exporting rows");
        let (sql, map): (&str, fn(&Row<'_>) -> rusqlite::Result<Record>) = match table {
            Table::Workflows => (
                concat!(
                    "SELECT ",
                    workflow_columns!(),
                    " FROM workflow_specs ORDER BY id"
                ),
                workflow,
            ),
            Table::Loops => (
                concat!("SELECT ", loop_columns!(), " FROM loops ORDER BY id"),
                a_loop,
            ),
            Table::Runs => (
                concat!("SELECT ", run_columns!(), " FROM loop_runs ORDER BY id"),
                run,
            ),
            Table::WorkflowRuns => (
                concat!(
                    "SELECT ",
                    workflow_run_columns!(),
                    " FROM workflow_runs ORDER BY id"
                ),
                workflow_run,
            ),
            Table::StepRuns => (
                concat!(
                    "SELECT ",
                    step_run_columns!(),
                    ", pid_start_ms",
                    " FROM workflow_step_runs ORDER BY id"
                ),
                step_run,
            ),
            Table::Events => (
                concat!(
                    "SELECT ",
                    event_columns!(),
                    " FROM workflow_events ORDER BY id"
                ),
                event,
            ),
        };
        let mut stopped = false;
        rows::query_each(conn, sql, [], what, map, |record| {
            let flow = each(record);
            stopped = flow.is_break();
            flow
        })?;
        if stopped {
            break;
        }
    }
    Ok(())
}

fn workflow(row: &Row<'_>) -> rusqlite::Result<Record> {
    rows::workflow_row(row).map(|w| Record::Workflow(Box::new(w)))
}

/// A loop with its stored `paused_reason`, which the shared mapper shows
/// only while the loop is paused.
fn a_loop(row: &Row<'_>) -> rusqlite::Result<Record> {
    let mut lp = rows::loop_row(row)?;
    lp.paused_reason = row.get(LOOP_PAUSED_REASON)?;
    Ok(Record::Loop(Box::new(lp)))
}

/// A run with its process start and spawn id, without its claim token.
fn run(row: &Row<'_>) -> rusqlite::Result<Record> {
    let mut run = rows::run_row(row)?;
    run.claim_token = None;
    Ok(Record::Run(Box::new(ExportedRun {
        run,
        pid_start_ms: row.get(RUN_PID_START)?,
        spawn_id: rows::run_spawn_id(row)?,
    })))
}

fn workflow_run(row: &Row<'_>) -> rusqlite::Result<Record> {
    rows::workflow_run_row(row).map(|r| Record::WorkflowRun(Box::new(r)))
}

fn step_run(row: &Row<'_>) -> rusqlite::Result<Record> {
    Ok(Record::StepRun(Box::new(ExportedStepRun {
        step: rows::step_run_row(row)?,
        pid_start_ms: row.get(STEP_PID_START)?,
    })))
}

fn event(row: &Row<'_>) -> rusqlite::Result<Record> {
    rows::event_row(row).map(|e| Record::Event(Box::new(e)))
}

/// `INSERT INTO table (names) VALUES (?1, …)`, writing nothing when any
/// unique key is taken.
fn insert_sql(table: &str, names: &[&str]) -> String {
    let slots: Vec<String> = (1..=names.len()).map(|i| format!("?{i}")).collect();
    format!(
        "INSERT INTO {table} ({}) VALUES ({}) ON CONFLICT DO NOTHING",
        names.join(", "),
        slots.join(", ")
    )
}

/// `UPDATE table SET (every name but the id) = (?2, …) WHERE id = ?1 AND
/// guard = ?n …`; `names` starts with `id`, and the guard's values follow
/// the names' ([`over_guard`]).
fn update_sql(table: &str, names: &[&str], guard: &[&str]) -> String {
    let slots: Vec<String> = (2..=names.len()).map(|i| format!("?{i}")).collect();
    let guard: String = guard
        .iter()
        .zip(names.len() + 1..)
        .map(|(column, i)| format!(" AND {column} = ?{i}"))
        .collect();
    format!(
        "UPDATE {table} SET ({}) = ({}) WHERE id = ?1{guard}",
        names[1..].join(", "),
        slots.join(", ")
    )
}

/// The columns, with their values in `stored`, that an import's
/// overwrite of `stored` requires unchanged (issue 25 item 3): those an
/// import decides by (`transfer::history::stored_is_newer`), a run's
/// status, attempt and last change, a workflow run's or step run's status
/// and last change. Every claim, retry, finish and recovery changes one of
/// them, so an overwrite decided on a row that a runner has since moved on
/// writes nothing, also on PostgreSQL, which reads without a lock and
/// re-checks the guard against the newest row. Definitions and events
/// have none: `replace` overwrites them as they are.
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
        Record::Workflow(_) | Record::Loop(_) | Record::Event(_) => Vec::new(),
    }
}

fn ts(t: Timestamp) -> String {
    t.to_string()
}

/// One column value of an imported row, of one of the column types loops
/// uses; each backend binds it its own way (SQLite: instants and JSON as
/// TEXT; PostgreSQL: `timestamptz` and `jsonb`).
#[derive(Debug)]
pub(crate) enum Cell {
    Text(Option<String>),
    Int(Option<i64>),
    Instant(Option<Timestamp>),
    Json(Option<String>),
}

impl rusqlite::ToSql for Cell {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Cell::Text(Some(s)) | Cell::Json(Some(s)) => ToSqlOutput::from(s.as_str()),
            Cell::Int(Some(n)) => ToSqlOutput::from(*n),
            Cell::Instant(Some(t)) => ToSqlOutput::Owned(Value::Text(ts(*t))),
            Cell::Text(None) | Cell::Int(None) | Cell::Instant(None) | Cell::Json(None) => {
                ToSqlOutput::Owned(Value::Null)
            }
        })
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
/// list (which starts with `id`), for both backends.
pub(crate) fn cells(record: &Record) -> Result<(Vec<&'static str>, Vec<Cell>)> {
    Ok(match record {
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
                ],
            )
        }
        Record::Run(r) => {
            let run = &r.run;
            (
                RUN_COLUMNS.to_vec(),
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
        for names in [
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
}
