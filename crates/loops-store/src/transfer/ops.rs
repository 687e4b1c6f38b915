//! Moving whole rows ([`TransferOps`]), written once for both backends
//! over [`Db`]: ids and every column kept.
//!
//! An export reads every table inside one read-only snapshot (SQLite: a
//! deferred read transaction, so writers go on under WAL; PostgreSQL:
//! `REPEATABLE READ, READ ONLY`), a page of rows at a time by id (keyset
//! paging: each page starts after the last id of the one before, so no
//! page costs more than its rows).
//!
//! Writes are plain `INSERT … ON CONFLICT DO NOTHING` and `UPDATE … WHERE
//! id` of the cells of `cells.rs`, so the `status_counts` triggers count
//! them. An import reads the stored rows without a lock, so a runner may
//! claim, finish or retry a run before the import overwrites it: the
//! overwrite of a run, workflow run or step run is guarded by what the
//! import read ([`over_guard`]), which PostgreSQL re-checks against the
//! newest row, and changes nothing when the runner got there first. An
//! active loop, a pending trigger or a pool written wakes PostgreSQL's
//! daemons at commit.
//!
//! Two things only PostgreSQL needs ([`Extras`]):
//! - a run's `exclusive` flag (a column SQLite does not have) is set as a
//!   claim would set it (running, of a loop whose overlap is `skip`),
//!   unless another running run of the loop already holds the one-running
//!   index;
//! - PostgreSQL enforces the schema's foreign keys, which SQLite never did
//!   (the original never turned them on, so there a row is written as it
//!   is): a workflow run's link to a loop or a run that is not in the
//!   database is cleared (as `ON DELETE SET NULL` would have done), and a
//!   row whose workflow or workflow run is missing is not written
//!   (reported as a conflict).

use std::ops::ControlFlow;

use loops_core::{LoopStatus, WorkflowStatus};

use super::cells::{Cell, cells, mapper, over_guard};
use crate::backend::{Transactions, TransferOps};
use crate::columns::{
    event_columns, loop_columns, run_columns, step_run_columns, workflow_columns,
    workflow_run_columns,
};
use crate::error::Result;
use crate::loops::ops::any_row;
use crate::sql::{self, Db, Dialect, Sql, Value};
use crate::transfer::{Record, Table};
use crate::triggers::ops::trigger_select;

/// Rows per page of an export.
const PAGE: i64 = 1000;

/// The statement reading a page of `table`: the rows after id `?1` (a
/// pool's name), at most `?2`.
fn page_of(table: Table) -> &'static str {
    match table {
        Table::Pools => {
            "SELECT name, max_running, created_at, updated_at FROM pools
             WHERE name > ?1 ORDER BY name LIMIT ?2"
        }
        Table::Triggers => concat!(trigger_select!(), " WHERE id > ?1 ORDER BY id LIMIT ?2"),
        Table::Workflows => concat!(
            "SELECT ",
            workflow_columns!(),
            " FROM workflow_specs WHERE id > ?1 ORDER BY id LIMIT ?2"
        ),
        Table::Loops => concat!(
            "SELECT ",
            loop_columns!(),
            " FROM loops WHERE id > ?1 ORDER BY id LIMIT ?2"
        ),
        Table::Runs => concat!(
            "SELECT ",
            run_columns!(),
            ", pool, trigger_id FROM loop_runs WHERE id > ?1 ORDER BY id LIMIT ?2"
        ),
        Table::WorkflowRuns => concat!(
            "SELECT ",
            workflow_run_columns!(),
            " FROM workflow_runs WHERE id > ?1 ORDER BY id LIMIT ?2"
        ),
        Table::StepRuns => concat!(
            "SELECT ",
            step_run_columns!(),
            ", pid_start_ms FROM workflow_step_runs WHERE id > ?1 ORDER BY id LIMIT ?2"
        ),
        Table::Events => concat!(
            "SELECT ",
            event_columns!(),
            " FROM workflow_events WHERE id > ?1 ORDER BY id LIMIT ?2"
        ),
    }
}

/// Starts the read snapshot of an export.
const BEGIN_SNAPSHOT: [&str; 2] = ["BEGIN", "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"];

fn export_tables(
    c: &mut dyn Sql,
    tables: &[Table],
    each: &mut dyn FnMut(Record) -> ControlFlow<()>,
) -> Result<()> {
    for &table in tables {
        let (sql, map, name) = (page_of(table), mapper(table), table.sql_name());
        let mut after = String::new();
        loop {
            let (mut read, mut last, mut stopped) = (0_i64, None, false);
            let params = [after.as_str().into(), PAGE.into()];
            c.query_rows(sql, &params, "exporting rows", &mut |row| {
                let record = sql::decode(row, name, map)?;
                read += 1;
                last = Some(record.id().to_owned());
                stopped = each(record).is_break();
                Ok(if stopped {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                })
            })?;
            if stopped {
                return Ok(());
            }
            match last {
                Some(id) if read == PAGE => after = id,
                _ => break,
            }
        }
    }
    Ok(())
}

