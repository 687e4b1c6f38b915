//! [`TriggerOps`] written once for both backends, and the `after` triggers
//! a finalize adds inside its own transaction ([`fire_after`]).

use loops_core::{AfterEdge, Loop, LoopId, LoopRun, RunId, RunStatus, Timestamp, TriggerKind};

use crate::backend::TriggerOps;
use crate::columns::{instant, instant_opt, parsed, parsed_opt, text, text_opt};
use crate::error::Result;
use crate::random_id_bytes;
use crate::sql::{Col, Db, Fields, Sql, Value};
use crate::triggers::{LoopTrigger, NewTrigger, TriggerAdded};

/// The columns [`trigger_row`] reads, in order.
pub(crate) const TRIGGER_COLUMNS: &[&str] = &[
    "id",
    "loop_id",
    "kind",
    "source_run_id",
    "source_loop_id",
    "idempotency_key",
    "payload",
    "created_at",
    "run_id",
    "coalesced_at",
];

macro_rules! trigger_select {
    () => {
        "SELECT id, loop_id, kind, source_run_id, source_loop_id, idempotency_key, payload,
           created_at, run_id, coalesced_at FROM loop_triggers"
    };
}
pub(crate) use trigger_select;

/// A [`TRIGGER_COLUMNS`] row.
pub(crate) fn trigger_row(row: &dyn Fields) -> Col<LoopTrigger> {
    let n = TRIGGER_COLUMNS;
    Ok(LoopTrigger {
        id: text(row, n, 0)?,
        loop_id: parsed(row, n, 1)?,
        kind: parsed(row, n, 2)?,
        source_run_id: parsed_opt(row, n, 3)?,
        source_loop_id: parsed_opt(row, n, 4)?,
        idempotency_key: text_opt(row, n, 5)?,
        payload: text_opt(row, n, 6)?,
        created_at: instant(row, n, 7)?,
        run_id: parsed_opt(row, n, 8)?,
        coalesced_at: instant_opt(row, n, 9)?,
    })
}

/// A new trigger; nothing when its `(loop, source run)` or `(loop, key)`
/// is taken (T3, T4).
const INSERT: (&str, &str) = (
    "INSERT OR IGNORE INTO loop_triggers (id, loop_id, kind, source_run_id, source_loop_id,
       idempotency_key, payload, created_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    "INSERT INTO loop_triggers (id, loop_id, kind, source_run_id, source_loop_id,
       idempotency_key, payload, created_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT DO NOTHING",
);

/// A trigger that catch-up folded into another (T7) before `?1`: it never
/// runs, has no run to be deleted with, and so goes by its own age.
macro_rules! old_coalesced {
    () => {
        "run_id IS NULL AND coalesced_at IS NOT NULL AND coalesced_at < ?1"
    };
}

