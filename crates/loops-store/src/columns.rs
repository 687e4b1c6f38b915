//! The columns each table's statements read, described once for both
//! dialects: the column lists and the mappers from a row to a core record
//! (SPEC §4.2 columns, §1 JSON).
//!
//! Every query names the columns it reads: each table has a column list
//! (`loop_columns!()` and so on) that its statements splice into their
//! `SELECT` or `RETURNING`, and its mapper reads the row by position in
//! that same list. Reading by position is several times cheaper than by
//! name, and naming the columns means the table's own column order does
//! not matter: a database whose additive migrations ran in another order,
//! or that has columns this binary does not know, decodes the same. A
//! unit test on each backend checks that every list names columns of its
//! migrated schema. A value that does not decode (bad JSON, unknown
//! status) becomes a [`ColumnError`] naming the column.

use std::str::FromStr;

use loops_core::{
    DaemonLease, Hooks, Loop, LoopPolicy, LoopRun, LoopStatus, ProcessRef, RunFacts, StepRun,
    Timestamp, Usd, WorkflowEvent, WorkflowRun, WorkflowSpec,
};

use crate::sql::{Col, ColumnError, Fields};

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

/// A NOT NULL column read as NULL.
fn null(name: &str) -> ColumnError {
    ColumnError::new(name, "unexpected NULL")
}

/// A TEXT column that may not be NULL.
pub(crate) fn text(row: &dyn Fields, names: &[&str], i: usize) -> Col<String> {
    row.text(i, names[i])?
        .map(str::to_owned)
        .ok_or_else(|| null(names[i]))
}

/// A nullable TEXT column.
pub(crate) fn text_opt(row: &dyn Fields, names: &[&str], i: usize) -> Col<Option<String>> {
    Ok(row.text(i, names[i])?.map(str::to_owned))
}

/// A parsable TEXT column (ids, enums).
pub(crate) fn parsed<T>(row: &dyn Fields, names: &[&str], i: usize) -> Col<T>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    row.text(i, names[i])?
        .ok_or_else(|| null(names[i]))?
        .parse()
        .map_err(|e| ColumnError::new(names[i], e))
}

/// A nullable parsable TEXT column.
pub(crate) fn parsed_opt<T>(row: &dyn Fields, names: &[&str], i: usize) -> Col<Option<T>>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    row.text(i, names[i])?
        .map(|s| s.parse().map_err(|e| ColumnError::new(names[i], e)))
        .transpose()
}

/// An instant column that may not be NULL.
pub(crate) fn instant(row: &dyn Fields, names: &[&str], i: usize) -> Col<Timestamp> {
    row.ts(i, names[i])?.ok_or_else(|| null(names[i]))
}

/// A nullable instant column.
pub(crate) fn instant_opt(row: &dyn Fields, names: &[&str], i: usize) -> Col<Option<Timestamp>> {
    row.ts(i, names[i])
}

/// A JSON column that may not be NULL.
pub(crate) fn json<T: serde::de::DeserializeOwned>(
    row: &dyn Fields,
    names: &[&str],
    i: usize,
) -> Col<T> {
    let s = row.json(i, names[i])?.ok_or_else(|| null(names[i]))?;
    serde_json::from_str(s).map_err(|e| ColumnError::new(names[i], e))
}

/// A nullable JSON column.
pub(crate) fn json_opt<T: serde::de::DeserializeOwned>(
    row: &dyn Fields,
    names: &[&str],
    i: usize,
) -> Col<Option<T>> {
    row.json(i, names[i])?
        .map(|s| serde_json::from_str(s).map_err(|e| ColumnError::new(names[i], e)))
        .transpose()
}

/// An integer column that may not be NULL, in the range of `T`.
pub(crate) fn int<T: TryFrom<i64>>(row: &dyn Fields, names: &[&str], i: usize) -> Col<T>
where
    T::Error: std::fmt::Display,
{
    let v = row.int(i, names[i])?.ok_or_else(|| null(names[i]))?;
    T::try_from(v).map_err(|e| ColumnError::new(names[i], e))
}

/// A nullable integer column, in the range of `T`.
pub(crate) fn int_opt<T: TryFrom<i64>>(row: &dyn Fields, names: &[&str], i: usize) -> Col<Option<T>>
where
    T::Error: std::fmt::Display,
{
    int_opt_named(row, i, names[i])
}

