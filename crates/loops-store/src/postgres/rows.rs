//! Row decoding and value encoding for PostgreSQL: the same column lists
//! as SQLite (`crate::sqlite::rows`), read by position into the same core
//! records.
//!
//! Instants are `timestamptz` ([`Ts`], to the millisecond), JSON columns
//! are `json` ([`Json`]: the text as written, see migration V1), integers
//! are `bigint`. A value that does not
//! decode becomes [`StoreError::Corrupt`] naming the row, as on SQLite.

use std::error::Error as StdError;
use std::str::FromStr;

use bytes::{BufMut, BytesMut};
use loops_core::{
    DaemonLease, Hooks, Loop, LoopPolicy, LoopRun, LoopStatus, ProcessRef, StepRun, Timestamp,
    WorkflowEvent, WorkflowRun, WorkflowSpec,
};
use postgres::Row;
use postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

use crate::error::{Result, StoreError};
use crate::sqlite::rows::{
    EVENT_COLUMNS, LEASE_COLUMNS, LOOP_COLUMNS, RUN_COLUMNS, STEP_RUN_COLUMNS, WORKFLOW_COLUMNS,
    WORKFLOW_RUN_COLUMNS,
};

type BoxError = Box<dyn StdError + Sync + Send>;

/// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
const PG_EPOCH_US: i64 = 946_684_800_000_000;

/// An instant as a `timestamptz` parameter or column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ts(pub(crate) Timestamp);

impl ToSql for Ts {
    fn to_sql(&self, _ty: &Type, out: &mut BytesMut) -> std::result::Result<IsNull, BoxError> {
        out.put_i64(self.0.as_millis() * 1000 - PG_EPOCH_US);
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::TIMESTAMPTZ | Type::TIMESTAMP)
    }

    to_sql_checked!();
}

impl<'a> FromSql<'a> for Ts {
    fn from_sql(_ty: &Type, raw: &'a [u8]) -> std::result::Result<Ts, BoxError> {
        let bytes: [u8; 8] = raw.try_into().map_err(|_| "a timestamptz is 8 bytes")?;
        let us = i64::from_be_bytes(bytes);
        // ±infinity and anything past year 9999 do not fit an instant.
        let ms = us.checked_add(PG_EPOCH_US).map(|u| u.div_euclid(1000));
        ms.and_then(Timestamp::from_millis)
            .map(Ts)
            .ok_or_else(|| "an instant outside the years 0000-9999".into())
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::TIMESTAMPTZ | Type::TIMESTAMP)
    }
}

/// An instant parameter.
pub(crate) fn ts(t: Timestamp) -> Ts {
    Ts(t)
}

/// A nullable instant parameter.
pub(crate) fn ts_opt(t: Option<Timestamp>) -> Option<Ts> {
    t.map(Ts)
}

/// JSON text as a `jsonb` (or `json`) parameter or column, passed through
/// unparsed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Json<'a>(pub(crate) &'a str);

impl ToSql for Json<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> std::result::Result<IsNull, BoxError> {
        if *ty == Type::JSONB {
            out.put_u8(1);
        }
        out.put_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::JSONB | Type::JSON)
    }

    to_sql_checked!();
}

impl<'a> FromSql<'a> for Json<'a> {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> std::result::Result<Json<'a>, BoxError> {
        let text = if *ty == Type::JSONB {
            match raw.split_first() {
                Some((1, rest)) => rest,
                _ => return Err("unknown jsonb version".into()),
            }
        } else {
            raw
        };
        Ok(Json(std::str::from_utf8(text)?))
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::JSONB | Type::JSON)
    }
}

/// A value of one column that did not decode.
#[derive(Debug)]
pub(crate) struct ColumnError(String);

impl std::fmt::Display for ColumnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

type Col<T> = std::result::Result<T, ColumnError>;

fn bad(col: &str, e: impl std::fmt::Display) -> ColumnError {
    ColumnError(format!("column {col}: {e}"))
}

