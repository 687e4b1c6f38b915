//! The PostgreSQL side of [`crate::gc`]: the same walk ([`plan`]),
//! batches and keep rules ([`crate::gc::ops`]) as SQLite, with two
//! differences.
//!
//! - PostgreSQL has no rowid, so a position in a walk is `(created_at,
//!   id)`, newest first in both phases, and a [`GcCursor`] holds it as
//!   `(id, created_at in ms)`.
//! - Every host's daemon may run gc at once, so a batch is deleted under
//!   row locks rather than a database-wide write lock: each run of the
//!   batch that may still go is locked `FOR UPDATE SKIP LOCKED` (a run
//!   another gc holds is left to it), the workflow runs of the locked loop
//!   runs next, then the rows go children first. A run another gc deleted
//!   first is no longer found, so the counts are what this call deleted.
//!   The locks are taken in id order and before any child row, the order
//!   of every other writer (loop run, then its workflow runs, then their
//!   steps and events), so gc never waits on them in a cycle.

use postgres::Row;

use crate::backend::GcOps;
use crate::error::{Result, StoreError};
use crate::gc::ops::{
    Candidate, Look, Position, Walk, loop_run_may_go, plan, standalone, workflow_run_may_go,
};
use crate::gc::{GcBatch, GcCounts, GcCursor, GcPhase, GcPolicy, SpaceUsage};
use crate::postgres::rows::{Ts, ts};
use crate::postgres::{Conn, Postgres, count};

pub(super) const FIRST_LOOP: &str = "SELECT loop_id FROM loop_runs ORDER BY loop_id LIMIT 1";
pub(super) const NEXT_LOOP: &str =
    "SELECT loop_id FROM loop_runs WHERE loop_id > $1 ORDER BY loop_id LIMIT 1";
/// The `$2`-th newest run of loop `$1`, counting from 0.
pub(super) const LOOP_BOUNDARY: &str = "SELECT created_at, id FROM loop_runs WHERE loop_id = $1
     ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET $2";
/// Runs of loop `$1` older than position `($2, $3)`, newest first.
pub(super) const LOOP_CANDIDATES: &str = concat!(
    "SELECT r.id, r.created_at, r.loop_name, ",
    loop_run_may_go!("r.status"),
    " FROM loop_runs r
     WHERE r.loop_id = $1 AND r.created_at <= $2 AND (r.created_at < $2 OR r.id < $3)
     ORDER BY r.created_at DESC, r.id DESC LIMIT $4"
);

pub(super) const FIRST_WORKFLOW: &str =
    "SELECT workflow_id FROM workflow_runs ORDER BY workflow_id LIMIT 1";
pub(super) const NEXT_WORKFLOW: &str =
    "SELECT workflow_id FROM workflow_runs WHERE workflow_id > $1 ORDER BY workflow_id LIMIT 1";
/// The `$2`-th newest standalone run of workflow `$1`.
pub(super) const WORKFLOW_BOUNDARY: &str = concat!(
    "SELECT w.created_at, w.id FROM workflow_runs w WHERE w.workflow_id = $1 AND ",
    standalone!(),
    " ORDER BY w.created_at DESC, w.id DESC LIMIT 1 OFFSET $2"
);
/// Runs of workflow `$1` older than position `($2, $3)`, newest first.
pub(super) const WORKFLOW_CANDIDATES: &str = concat!(
    "SELECT w.id, w.created_at, w.workflow_name, ",
    workflow_run_may_go!("w.status"),
    " FROM workflow_runs w
     WHERE w.workflow_id = $1 AND w.created_at <= $2 AND (w.created_at < $2 OR w.id < $3)
     ORDER BY w.created_at DESC, w.id DESC LIMIT $4"
);

/// The loop runs of `$1` that may still go, locked; those another
/// transaction holds are skipped.
pub(super) const LOCK_LOOP_RUNS: &str = concat!(
    "SELECT r.id FROM loop_runs r WHERE r.id = ANY($1) AND ",
    loop_run_may_go!("r.status"),
    " ORDER BY r.id FOR UPDATE OF r SKIP LOCKED"
);
/// The workflow runs of the loop runs `$1`, locked.
pub(super) const LOCK_THEIR_WORKFLOW_RUNS: &str =
    "SELECT w.id FROM workflow_runs w WHERE w.loop_run_id = ANY($1) ORDER BY w.id FOR UPDATE";
/// The standalone workflow runs of `$1` that may still go, locked; those
/// another transaction holds are skipped.
pub(super) const LOCK_WORKFLOW_RUNS: &str = concat!(
    "SELECT w.id FROM workflow_runs w WHERE w.id = ANY($1) AND ",
    workflow_run_may_go!("w.status"),
    " ORDER BY w.id FOR UPDATE OF w SKIP LOCKED"
);

/// The workflow runs of the loop runs in `$1`.
macro_rules! of_loop_runs {
    () => {
        "(SELECT w.id FROM workflow_runs w WHERE w.loop_run_id = ANY($1))"
    };
}

