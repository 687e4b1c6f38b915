//! The SQLite side of [`crate::gc`].
//!
//! A pass walks `loop_runs` in one group, oldest first, up
//! `idx_runs_created` to the cutoff ([`AGED_CANDIDATES`]): runs are
//! appended as they are claimed, so that is about the order of their rows
//! in the file, and a batch deletes runs that share pages of the table
//! and of its indexes by time (`created_at`, `scheduled_for`, status). A
//! run stays unless it is older than the `keep`-th newest of its loop,
//! read on `idx_runs_loop` (at most `keep` entries).
//!
//! It then walks `workflow_runs` workflow by workflow on
//! `idx_workflow_runs_workflow_created`: within a workflow it reads the
//! `keep`-th newest run once (an `OFFSET` of at most `keep` index
//! entries), then walks the older runs newest first from there, or from
//! the cutoff when that is older, down the same index.
//!
//! A position is `(created_at, rowid)`, the index's own order, so no
//! query sorts and each batch reads only the entries it looks at (the
//! `plans` tests).
//!
//! The rules that are not positions (finished, no unfinished workflow
//! run, no retry pending) are written once for both backends, in
//! `loop_run_may_go!` and `workflow_run_may_go!` of [`crate::gc::ops`],
//! and evaluated twice: when a batch is planned, and again under the
//! write lock when it is deleted. The walk itself is [`plan`].

use rusqlite::{Connection, OptionalExtension, params};

use crate::backend::GcOps;
use crate::error::{Result, StoreError};
use crate::gc::ops::{
    Candidate, Look, Position, Walk, loop_run_may_go, plan, standalone, workflow_run_may_go,
};
use crate::gc::{GcBatch, GcCounts, GcCursor, GcPhase, GcPolicy, SpaceUsage};
use crate::sqlite::Sqlite;
use crate::sqlite::rows::ts;

/// The workflow runs of the loop runs in the JSON array `?1`.
macro_rules! of_loop_runs {
    () => {
        "(SELECT w.id FROM workflow_runs w WHERE w.loop_run_id IN (SELECT value FROM json_each(?1)))"
    };
}

/// The ids in the JSON array `?1`.
macro_rules! listed {
    () => {
        "(SELECT value FROM json_each(?1))"
    };
}

/// Up to `?4` loop runs created before `?1`, after position `(?2, ?3)`,
/// oldest first, each with whether it may go: when it is older than the
/// `?5`-th newest run of its loop (counting from 0: an `OFFSET` of at
/// most `keep` entries of `idx_runs_loop`), a test that turns away the
/// kept runs before the rules are read, and by the rules.
pub(super) const AGED_CANDIDATES: &str = concat!(
    "SELECT r.rowid, r.created_at, r.id, r.loop_name, r.loop_id, coalesce(
       (r.created_at, r.rowid) < (SELECT n.created_at, n.rowid FROM loop_runs n
          WHERE n.loop_id = r.loop_id ORDER BY n.created_at DESC, n.rowid DESC
          LIMIT 1 OFFSET ?5) AND ",
    loop_run_may_go!("+r.status"),
    ", 0)
     FROM loop_runs r
     WHERE r.created_at >= ?2 AND r.created_at < ?1 AND (r.created_at > ?2 OR r.rowid > ?3)
     ORDER BY r.created_at, r.rowid LIMIT ?4"
);

pub(super) const FIRST_WORKFLOW: &str =
    "SELECT workflow_id FROM workflow_runs ORDER BY workflow_id LIMIT 1";
pub(super) const NEXT_WORKFLOW: &str =
    "SELECT workflow_id FROM workflow_runs WHERE workflow_id > ?1 ORDER BY workflow_id LIMIT 1";
/// The `?2`-th newest standalone run of workflow `?1`. The index keeps
/// equal instants in rowid order, so a workflow's walk goes `created_at`
/// down and rowid up.
pub(super) const WORKFLOW_BOUNDARY: &str = concat!(
    "SELECT w.created_at, w.rowid FROM workflow_runs w WHERE w.workflow_id = ?1 AND ",
    standalone!(),
    " ORDER BY w.created_at DESC, w.rowid ASC LIMIT 1 OFFSET ?2"
);
/// Runs of workflow `?1` after position `(?2, ?3)`, newest first, in the
/// columns of [`AGED_CANDIDATES`] (no loop: NULL).
pub(super) const WORKFLOW_CANDIDATES: &str = concat!(
    "SELECT w.rowid, w.created_at, w.id, w.workflow_name, NULL, ",
    workflow_run_may_go!("+w.status"),
    " FROM workflow_runs w
     WHERE w.workflow_id = ?1 AND w.created_at <= ?2 AND (w.created_at < ?2 OR w.rowid > ?3)
     ORDER BY w.created_at DESC, w.rowid ASC LIMIT ?4"
);