/// [`int_opt`] at position `i`, reported as `name`.
fn int_opt_named<T: TryFrom<i64>>(row: &dyn Fields, i: usize, name: &str) -> Col<Option<T>>
where
    T::Error: std::fmt::Display,
{
    row.int(i, name)?
        .map(|v| T::try_from(v).map_err(|e| ColumnError::new(name, e)))
        .transpose()
}

/// A nullable amount of dollars stored in billionths (issue 27).
pub(crate) fn usd_opt(row: &dyn Fields, names: &[&str], i: usize) -> Col<Option<Usd>> {
    Ok(row.int(i, names[i])?.map(Usd::from_nanos))
}

/// A recorded process: `pid` plus the additive `pid_start_ms`, at
/// the positions given, reported under `names`.
fn process(
    row: &dyn Fields,
    (pid, start): (usize, usize),
    names: [&str; 2],
) -> Col<Option<ProcessRef>> {
    let pid: Option<u32> = int_opt_named(row, pid, names[0])?;
    let start = row.int(start, names[1])?;
    Ok(pid.map(|pid| ProcessRef { pid, start }))
}

/// The recorded process of a row that selects `pid, pid_start_ms` from
/// position `first` on.
pub(crate) fn process_at(row: &dyn Fields, first: usize) -> Col<Option<ProcessRef>> {
    process(row, (first, first + 1), ["pid", "pid_start_ms"])
}

columns!(
    /// The columns of `loops` that [`loop_row`] reads.
    loop_columns, LOOP_COLUMNS: [
        "id", "name", "description", "status", "schedule_json", "target_json", "next_run_at",
        "retry_scheduled_for", "catch_up", "catch_up_limit", "overlap", "max_attempts",
        "retry_delay_ms", "lease_ms", "expires_at", "created_at", "updated_at", "paused_reason",
        "labels", "expires_after_runs", "consecutive_successes", "pause_after_failures",
        "consecutive_failures", "backoff", "max_retry_delay_ms", "skip_exit_codes",
        "on_failure", "on_success", "hook_show_output", "max_cost_per_day_nanos", "runs_on",
        "pool", "after_json", "trigger_only", "watch_json",
        "scope",
    ]
);

/// A [`loop_columns!`] row → [`Loop`].
pub(crate) fn loop_row(row: &dyn Fields) -> Col<Loop> {
    let n = LOOP_COLUMNS;
    let status: LoopStatus = parsed(row, n, 3)?;
    // A reason is shown only while the loop is paused: the original resumes
    // a loop without clearing the column it does not know.
    let paused_reason = match status {
        LoopStatus::Paused => text_opt(row, n, 17)?,
        _ => None,
    };
    let policy = LoopPolicy {
        labels: json_opt(row, n, 18)?.unwrap_or_default(),
        expires_after_runs: int_opt(row, n, 19)?,
        pause_after_failures: int_opt(row, n, 21)?,
        backoff: parsed_opt(row, n, 23)?.unwrap_or_default(),
        max_retry_delay_ms: int_opt(row, n, 24)?,
        skip_exit_codes: json_opt(row, n, 25)?.unwrap_or_default(),
        max_cost_per_day: usd_opt(row, n, 29)?,
        runs_on: json_opt(row, n, 30)?.unwrap_or_default(),
        pool: text_opt(row, n, 31)?,
        after: json_opt(row, n, 32)?.unwrap_or_default(),
        trigger_only: int::<i64>(row, n, 33)? != 0,
        watch: json_opt(row, n, 34)?,
        scope: text_opt(row, n, 35)?,
    };
    // A streak is read only while the policy that counts it is set, so
    // the loop's JSON shows it only then.
    let consecutive_successes = match policy.expires_after_runs {
        Some(_) => Some(int(row, n, 20)?),
        None => None,
    };
    let consecutive_failures = match policy.pause_after_failures {
        Some(_) => Some(int(row, n, 22)?),
        None => None,
    };
    Ok(Loop {
        id: parsed(row, n, 0)?,
        name: text(row, n, 1)?,
        description: text_opt(row, n, 2)?,
        status,
        schedule: json(row, n, 4)?,
        target: json(row, n, 5)?,
        next_run_at: instant_opt(row, n, 6)?,
        retry_scheduled_for: instant_opt(row, n, 7)?,
        catch_up: parsed(row, n, 8)?,
        catch_up_limit: int(row, n, 9)?,
        overlap: parsed(row, n, 10)?,
        max_attempts: int(row, n, 11)?,
        retry_delay_ms: int(row, n, 12)?,
        lease_ms: int(row, n, 13)?,
        expires_at: instant_opt(row, n, 14)?,
        created_at: instant(row, n, 15)?,
        updated_at: instant(row, n, 16)?,
        paused_reason,
        policy,
        consecutive_successes,
        consecutive_failures,
        hooks: Hooks {
            on_failure: text_opt(row, n, 26)?,
            on_success: text_opt(row, n, 27)?,
            hook_show_output: int::<i64>(row, n, 28)? != 0,
        },
    })
}

