//! The SQLite side of [`crate::complete`]: one read-only connection, one
//! statement, interrupted once its budget is spent.
//!
//! A value starts with the prefix when it sorts in `[prefix, prefix ||
//! U+10FFFF)`: SQLite compares text byte by byte, so the range finds ids
//! through their primary keys.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, params};

use crate::complete::{Candidate, CompletionKind, finish};

/// Loop names, then ids, most recently changed first.
const LOOP_NAMES: &str = "SELECT name, status || ' loop ' || id FROM loops
     WHERE name >= ?1 AND name < ?2 ORDER BY updated_at DESC LIMIT ?3";
const LOOP_IDS: &str = "SELECT id, name || ' (' || status || ')' FROM loops
     WHERE id >= ?1 AND id < ?2 ORDER BY updated_at DESC LIMIT ?3";

/// Run ids, newest first, with the current name of their loop.
const LOOP_RUNS: &str = "SELECT r.id, r.status || ' run of ' || COALESCE(l.name, r.loop_name)
     FROM loop_runs r LEFT JOIN loops l ON l.id = r.loop_id
     WHERE r.id >= ?1 AND r.id < ?2 ORDER BY r.created_at DESC LIMIT ?3";

/// The names of active workflows (the only ones names find), then every
/// workflow's id.
const WORKFLOW_NAMES: &str = "SELECT name, 'workflow ' || id FROM workflow_specs
     WHERE status = 'active' AND name >= ?1 AND name < ?2 ORDER BY updated_at DESC LIMIT ?3";
const WORKFLOW_IDS: &str = "SELECT id, name || ' (' || status || ')' FROM workflow_specs
     WHERE id >= ?1 AND id < ?2 ORDER BY updated_at DESC LIMIT ?3";

/// Workflow run ids, newest first.
const WORKFLOW_RUNS: &str = "SELECT id, status || ' run of ' || workflow_name FROM workflow_runs
     WHERE id >= ?1 AND id < ?2 ORDER BY created_at DESC LIMIT ?3";

/// Every label some loop has, with how many loops have it. A row whose
/// labels are not JSON counts as having none.
const LABELS: &str = "SELECT j.value,
       COUNT(*) || CASE COUNT(*) WHEN 1 THEN ' loop' ELSE ' loops' END
     FROM loops, json_each(CASE WHEN json_valid(loops.labels) THEN loops.labels ELSE '[]' END) j
     WHERE j.value >= ?1 AND j.value < ?2 GROUP BY j.value ORDER BY j.value LIMIT ?3";

/// Pool names, with their limits.
const POOLS: &str = "SELECT name, 'pool of max ' || max_running FROM pools
     WHERE name >= ?1 AND name < ?2 ORDER BY name LIMIT ?3";

/// The candidates of `kind` in the database at `db` (see
/// [`crate::complete_sqlite`]).
pub(crate) fn candidates(
    db: &Path,
    kind: CompletionKind,
    prefix: &str,
    limit: usize,
    budget: Duration,
) -> rusqlite::Result<Vec<Candidate>> {
    // Opening read-only creates nothing; checking first keeps even the
    // attempt off a missing file.
    if !db.is_file() {
        return Ok(Vec::new());
    }
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )?;
    conn.busy_timeout(budget)?;
    let interrupt = conn.get_interrupt_handle();
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let timer = std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(budget) {
            interrupt.interrupt();
        }
    });
    let statements: &[&str] = match kind {
        CompletionKind::Loop => &[LOOP_NAMES, LOOP_IDS],
        CompletionKind::LoopRun => &[LOOP_RUNS],
        CompletionKind::Workflow => &[WORKFLOW_NAMES, WORKFLOW_IDS],
        CompletionKind::WorkflowRun => &[WORKFLOW_RUNS],
        CompletionKind::Label => &[LABELS],
        CompletionKind::Pool => &[POOLS],
    };
    let end = format!("{prefix}\u{10FFFF}");
    let max = i64::try_from(limit).unwrap_or(i64::MAX);
    let read = (|| -> rusqlite::Result<Vec<Candidate>> {
        let mut found = Vec::new();
        for sql in statements {
            let mut stmt = conn.prepare(sql)?;
            let rows = stmt.query_map(params![prefix, end, max], |r| {
                Ok(Candidate {
                    value: r.get(0)?,
                    help: r.get(1)?,
                })
            })?;
            for row in rows {
                found.push(row?);
            }
        }
        Ok(found)
    })();
    drop(done);
    // The timer ends as soon as `done` is dropped.
    let _ = timer.join();
    Ok(finish(read?, prefix, limit))
}