/// Column `i` of `names`: a typed value.
fn get<'a, T: FromSql<'a>>(row: &'a Row, names: &[&str], i: usize) -> Col<T> {
    row.try_get(i).map_err(|e| bad(names[i], e))
}

fn parsed<T>(row: &Row, names: &[&str], i: usize) -> Col<T>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    let s: &str = get(row, names, i)?;
    s.parse().map_err(|e| bad(names[i], e))
}

fn parsed_opt<T>(row: &Row, names: &[&str], i: usize) -> Col<Option<T>>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    let s: Option<&str> = get(row, names, i)?;
    s.map(|s| s.parse().map_err(|e| bad(names[i], e)))
        .transpose()
}

fn instant(row: &Row, names: &[&str], i: usize) -> Col<Timestamp> {
    get::<Ts>(row, names, i).map(|t| t.0)
}

fn instant_opt(row: &Row, names: &[&str], i: usize) -> Col<Option<Timestamp>> {
    get::<Option<Ts>>(row, names, i).map(|t| t.map(|t| t.0))
}

fn json<T: serde::de::DeserializeOwned>(row: &Row, names: &[&str], i: usize) -> Col<T> {
    let Json(s) = get(row, names, i)?;
    serde_json::from_str(s).map_err(|e| bad(names[i], e))
}

fn json_opt<T: serde::de::DeserializeOwned>(row: &Row, names: &[&str], i: usize) -> Col<Option<T>> {
    let s: Option<Json<'_>> = get(row, names, i)?;
    s.map(|Json(s)| serde_json::from_str(s).map_err(|e| bad(names[i], e)))
        .transpose()
}

fn int<T: TryFrom<i64>>(row: &Row, names: &[&str], i: usize) -> Col<T>
where
    T::Error: std::fmt::Display,
{
    let v: i64 = get(row, names, i)?;
    T::try_from(v).map_err(|e| bad(names[i], e))
}

fn int_opt<T: TryFrom<i64>>(row: &Row, names: &[&str], i: usize) -> Col<Option<T>>
where
    T::Error: std::fmt::Display,
{
    let v: Option<i64> = get(row, names, i)?;
    v.map(|v| T::try_from(v).map_err(|e| bad(names[i], e)))
        .transpose()
}

/// A recorded process: `pid` plus `pid_start_ms`, at positions `pid` and
/// `start` of `names`.
fn process_ref(row: &Row, names: &[&str], pid: usize, start: usize) -> Col<Option<ProcessRef>> {
    let pid: Option<u32> = int_opt(row, names, pid)?;
    let start: Option<i64> = get(row, names, start)?;
    Ok(pid.map(|pid| ProcessRef { pid, start }))
}

/// A [`loop_columns!`](crate::sqlite::rows::loop_columns) row → [`Loop`].
pub(crate) fn loop_row(row: &Row) -> Col<Loop> {
    let n = LOOP_COLUMNS;
    let status: LoopStatus = parsed(row, n, 3)?;
    let paused_reason = match status {
        LoopStatus::Paused => get(row, n, 17)?,
        _ => None,
    };
    let policy = LoopPolicy {
        labels: json_opt(row, n, 18)?.unwrap_or_default(),
        expires_after_runs: int_opt(row, n, 19)?,
        pause_after_failures: int_opt(row, n, 21)?,
        backoff: parsed_opt(row, n, 23)?.unwrap_or_default(),
        max_retry_delay_ms: int_opt(row, n, 24)?,
        skip_exit_codes: json_opt(row, n, 25)?.unwrap_or_default(),
    };
    // A streak is shown only while the policy that counts it is set.
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
        name: get(row, n, 1)?,
        description: get(row, n, 2)?,
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
            on_failure: get(row, n, 26)?,
            on_success: get(row, n, 27)?,
            hook_show_output: get::<i64>(row, n, 28)? != 0,
        },
    })
}