/// The loop runs of `?1` that may still go.
pub(super) const CONFIRM_LOOP_RUNS: &str = concat!(
    "SELECT r.id FROM loop_runs r WHERE r.id IN ",
    listed!(),
    " AND ",
    loop_run_may_go!("+r.status")
);
/// The standalone workflow runs of `?1` that may still go.
pub(super) const CONFIRM_WORKFLOW_RUNS: &str = concat!(
    "SELECT w.id FROM workflow_runs w WHERE w.id IN ",
    listed!(),
    " AND ",
    workflow_run_may_go!("+w.status")
);

/// The statements that count, or delete, the rows of a batch: children
/// first, so no step is ever left without its run.
pub(super) struct Rows {
    pub(super) events: [&'static str; 2],
    pub(super) steps: [&'static str; 2],
    pub(super) workflow_runs: [&'static str; 2],
    pub(super) loop_runs: Option<[&'static str; 2]>,
}

impl Rows {
    /// Every statement, counts and deletes.
    #[cfg(test)]
    pub(super) fn all(&self) -> Vec<&'static str> {
        let mut all = [self.events, self.steps, self.workflow_runs].concat();
        all.extend(self.loop_runs.into_iter().flatten());
        all
    }
}

/// A batch of loop runs (`?1`) with their workflow runs.
pub(super) const LOOP_RUN_ROWS: Rows = Rows {
    events: [
        concat!(
            "SELECT COUNT(*) FROM workflow_events WHERE workflow_run_id IN ",
            of_loop_runs!()
        ),
        concat!(
            "DELETE FROM workflow_events WHERE workflow_run_id IN ",
            of_loop_runs!()
        ),
    ],
    steps: [
        concat!(
            "SELECT COUNT(*) FROM workflow_step_runs WHERE workflow_run_id IN ",
            of_loop_runs!()
        ),
        concat!(
            "DELETE FROM workflow_step_runs WHERE workflow_run_id IN ",
            of_loop_runs!()
        ),
    ],
    workflow_runs: [
        concat!(
            "SELECT COUNT(*) FROM workflow_runs WHERE loop_run_id IN ",
            listed!()
        ),
        concat!("DELETE FROM workflow_runs WHERE loop_run_id IN ", listed!()),
    ],
    loop_runs: Some([
        concat!("SELECT COUNT(*) FROM loop_runs WHERE id IN ", listed!()),
        concat!("DELETE FROM loop_runs WHERE id IN ", listed!()),
    ]),
};

/// A batch of standalone workflow runs (`?1`).
pub(super) const WORKFLOW_RUN_ROWS: Rows = Rows {
    events: [
        concat!(
            "SELECT COUNT(*) FROM workflow_events WHERE workflow_run_id IN ",
            listed!()
        ),
        concat!(
            "DELETE FROM workflow_events WHERE workflow_run_id IN ",
            listed!()
        ),
    ],
    steps: [
        concat!(
            "SELECT COUNT(*) FROM workflow_step_runs WHERE workflow_run_id IN ",
            listed!()
        ),
        concat!(
            "DELETE FROM workflow_step_runs WHERE workflow_run_id IN ",
            listed!()
        ),
    ],
    workflow_runs: [
        concat!("SELECT COUNT(*) FROM workflow_runs WHERE id IN ", listed!()),
        concat!("DELETE FROM workflow_runs WHERE id IN ", listed!()),
    ],
    loop_runs: None,
};

fn json_ids(ids: &[String]) -> Result<String> {
    serde_json::to_string(ids).map_err(|e| StoreError::Encode(format!("gc batch ids: {e}")))
}

impl GcOps for Sqlite {
    fn plan_gc_batch(&self, policy: &GcPolicy, cursor: &mut GcCursor) -> Result<GcBatch> {
        plan(&mut Walker(self), policy, cursor)
    }

    fn count_gc_batch(&self, batch: &GcBatch) -> Result<GcCounts> {
        let mut counts = GcCounts::default();
        let count = |sql: &str, ids: &str| -> Result<u64> {
            self.conn
                .prepare_cached(sql)
                .and_then(|mut s| s.query_row([ids], |r| r.get::<_, i64>(0)))
                .map(|n| u64::try_from(n).unwrap_or(0))
                .map_err(StoreError::db("counting what gc would delete"))
        };
        for (ids, rows) in [
            (&batch.loop_runs, &LOOP_RUN_ROWS),
            (&batch.workflow_runs, &WORKFLOW_RUN_ROWS),
        ] {
            if ids.is_empty() {
                continue;
            }
            let ids = json_ids(ids)?;
            counts.add(GcCounts {
                loop_runs: rows.loop_runs.map_or(Ok(0), |[c, _]| count(c, &ids))?,
                workflow_runs: count(rows.workflow_runs[0], &ids)?,
                step_runs: count(rows.steps[0], &ids)?,
                events: count(rows.events[0], &ids)?,
                ..GcCounts::default()
            });
        }
        Ok(counts)
    }

    fn apply_gc_batch(&self, batch: &GcBatch) -> Result<GcCounts> {
        if batch.is_empty() {
            return Ok(GcCounts::default());
        }
        // The commit leaves the WAL as it is; the caller checkpoints it
        // after the lock is released (`checkpoint_wal`).
        self.conn
            .pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(StoreError::db("setting the WAL checkpoint"))?;
        self.write_tx(|conn| {
            let mut counts = GcCounts::default();
            for (ids, confirm, rows) in [
                (&batch.loop_runs, CONFIRM_LOOP_RUNS, &LOOP_RUN_ROWS),
                (
                    &batch.workflow_runs,
                    CONFIRM_WORKFLOW_RUNS,
                    &WORKFLOW_RUN_ROWS,
                ),
            ] {
                if ids.is_empty() {
                    continue;
                }
                let still = confirmed(conn, confirm, &json_ids(ids)?)?;
                if still.is_empty() {
                    continue;
                }
                let ids = json_ids(&still)?;
                let delete = |sql: &str| -> Result<u64> {
                    conn.prepare_cached(sql)
                        .and_then(|mut s| s.execute([&ids]))
                        .map(|n| n as u64)
                        .map_err(StoreError::db("deleting old runs"))
                };
                if rows.loop_runs.is_some() {
                    // The triggers that started them (issue 30) go too.
                    delete(concat!(
                        "DELETE FROM loop_triggers WHERE run_id IN ",
                        listed!()
                    ))?;
                }
                counts.add(GcCounts {
                    events: delete(rows.events[1])?,
                    step_runs: delete(rows.steps[1])?,
                    workflow_runs: delete(rows.workflow_runs[1])?,
                    loop_runs: rows.loop_runs.map_or(Ok(0), |[_, d]| delete(d))?,
                    ..GcCounts::default()
                });
            }
            Ok(counts)
        })
    }

    fn checkpoint_wal(&self) -> Result<()> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
            .map_err(StoreError::db("checkpointing the WAL"))
    }

    /// The frames past the last checkpoint, from the wal-index header of
    /// `<db>-shm` (sqlite.org/walformat.html): `mxFrame` at byte 16 of the
    /// header, `nBackfill` at byte 96, both in this machine's byte order;
    /// times the page size. `None` for an in-memory database, a file that
    /// is not there or too short, or a header whose two copies differ
    /// (a writer is changing it: the next batch reads it again). The file
    /// is opened once and never closed before the connection (`shm`).
    fn wal_backlog(&self) -> Option<u64> {
        use std::os::unix::fs::{FileExt, OpenOptionsExt};
        let path = self.conn.path().filter(|p| !p.is_empty())?;
        if self.shm.get().is_none() {
            // Never through a link, nor waiting on a FIFO put in its place.
            let file = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(format!("{path}-shm"))
                .ok()?;
            if !file.metadata().is_ok_and(|m| m.is_file()) {
                return None;
            }
            // Only this thread sets it: the connection is not shared.
            let _ = self.shm.set(file);
        }
        let mut shm = [0u8; 104];
        self.shm.get()?.read_exact_at(&mut shm, 0).ok()?;
        if shm[..48] != shm[48..96] {
            return None;
        }
        let word = |at: usize| u32::from_ne_bytes([shm[at], shm[at + 1], shm[at + 2], shm[at + 3]]);
        let page = match u16::from_ne_bytes([shm[14], shm[15]]) {
            1 => 65_536,
            n => u64::from(n),
        };
        Some(u64::from(word(16).saturating_sub(word(96))) * page)
    }

    fn space_usage(&self) -> Result<SpaceUsage> {
        let pragma = |name: &str| -> Result<u64> {
            self.conn
                .pragma_query_value(None, name, |r| r.get::<_, i64>(0))
                .map(|n| u64::try_from(n).unwrap_or(0))
                .map_err(StoreError::db("reading the database's page counts"))
        };
        Ok(SpaceUsage {
            page_size: pragma("page_size")?,
            page_count: pragma("page_count")?,
            freelist_count: pragma("freelist_count")?,
        })
    }
}

impl Sqlite {
    /// [`Store::vacuum`](crate::Store::vacuum) on SQLite: `VACUUM`, which
    /// in WAL mode writes the rewritten database into the WAL, then a
    /// `TRUNCATE` checkpoint, which copies it into the database file, cuts
    /// the file to its new size and empties the WAL.
    pub(crate) fn vacuum(&self) -> Result<()> {
        self.conn
            .execute_batch("VACUUM")
            .map_err(StoreError::db("rewriting the database (VACUUM)"))?;
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(StoreError::db("checkpointing the WAL after VACUUM"))
    }
}

/// The ids `confirm` returns for the JSON array `ids`.
fn confirmed(conn: &Connection, confirm: &str, ids: &str) -> Result<Vec<String>> {
    let context = "checking old runs again before deleting them";
    let mut stmt = conn
        .prepare_cached(confirm)
        .map_err(StoreError::db(context))?;
    let rows = stmt
        .query_map([ids], |r| r.get::<_, String>(0))
        .map_err(StoreError::db(context))?;
    rows.collect::<rusqlite::Result<Vec<_>>>()
        .map_err(StoreError::db(context))
}

/// A walk on SQLite's connection.
struct Walker<'a>(&'a Sqlite);

/// The one group loop runs are walked in: the whole table.
const ALL_LOOP_RUNS: &str = "";

impl Walk for Walker<'_> {
    fn next_group(&mut self, phase: GcPhase, key: Option<&str>) -> Result<Option<String>> {
        if phase == GcPhase::LoopRuns {
            return Ok(key.is_none().then(|| ALL_LOOP_RUNS.to_owned()));
        }
        let context = "finding the next workflow to collect";
        let mut stmt = self
            .0
            .conn
            .prepare_cached(if key.is_some() {
                NEXT_WORKFLOW
            } else {
                FIRST_WORKFLOW
            })
            .map_err(StoreError::db(context))?;
        let found = match key {
            Some(key) => stmt.query_row([key], |r| r.get(0)),
            None => stmt.query_row([], |r| r.get(0)),
        };
        found.optional().map_err(StoreError::db(context))
    }

