//! Row decoding: SQLite rows into core records (SPEC §4.2 columns, §1 JSON).
//!
//! Mappers read columns by name, so the `SELECT *` of a database with extra
//! additive columns still decodes. The two hot tables, `loops` and
//! `loop_runs`, are read by position instead: a name lookup compares the
//! name against every column, which cost more than the rest of decoding a
//! row. Their positions are the original's column order, which additive
//! migrations never change (new columns go at the end), and
//! [`check_layout`] verifies it when a database is opened. A value that does
//! not decode (bad JSON, unknown status) becomes a conversion error naming
//! the column.

use std::ops::ControlFlow;
use std::str::FromStr;

use loops_core::{
    DaemonLease, Loop, LoopRun, LoopStatus, ProcessRef, StepRun, Timestamp, WorkflowEvent,
    WorkflowRun, WorkflowSpec,
};
use rusqlite::types::{Type, ValueRef};
use rusqlite::{Connection, OptionalExtension, Params, Row};

use crate::error::{DbError, Result, StoreError};

/// A column of a row: by name (`&str`) or by position ([`At`]).
pub(crate) trait Column: Copy + std::fmt::Display {
    /// Reads the column.
    fn get<T: rusqlite::types::FromSql>(self, row: &Row<'_>) -> rusqlite::Result<T>;

    /// Borrows the column's raw value, without copying text out of SQLite.
    fn get_ref<'r>(self, row: &'r Row<'_>) -> rusqlite::Result<ValueRef<'r>>;

    /// Borrows a TEXT column, `None` when NULL.
    fn text<'r>(self, row: &'r Row<'_>) -> rusqlite::Result<Option<&'r str>> {
        match self.get_ref(row)? {
            ValueRef::Null => Ok(None),
            other => other.as_str().map(Some).map_err(|e| conversion(self, e)),
        }
    }
}

impl Column for &str {
    fn get<T: rusqlite::types::FromSql>(self, row: &Row<'_>) -> rusqlite::Result<T> {
        row.get(self)
    }

    fn get_ref<'r>(self, row: &'r Row<'_>) -> rusqlite::Result<ValueRef<'r>> {
        row.get_ref(self)
    }
}

/// A column at a known position, with its name for messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct At(usize, &'static str);

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.1)
    }
}

impl Column for At {
    fn get<T: rusqlite::types::FromSql>(self, row: &Row<'_>) -> rusqlite::Result<T> {
        row.get(self.0)
    }

    fn get_ref<'r>(self, row: &'r Row<'_>) -> rusqlite::Result<ValueRef<'r>> {
        row.get_ref(self.0)
    }
}

/// The original's columns of `loops`, in table order.
const LOOP_COLUMNS: [&str; 17] = [
    "id",
    "name",
    "description",
    "status",
    "schedule_json",
    "target_json",
    "next_run_at",
    "retry_scheduled_for",
    "catch_up",
    "catch_up_limit",
    "overlap",
    "max_attempts",
    "retry_delay_ms",
    "lease_ms",
    "expires_at",
    "created_at",
    "updated_at",
];

/// The original's columns of `loop_runs`, in table order.
const RUN_COLUMNS: [&str; 18] = [
    "id",
    "loop_id",
    "loop_name",
    "scheduled_for",
    "attempt",
    "status",
    "started_at",
    "finished_at",
    "claimed_by",
    "lease_expires_at",
    "pid",
    "exit_code",
    "duration_ms",
    "stdout",
    "stderr",
    "error",
    "created_at",
    "updated_at",
];

/// Column `i` of `loops`.
const fn lc(i: usize) -> At {
    At(i, LOOP_COLUMNS[i])
}

/// Column `i` of `loop_runs`.
const fn rc(i: usize) -> At {
    At(i, RUN_COLUMNS[i])
}

/// Checks that `loops` and `loop_runs` start with the original's columns in
/// the original's order, which the positional mappers rely on.
pub(crate) fn check_layout(conn: &Connection) -> Result<()> {
    for (table, expected) in [
        ("loops", &LOOP_COLUMNS[..]),
        ("loop_runs", &RUN_COLUMNS[..]),
    ] {
        let mut stmt = conn
            .prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")
            .map_err(StoreError::db("inspecting the schema"))?;
        let names = stmt
            .query_map([table], |r| r.get::<_, String>(0))
            .map_err(StoreError::db("inspecting the schema"))?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(StoreError::db("inspecting the schema"))?;
        let prefix: Vec<&str> = names
            .iter()
            .take(expected.len())
            .map(String::as_str)
            .collect();
        if prefix != expected {
            return Err(StoreError::Migration(format!(
                "table {table} has columns ({}) where loops expects ({}) first; \
                 the database was changed by hand or by another program",
                names.join(", "),
                expected.join(", ")
            )));
        }
    }
    Ok(())
}

