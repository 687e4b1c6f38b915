//! Row decoding: SQLite rows into core records (SPEC §4.2 columns, §1 JSON).
//!
//! Every query names the columns it reads: each table has a column list
//! (`loop_columns!()` and so on) that its statements splice into their
//! `SELECT` or `RETURNING`, and its mapper reads the row by position in
//! that same list. Reading by position is several times cheaper than by
//! name (a name lookup compares the name against every column), and naming
//! the columns means the table's own column order does not matter: a
//! database whose additive migrations ran in another order, or that has
//! columns this binary does not know, decodes the same. A unit test checks
//! that every list names columns of the migrated schema. A value that does
//! not decode (bad JSON, unknown status) becomes a conversion error naming
//! the column.

use std::ops::ControlFlow;
use std::str::FromStr;

use loops_core::{
    DaemonLease, Hooks, Loop, LoopPolicy, LoopRun, LoopStatus, ProcessRef, StepRun, Timestamp,
    WorkflowEvent, WorkflowRun, WorkflowSpec,
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

/// Declares a table's column list: a macro expanding to the list as SQL
/// text (for `concat!`), and an array of the same names whose index is the
/// position a mapper reads.
macro_rules! columns {
    (
        $(#[$doc:meta])* $mac:ident, $names:ident:
        [$first:literal $(, $col:literal)* $(,)?]
    ) => {
        $(#[$doc])*
        macro_rules! $mac {
            () => {
                concat!($first $(, ", ", $col)*)
            };
        }
        pub(crate) use $mac;

        /// The column names of the list, in order.
        pub(crate) const $names: &[&str] = &[$first $(, $col)*];
    };
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

/// Column `i` of a list declared with `columns!`.
fn at(names: &'static [&'static str], i: usize) -> At {
    At(i, names[i])
}

/// A recorded process: `pid` plus the additive `pid_start_ms`.
fn process_ref(row: &Row<'_>, pid: At, start: At) -> rusqlite::Result<Option<ProcessRef>> {
    let pid = u32_opt(row, pid)?;
    let start: Option<i64> = start.get(row)?;
    Ok(pid.map(|pid| ProcessRef { pid, start }))
}

/// The recorded process of a row that selects `pid, pid_start_ms` from
/// position `first` on.
pub(crate) fn process_at(row: &Row<'_>, first: usize) -> rusqlite::Result<Option<ProcessRef>> {
    process_ref(row, At(first, "pid"), At(first + 1, "pid_start_ms"))
}

columns!(
    /// The columns of `loops` that [`loop_row`] reads.
    loop_columns, LOOP_COLUMNS: [
        "id", "name", "description", "status", "schedule_json", "target_json", "next_run_at",
        "retry_scheduled_for", "catch_up", "catch_up_limit", "overlap", "max_attempts",
        "retry_delay_ms", "lease_ms", "expires_at", "created_at", "updated_at", "paused_reason",
        "labels", "expires_after_runs", "consecutive_successes", "pause_after_failures",
        "consecutive_failures", "backoff", "max_retry_delay_ms", "skip_exit_codes",
        "on_failure", "on_success", "hook_show_output",
    ]
);

/// A [`loop_columns!`] row → [`Loop`].
pub(crate) fn loop_row(row: &Row<'_>) -> rusqlite::Result<Loop> {
    let c = |i| at(LOOP_COLUMNS, i);
    let status: LoopStatus = parsed(row, c(3))?;
    // A reason is shown only while the loop is paused: the original resumes
    // a loop without clearing the column it does not know.
    let paused_reason = match status {
        LoopStatus::Paused => c(17).get(row)?,
        _ => None,
    };
    let policy = loop_policy(row)?;
    let policy_on = (
        policy.expires_after_runs.is_some(),
        policy.pause_after_failures.is_some(),
    );
    Ok(Loop {
        id: parsed(row, c(0))?,
        name: c(1).get(row)?,
        description: c(2).get(row)?,
        status,
        schedule: json(row, c(4))?,
        target: json(row, c(5))?,
        next_run_at: parsed_opt(row, c(6))?,
        retry_scheduled_for: parsed_opt(row, c(7))?,
        catch_up: parsed(row, c(8))?,
        catch_up_limit: u32_col(row, c(9))?,
        overlap: parsed(row, c(10))?,
        max_attempts: u32_col(row, c(11))?,
        retry_delay_ms: u64_col(row, c(12))?,
        lease_ms: u64_col(row, c(13))?,
        expires_at: parsed_opt(row, c(14))?,
        created_at: parsed(row, c(15))?,
        updated_at: parsed(row, c(16))?,
        paused_reason,
        policy,
        consecutive_successes: streak(row, c(20), policy_on.0)?,
        consecutive_failures: streak(row, c(22), policy_on.1)?,
        hooks: Hooks {
            on_failure: c(26).get(row)?,
            on_success: c(27).get(row)?,
            hook_show_output: c(28).get::<i64>(row)? != 0,
        },
    })
}

/// The policy columns of a [`loop_columns!`] row (issue 17).
fn loop_policy(row: &Row<'_>) -> rusqlite::Result<LoopPolicy> {
    let c = |i| at(LOOP_COLUMNS, i);
    Ok(LoopPolicy {
        labels: json_opt(row, c(18))?.unwrap_or_default(),
        expires_after_runs: u32_opt(row, c(19))?,
        pause_after_failures: u32_opt(row, c(21))?,
        backoff: parsed_opt(row, c(23))?.unwrap_or_default(),
        max_retry_delay_ms: c(24)
            .get::<Option<i64>>(row)?
            .map(|v| u64::try_from(v).map_err(|e| conversion(c(24), e)))
            .transpose()?,
        skip_exit_codes: json_opt(row, c(25))?.unwrap_or_default(),
    })
}

/// A run streak, read only while the policy that counts it is set, so the
/// loop's JSON shows it only then.
fn streak(row: &Row<'_>, col: At, on: bool) -> rusqlite::Result<Option<u32>> {
    if on {
        u32_col(row, col).map(Some)
    } else {
        Ok(None)
    }
}

columns!(
    /// The columns of `loop_runs` that [`run_row`], [`run_process`] and
    /// [`run_spawn_id`] read.
    run_columns, RUN_COLUMNS: [
        "id", "loop_id", "loop_name", "scheduled_for", "attempt", "status", "started_at",
        "finished_at", "claimed_by", "lease_expires_at", "pid", "exit_code", "duration_ms",
        "stdout", "stderr", "error", "created_at", "updated_at", "pid_start_ms", "spawn_id",
        "claim_token", "claimed_host",
    ]
);

/// A [`run_columns!`] row → [`LoopRun`].
pub(crate) fn run_row(row: &Row<'_>) -> rusqlite::Result<LoopRun> {
    let c = |i| at(RUN_COLUMNS, i);
    Ok(LoopRun {
        id: parsed(row, c(0))?,
        loop_id: parsed(row, c(1))?,
        loop_name: c(2).get(row)?,
        scheduled_for: parsed(row, c(3))?,
        attempt: u32_col(row, c(4))?,
        status: parsed(row, c(5))?,
        started_at: parsed_opt(row, c(6))?,
        finished_at: parsed_opt(row, c(7))?,
        claimed_by: c(8).get(row)?,
        claimed_host: c(21).get(row)?,
        lease_expires_at: parsed_opt(row, c(9))?,
        pid: u32_opt(row, c(10))?,
        exit_code: i32_opt(row, c(11))?,
        duration_ms: c(12).get(row)?,
        stdout: c(13).get(row)?,
        stderr: c(14).get(row)?,
        error: c(15).get(row)?,
        created_at: parsed(row, c(16))?,
        updated_at: parsed(row, c(17))?,
        claim_token: c(20).get(row)?,
    })
}

/// The recorded process of a [`run_columns!`] row.
pub(crate) fn run_process(row: &Row<'_>) -> rusqlite::Result<Option<ProcessRef>> {
    process_ref(row, at(RUN_COLUMNS, 10), at(RUN_COLUMNS, 18))
}

/// The spawn id of a [`run_columns!`] row.
pub(crate) fn run_spawn_id(row: &Row<'_>) -> rusqlite::Result<Option<String>> {
    at(RUN_COLUMNS, 19).get(row)
}

columns!(
    /// The columns of `workflow_specs` that [`workflow_row`] reads.
    workflow_columns, WORKFLOW_COLUMNS: [
        "id", "name", "description", "version", "status", "steps_json", "max_parallel",
        "created_at", "updated_at",
    ]
);

/// A [`workflow_columns!`] row → [`WorkflowSpec`].
pub(crate) fn workflow_row(row: &Row<'_>) -> rusqlite::Result<WorkflowSpec> {
    let c = |i| at(WORKFLOW_COLUMNS, i);
    Ok(WorkflowSpec {
        id: parsed(row, c(0))?,
        name: c(1).get(row)?,
        description: c(2).get(row)?,
        version: u32_col(row, c(3))?,
        status: parsed(row, c(4))?,
        steps: json(row, c(5))?,
        max_parallel: u32_opt(row, c(6))?,
        created_at: parsed(row, c(7))?,
        updated_at: parsed(row, c(8))?,
    })
}

columns!(
    /// The columns of `workflow_runs` that [`workflow_run_row`] reads.
    workflow_run_columns, WORKFLOW_RUN_COLUMNS: [
        "id", "workflow_id", "workflow_name", "loop_id", "loop_run_id", "scheduled_for",
        "idempotency_key", "status", "started_at", "finished_at", "duration_ms", "error",
        "created_at", "updated_at",
    ]
);

/// A [`workflow_run_columns!`] row → [`WorkflowRun`].
pub(crate) fn workflow_run_row(row: &Row<'_>) -> rusqlite::Result<WorkflowRun> {
    let c = |i| at(WORKFLOW_RUN_COLUMNS, i);
    Ok(WorkflowRun {
        id: parsed(row, c(0))?,
        workflow_id: parsed(row, c(1))?,
        workflow_name: c(2).get(row)?,
        loop_id: parsed_opt(row, c(3))?,
        loop_run_id: parsed_opt(row, c(4))?,
        scheduled_for: parsed_opt(row, c(5))?,
        idempotency_key: c(6).get(row)?,
        status: parsed(row, c(7))?,
        started_at: parsed_opt(row, c(8))?,
        finished_at: parsed_opt(row, c(9))?,
        duration_ms: c(10).get(row)?,
        error: c(11).get(row)?,
        created_at: parsed(row, c(12))?,
        updated_at: parsed(row, c(13))?,
    })
}

columns!(
    /// The columns of `workflow_step_runs` that [`step_run_row`] reads.
    step_run_columns, STEP_RUN_COLUMNS: [
        "id", "workflow_run_id", "step_id", "sequence", "status", "started_at", "finished_at",
        "exit_code", "pid", "duration_ms", "stdout", "stderr", "error", "account_profile",
        "account_tool", "created_at", "updated_at",
    ]
);

/// A [`step_run_columns!`] row → [`StepRun`].
pub(crate) fn step_run_row(row: &Row<'_>) -> rusqlite::Result<StepRun> {
    let c = |i| at(STEP_RUN_COLUMNS, i);
    Ok(StepRun {
        id: parsed(row, c(0))?,
        workflow_run_id: parsed(row, c(1))?,
        step_id: c(2).get(row)?,
        sequence: u32_col(row, c(3))?,
        status: parsed(row, c(4))?,
        started_at: parsed_opt(row, c(5))?,
        finished_at: parsed_opt(row, c(6))?,
        exit_code: i32_opt(row, c(7))?,
        pid: u32_opt(row, c(8))?,
        duration_ms: c(9).get(row)?,
        stdout: c(10).get(row)?,
        stderr: c(11).get(row)?,
        error: c(12).get(row)?,
        account_profile: c(13).get(row)?,
        account_tool: c(14).get(row)?,
        created_at: parsed(row, c(15))?,
        updated_at: parsed(row, c(16))?,
    })
}

columns!(
    /// The columns of `workflow_events` that [`event_row`] reads.
    event_columns, EVENT_COLUMNS: [
        "id", "workflow_run_id", "sequence", "event_type", "step_id", "payload_json",
        "created_at",
    ]
);

/// An [`event_columns!`] row → [`WorkflowEvent`].
pub(crate) fn event_row(row: &Row<'_>) -> rusqlite::Result<WorkflowEvent> {
    let c = |i| at(EVENT_COLUMNS, i);
    Ok(WorkflowEvent {
        id: parsed(row, c(0))?,
        workflow_run_id: parsed(row, c(1))?,
        sequence: u32_col(row, c(2))?,
        event_type: c(3).get(row)?,
        step_id: c(4).get(row)?,
        payload: json_opt(row, c(5))?,
        created_at: parsed(row, c(6))?,
    })
}

columns!(
    /// The columns of `daemon_lease` that [`lease_row`] reads.
    lease_columns, LEASE_COLUMNS: [
        "id", "pid", "hostname", "heartbeat_at", "expires_at", "created_at", "updated_at",
    ]
);

/// A [`lease_columns!`] row → [`DaemonLease`].
pub(crate) fn lease_row(row: &Row<'_>) -> rusqlite::Result<DaemonLease> {
    let c = |i| at(LEASE_COLUMNS, i);
    Ok(DaemonLease {
        id: parsed(row, c(0))?,
        pid: u32_col(row, c(1))?,
        hostname: c(2).get(row)?,
        heartbeat_at: parsed(row, c(3))?,
        expires_at: parsed(row, c(4))?,
        created_at: parsed(row, c(5))?,
        updated_at: parsed(row, c(6))?,
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
            // Every column list starts with the row's id.
            id: row.get::<_, String>(0).unwrap_or_default(),
            reason: e.to_string(),
        },
        other => StoreError::Db {
            context: "decoding a row",
            error: DbError::from(other),
        },
    })
}

/// Runs a statement returning at most one row of `table` (a `SELECT` or an
/// `… RETURNING` write).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_column_list_selects_from_the_migrated_schema() {
        let conn = crate::sqlite::open::open_memory().unwrap();
        for (table, sql, names) in [
            ("loops", loop_columns!(), LOOP_COLUMNS),
            ("loop_runs", run_columns!(), RUN_COLUMNS),
            ("workflow_specs", workflow_columns!(), WORKFLOW_COLUMNS),
            (
                "workflow_runs",
                workflow_run_columns!(),
                WORKFLOW_RUN_COLUMNS,
            ),
            ("workflow_step_runs", step_run_columns!(), STEP_RUN_COLUMNS),
            ("workflow_events", event_columns!(), EVENT_COLUMNS),
            ("daemon_lease", lease_columns!(), LEASE_COLUMNS),
        ] {
            let stmt = conn
                .prepare(&format!("SELECT {sql} FROM {table}"))
                .unwrap_or_else(|e| panic!("{table}: {e}"));
            assert_eq!(stmt.column_names().collect::<Vec<_>>(), names, "{table}");
        }
    }
}