columns!(
    /// The columns of `loop_runs` that [`run_row`], [`run_process`] and
    /// [`run_spawn_id`] read.
    run_columns, RUN_COLUMNS: [
        "id", "loop_id", "loop_name", "scheduled_for", "attempt", "status", "started_at",
        "finished_at", "claimed_by", "lease_expires_at", "pid", "exit_code", "duration_ms",
        "stdout", "stderr", "error", "created_at", "updated_at", "pid_start_ms", "spawn_id",
        "claim_token", "claimed_host", "failure_class", "failure_fingerprint", "session_id",
        "result", "cost_usd_nanos", "usage", "is_error", "worktree", "worktree_branch",
        "last_output_at", "cancel_requested_at", "cancelled_by", "cancel_grace_ms",
    ]
);

/// A [`run_columns!`] row → [`LoopRun`].
pub(crate) fn run_row(row: &dyn Fields) -> Col<LoopRun> {
    let n = RUN_COLUMNS;
    Ok(LoopRun {
        id: parsed(row, n, 0)?,
        loop_id: parsed(row, n, 1)?,
        loop_name: text(row, n, 2)?,
        scheduled_for: instant(row, n, 3)?,
        attempt: int(row, n, 4)?,
        status: parsed(row, n, 5)?,
        started_at: instant_opt(row, n, 6)?,
        finished_at: instant_opt(row, n, 7)?,
        claimed_by: text_opt(row, n, 8)?,
        claimed_host: text_opt(row, n, 21)?,
        lease_expires_at: instant_opt(row, n, 9)?,
        pid: int_opt(row, n, 10)?,
        exit_code: int_opt(row, n, 11)?,
        duration_ms: row.int(12, n[12])?,
        stdout: text_opt(row, n, 13)?,
        stderr: text_opt(row, n, 14)?,
        error: text_opt(row, n, 15)?,
        created_at: instant(row, n, 16)?,
        updated_at: instant(row, n, 17)?,
        claim_token: text_opt(row, n, 20)?,
        last_output_at: instant_opt(row, n, 31)?,
        cancel_requested_at: instant_opt(row, n, 32)?,
        cancelled_by: text_opt(row, n, 33)?,
        facts: RunFacts {
            failure_class: parsed_opt(row, n, 22)?,
            failure_fingerprint: text_opt(row, n, 23)?,
            session_id: text_opt(row, n, 24)?,
            result: text_opt(row, n, 25)?,
            cost_usd: usd_opt(row, n, 26)?,
            usage: json_opt(row, n, 27)?,
            is_error: int_opt::<i64>(row, n, 28)?.map(|v| v != 0),
            worktree: text_opt(row, n, 29)?,
            worktree_branch: text_opt(row, n, 30)?,
        },
    })
}

/// The recorded process of a [`run_columns!`] row.
pub(crate) fn run_process(row: &dyn Fields) -> Col<Option<ProcessRef>> {
    process(row, (10, 18), [RUN_COLUMNS[10], RUN_COLUMNS[18]])
}

/// The spawn id of a [`run_columns!`] row.
pub(crate) fn run_spawn_id(row: &dyn Fields) -> Col<Option<String>> {
    text_opt(row, RUN_COLUMNS, 19)
}

/// The grace between SIGTERM and SIGKILL a cancel request of a
/// [`run_columns!`] row asks for, in milliseconds.
pub(crate) fn run_cancel_grace_ms(row: &dyn Fields) -> Col<Option<u64>> {
    int_opt(row, RUN_COLUMNS, 34)
}