fn conversion<E>(col: impl std::fmt::Display, err: E) -> rusqlite::Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    // rusqlite wants a column index; the name travels in the message instead.
    rusqlite::Error::FromSqlConversionFailure(
        0,
        Type::Text,
        Box::new(ColumnError {
            column: col.to_string(),
            message: err.to_string(),
        }),
    )
}

#[derive(Debug)]
struct ColumnError {
    column: String,
    message: String,
}

impl std::fmt::Display for ColumnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

impl std::error::Error for ColumnError {}

/// Reads a parsable text column (ids, enums, instants).
pub(crate) fn parsed<T>(row: &Row<'_>, col: impl Column) -> rusqlite::Result<T>
where
    T: FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    col.text(row)?
        .ok_or_else(|| conversion(col, NullColumn))?
        .parse()
        .map_err(|e| conversion(col, e))
}

/// A NOT NULL column read as NULL.
#[derive(Debug)]
struct NullColumn;

impl std::fmt::Display for NullColumn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("unexpected NULL")
    }
}

impl std::error::Error for NullColumn {}

/// Reads a nullable parsable text column.
pub(crate) fn parsed_opt<T>(row: &Row<'_>, col: impl Column) -> rusqlite::Result<Option<T>>
where
    T: FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    col.text(row)?
        .map(|s| s.parse().map_err(|e| conversion(col, e)))
        .transpose()
}

/// Reads a JSON column.
pub(crate) fn json<T: serde::de::DeserializeOwned>(
    row: &Row<'_>,
    col: impl Column,
) -> rusqlite::Result<T> {
    let s = col.text(row)?.ok_or_else(|| conversion(col, NullColumn))?;
    serde_json::from_str(s).map_err(|e| conversion(col, e))
}

/// Reads a nullable JSON column.
pub(crate) fn json_opt<T: serde::de::DeserializeOwned>(
    row: &Row<'_>,
    col: impl Column,
) -> rusqlite::Result<Option<T>> {
    let s: Option<String> = col.get(row)?;
    s.map(|s| serde_json::from_str(&s).map_err(|e| conversion(col, e)))
        .transpose()
}

/// Reads a non-negative integer column into `u32`.
pub(crate) fn u32_col(row: &Row<'_>, col: impl Column) -> rusqlite::Result<u32> {
    let v: i64 = col.get(row)?;
    u32::try_from(v).map_err(|e| conversion(col, e))
}

/// Reads a nullable non-negative integer column into `u32`.
pub(crate) fn u32_opt(row: &Row<'_>, col: impl Column) -> rusqlite::Result<Option<u32>> {
    let v: Option<i64> = col.get(row)?;
    v.map(|v| u32::try_from(v).map_err(|e| conversion(col, e)))
        .transpose()
}

/// Reads a non-negative integer column into `u64`.
pub(crate) fn u64_col(row: &Row<'_>, col: impl Column) -> rusqlite::Result<u64> {
    let v: i64 = col.get(row)?;
    u64::try_from(v).map_err(|e| conversion(col, e))
}

/// Reads a nullable `i32` column (exit codes).
pub(crate) fn i32_opt(row: &Row<'_>, col: impl Column) -> rusqlite::Result<Option<i32>> {
    let v: Option<i64> = col.get(row)?;
    v.map(|v| i32::try_from(v).map_err(|e| conversion(col, e)))
        .transpose()
}

/// Reads a column that may be absent from an older schema as NULL.
pub(crate) fn optional_column<T: rusqlite::types::FromSql>(
    row: &Row<'_>,
    col: &str,
) -> rusqlite::Result<Option<T>> {
    match row.get::<_, Option<T>>(col) {
        Err(rusqlite::Error::InvalidColumnName(_)) => Ok(None),
        other => other,
    }
}

/// The recorded process of a run or step row: `pid` plus the additive
/// `pid_start_ms`.
pub(crate) fn process_ref(row: &Row<'_>) -> rusqlite::Result<Option<ProcessRef>> {
    let pid = u32_opt(row, "pid")?;
    let start: Option<i64> = optional_column(row, "pid_start_ms")?;
    Ok(pid.map(|pid| ProcessRef { pid, start }))
}

