//! Row decoding: SQLite rows into core records (SPEC §4.2 columns, §1 JSON).
//!
//! Every mapper reads columns by name, so the `SELECT *` of a database with
//! extra additive columns still decodes. A value that does not decode (bad
//! JSON, unknown status) becomes a conversion error naming the column.

use std::str::FromStr;

use loops_core::{
    DaemonLease, Loop, LoopRun, ProcessRef, StepRun, Timestamp, WorkflowEvent, WorkflowRun,
    WorkflowSpec,
};
use rusqlite::types::Type;
use rusqlite::{Connection, OptionalExtension, Params, Row};

use crate::error::{DbError, Result, StoreError};

fn conversion<E>(idx: &str, err: E) -> rusqlite::Error
where
    E: std::error::Error + Send + Sync + 'static,
{
    // rusqlite wants a column index; the name travels in the message instead.
    let _ = idx;
    rusqlite::Error::FromSqlConversionFailure(
        0,
        Type::Text,
        Box::new(ColumnError {
            column: idx.to_owned(),
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
pub(crate) fn parsed<T>(row: &Row<'_>, col: &str) -> rusqlite::Result<T>
where
    T: FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    let s: String = row.get(col)?;
    s.parse().map_err(|e| conversion(col, e))
}

/// Reads a nullable parsable text column.
pub(crate) fn parsed_opt<T>(row: &Row<'_>, col: &str) -> rusqlite::Result<Option<T>>
where
    T: FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    let s: Option<String> = row.get(col)?;
    s.map(|s| s.parse().map_err(|e| conversion(col, e)))
        .transpose()
}

/// Reads a JSON column.
pub(crate) fn json<T: serde::de::DeserializeOwned>(
    row: &Row<'_>,
    col: &str,
) -> rusqlite::Result<T> {
    let s: String = row.get(col)?;
    serde_json::from_str(&s).map_err(|e| conversion(col, e))
}

/// Reads a nullable JSON column.
pub(crate) fn json_opt<T: serde::de::DeserializeOwned>(
    row: &Row<'_>,
    col: &str,
) -> rusqlite::Result<Option<T>> {
    let s: Option<String> = row.get(col)?;
    s.map(|s| serde_json::from_str(&s).map_err(|e| conversion(col, e)))
        .transpose()
}

/// Reads a non-negative integer column into `u32`.
pub(crate) fn u32_col(row: &Row<'_>, col: &str) -> rusqlite::Result<u32> {
    let v: i64 = row.get(col)?;
    u32::try_from(v).map_err(|e| conversion(col, e))
}

/// Reads a nullable non-negative integer column into `u32`.
pub(crate) fn u32_opt(row: &Row<'_>, col: &str) -> rusqlite::Result<Option<u32>> {
    let v: Option<i64> = row.get(col)?;
    v.map(|v| u32::try_from(v).map_err(|e| conversion(col, e)))
        .transpose()
}

/// Reads a non-negative integer column into `u64`.
pub(crate) fn u64_col(row: &Row<'_>, col: &str) -> rusqlite::Result<u64> {
    let v: i64 = row.get(col)?;
    u64::try_from(v).map_err(|e| conversion(col, e))
}

/// Reads a nullable `i32` column (exit codes).
pub(crate) fn i32_opt(row: &Row<'_>, col: &str) -> rusqlite::Result<Option<i32>> {
    let v: Option<i64> = row.get(col)?;
    v.map(|v| i32::try_from(v).map_err(|e| conversion(col, e)))
        .transpose()
}

/// Reads a column that may be absent from an older schema as NULL.
fn optional_column<T: rusqlite::types::FromSql>(
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

/// `loops` row → [`Loop`].
pub(crate) fn loop_row(row: &Row<'_>) -> rusqlite::Result<Loop> {
    Ok(Loop {
        id: parsed(row, "id")?,
        name: row.get("name")?,
        description: row.get("description")?,
        status: parsed(row, "status")?,
        schedule: json(row, "schedule_json")?,
        target: json(row, "target_json")?,
        next_run_at: parsed_opt(row, "next_run_at")?,
        retry_scheduled_for: parsed_opt(row, "retry_scheduled_for")?,
        catch_up: parsed(row, "catch_up")?,
        catch_up_limit: u32_col(row, "catch_up_limit")?,
        overlap: parsed(row, "overlap")?,
        max_attempts: u32_col(row, "max_attempts")?,
        retry_delay_ms: u64_col(row, "retry_delay_ms")?,
        lease_ms: u64_col(row, "lease_ms")?,
        expires_at: parsed_opt(row, "expires_at")?,
        created_at: parsed(row, "created_at")?,
        updated_at: parsed(row, "updated_at")?,
    })
}

/// `loop_runs` row → [`LoopRun`].
pub(crate) fn run_row(row: &Row<'_>) -> rusqlite::Result<LoopRun> {
    Ok(LoopRun {
        id: parsed(row, "id")?,
        loop_id: parsed(row, "loop_id")?,
        loop_name: row.get("loop_name")?,
        scheduled_for: parsed(row, "scheduled_for")?,
        attempt: u32_col(row, "attempt")?,
        status: parsed(row, "status")?,
        started_at: parsed_opt(row, "started_at")?,
        finished_at: parsed_opt(row, "finished_at")?,
        claimed_by: row.get("claimed_by")?,
        lease_expires_at: parsed_opt(row, "lease_expires_at")?,
        pid: u32_opt(row, "pid")?,
        exit_code: i32_opt(row, "exit_code")?,
        duration_ms: row.get("duration_ms")?,
        stdout: row.get("stdout")?,
        stderr: row.get("stderr")?,
        error: row.get("error")?,
        created_at: parsed(row, "created_at")?,
        updated_at: parsed(row, "updated_at")?,
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
    Ok(StepRun {
        id: parsed(row, "id")?,
        workflow_run_id: parsed(row, "workflow_run_id")?,
        step_id: row.get("step_id")?,
        sequence: u32_col(row, "sequence")?,
        status: parsed(row, "status")?,
        started_at: parsed_opt(row, "started_at")?,
        finished_at: parsed_opt(row, "finished_at")?,
        exit_code: i32_opt(row, "exit_code")?,
        pid: u32_opt(row, "pid")?,
        duration_ms: row.get("duration_ms")?,
        stdout: row.get("stdout")?,
        stderr: row.get("stderr")?,
        error: row.get("error")?,
        account_profile: row.get("account_profile")?,
        account_tool: row.get("account_tool")?,
        created_at: parsed(row, "created_at")?,
        updated_at: parsed(row, "updated_at")?,
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
            source: DbError(other),
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
    (table, context): (&'static str, &'static str),
    map: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql).map_err(StoreError::db(context))?;
    let decoded = stmt
        .query_map(params, |row| Ok(decode(row, table, map)))
        .map_err(StoreError::db(context))?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(StoreError::db(context))?;
    decoded.into_iter().collect()
}
