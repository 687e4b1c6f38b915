//! The part of gc written once for both backends: the keep rules as SQL
//! conditions, and the walk that plans a batch ([`plan`]).
//!
//! A pass walks `loop_runs`, then `workflow_runs` workflow by workflow.
//! Within a group it starts at the `keep`-th newest run, or at the cutoff
//! when that is older, and reads the older runs newest first, a few at a
//! time. How a backend groups and reads the runs ([`Walk`]) and what a
//! position is stay with the backend:
//! - PostgreSQL walks loop runs loop by loop, a position being `(id,
//!   created_at in ms)`, since it has no row numbers;
//! - SQLite walks them as one group in the order they lie in the file,
//!   oldest first by `(created_at, rowid)`, with the keep rule checked run
//!   by run: a batch of runs that lie together rewrites fewer pages of the
//!   table and of its time-ordered indexes than one of runs of a few loops
//!   scattered over the file, a third fewer bytes on disk (issue 32).
//!
//! Counting and deleting a batch stay with the backend too:
//! SQLite names a batch's ids as a JSON array under its write lock,
//! PostgreSQL as an array it locks row by row.

use crate::error::Result;
use crate::gc::{GcBatch, GcCursor, GcLoopTally, GcPhase, GcPolicy};

/// A loop run `r` may go, position aside: it is finished (a status this
/// version does not know counts as unfinished), no workflow run that has
/// not finished points to it, and its loop is not waiting to retry its
/// slot (deleting the row would restart the slot's attempts). `$status`
/// is how the status column is named: SQLite's `+r.status` keeps its
/// planner off `idx_runs_status`, which would read every finished run
/// instead of the few the query names.
macro_rules! loop_run_may_go {
    ($status:literal) => {
        concat!(
            $status,
            " IN ('succeeded', 'failed', 'timed_out', 'abandoned', 'skipped')
             AND NOT EXISTS (SELECT 1 FROM workflow_runs w WHERE w.loop_run_id = r.id
                   AND w.status NOT IN ('succeeded', 'failed', 'timed_out', 'cancelled'))
             AND NOT EXISTS (SELECT 1 FROM loops l WHERE l.id = r.loop_id
                   AND l.retry_scheduled_for = r.scheduled_for)"
        )
    };
}
pub(crate) use loop_run_may_go;

/// A workflow run `w` is standalone: no loop run, or one that is gone.
macro_rules! standalone {
    () => {
        "(w.loop_run_id IS NULL
          OR NOT EXISTS (SELECT 1 FROM loop_runs r WHERE r.id = w.loop_run_id))"
    };
}
pub(crate) use standalone;

/// A workflow run `w` may go, position aside: finished and standalone.
/// `$status` as in [`loop_run_may_go!`].
macro_rules! workflow_run_may_go {
    ($status:literal) => {
        concat!(
            $status,
            " IN ('succeeded', 'failed', 'timed_out', 'cancelled') AND ",
            $crate::gc::ops::standalone!()
        )
    };
}
pub(crate) use workflow_run_may_go;

/// Where a walk is within a group, as the backend orders its runs.
pub(crate) type Position = (String, i64);

/// One run a walk looked at.
pub(crate) struct Candidate {
    /// Its position: the next read starts after it.
    pub(crate) at: Position,
    pub(crate) id: String,
    /// Its loop's name (loop runs).
    pub(crate) name: String,
    /// Its loop, when the walk does not go loop by loop (the group is
    /// then not a loop).
    pub(crate) group: Option<String>,
    /// Whether the keep rules let it go.
    pub(crate) may_go: bool,
}

/// How one backend reads the groups of a phase and their runs.
pub(crate) trait Walk {
    /// The first group of `phase` after `key` (the first of all when
    /// `None`).
    fn next_group(&mut self, phase: GcPhase, key: Option<&str>) -> Result<Option<String>>;
    /// Where the walk of group `key` starts: at its `keep`-th newest run,
    /// or at the cutoff when that is older; `None` when the group has no
    /// more than `keep` runs.
    fn start(&mut self, phase: GcPhase, key: &str, policy: &GcPolicy) -> Result<Option<Position>>;
    /// Up to `look.limit` runs of group `look.key` after position
    /// `look.after`, newest first.
    fn read(&mut self, look: &Look<'_>) -> Result<Vec<Candidate>>;
}

/// What [`Walk::read`] reads.
pub(crate) struct Look<'a> {
    pub(crate) phase: GcPhase,
    /// What may go.
    pub(crate) policy: &'a GcPolicy,
    /// The group.
    pub(crate) key: &'a str,
    /// The position the runs come after.
    pub(crate) after: &'a Position,
    /// At most this many runs.
    pub(crate) limit: usize,
}

/// How many groups and rows one planned batch looks at, at most, per run
/// it may delete: a pass over a history with little to delete still ends
/// each batch soon.
const LOOK_PER_RUN: u32 = 4;

/// [`GcOps::plan_gc_batch`](crate::backend::GcOps::plan_gc_batch): the
/// next batch of runs that may go, reading on from `cursor`, and moving
/// it on. A batch holds one phase's runs.
pub(crate) fn plan(
    walk: &mut dyn Walk,
    policy: &GcPolicy,
    cursor: &mut GcCursor,
) -> Result<GcBatch> {
    let mut batch = GcBatch::default();
    let size = policy.batch() as usize;
    let look = policy.batch().saturating_mul(LOOK_PER_RUN);
    let (mut groups, mut rows) = (0u32, 0u32);
    loop {
        let phase = cursor.phase;
        if phase == GcPhase::Done {
            return Ok(batch);
        }
        let planned = batch.loop_runs.len() + batch.workflow_runs.len();
        let Some(after) = cursor.after.clone() else {
            if planned >= size || groups >= look {
                return Ok(batch);
            }
            match walk.next_group(phase, cursor.key.as_deref())? {
                Some(key) => {
                    groups += 1;
                    cursor.after = walk.start(phase, &key, policy)?;
                    cursor.key = Some(key);
                }
                None => {
                    cursor.phase = match phase {
                        GcPhase::LoopRuns => GcPhase::WorkflowRuns,
                        _ => GcPhase::Done,
                    };
                    cursor.key = None;
                    if !batch.is_empty() {
                        return Ok(batch);
                    }
                }
            }
            continue;
        };
        let limit = (size - planned).min(look.saturating_sub(rows) as usize);
        if limit == 0 {
            return Ok(batch);
        }
        let key = cursor.key.clone().unwrap_or_default();
        let found = walk.read(&Look {
            phase,
            policy,
            key: &key,
            after: &after,
            limit,
        })?;
        rows += u32::try_from(found.len()).unwrap_or(u32::MAX);
        cursor.after = match found.last() {
            Some(last) if found.len() == limit => Some(last.at.clone()),
            _ => None,
        };
        for run in found.into_iter().filter(|c| c.may_go) {
            if phase == GcPhase::LoopRuns {
                let loop_id = run.group.unwrap_or_else(|| key.clone());
                match batch
                    .per_loop
                    .iter_mut()
                    .rev()
                    .find(|t| t.loop_id == loop_id)
                {
                    Some(t) => t.runs += 1,
                    None => batch.per_loop.push(GcLoopTally {
                        loop_id,
                        loop_name: run.name,
                        runs: 1,
                    }),
                }
                batch.loop_runs.push(run.id);
            } else {
                batch.workflow_runs.push(run.id);
            }
        }
    }
}