/// `loops` row → [`Loop`], by position (see the module docs).
pub(crate) fn loop_row(row: &Row<'_>) -> rusqlite::Result<Loop> {
    let status: LoopStatus = parsed(row, lc(3))?;
    // A reason is shown only while the loop is paused: the original resumes
    // a loop without clearing the column it does not know.
    let paused_reason = match status {
        LoopStatus::Paused => optional_column(row, "paused_reason")?,
        _ => None,
    };
    Ok(Loop {
        id: parsed(row, lc(0))?,
        name: lc(1).get(row)?,
        description: lc(2).get(row)?,
        status,
        schedule: json(row, lc(4))?,
        target: json(row, lc(5))?,
        next_run_at: parsed_opt(row, lc(6))?,
        retry_scheduled_for: parsed_opt(row, lc(7))?,
        catch_up: parsed(row, lc(8))?,
        catch_up_limit: u32_col(row, lc(9))?,
        overlap: parsed(row, lc(10))?,
        max_attempts: u32_col(row, lc(11))?,
        retry_delay_ms: u64_col(row, lc(12))?,
        lease_ms: u64_col(row, lc(13))?,
        expires_at: parsed_opt(row, lc(14))?,
        created_at: parsed(row, lc(15))?,
        updated_at: parsed(row, lc(16))?,
        paused_reason,
    })
}

/// `loop_runs` row → [`LoopRun`], by position (see the module docs).
pub(crate) fn run_row(row: &Row<'_>) -> rusqlite::Result<LoopRun> {
    Ok(LoopRun {
        id: parsed(row, rc(0))?,
        loop_id: parsed(row, rc(1))?,
        loop_name: rc(2).get(row)?,
        scheduled_for: parsed(row, rc(3))?,
        attempt: u32_col(row, rc(4))?,
        status: parsed(row, rc(5))?,
        started_at: parsed_opt(row, rc(6))?,
        finished_at: parsed_opt(row, rc(7))?,
        claimed_by: rc(8).get(row)?,
        lease_expires_at: parsed_opt(row, rc(9))?,
        pid: u32_opt(row, rc(10))?,
        exit_code: i32_opt(row, rc(11))?,
        duration_ms: rc(12).get(row)?,
        stdout: rc(13).get(row)?,
        stderr: rc(14).get(row)?,
        error: rc(15).get(row)?,
        created_at: parsed(row, rc(16))?,
        updated_at: parsed(row, rc(17))?,
    })
}

/// `workflow_specs` row → [`WorkflowSpec`].
pub(crate) fn workflow_row(row: &Row<'_>) -> rusqlite::Result<WorkflowSpec> {
    Ok(WorkflowSpec {
        id: parsed(row, "id")?,
        name: row.get("name")?,
        description: row.get("description")?,
        version: u32_col(row, "version")?,
        status: parsed(row, "status")?,
        steps: json(row, "steps_json")?,
        max_parallel: optional_column::<i64>(row, "max_parallel")?
            .map(|v| u32::try_from(v).map_err(|e| conversion("max_parallel", e)))
            .transpose()?,
        created_at: parsed(row, "created_at")?,
        updated_at: parsed(row, "updated_at")?,
    })
}

/// `workflow_runs` row → [`WorkflowRun`].
pub(crate) fn workflow_run_row(row: &Row<'_>) -> rusqlite::Result<WorkflowRun> {
    Ok(WorkflowRun {
        id: parsed(row, "id")?,
        workflow_id: parsed(row, "workflow_id")?,
        workflow_name: row.get("workflow_name")?,
        loop_id: parsed_opt(row, "loop_id")?,
        loop_run_id: parsed_opt(row, "loop_run_id")?,
        scheduled_for: parsed_opt(row, "scheduled_for")?,
        idempotency_key: row.get("idempotency_key")?,
        status: parsed(row, "status")?,
        started_at: parsed_opt(row, "started_at")?,
        finished_at: parsed_opt(row, "finished_at")?,
        duration_ms: row.get("duration_ms")?,
        error: row.get("error")?,
        created_at: parsed(row, "created_at")?,
        updated_at: parsed(row, "updated_at")?,
    })
}