/// What a dry run counts for a batch of loop runs (`$1`) with their
/// workflow runs: events, steps, workflow runs, loop runs.
pub(super) const COUNT_LOOP_RUN_ROWS: [&str; 4] = [
    concat!(
        "SELECT COUNT(*) FROM workflow_events WHERE workflow_run_id IN ",
        of_loop_runs!()
    ),
    concat!(
        "SELECT COUNT(*) FROM workflow_step_runs WHERE workflow_run_id IN ",
        of_loop_runs!()
    ),
    "SELECT COUNT(*) FROM workflow_runs WHERE loop_run_id = ANY($1)",
    "SELECT COUNT(*) FROM loop_runs WHERE id = ANY($1)",
];

/// What a dry run counts for a batch of standalone workflow runs (`$1`):
/// events, steps, workflow runs.
pub(super) const COUNT_WORKFLOW_RUN_ROWS: [&str; 3] = [
    "SELECT COUNT(*) FROM workflow_events WHERE workflow_run_id = ANY($1)",
    "SELECT COUNT(*) FROM workflow_step_runs WHERE workflow_run_id = ANY($1)",
    "SELECT COUNT(*) FROM workflow_runs WHERE id = ANY($1)",
];

/// The deletes of locked workflow runs (`$1`), children first.
pub(super) const DELETE_WORKFLOW_RUN_ROWS: [&str; 3] = [
    "DELETE FROM workflow_events WHERE workflow_run_id = ANY($1)",
    "DELETE FROM workflow_step_runs WHERE workflow_run_id = ANY($1)",
    "DELETE FROM workflow_runs WHERE id = ANY($1)",
];

pub(super) const DELETE_LOOP_RUNS: &str = "DELETE FROM loop_runs WHERE id = ANY($1)";

/// What one phase walks: its statements.
struct Statements {
    first: &'static str,
    next: &'static str,
    boundary: &'static str,
    candidates: &'static str,
}

const LOOP_WALK: Statements = Statements {
    first: FIRST_LOOP,
    next: NEXT_LOOP,
    boundary: LOOP_BOUNDARY,
    candidates: LOOP_CANDIDATES,
};

const WORKFLOW_WALK: Statements = Statements {
    first: FIRST_WORKFLOW,
    next: NEXT_WORKFLOW,
    boundary: WORKFLOW_BOUNDARY,
    candidates: WORKFLOW_CANDIDATES,
};

/// The statements of `phase`'s walk.
fn statements(phase: GcPhase) -> &'static Statements {
    if phase == GcPhase::WorkflowRuns {
        &WORKFLOW_WALK
    } else {
        &LOOP_WALK
    }
}

impl GcOps for Postgres {
    fn plan_gc_batch(&self, policy: &GcPolicy, cursor: &mut GcCursor) -> Result<GcBatch> {
        self.with(|c| plan(&mut Walker(c), policy, cursor))
    }

    fn count_gc_batch(&self, batch: &GcBatch) -> Result<GcCounts> {
        let context = "counting what gc would delete";
        self.with(|c| {
            let mut counts = GcCounts::default();
            let mut count_of = |sql: &str, ids: &[String]| -> Result<u64> {
                let row = c.query_one(sql, &[&ids], context)?;
                count(&row, 0)
            };
            if !batch.loop_runs.is_empty() {
                let ids = &batch.loop_runs;
                let [events, steps, workflow_runs, loop_runs] = COUNT_LOOP_RUN_ROWS;
                counts.add(GcCounts {
                    events: count_of(events, ids)?,
                    step_runs: count_of(steps, ids)?,
                    workflow_runs: count_of(workflow_runs, ids)?,
                    loop_runs: count_of(loop_runs, ids)?,
                    ..GcCounts::default()
                });
            }
            if !batch.workflow_runs.is_empty() {
                let ids = &batch.workflow_runs;
                let [events, steps, workflow_runs] = COUNT_WORKFLOW_RUN_ROWS;
                counts.add(GcCounts {
                    events: count_of(events, ids)?,
                    step_runs: count_of(steps, ids)?,
                    workflow_runs: count_of(workflow_runs, ids)?,
                    loop_runs: 0,
                    ..GcCounts::default()
                });
            }
            Ok(counts)
        })
    }

    fn apply_gc_batch(&self, batch: &GcBatch) -> Result<GcCounts> {
        if batch.is_empty() {
            return Ok(GcCounts::default());
        }
        self.write_tx(|c| {
            let mut counts = GcCounts::default();
            if !batch.loop_runs.is_empty() {
                let loop_runs = locked(c, LOCK_LOOP_RUNS, &batch.loop_runs)?;
                if !loop_runs.is_empty() {
                    let workflow_runs = locked(c, LOCK_THEIR_WORKFLOW_RUNS, &loop_runs)?;
                    counts.add(delete_workflow_runs(c, &workflow_runs)?);
                    let ids = loop_runs.as_slice();
                    // The triggers that started them (issue 30) go too.
                    c.execute(
                        "DELETE FROM loop_triggers WHERE run_id = ANY($1)",
                        &[&ids],
                        DELETING,
                    )?;
                    counts.loop_runs += c.execute(DELETE_LOOP_RUNS, &[&ids], DELETING)?;
                }
            }
            if !batch.workflow_runs.is_empty() {
                let workflow_runs = locked(c, LOCK_WORKFLOW_RUNS, &batch.workflow_runs)?;
                counts.add(delete_workflow_runs(c, &workflow_runs)?);
            }
            Ok(counts)
        })
    }