/// Whether an imported run takes the one-running index, as a claim would:
/// running, of a `skip` loop, and no other running run of the loop holds
/// it (which would make the insert conflict).
const EXCLUSIVE: &str = "?6 = 'running'
    AND EXISTS (SELECT 1 FROM loops WHERE id = ?2 AND overlap = 'skip')
    AND NOT EXISTS (SELECT 1 FROM loop_runs o
                    WHERE o.loop_id = ?2 AND o.status = 'running' AND o.exclusive
                      AND o.id <> ?1)";

/// What writing a row needs on PostgreSQL beyond its columns.
struct Extras<'r> {
    /// Expressions in place of some parameters, by position from 1.
    exprs: &'static [(usize, &'static str)],
    /// The row is a run, whose `exclusive` flag is computed.
    exclusive: bool,
    /// The table and id of the row it cannot exist without.
    parent: Option<(&'static str, &'r str)>,
}

/// What writing `record` needs in `dialect` beyond its columns: on
/// PostgreSQL, the foreign keys SQLite never enforced (a dangling optional
/// link is cleared, and a row whose parent is missing is not written) and
/// a run's `exclusive` flag; on SQLite, nothing.
fn extras(record: &Record, dialect: Dialect) -> Extras<'_> {
    let none = Extras {
        exprs: &[],
        exclusive: false,
        parent: None,
    };
    if dialect == Dialect::Sqlite {
        return none;
    }
    match record {
        Record::Run(_) => Extras {
            exclusive: true,
            ..none
        },
        Record::WorkflowRun(r) => Extras {
            exprs: &[
                (4, "(SELECT id FROM loops WHERE id = ?4)"),
                (5, "(SELECT id FROM loop_runs WHERE id = ?5)"),
            ],
            parent: Some(("workflow_specs", r.workflow_id.as_str())),
            ..none
        },
        Record::StepRun(s) => Extras {
            parent: Some(("workflow_runs", s.step.workflow_run_id.as_str())),
            ..none
        },
        Record::Event(e) => Extras {
            parent: Some(("workflow_runs", e.workflow_run_id.as_str())),
            ..none
        },
        // `pools` and `loop_triggers` have no foreign keys.
        Record::Pool(_) | Record::Workflow(_) | Record::Loop(_) | Record::Trigger(_) => none,
    }
}

/// The statement writing `names` of `table` with `extras`: an `INSERT …
/// ON CONFLICT DO NOTHING`, or with `guard` (the columns of [`over_guard`],
/// whose values follow the names') an `UPDATE` of every column but the
/// key (`names` starts with it: `id`, a pool's `name`).
fn write_sql(table: &str, names: &[&str], guard: Option<&[&str]>, extras: &Extras<'_>) -> String {
    let slots: Vec<String> = (1..=names.len())
        .map(|i| {
            extras
                .exprs
                .iter()
                .find(|(at, _)| *at == i)
                .map_or_else(|| format!("?{i}"), |(_, e)| (*e).to_owned())
        })
        .collect();
    match guard {
        Some(guard) => {
            let extra = if extras.exclusive {
                format!(", exclusive = ({EXCLUSIVE})")
            } else {
                String::new()
            };
            let guard: String = guard
                .iter()
                .zip(names.len() + 1..)
                .map(|(column, i)| format!(" AND {column} = ?{i}"))
                .collect();
            format!(
                "UPDATE {table} SET ({}) = ({}){extra} WHERE {} = ?1{guard}",
                names[1..].join(", "),
                slots[1..].join(", "),
                names[0]
            )
        }
        None => {
            let (col, expr) = if extras.exclusive {
                (", exclusive".to_owned(), format!(", ({EXCLUSIVE})"))
            } else {
                (String::new(), String::new())
            };
            format!(
                "INSERT INTO {table} ({}{col}) VALUES ({}{expr}) ON CONFLICT DO NOTHING",
                names.join(", "),
                slots.join(", ")
            )
        }
    }
}

impl<D: Db + Transactions> TransferOps for D {
    fn export_rows(
        &self,
        tables: &[Table],
        each: &mut dyn FnMut(Record) -> ControlFlow<()>,
    ) -> Result<()> {
        let own = !self.in_transaction();
        self.read(|c| {
            if !own {
                return export_tables(c, tables, each);
            }
            let begin = c.dialect().pick(BEGIN_SNAPSHOT[0], BEGIN_SNAPSHOT[1]);
            c.execute(begin, &[], "starting a read snapshot")?;
            let out = export_tables(c, tables, each);
            if out.is_err() {
                // Already failing: an error ending the snapshot adds nothing.
                let _ = c.execute("ROLLBACK", &[], "ending a read snapshot");
                return out;
            }
            c.execute("COMMIT", &[], "ending a read snapshot")?;
            out
        })
    }