/// A [`run_columns!`](crate::sqlite::rows::run_columns) row → [`LoopRun`].
pub(crate) fn run_row(row: &Row) -> Col<LoopRun> {
    let n = RUN_COLUMNS;
    Ok(LoopRun {
        id: parsed(row, n, 0)?,
        loop_id: parsed(row, n, 1)?,
        loop_name: get(row, n, 2)?,
        scheduled_for: instant(row, n, 3)?,
        attempt: int(row, n, 4)?,
        status: parsed(row, n, 5)?,
        started_at: instant_opt(row, n, 6)?,
        finished_at: instant_opt(row, n, 7)?,
        claimed_by: get(row, n, 8)?,
        claimed_host: get(row, n, 21)?,
        lease_expires_at: instant_opt(row, n, 9)?,
        pid: int_opt(row, n, 10)?,
        exit_code: int_opt(row, n, 11)?,
        duration_ms: get(row, n, 12)?,
        stdout: get(row, n, 13)?,
        stderr: get(row, n, 14)?,
        error: get(row, n, 15)?,
        created_at: instant(row, n, 16)?,
        updated_at: instant(row, n, 17)?,
        claim_token: get(row, n, 20)?,
    })
}

/// The recorded process of a [`run_columns!`](crate::sqlite::rows::run_columns) row.
pub(crate) fn run_process(row: &Row) -> Col<Option<ProcessRef>> {
    process_ref(row, RUN_COLUMNS, 10, 18)
}

/// The spawn id of a [`run_columns!`](crate::sqlite::rows::run_columns) row.
pub(crate) fn run_spawn_id(row: &Row) -> Col<Option<String>> {
    get(row, RUN_COLUMNS, 19)
}

/// A run with its recorded process.
pub(crate) fn run_and_process(row: &Row) -> Col<(LoopRun, Option<ProcessRef>)> {
    Ok((run_row(row)?, run_process(row)?))
}

/// A [`workflow_columns!`](crate::sqlite::rows::workflow_columns) row → [`WorkflowSpec`].
pub(crate) fn workflow_row(row: &Row) -> Col<WorkflowSpec> {
    let n = WORKFLOW_COLUMNS;
    Ok(WorkflowSpec {
        id: parsed(row, n, 0)?,
        name: get(row, n, 1)?,
        description: get(row, n, 2)?,
        version: int(row, n, 3)?,
        status: parsed(row, n, 4)?,
        steps: json(row, n, 5)?,
        max_parallel: int_opt(row, n, 6)?,
        created_at: instant(row, n, 7)?,
        updated_at: instant(row, n, 8)?,
    })
}

/// A [`workflow_run_columns!`](crate::sqlite::rows::workflow_run_columns) row → [`WorkflowRun`].
pub(crate) fn workflow_run_row(row: &Row) -> Col<WorkflowRun> {
    let n = WORKFLOW_RUN_COLUMNS;
    Ok(WorkflowRun {
        id: parsed(row, n, 0)?,
        workflow_id: parsed(row, n, 1)?,
        workflow_name: get(row, n, 2)?,
        loop_id: parsed_opt(row, n, 3)?,
        loop_run_id: parsed_opt(row, n, 4)?,
        scheduled_for: instant_opt(row, n, 5)?,
        idempotency_key: get(row, n, 6)?,
        status: parsed(row, n, 7)?,
        started_at: instant_opt(row, n, 8)?,
        finished_at: instant_opt(row, n, 9)?,
        duration_ms: get(row, n, 10)?,
        error: get(row, n, 11)?,
        created_at: instant(row, n, 12)?,
        updated_at: instant(row, n, 13)?,
    })
}