/// A [`run_columns!`] row with its recorded process.
pub(crate) fn run_and_process(row: &dyn Fields) -> Col<(LoopRun, Option<ProcessRef>)> {
    Ok((run_row(row)?, run_process(row)?))
}

columns!(
    /// The columns of `workflow_specs` that [`workflow_row`] reads.
    workflow_columns, WORKFLOW_COLUMNS: [
        "id", "name", "description", "version", "status", "steps_json", "max_parallel",
        "created_at", "updated_at",
    ]
);

/// A [`workflow_columns!`] row → [`WorkflowSpec`].
pub(crate) fn workflow_row(row: &dyn Fields) -> Col<WorkflowSpec> {
    let n = WORKFLOW_COLUMNS;
    Ok(WorkflowSpec {
        id: parsed(row, n, 0)?,
        name: text(row, n, 1)?,
        description: text_opt(row, n, 2)?,
        version: int(row, n, 3)?,
        status: parsed(row, n, 4)?,
        steps: json(row, n, 5)?,
        max_parallel: int_opt(row, n, 6)?,
        created_at: instant(row, n, 7)?,
        updated_at: instant(row, n, 8)?,
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
pub(crate) fn workflow_run_row(row: &dyn Fields) -> Col<WorkflowRun> {
    let n = WORKFLOW_RUN_COLUMNS;
    Ok(WorkflowRun {
        id: parsed(row, n, 0)?,
        workflow_id: parsed(row, n, 1)?,
        workflow_name: text(row, n, 2)?,
        loop_id: parsed_opt(row, n, 3)?,
        loop_run_id: parsed_opt(row, n, 4)?,
        scheduled_for: instant_opt(row, n, 5)?,
        idempotency_key: text_opt(row, n, 6)?,
        status: parsed(row, n, 7)?,
        started_at: instant_opt(row, n, 8)?,
        finished_at: instant_opt(row, n, 9)?,
        duration_ms: row.int(10, n[10])?,
        error: text_opt(row, n, 11)?,
        created_at: instant(row, n, 12)?,
        updated_at: instant(row, n, 13)?,
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
pub(crate) fn step_run_row(row: &dyn Fields) -> Col<StepRun> {
    let n = STEP_RUN_COLUMNS;
    Ok(StepRun {
        id: parsed(row, n, 0)?,
        workflow_run_id: parsed(row, n, 1)?,
        step_id: text(row, n, 2)?,
        sequence: int(row, n, 3)?,
        status: parsed(row, n, 4)?,
        started_at: instant_opt(row, n, 5)?,
        finished_at: instant_opt(row, n, 6)?,
        exit_code: int_opt(row, n, 7)?,
        pid: int_opt(row, n, 8)?,
        duration_ms: row.int(9, n[9])?,
        stdout: text_opt(row, n, 10)?,
        stderr: text_opt(row, n, 11)?,
        error: text_opt(row, n, 12)?,
        account_profile: text_opt(row, n, 13)?,
        account_tool: text_opt(row, n, 14)?,
        created_at: instant(row, n, 15)?,
        updated_at: instant(row, n, 16)?,
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
pub(crate) fn event_row(row: &dyn Fields) -> Col<WorkflowEvent> {
    let n = EVENT_COLUMNS;
    Ok(WorkflowEvent {
        id: parsed(row, n, 0)?,
        workflow_run_id: parsed(row, n, 1)?,
        sequence: int(row, n, 2)?,
        event_type: text(row, n, 3)?,
        step_id: text_opt(row, n, 4)?,
        payload: json_opt(row, n, 5)?,
        created_at: instant(row, n, 6)?,
    })
}

columns!(
    /// The columns of `daemon_lease` that [`lease_row`] reads.
    lease_columns, LEASE_COLUMNS: [
        "id", "pid", "hostname", "heartbeat_at", "expires_at", "created_at", "updated_at",
    ]
);

/// A [`lease_columns!`] row → [`DaemonLease`].
pub(crate) fn lease_row(row: &dyn Fields) -> Col<DaemonLease> {
    let n = LEASE_COLUMNS;
    Ok(DaemonLease {
        id: parsed(row, n, 0)?,
        pid: int(row, n, 1)?,
        hostname: text(row, n, 2)?,
        heartbeat_at: instant(row, n, 3)?,
        expires_at: instant(row, n, 4)?,
        created_at: instant(row, n, 5)?,
        updated_at: instant(row, n, 6)?,
    })
}
