//! [`PoolOps`] written once for both backends.

use loops_core::{Step, Timestamp};

use crate::backend::PoolOps;
use crate::columns::{instant, int, json, text};
use crate::error::Result;
use crate::pools::{PoolInfo, PoolRemoval};
use crate::sql::{Col, Db, Dialect, Fields, Sql};

/// The columns [`pool_row`] reads, in order.
const POOL_COLUMNS: &[&str] = &[
    "name",
    "max_running",
    "members",
    "running",
    "created_at",
    "updated_at",
];

/// The places of pool `p.name` taken now (issue 30, Q3): its running loop
/// runs (`idx_runs_pool_running`) and its running steps
/// (`idx_step_runs_pool_running`). A step counts only while its workflow
/// run is running: whatever ended the run (a cancel, a recovery, a lease
/// recovery's cascade, a failed finish) frees its steps' places even if
/// it left a step row running.
macro_rules! pool_places {
    () => {
        "(SELECT COUNT(*) FROM loop_runs r WHERE r.pool = p.name AND r.status = 'running')
         + (SELECT COUNT(*) FROM workflow_step_runs s
              JOIN workflow_runs w ON w.id = s.workflow_run_id
            WHERE s.pool = p.name AND s.status = 'running' AND w.status = 'running')"
    };
}

/// Every pool with its members and running runs and steps, by name.
const LIST: &str = concat!(
    "SELECT p.name, p.max_running,
       (SELECT COUNT(*) FROM loops l WHERE l.pool = p.name), ",
    pool_places!(),
    ", p.created_at, p.updated_at
     FROM pools p ORDER BY p.name"
);

/// A pool's limit and the places taken in it.
const PLACES: &str = concat!(
    "SELECT p.max_running, ",
    pool_places!(),
    " FROM pools p WHERE p.name = ?1"
);

/// Locks a pool's row on PostgreSQL, in a statement of its own: the count
/// that follows then reads what the previous holder committed (a count in
/// the locking statement would read the snapshot taken before the wait).
const LOCK_POOL: &str = "SELECT name FROM pools WHERE name = ?1 FOR UPDATE";

/// Whether [`pool_full`] must lock the pool's row itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PoolLock {
    /// The transaction holds it already (the loop claim's `claim_tx`).
    Held,
    /// Lock it now (`FOR UPDATE` on PostgreSQL; SQLite's write lock).
    Take,
}

/// The limit of pool `pool` when its running loop runs and steps reach it,
/// inside the caller's write transaction: the one count both the loop
/// claim and the step start decide by (issue 30, Q2, Q3). A pool that does
/// not exist limits nothing.
pub(crate) fn pool_full(c: &mut dyn Sql, pool: &str, lock: PoolLock) -> Result<Option<u32>> {
    if lock == PoolLock::Take && c.dialect() == Dialect::Postgres {
        c.query_vec(
            LOCK_POOL,
            &[pool.into()],
            ("pools", "locking a pool"),
            |row| text(row, &["name"], 0),
        )?;
    }
    let found = c.query_opt(
        PLACES,
        &[pool.into()],
        ("pools", "counting a pool's running runs"),
        |row| {
            let n = &["max_running", "running"];
            Ok((int::<u32>(row, n, 0)?, int::<i64>(row, n, 1)?))
        },
    )?;
    Ok(found.and_then(|(max_running, running)| {
        (running >= i64::from(max_running)).then_some(max_running)
    }))
}

/// Creates a pool or changes its limit.
const UPSERT: &str = "INSERT INTO pools (name, max_running, created_at, updated_at)
     VALUES (?1, ?2, ?3, ?3)
     ON CONFLICT (name) DO UPDATE SET max_running = excluded.max_running,
       updated_at = excluded.updated_at";

/// The workflows whose steps may name a pool: a text match narrows them,
/// and [`steps_in_pool`] reads each one's steps to be sure.
const MAYBE_POOLED: (&str, &str) = (
    "SELECT name, steps_json FROM workflow_specs
     WHERE steps_json LIKE '%\"pool\"%' ORDER BY name",
    "SELECT name, steps_json FROM workflow_specs
     WHERE steps_json::text LIKE '%\"pool\"%' ORDER BY name",
);

/// `workflow/step` for each workflow step whose `pool` is `pool` (issue
/// 30, Q1), ten at most, in workflow then step order.
fn steps_in_pool(c: &mut dyn Sql, pool: &str) -> Result<Vec<String>> {
    let workflows = c.query_vec(
        c.dialect().pick(MAYBE_POOLED.0, MAYBE_POOLED.1),
        &[],
        ("workflow_specs", "listing the workflows that use a pool"),
        |row| {
            let n = &["name", "steps_json"];
            Ok((text(row, n, 0)?, json::<Vec<Step>>(row, n, 1)?))
        },
    )?;
    Ok(workflows
        .iter()
        .flat_map(|(name, steps)| {
            steps
                .iter()
                .filter(|s| s.pool.as_deref() == Some(pool))
                .map(move |s| format!("{name}/{}", s.id))
        })
        .take(10)
        .collect())
}

fn pool_row(row: &dyn Fields) -> Col<PoolInfo> {
    let n = POOL_COLUMNS;
    Ok(PoolInfo {
        name: text(row, n, 0)?,
        max_running: int(row, n, 1)?,
        members: int(row, n, 2)?,
        running: int(row, n, 3)?,
        created_at: instant(row, n, 4)?,
        updated_at: instant(row, n, 5)?,
    })
}

impl<D: Db> PoolOps for D {
    fn set_pool(&self, name: &str, max_running: u32, now: Timestamp) -> Result<PoolInfo> {
        self.write(|c| {
            c.execute(
                UPSERT,
                &[name.into(), max_running.into(), now.into()],
                "setting a pool",
            )?;
            // A raised limit may let waiting members start.
            c.notify("pool")?;
            let all = c.query_vec(LIST, &[], ("pools", "listing the pools"), pool_row)?;
            Ok(all
                .into_iter()
                .find(|p| p.name == name)
                .expect("the pool was just written"))
        })
    }

    fn list_pools(&self) -> Result<Vec<PoolInfo>> {
        self.read(|c| c.query_vec(LIST, &[], ("pools", "listing the pools"), pool_row))
    }

    fn remove_pool(&self, name: &str) -> Result<PoolRemoval> {
        self.write(|c| {
            let members = c.query_vec(
                "SELECT name FROM loops WHERE pool = ?1 ORDER BY name LIMIT 10",
                &[name.into()],
                ("loops", "listing a pool's members"),
                |row| text(row, &["name"], 0),
            )?;
            if !members.is_empty() {
                return Ok(PoolRemoval::InUse(members));
            }
            let steps = steps_in_pool(c, name)?;
            if !steps.is_empty() {
                return Ok(PoolRemoval::InUseBySteps(steps));
            }
            let removed = c.execute(
                "DELETE FROM pools WHERE name = ?1",
                &[name.into()],
                "removing a pool",
            )?;
            Ok(if removed == 0 {
                PoolRemoval::Missing
            } else {
                PoolRemoval::Removed
            })
        })
    }
}
