//! The statements of the `loops` operations, written once with SQLite's
//! numbered placeholders (`?1`, rendered `$1` on PostgreSQL).
//!
//! Where the dialects differ the two texts stand side by side, and the
//! operation picks one ([`Dialect::pick`](crate::sql::Dialect::pick)):
//! PostgreSQL sorts NULLs first only when asked (`NULLS FIRST`) and breaks
//! ties by `id` (or creation order) where SQLite uses `rowid`; it locks the
//! loop rows an operation decides from (`FOR NO KEY UPDATE`, `FOR
//! UPDATE`), where SQLite's `BEGIN IMMEDIATE` already holds the write
//! lock; it reads JSON with `->>` and `@>` rather than `json_extract` and
//! `json_each`; and it needs a cast where it cannot infer a type.

use crate::columns::loop_columns;

/// SQL true when the JSON array of labels `$have` holds every label of the
/// JSON array `$want` (issue 17), on SQLite.
macro_rules! has_labels {
    ($have:literal, $want:literal) => {
        concat!(
            "NOT EXISTS (SELECT 1 FROM json_each(",
            $want,
            ") w WHERE NOT EXISTS (SELECT 1 FROM json_each(",
            $have,
            ") h WHERE h.value = w.value))"
        )
    };
}

/// One loop by id.
pub(super) const LOOP_BY_ID: &str =
    concat!("SELECT ", loop_columns!(), " FROM loops WHERE id = ?1");

/// One loop by id, its row locked until the transaction ends
/// (PostgreSQL; see [`lock_loop`](super::ops::lock_loop)).
pub(super) const LOCK_LOOP_PG: &str = concat!(
    "SELECT ",
    loop_columns!(),
    " FROM loops WHERE id = ?1 FOR NO KEY UPDATE"
);

/// The loops called `?1`, newest first.
pub(super) const LOOPS_NAMED: [&str; 2] = [
    concat!(
        "SELECT ",
        loop_columns!(),
        " FROM loops WHERE name = ?1 ORDER BY created_at DESC, rowid DESC"
    ),
    concat!(
        "SELECT ",
        loop_columns!(),
        " FROM loops WHERE name = ?1 ORDER BY created_at DESC, id DESC"
    ),
];

/// The loops whose target is the workflow `?1`, any status; every loop is
/// read: replacing a workflow is rare, and no index reaches into the
/// target's JSON. PostgreSQL locks them.
pub(super) const WORKFLOW_LOOPS: [&str; 2] = [
    concat!(
        "SELECT ",
        loop_columns!(),
        " FROM loops
         WHERE CASE WHEN json_valid(target_json)
           THEN json_extract(target_json, '$.type') = 'workflow'
            AND json_extract(target_json, '$.workflowId') = ?1 END
         ORDER BY rowid"
    ),
    concat!(
        "SELECT ",
        loop_columns!(),
        " FROM loops WHERE target_json ->> 'type' = 'workflow'
           AND target_json ->> 'workflowId' = ?1 ORDER BY id FOR NO KEY UPDATE"
    ),
];

/// A new loop, with no pending retry.
pub(super) const INSERT_LOOP: &str = "INSERT INTO loops (id, name, description, status,
   schedule_json, target_json, next_run_at, retry_scheduled_for, catch_up, catch_up_limit,
   overlap, max_attempts, retry_delay_ms, lease_ms, expires_at, created_at, updated_at, labels,
   expires_after_runs, pause_after_failures, backoff, max_retry_delay_ms, skip_exit_codes,
   on_failure, on_success, hook_show_output, max_cost_per_day_nanos, runs_on, pool,
   after_json, trigger_only, watch_json, scope)
 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15,
   ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31)";

/// An edit: every setting, and when `?14` is 1 the next run `?15` with
/// the pending retry dropped; guarded on the status the edit read.
pub(super) const UPDATE_LOOP: &str = concat!(
    "UPDATE loops SET name = ?3, description = ?4, schedule_json = ?5,
       target_json = ?6, catch_up = ?7, catch_up_limit = ?8, overlap = ?9,
       max_attempts = ?10, retry_delay_ms = ?11, lease_ms = ?12, expires_at = ?13,
       next_run_at = CASE WHEN ?14 = 1 THEN ?15 ELSE next_run_at END,
       retry_scheduled_for = CASE WHEN ?14 = 1 THEN NULL ELSE retry_scheduled_for END,
       updated_at = ?16, labels = ?17, expires_after_runs = ?18,
       pause_after_failures = ?19, backoff = ?20, max_retry_delay_ms = ?21,
       skip_exit_codes = ?22, on_failure = ?23, on_success = ?24,
       hook_show_output = ?25, max_cost_per_day_nanos = ?26, runs_on = ?27, pool = ?28,
       after_json = ?29, trigger_only = ?30, watch_json = ?31, scope = ?32
     WHERE id = ?1 AND status = ?2 RETURNING ",
    loop_columns!()
);