    fn start(&mut self, phase: GcPhase, key: &str, policy: &GcPolicy) -> Result<Option<Position>> {
        if phase == GcPhase::LoopRuns {
            // Before the oldest run: every instant sorts after "".
            return Ok(Some((String::new(), i64::MIN)));
        }
        let boundary: Option<(String, i64)> = self
            .0
            .conn
            .prepare_cached(WORKFLOW_BOUNDARY)
            .and_then(|mut s| {
                s.query_row(params![key, policy.kept() - 1], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()
            })
            .map_err(StoreError::db("finding the newest runs to keep"))?;
        let Some((created, rowid)) = boundary else {
            return Ok(None);
        };
        let cutoff = ts(policy.older_than);
        // Every run created at the cutoff or later stays: a position at the
        // cutoff with a rowid past every row starts the walk below it.
        Ok(Some(if cutoff <= created {
            // The index sorts equal instants by rowid up.
            (cutoff, i64::MAX)
        } else {
            (created, rowid)
        }))
    }

    fn read(&mut self, look: &Look<'_>) -> Result<Vec<Candidate>> {
        let Look {
            phase,
            policy,
            key,
            after,
            limit,
        } = *look;
        let context = "reading old runs";
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let loops = phase == GcPhase::LoopRuns;
        let mut stmt = self
            .0
            .conn
            .prepare_cached(if loops {
                AGED_CANDIDATES
            } else {
                WORKFLOW_CANDIDATES
            })
            .map_err(StoreError::db(context))?;
        let candidate = |r: &rusqlite::Row<'_>| {
            Ok(Candidate {
                at: (r.get(1)?, r.get(0)?),
                id: r.get(2)?,
                name: r.get(3)?,
                group: r.get(4)?,
                may_go: r.get(5)?,
            })
        };
        let rows = if loops {
            let cutoff = ts(policy.older_than);
            stmt.query_map(
                params![cutoff, after.0, after.1, limit, policy.kept() - 1],
                candidate,
            )
        } else {
            stmt.query_map(params![key, after.0, after.1, limit], candidate)
        }
        .map_err(StoreError::db(context))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(StoreError::db(context))
    }
}
