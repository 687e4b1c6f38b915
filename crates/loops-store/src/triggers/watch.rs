//! `watch` triggers (issue 30, `docs/triggers.md` T8–T9), written once for
//! both backends: the loops the daemons watch for, and the decision
//! whether a burst of changes starts a run.

use loops_core::{Loop, LoopId, LoopStatus, RunStatus, Timestamp, TriggerKind, Watch};

use super::ops::{insert, new_trigger_id};
use crate::columns::{self, instant_opt, json_opt, loop_columns, parsed, text};
use crate::error::Result;
use crate::sql::{Db, Sql};
use crate::triggers::{LoopTrigger, WatchFired};

/// The loops that watch paths, read down `idx_loops_watch`; the caller
/// keeps the active ones. With `status = 'active'` in the query, SQLite
/// read every active loop down `idx_loops_status_next` and sorted them,
/// every 5 s in every daemon: about 30 ms at 100,000 loops, which made
/// the runs due meanwhile that late (`docs/perf.md`, "Retention batches").
pub(crate) const WATCH_LOOPS: &str = concat!(
    "SELECT ",
    loop_columns!(),
    " FROM loops WHERE watch_json IS NOT NULL ORDER BY id"
);

/// How many of a loop's newest runs the own-change check reads: enough
/// for the runs an `--overlap allow` loop has in flight at once, in the
/// common case, and a bounded read whatever its history.
const RECENT_RUNS: u32 = 4;

/// [`crate::Store::watch_loops`].
pub(super) fn watch_loops(db: &impl Db) -> Result<Vec<Loop>> {
    let mut loops = db.read(|c| {
        c.query_vec(
            WATCH_LOOPS,
            &[],
            ("loops", "listing the loops that watch paths"),
            columns::loop_row,
        )
    })?;
    loops.retain(|lp| lp.status == LoopStatus::Active);
    Ok(loops)
}

/// [`crate::Store::add_watch_trigger`]: in one transaction, the loop's
/// watch, its newest runs, and the trigger keyed by the newest run, so
/// that daemons watching the same files add one trigger between two runs.
pub(super) fn add_watch_trigger(
    db: &impl Db,
    loop_id: &LoopId,
    changed_at: Timestamp,
    now: Timestamp,
) -> Result<WatchFired> {
    db.write(|c| {
        let Some(watch) = active_watch(c, loop_id)? else {
            return Ok(WatchFired::NotWatching);
        };
        let recent = recent_runs(c, loop_id)?;
        let running = recent.iter().any(|(_, s, _)| *s == RunStatus::Running);
        let last_end = recent.iter().filter_map(|(_, _, end)| *end).max();
        if watch.is_own_change(running, last_end, changed_at) {
            return Ok(WatchFired::OwnRun);
        }
        let since = recent.first().map_or("-", |(id, _, _)| id.as_str());
        let trigger = LoopTrigger {
            id: new_trigger_id(),
            loop_id: *loop_id,
            kind: TriggerKind::Watch,
            source_run_id: None,
            source_loop_id: None,
            idempotency_key: Some(format!("watch:{since}")),
            payload: None,
            created_at: now,
            run_id: None,
            coalesced_at: None,
        };
        if !insert(c, &trigger)? {
            return Ok(WatchFired::Joined);
        }
        c.notify(loop_id.as_str())?;
        Ok(WatchFired::Added(trigger))
    })
}

/// The watch of loop `loop_id` while it is active.
fn active_watch(c: &mut dyn Sql, loop_id: &LoopId) -> Result<Option<Watch>> {
    let row = c.query_opt(
        "SELECT status, watch_json FROM loops WHERE id = ?1",
        &[loop_id.as_str().into()],
        ("loops", "reading a loop's watch"),
        |row| {
            let n = &["status", "watch_json"];
            let status: LoopStatus = parsed(row, n, 0)?;
            let watch: Option<Watch> = json_opt(row, n, 1)?;
            Ok((status, watch))
        },
    )?;
    Ok(row.and_then(|(status, watch)| watch.filter(|_| status == LoopStatus::Active)))
}

/// The newest [`RECENT_RUNS`] runs of loop `loop_id`, newest first: id,
/// status and end (`idx_runs_loop`).
fn recent_runs(
    c: &mut dyn Sql,
    loop_id: &LoopId,
) -> Result<Vec<(String, RunStatus, Option<Timestamp>)>> {
    c.query_vec(
        "SELECT id, status, finished_at FROM loop_runs WHERE loop_id = ?1
         ORDER BY created_at DESC, id DESC LIMIT ?2",
        &[loop_id.as_str().into(), RECENT_RUNS.into()],
        ("loop_runs", "reading a loop's newest runs"),
        |row| {
            let n = &["id", "status", "finished_at"];
            Ok((
                text(row, n, 0)?,
                parsed(row, n, 1)?,
                instant_opt(row, n, 2)?,
            ))
        },
    )
}