/// A [`step_run_columns!`](crate::sqlite::rows::step_run_columns) row → [`StepRun`].
pub(crate) fn step_run_row(row: &Row) -> Col<StepRun> {
    let n = STEP_RUN_COLUMNS;
    Ok(StepRun {
        id: parsed(row, n, 0)?,
        workflow_run_id: parsed(row, n, 1)?,
        step_id: get(row, n, 2)?,
        sequence: int(row, n, 3)?,
        status: parsed(row, n, 4)?,
        started_at: instant_opt(row, n, 5)?,
        finished_at: instant_opt(row, n, 6)?,
        exit_code: int_opt(row, n, 7)?,
        pid: int_opt(row, n, 8)?,
        duration_ms: get(row, n, 9)?,
        stdout: get(row, n, 10)?,
        stderr: get(row, n, 11)?,
        error: get(row, n, 12)?,
        account_profile: get(row, n, 13)?,
        account_tool: get(row, n, 14)?,
        created_at: instant(row, n, 15)?,
        updated_at: instant(row, n, 16)?,
    })
}

/// An [`event_columns!`](crate::sqlite::rows::event_columns) row → [`WorkflowEvent`].
pub(crate) fn event_row(row: &Row) -> Col<WorkflowEvent> {
    let n = EVENT_COLUMNS;
    Ok(WorkflowEvent {
        id: parsed(row, n, 0)?,
        workflow_run_id: parsed(row, n, 1)?,
        sequence: int(row, n, 2)?,
        event_type: get(row, n, 3)?,
        step_id: get(row, n, 4)?,
        payload: json_opt(row, n, 5)?,
        created_at: instant(row, n, 6)?,
    })
}

/// A [`lease_columns!`](crate::sqlite::rows::lease_columns) row → [`DaemonLease`].
pub(crate) fn lease_row(row: &Row) -> Col<DaemonLease> {
    let n = LEASE_COLUMNS;
    Ok(DaemonLease {
        id: parsed(row, n, 0)?,
        pid: int(row, n, 1)?,
        hostname: get(row, n, 2)?,
        heartbeat_at: instant(row, n, 3)?,
        expires_at: instant(row, n, 4)?,
        created_at: instant(row, n, 5)?,
        updated_at: instant(row, n, 6)?,
    })
}

/// Decodes one row of `table`, reporting a value that does not decode as
/// [`StoreError::Corrupt`] naming the row's id (every column list starts
/// with it).
pub(crate) fn decode<T>(row: &Row, table: &'static str, map: fn(&Row) -> Col<T>) -> Result<T> {
    map(row).map_err(|e| StoreError::Corrupt {
        table,
        id: row.try_get::<_, String>(0).unwrap_or_default(),
        reason: e.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_round_trip_through_the_wire_format() {
        for s in [
            "2026-01-01T00:00:00.000Z",
            "1969-12-31T23:59:59.999Z",
            "2000-01-01T00:00:00.001Z",
            "9999-12-31T23:59:59.999Z",
        ] {
            let t: Timestamp = s.parse().unwrap();
            let mut buf = BytesMut::new();
            Ts(t).to_sql(&Type::TIMESTAMPTZ, &mut buf).unwrap();
            let back = Ts::from_sql(&Type::TIMESTAMPTZ, &buf).unwrap();
            assert_eq!(back.0, t, "{s}");
        }
    }

    #[test]
    fn sub_millisecond_instants_truncate_toward_the_past() {
        // 1969-12-31T23:59:59.9995Z in PostgreSQL's microseconds.
        let us: i64 = -500 - PG_EPOCH_US;
        let t = Ts::from_sql(&Type::TIMESTAMPTZ, &us.to_be_bytes())
            .unwrap()
            .0;
        assert_eq!(t.to_string(), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn jsonb_carries_a_version_byte() {
        let mut buf = BytesMut::new();
        Json("{\"a\":1}").to_sql(&Type::JSONB, &mut buf).unwrap();
        assert_eq!(&buf[..], b"\x01{\"a\":1}");
        assert_eq!(Json::from_sql(&Type::JSONB, &buf).unwrap().0, "{\"a\":1}");
    }
}