/// `n` numbered placeholders from `?first` on, joined by commas.
fn marks(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn new_trigger_id() -> String {
    random_id_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Inserts one trigger row; whether it was new.
pub(super) fn insert(c: &mut dyn Sql, t: &LoopTrigger) -> Result<bool> {
    let d = c.dialect();
    let written = c.execute(
        d.pick(INSERT.0, INSERT.1),
        &[
            t.id.as_str().into(),
            t.loop_id.as_str().into(),
            t.kind.as_str().into(),
            t.source_run_id.as_ref().map(RunId::as_str).into(),
            t.source_loop_id.as_ref().map(LoopId::as_str).into(),
            t.idempotency_key.as_deref().into(),
            t.payload.as_deref().into(),
            t.created_at.into(),
        ],
        "adding a trigger",
    )?;
    Ok(written > 0)
}

/// Adds an `after` trigger to each loop whose `--after` edges `run` fires
/// (T3), inside the transaction that finalized it: exactly once per
/// upstream run, whoever finalizes it, since `(loop, source run)` is
/// unique. `last` says no retry of the run is to come.
pub(crate) fn fire_after(c: &mut dyn Sql, run: &LoopRun, last: bool, now: Timestamp) -> Result<()> {
    if run.status == RunStatus::Running {
        return Ok(());
    }
    let chained = c.query_vec(
        "SELECT id, after_json FROM loops WHERE after_json IS NOT NULL",
        &[],
        ("loops", "reading the loops that run after others"),
        |row| {
            let edges: Vec<AfterEdge> =
                crate::columns::json_opt(row, &["id", "after_json"], 1)?.unwrap_or_default();
            Ok((text(row, &["id"], 0)?, edges))
        },
    )?;
    let mut fired = false;
    for (loop_id, edges) in chained {
        let fires = edges
            .iter()
            .any(|e| e.loop_id == run.loop_id.as_str() && e.on.fires(run.status, last));
        let Ok(loop_id) = loop_id.parse::<LoopId>() else {
            continue;
        };
        if !fires {
            continue;
        }
        fired |= insert(
            c,
            &LoopTrigger {
                id: new_trigger_id(),
                loop_id,
                kind: TriggerKind::After,
                source_run_id: Some(run.id),
                source_loop_id: Some(run.loop_id),
                idempotency_key: None,
                payload: None,
                created_at: now,
                run_id: None,
                coalesced_at: None,
            },
        )?;
    }
    if fired {
        c.notify("trigger")?;
    }
    Ok(())
}

impl<D: Db> TriggerOps for D {
    fn add_trigger(
        &self,
        loop_id: &LoopId,
        new: &NewTrigger,
        now: Timestamp,
    ) -> Result<Option<TriggerAdded>> {
        self.write(|c| {
            let exists = c.query_int(
                "SELECT COUNT(*) FROM loops WHERE id = ?1",
                &[loop_id.as_str().into()],
                "reading a loop",
            )?;
            if exists == 0 {
                return Ok(None);
            }
            let trigger = LoopTrigger {
                id: new_trigger_id(),
                loop_id: *loop_id,
                kind: TriggerKind::Manual,
                source_run_id: None,
                source_loop_id: None,
                idempotency_key: new.idempotency_key.clone(),
                payload: new.payload.clone(),
                created_at: now,
                run_id: None,
                coalesced_at: None,
            };
            if insert(c, &trigger)? {
                c.notify(loop_id.as_str())?;
                return Ok(Some(TriggerAdded {
                    trigger,
                    added: true,
                }));
            }
            // The key was used already: the first delivery's row.
            let first = c.query_opt(
                concat!(
                    trigger_select!(),
                    " WHERE loop_id = ?1 AND idempotency_key = ?2"
                ),
                &[
                    loop_id.as_str().into(),
                    new.idempotency_key.as_deref().into(),
                ],
                ("loop_triggers", "reading a trigger by key"),
                trigger_row,
            )?;
            Ok(first.map(|trigger| TriggerAdded {
                trigger,
                added: false,
            }))
        })
    }

    fn pending_triggers(&self) -> Result<Vec<LoopTrigger>> {
        self.read(|c| {
            c.query_vec(
                concat!(
                    trigger_select!(),
                    " WHERE run_id IS NULL AND coalesced_at IS NULL
                     ORDER BY loop_id, created_at, id"
                ),
                &[],
                ("loop_triggers", "listing the pending triggers"),
                trigger_row,
            )
        })
    }

    fn loop_triggers(&self, loop_id: &LoopId, limit: u32) -> Result<Vec<LoopTrigger>> {
        self.read(|c| {
            c.query_vec(
                concat!(
                    trigger_select!(),
                    " WHERE loop_id = ?1 ORDER BY created_at DESC, id DESC LIMIT ?2"
                ),
                &[loop_id.as_str().into(), limit.into()],
                ("loop_triggers", "listing a loop's triggers"),
                trigger_row,
            )
        })
    }

    fn after_edges(&self) -> Result<Vec<(LoopId, String, Vec<AfterEdge>)>> {
        self.read(|c| {
            c.query_vec(
                "SELECT id, name, after_json FROM loops WHERE after_json IS NOT NULL",
                &[],
                ("loops", "reading the loops that run after others"),
                |row| {
                    let n = &["id", "name", "after_json"];
                    Ok((
                        parsed(row, n, 0)?,
                        text(row, n, 1)?,
                        crate::columns::json_opt(row, n, 2)?.unwrap_or_default(),
                    ))
                },
            )
        })
    }

    fn triggers_of_runs(&self, run_ids: &[RunId]) -> Result<Vec<LoopTrigger>> {
        self.read(|c| {
            let mut out = Vec::new();
            // A hundred runs a statement: a page of `runs` is one or two.
            for chunk in run_ids.chunks(100) {
                let marks = marks(1, chunk.len());
                let sql = format!("{} WHERE run_id IN ({})", trigger_select!(), marks);
                let params: Vec<_> = chunk.iter().map(|id| id.as_str().into()).collect();
                out.extend(c.query_vec(
                    &sql,
                    &params,
                    ("loop_triggers", "reading the triggers of runs"),
                    trigger_row,
                )?);
            }
            Ok(out)
        })
    }

    fn old_coalesced_triggers(&self, older_than: Timestamp) -> Result<u64> {
        self.read(|c| {
            let n = c.query_int(
                concat!(
                    "SELECT COUNT(*) FROM loop_triggers WHERE ",
                    old_coalesced!()
                ),
                &[older_than.into()],
                "counting the old coalesced triggers",
            )?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }

    fn plan_old_coalesced_triggers(
        &self,
        older_than: Timestamp,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<String>> {
        self.read(|c| {
            c.query_vec(
                concat!(
                    "SELECT id FROM loop_triggers WHERE ",
                    old_coalesced!(),
                    " AND id > ?2 ORDER BY id LIMIT ?3"
                ),
                // Every id sorts after the empty string.
                &[
                    older_than.into(),
                    after.unwrap_or("").into(),
                    limit.max(1).into(),
                ],
                ("loop_triggers", "reading the old coalesced triggers"),
                |row| text(row, &["id"], 0),
            )
        })
    }

    fn delete_old_coalesced_triggers(&self, ids: &[String], older_than: Timestamp) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        self.write(|c| {
            let mut gone = 0;
            // A hundred a statement, as `triggers_of_runs` reads them.
            for chunk in ids.chunks(100) {
                let marks = marks(2, chunk.len());
                let sql = format!(
                    "DELETE FROM loop_triggers WHERE id IN ({}) AND {}",
                    marks,
                    old_coalesced!()
                );
                let mut params: Vec<Value<'_>> = vec![older_than.into()];
                params.extend(chunk.iter().map(|id| Value::from(id.as_str())));
                gone += c.execute(&sql, &params, "deleting old coalesced triggers")?;
            }
            Ok(gone)
        })
    }

    fn watch_loops(&self) -> Result<Vec<Loop>> {
        super::watch::watch_loops(self)
    }

    fn add_watch_trigger(
        &self,
        loop_id: &LoopId,
        changed_at: Timestamp,
        now: Timestamp,
    ) -> Result<crate::triggers::WatchFired> {
        super::watch::add_watch_trigger(self, loop_id, changed_at, now)
    }
}