/// `workflow_step_runs` row → [`StepRun`].
pub(crate) fn step_run_row(row: &Row<'_>) -> rusqlite::Result<StepRun> {
    let c = |i: usize, name: &'static str| At(i, name);
    Ok(StepRun {
        id: parsed(row, c(0, "id"))?,
        workflow_run_id: parsed(row, c(1, "workflow_run_id"))?,
        step_id: c(2, "step_id").get(row)?,
        sequence: u32_col(row, c(3, "sequence"))?,
        status: parsed(row, c(4, "status"))?,
        started_at: parsed_opt(row, c(5, "started_at"))?,
        finished_at: parsed_opt(row, c(6, "finished_at"))?,
        exit_code: i32_opt(row, c(7, "exit_code"))?,
        pid: u32_opt(row, c(8, "pid"))?,
        duration_ms: c(9, "duration_ms").get(row)?,
        stdout: c(10, "stdout").get(row)?,
        stderr: c(11, "stderr").get(row)?,
        error: c(12, "error").get(row)?,
        account_profile: c(13, "account_profile").get(row)?,
        account_tool: c(14, "account_tool").get(row)?,
        created_at: parsed(row, c(15, "created_at"))?,
        updated_at: parsed(row, c(16, "updated_at"))?,
    })
}

/// `workflow_events` row → [`WorkflowEvent`].
pub(crate) fn event_row(row: &Row<'_>) -> rusqlite::Result<WorkflowEvent> {
    Ok(WorkflowEvent {
        id: parsed(row, "id")?,
        workflow_run_id: parsed(row, "workflow_run_id")?,
        sequence: u32_col(row, "sequence")?,
        event_type: row.get("event_type")?,
        step_id: row.get("step_id")?,
        payload: json_opt(row, "payload_json")?,
        created_at: parsed(row, "created_at")?,
    })
}

/// `daemon_lease` row → [`DaemonLease`].
pub(crate) fn lease_row(row: &Row<'_>) -> rusqlite::Result<DaemonLease> {
    Ok(DaemonLease {
        id: parsed(row, "id")?,
        pid: u32_col(row, "pid")?,
        hostname: row.get("hostname")?,
        heartbeat_at: parsed(row, "heartbeat_at")?,
        expires_at: parsed(row, "expires_at")?,
        created_at: parsed(row, "created_at")?,
        updated_at: parsed(row, "updated_at")?,
    })
}

/// Executes one statement through the connection's statement cache.
///
/// `Connection::execute` parses its SQL on every call; the hot writes (step
/// transitions, events) run thousands of times per process.
pub(crate) fn exec(conn: &Connection, sql: &str, params: impl Params) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// An instant as the TEXT SQL compares.
pub(crate) fn ts(t: Timestamp) -> String {
    t.to_string()
}

/// A nullable instant as TEXT.
pub(crate) fn ts_opt(t: Option<Timestamp>) -> Option<String> {
    t.map(ts)
}

/// Decodes one row of `table`, reporting a value that does not decode (bad
/// JSON, unknown status) as [`StoreError::Corrupt`] naming the row's id.
pub(crate) fn decode<T>(
    row: &Row<'_>,
    table: &'static str,
    map: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<T> {
    map(row).map_err(|e| match e {
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::IntegralValueOutOfRange(..) => StoreError::Corrupt {
            table,
            id: row.get::<_, String>("id").unwrap_or_default(),
            reason: e.to_string(),
        },
        other => StoreError::Db {
            context: "decoding a row",
            error: DbError(other),
        },
    })
}

/// Runs a statement returning at most one row of `table` (a `SELECT` or an
/// `… RETURNING *` write).
pub(crate) fn query_opt<T>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
    (table, context): (&'static str, &'static str),
    map: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Option<T>> {
    let mut stmt = conn.prepare_cached(sql).map_err(StoreError::db(context))?;
    stmt.query_row(params, |row| Ok(decode(row, table, map)))
        .optional()
        .map_err(StoreError::db(context))?
        .transpose()
}

/// Runs a statement returning rows of `table`.
pub(crate) fn query_vec<T>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
    what: (&'static str, &'static str),
    map: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    let mut all = Vec::new();
    query_each(conn, sql, params, what, map, |v| {
        all.push(v);
        ControlFlow::Continue(())
    })?;
    Ok(all)
}

/// Runs a statement returning rows of `table`, handing each decoded row to
/// `each` as it is read; an error from `each` stops the query.
pub(crate) fn query_each<T>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
    (table, context): (&'static str, &'static str),
    map: fn(&Row<'_>) -> rusqlite::Result<T>,
    mut each: impl FnMut(T) -> ControlFlow<()>,
) -> Result<()> {
    let mut stmt = conn.prepare_cached(sql).map_err(StoreError::db(context))?;
    let mut rows = stmt.query(params).map_err(StoreError::db(context))?;
    while let Some(row) = rows.next().map_err(StoreError::db(context))? {
        if each(decode(row, table, map)?).is_break() {
            break;
        }
    }
    Ok(())
}