    /// Nothing to do: PostgreSQL has no WAL to copy back between batches.
    fn checkpoint_wal(&self) -> Result<()> {
        Ok(())
    }

    /// None: the server's own WAL is not ours to copy back.
    fn wal_backlog(&self) -> Option<u64> {
        None
    }

    /// The database's size on disk (`pg_database_size`) in pages of the
    /// server's block size; PostgreSQL reuses the space deleted rows leave
    /// after autovacuum without counting it anywhere cheap to read, so no
    /// page is reported free and no `VACUUM` is suggested.
    fn space_usage(&self) -> Result<SpaceUsage> {
        let context = "reading the database's size";
        self.with(|c| {
            let row = c.query_one(
                "SELECT current_setting('block_size')::bigint,
                        pg_database_size(current_database())",
                &[],
                context,
            )?;
            let page_size = count(&row, 0)?.max(1);
            let bytes = count(&row, 1)?;
            Ok(SpaceUsage {
                page_size,
                page_count: bytes.div_ceil(page_size),
                freelist_count: 0,
            })
        })
    }
}

const DELETING: &str = "deleting old runs";

/// The ids `lock` returns (and locks) for `ids`.
fn locked(c: &mut Conn<'_>, lock: &str, ids: &[String]) -> Result<Vec<String>> {
    let context = "checking old runs again before deleting them";
    let found = c.query(lock, &[&ids], context)?;
    found
        .iter()
        .map(|r| r.try_get(0).map_err(StoreError::db(context)))
        .collect()
}

/// Deletes the locked workflow runs `ids` with their steps and events.
fn delete_workflow_runs(c: &mut Conn<'_>, ids: &[String]) -> Result<GcCounts> {
    if ids.is_empty() {
        return Ok(GcCounts::default());
    }
    let [events, steps, workflow_runs] = DELETE_WORKFLOW_RUN_ROWS;
    Ok(GcCounts {
        events: c.execute(events, &[&ids], DELETING)?,
        step_runs: c.execute(steps, &[&ids], DELETING)?,
        workflow_runs: c.execute(workflow_runs, &[&ids], DELETING)?,
        loop_runs: 0,
        ..GcCounts::default()
    })
}

/// A walk on one PostgreSQL connection.
struct Walker<'a, 'c>(&'a mut Conn<'c>);

impl Walk for Walker<'_, '_> {
    fn next_group(&mut self, phase: GcPhase, key: Option<&str>) -> Result<Option<String>> {
        let (c, walk) = (&mut *self.0, statements(phase));
        let context = "finding the next loop or workflow to collect";
        let found = match key {
            Some(key) => c.query(walk.next, &[&key], context)?,
            None => c.query(walk.first, &[], context)?,
        };
        found
            .first()
            .map(|r| r.try_get(0).map_err(StoreError::db(context)))
            .transpose()
    }

    /// A position here is `(id, created_at ms)`.
    fn start(&mut self, phase: GcPhase, key: &str, policy: &GcPolicy) -> Result<Option<Position>> {
        let context = "finding the newest runs to keep";
        let offset = i64::from(policy.kept() - 1);
        let found = self
            .0
            .query(statements(phase).boundary, &[&key, &offset], context)?;
        let Some(row) = found.first() else {
            return Ok(None);
        };
        let created: Ts = row.try_get(0).map_err(StoreError::db(context))?;
        let id: String = row.try_get(1).map_err(StoreError::db(context))?;
        // Every run created at the cutoff or later stays: a position at the
        // cutoff with an id below every id (the empty one) starts the walk
        // below it.
        Ok(Some(if policy.older_than <= created.0 {
            (String::new(), policy.older_than.as_millis())
        } else {
            (id, created.0.as_millis())
        }))
    }

    fn read(&mut self, look: &Look<'_>) -> Result<Vec<Candidate>> {
        let (after_id, after_ms) = look.after;
        let after = loops_core::Timestamp::from_millis(*after_ms).ok_or_else(|| {
            StoreError::Encode(format!("gc cursor: {after_ms} ms is not an instant"))
        })?;
        let limit = i64::try_from(look.limit).unwrap_or(i64::MAX);
        let context = "reading old runs";
        let found = self.0.query(
            statements(look.phase).candidates,
            &[&look.key, &ts(after), after_id, &limit],
            context,
        )?;
        found.iter().map(|r| candidate(r, context)).collect()
    }
}

fn candidate(row: &Row, context: &'static str) -> Result<Candidate> {
    let created: Ts = row.try_get(1).map_err(StoreError::db(context))?;
    let id: String = row.try_get(0).map_err(StoreError::db(context))?;
    Ok(Candidate {
        at: (id.clone(), created.0.as_millis()),
        id,
        name: row.try_get(2).map_err(StoreError::db(context))?,
        may_go: row.try_get(3).map_err(StoreError::db(context))?,
        group: None,
    })
}