/// The loops with status `?1`, by next run, at most `?2`, after skipping
/// `?3`.
pub(super) const LIST_BY_STATUS: [&str; 2] = [
    concat!(
        "SELECT ",
        loop_columns!(),
        " FROM loops WHERE status = ?1 ORDER BY next_run_at, rowid LIMIT ?2 OFFSET ?3"
    ),
    concat!(
        "SELECT ",
        loop_columns!(),
        " FROM loops WHERE status = ?1 ORDER BY next_run_at NULLS FIRST, id LIMIT ?2 OFFSET ?3"
    ),
];

/// Every loop, by status then next run, at most `?1`, after skipping `?2`.
pub(super) const LIST_ALL: [&str; 2] = [
    concat!(
        "SELECT ",
        loop_columns!(),
        " FROM loops ORDER BY status, next_run_at, rowid LIMIT ?1 OFFSET ?2"
    ),
    concat!(
        "SELECT ",
        loop_columns!(),
        " FROM loops ORDER BY status, next_run_at NULLS FIRST, id LIMIT ?1 OFFSET ?2"
    ),
];

/// The loops (with status `?1`, or any) carrying every label of the JSON
/// array `?3`, at most `?2`, after skipping `?4`.
pub(super) const LIST_LABELED: [&str; 2] = [
    concat!(
        "SELECT ",
        loop_columns!(),
        " FROM loops WHERE (?1 IS NULL OR status = ?1) AND ",
        has_labels!("loops.labels", "?3"),
        " ORDER BY status, next_run_at, rowid LIMIT ?2 OFFSET ?4"
    ),
    concat!(
        "SELECT ",
        loop_columns!(),
        " FROM loops WHERE (?1::text IS NULL OR status = ?1)
           AND labels::jsonb @> ?3::text::jsonb
         ORDER BY status, next_run_at NULLS FIRST, id LIMIT ?2 OFFSET ?4"
    ),
];

/// Rows of table `?1` (with status `?2`, or all), from the counts V6's
/// triggers keep: a few rows read, however many loops and runs are stored.
pub(crate) const COUNT_STATUS: &str =
    "SELECT COALESCE(SUM(n), 0) FROM status_counts WHERE tbl = ?1 AND (?2 IS NULL OR status = ?2)";
/// [`COUNT_STATUS`] on PostgreSQL.
pub(crate) const COUNT_STATUS_PG: &str = "SELECT COALESCE(SUM(n), 0)::bigint FROM status_counts
     WHERE tbl = ?1 AND (?2::text IS NULL OR status = ?2)";

/// Every row counted by status, as V6's triggers keep it.
macro_rules! counted {
    () => {
        "SELECT 'loops' AS tbl, status, COUNT(*) AS n FROM loops GROUP BY status
         UNION ALL SELECT 'loop_runs', status, COUNT(*) FROM loop_runs GROUP BY status"
    };
    (pg) => {
        "SELECT 'loops'::text AS tbl, status, COUNT(*) AS n FROM loops GROUP BY status
         UNION ALL SELECT 'loop_runs'::text, status, COUNT(*) FROM loop_runs GROUP BY status"
    };
}

/// 1 when the kept counts differ from a real count (a zero kept count is
/// the same as none), 0 when they agree.
pub(super) const COUNTS_DIFFER: [&str; 2] = [
    concat!(
        "WITH actual AS (",
        counted!(),
        "), kept AS (SELECT tbl, status, n FROM status_counts WHERE n != 0)
         SELECT EXISTS (SELECT * FROM actual EXCEPT SELECT * FROM kept)
             OR EXISTS (SELECT * FROM kept EXCEPT SELECT * FROM actual)"
    ),
    concat!(
        "WITH actual AS (",
        counted!(pg),
        "), kept AS (SELECT tbl, status, SUM(n) FROM status_counts GROUP BY tbl, status
                     HAVING SUM(n) <> 0)
         SELECT CAST(CASE WHEN EXISTS (SELECT * FROM actual EXCEPT SELECT * FROM kept)
             OR EXISTS (SELECT * FROM kept EXCEPT SELECT * FROM actual) THEN 1 ELSE 0 END
           AS bigint)"
    ),
];

/// Holds the kept counts still while they are compared and rewritten
/// (PostgreSQL: writers update them in their own transactions).
pub(super) const LOCK_COUNTS_PG: &str = "LOCK TABLE status_counts IN EXCLUSIVE MODE";

/// Clears the kept counts, before [`RECOUNT`] writes them again.
pub(super) const CLEAR_COUNTS: &str = "DELETE FROM status_counts";

/// Writes the kept counts from a real count.
pub(super) const RECOUNT: [&str; 2] = [
    concat!("INSERT INTO status_counts (tbl, status, n) ", counted!()),
    concat!("INSERT INTO status_counts (tbl, status, n) ", counted!(pg)),
];

/// Whether loop `?1` has a run in flight: the running runs only
/// (`idx_runs_status_created`), not the loop's whole history.
pub(crate) const HAS_RUNNING_RUN: &str =
    "SELECT EXISTS (SELECT 1 FROM loop_runs WHERE loop_id = ?1 AND status = 'running')";