    fn matching_rows(&self, record: &Record) -> Result<Vec<Record>> {
        let table = record.table();
        let what = (table.sql_name(), "reading the rows an import would change");
        let map = mapper(table);
        let id = record.id();
        self.read(|c| match record {
            Record::Pool(_) => c.query_vec(
                "SELECT name, max_running, created_at, updated_at FROM pools WHERE name = ?1",
                &[id.into()],
                what,
                map,
            ),
            // Its id, and its loop's unique keys: the upstream run, the
            // idempotency key.
            Record::Trigger(t) => c.query_vec(
                concat!(
                    trigger_select!(),
                    " WHERE id = ?1 OR (loop_id = ?2 AND (source_run_id = ?3
                       OR idempotency_key = ?4))"
                ),
                &[
                    id.into(),
                    t.loop_id.as_str().into(),
                    t.source_run_id.as_ref().map(|r| r.as_str()).into(),
                    t.idempotency_key.as_deref().into(),
                ],
                what,
                map,
            ),
            Record::Workflow(w) => {
                // Only an active workflow's name is unique.
                let active = (w.status == WorkflowStatus::Active).then_some(w.name.as_str());
                let sql = concat!(
                    "SELECT ",
                    workflow_columns!(),
                    " FROM workflow_specs WHERE id = ?1 OR (status = 'active' AND name = ?2)"
                );
                c.query_vec(sql, &[id.into(), active.into()], what, map)
            }
            Record::Loop(lp) => {
                let by_id = concat!("SELECT ", loop_columns!(), " FROM loops WHERE id = ?1");
                let mut found = c.query_vec(by_id, &[id.into()], what, map)?;
                let named = concat!(
                    "SELECT ",
                    loop_columns!(),
                    " FROM loops WHERE name = ?1 AND id <> ?2 LIMIT 1"
                );
                found.extend(c.query_opt(
                    named,
                    &[lp.name.as_str().into(), id.into()],
                    what,
                    map,
                )?);
                Ok(found)
            }
            Record::Run(r) => c.query_vec(
                concat!(
                    "SELECT ",
                    run_columns!(),
                    ", pool, trigger_id FROM loop_runs
                     WHERE id = ?1 OR (loop_id = ?2 AND scheduled_for = ?3)"
                ),
                &[
                    id.into(),
                    r.run.loop_id.as_str().into(),
                    r.run.scheduled_for.into(),
                ],
                what,
                map,
            ),
            Record::WorkflowRun(r) => c.query_vec(
                concat!(
                    "SELECT ",
                    workflow_run_columns!(),
                    " FROM workflow_runs
                     WHERE id = ?1 OR (workflow_id = ?2 AND idempotency_key = ?3)"
                ),
                &[
                    id.into(),
                    r.workflow_id.as_str().into(),
                    r.idempotency_key.as_deref().into(),
                ],
                what,
                map,
            ),
            Record::StepRun(s) => c.query_vec(
                concat!(
                    "SELECT ",
                    step_run_columns!(),
                    ", pid_start_ms FROM workflow_step_runs
                     WHERE id = ?1 OR (workflow_run_id = ?2 AND step_id = ?3)"
                ),
                &[
                    id.into(),
                    s.step.workflow_run_id.as_str().into(),
                    s.step.step_id.as_str().into(),
                ],
                what,
                map,
            ),
            Record::Event(e) => c.query_vec(
                concat!(
                    "SELECT ",
                    event_columns!(),
                    " FROM workflow_events
                     WHERE id = ?1 OR (workflow_run_id = ?2 AND sequence = ?3)"
                ),
                &[
                    id.into(),
                    e.workflow_run_id.as_str().into(),
                    e.sequence.into(),
                ],
                what,
                map,
            ),
        })
    }

    fn write_record(&self, record: &Record, over: Option<&Record>) -> Result<bool> {
        let (names, mut values) = cells(record)?;
        let table = record.table().sql_name();
        let mut guard = Vec::new();
        if let Some(stored) = over {
            for (column, observed) in over_guard(stored) {
                guard.push(column);
                values.push(observed);
            }
        }
        let what = if over.is_some() {
            "replacing an imported row"
        } else {
            "inserting an imported row"
        };
        let params: Vec<Value<'_>> = values.iter().map(Cell::value).collect();
        self.write(|c| {
            let extras = extras(record, c.dialect());
            if let Some((parent, id)) = extras.parent {
                let sql = format!("SELECT 1 FROM {parent} WHERE id = ?1");
                if !any_row(c, &sql, &[id.into()], what)? {
                    return Ok(false);
                }
            }
            let sql = write_sql(table, &names, over.map(|_| &guard[..]), &extras);
            let written = c.execute(&sql, &params, what)? == 1;
            if written {
                // What a daemon here may now start: an active loop, a
                // pending trigger, a pool's members given room.
                match record {
                    Record::Loop(lp) if lp.status == LoopStatus::Active => {
                        c.notify(lp.id.as_str())?;
                    }
                    Record::Trigger(t) if t.is_pending() => c.notify(t.loop_id.as_str())?,
                    Record::Pool(_) => c.notify("pool")?,
                    _ => {}
                }
            }
            Ok(written)
        })
    }
}