/// [`HAS_RUNNING_RUN`] on PostgreSQL, as a `bigint`.
pub(crate) const HAS_RUNNING_RUN_PG: &str = "SELECT COUNT(*) FROM (SELECT 1 FROM loop_runs
     WHERE loop_id = ?1 AND status = 'running' LIMIT 1) AS running";

/// The due active loops, earliest first: `idx_loops_status_next` from its
/// start, so it reads the due loops and stops.
pub(crate) const DUE_LOOPS: &str = concat!(
    "SELECT ",
    loop_columns!(),
    " FROM loops
     WHERE status = 'active' AND next_run_at IS NOT NULL AND next_run_at <= ?1
     ORDER BY next_run_at, rowid LIMIT ?2"
);
/// [`DUE_LOOPS`] on PostgreSQL: loops due at one instant come in creation
/// order, as SQLite's `rowid` gives them.
pub(crate) const DUE_LOOPS_PG: &str = concat!(
    "SELECT ",
    loop_columns!(),
    " FROM loops
     WHERE status = 'active' AND next_run_at IS NOT NULL AND next_run_at <= ?1
     ORDER BY next_run_at, created_at, id LIMIT ?2"
);

/// Expires the active loops whose expiry has passed, through
/// `idx_loops_status_expires` (V5): the tick runs it every time, so its
/// cost must be the loops it expires, not every active loop.
pub(crate) const EXPIRE_LOOPS: &str = concat!(
    "UPDATE loops SET status = 'expired', next_run_at = NULL, updated_at = ?1
     WHERE status = 'active' AND expires_at IS NOT NULL AND expires_at <= ?1
     RETURNING ",
    loop_columns!()
);
/// [`EXPIRE_LOOPS`] on PostgreSQL. Rows another transaction holds are
/// left for the next tick rather than waited on, and the rows are locked
/// in id order, so two daemons expiring at once neither wait on each other
/// nor deadlock.
pub(crate) const EXPIRE_LOOPS_PG: &str = concat!(
    "UPDATE loops SET status = 'expired', next_run_at = NULL, updated_at = ?1
     WHERE id IN (SELECT id FROM loops
                  WHERE status = 'active' AND expires_at IS NOT NULL AND expires_at <= ?1
                  ORDER BY id FOR NO KEY UPDATE SKIP LOCKED)
       AND status = 'active' AND expires_at <= ?1
     RETURNING ",
    loop_columns!()
);

/// Pauses loop `?1` if it is active, recording reason `?2` (or none).
pub(super) const PAUSE: &str = concat!(
    "UPDATE loops SET status = 'paused', paused_reason = ?2, updated_at = ?3
     WHERE id = ?1 AND status = 'active' RETURNING ",
    loop_columns!()
);

/// Resumes loop `?1`, guarded on the status `?2` it was read with.
pub(super) const RESUME: &str = concat!(
    "UPDATE loops SET status = 'active', next_run_at = ?3, retry_scheduled_for = ?4,
       paused_reason = NULL, consecutive_failures = 0,
       consecutive_successes = CASE WHEN status = 'expired' THEN 0
         ELSE consecutive_successes END,
       updated_at = ?5
     WHERE id = ?1 AND status = ?2 RETURNING ",
    loop_columns!()
);

/// Stops loop `?1` unless it is stopped.
pub(super) const STOP: &str = concat!(
    "UPDATE loops SET status = 'stopped', next_run_at = NULL, retry_scheduled_for = NULL,
       updated_at = ?2
     WHERE id = ?1 AND status <> 'stopped' RETURNING ",
    loop_columns!()
);

/// The run in slot `?2` of loop `?1` (a `once` loop's only slot).
pub(super) const SLOT_RUN: &str =
    "SELECT status, attempt, error FROM loop_runs WHERE loop_id = ?1 AND scheduled_for = ?2";

/// Whether loop `?1` exists; PostgreSQL locks the row about to be deleted.
pub(super) const LOCK_FOR_DELETE: [&str; 2] = [
    "SELECT id FROM loops WHERE id = ?1",
    "SELECT id FROM loops WHERE id = ?1 FOR UPDATE",
];

/// Unlinks the workflow runs of loop `?1`, keeping their run links.
pub(super) const UNLINK_LOOP: &str = "UPDATE workflow_runs SET loop_id = NULL WHERE loop_id = ?1";

/// Unlinks the workflow runs of loop `?1` and of its runs.
pub(super) const UNLINK_LOOP_AND_RUNS: &str =
    "UPDATE workflow_runs SET loop_id = NULL, loop_run_id = NULL
     WHERE loop_id = ?1 OR loop_run_id IN (SELECT id FROM loop_runs WHERE loop_id = ?1)";

/// Deletes the runs of loop `?1`.
pub(super) const DELETE_RUNS: &str = "DELETE FROM loop_runs WHERE loop_id = ?1";

/// Deletes loop `?1`.
pub(super) const DELETE_LOOP: &str = "DELETE FROM loops WHERE id = ?1";
