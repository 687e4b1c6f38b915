//! The PostgreSQL side of [`crate::transfer`]: whole rows, ids kept.
//!
//! An export reads every table inside one `REPEATABLE READ, READ ONLY`
//! transaction, so the document is one snapshot while daemons go on, a
//! page of rows at a time by id (keyset paging: each page starts after
//! the last id of the one before, so no page costs more than its rows).
//!
//! Writes are plain `INSERT … ON CONFLICT DO NOTHING` and `UPDATE … WHERE
//! id`, so the `status_counts` triggers count them. An import reads the
//! stored rows without a lock, so a runner may claim, finish or retry a
//! run before the import overwrites it: the overwrite of a run, workflow
//! run or step run is guarded by what the import read (`over_guard`, the
//! same guard as on SQLite), which PostgreSQL re-checks against the
//! newest row, and changes nothing when the runner got there first.
//! Three things SQLite does not need:
//! - a run's `exclusive` flag is set as a claim would set it (running, of a
//!   loop whose overlap is `skip`), unless another running run of the loop
//!   already holds the one-running index;
//! - PostgreSQL enforces the schema's foreign keys, which SQLite never did:
//!   a workflow run's link to a loop or a run that is not in the database
//!   is cleared (as `ON DELETE SET NULL` would have done), and a row whose
//!   workflow or workflow run is missing is not written (reported as a
//!   conflict);
//! - an active loop written wakes the daemons (`pg_notify`) at commit.

use std::ops::ControlFlow;

use bytes::BytesMut;
use loops_core::{LoopStatus, WorkflowStatus};
use postgres::Row;
use postgres::types::{FromSql, IsNull, ToSql, Type};

use crate::backend::{Transactions, TransferOps};
use crate::error::{Result, StoreError};
use crate::postgres::rows::{self, Json, Ts, ts};
use crate::postgres::{Conn, Postgres};
use crate::sqlite::rows::{
    event_columns, loop_columns, run_columns, step_run_columns, workflow_columns,
    workflow_run_columns,
};
use crate::sqlite::transfer::{Cell, cells, over_guard};
use crate::transfer::{ExportedRun, ExportedStepRun, Record, Table};

/// Rows per page of an export.
const PAGE: i64 = 1000;

/// Positions of the additive columns in the shared column lists (checked
/// against the lists by the SQLite side's tests).
const LOOP_PAUSED_REASON: usize = 17;
const RUN_PID_START: usize = 18;
const STEP_PID_START: usize = 17;

/// Whether an imported run takes the one-running index, as a claim would:
/// running, of a `skip` loop, and no other running run of the loop holds
/// it (which would make the insert conflict).
const EXCLUSIVE: &str = "$6 = 'running'
    AND EXISTS (SELECT 1 FROM loops WHERE id = $2 AND overlap = 'skip')
    AND NOT EXISTS (SELECT 1 FROM loop_runs o
                    WHERE o.loop_id = $2 AND o.status = 'running' AND o.exclusive
                      AND o.id <> $1)";

impl TransferOps for Postgres {
    fn export_rows(
        &self,
        tables: &[Table],
        each: &mut dyn FnMut(Record) -> ControlFlow<()>,
    ) -> Result<()> {
        let own = !self.in_transaction();
        self.with(|c| {
            if own {
                c.batch(
                    "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
                    "starting a read snapshot",
                )?;
            }
            let out = export_tables(c, tables, each);
            if own {
                if out.is_err() {
                    let _ = c.batch("ROLLBACK", "ending a read snapshot");
                    return out;
                }
                c.batch("COMMIT", "ending a read snapshot")?;
            }
            out
        })
    }

    fn matching_rows(&self, record: &Record) -> Result<Vec<Record>> {
        let table = record.table();
        let context = "reading the rows an import would change";
        let id = record.id();
        self.with(|c| {
            let found = match record {
                Record::Workflow(w) => c.query(
                    concat!(
                        "SELECT ",
                        workflow_columns!(),
                        " FROM workflow_specs
                         WHERE id = $1 OR ($3 AND status = 'active' AND name = $2)"
                    ),
                    &[&id, &w.name, &(w.status == WorkflowStatus::Active)],
                    context,
                )?,
                Record::Loop(lp) => {
                    let mut found = c.query(
                        concat!("SELECT ", loop_columns!(), " FROM loops WHERE id = $1"),
                        &[&id],
                        context,
                    )?;
                    found.extend(c.query(
                        concat!(
                            "SELECT ",
                            loop_columns!(),
                            " FROM loops WHERE name = $1 AND id <> $2 LIMIT 1"
                        ),
                        &[&lp.name, &id],
                        context,
                    )?);
                    found
                }
                Record::Run(r) => c.query(
                    concat!(
                        "SELECT ",
                        run_columns!(),
                        " FROM loop_runs WHERE id = $1 OR (loop_id = $2 AND scheduled_for = $3)"
                    ),
                    &[&id, &r.run.loop_id.as_str(), &ts(r.run.scheduled_for)],
                    context,
                )?,
                Record::WorkflowRun(r) => c.query(
                    concat!(
                        "SELECT ",
                        workflow_run_columns!(),
                        " FROM workflow_runs
                         WHERE id = $1 OR (workflow_id = $2 AND idempotency_key = $3)"
                    ),
                    &[&id, &r.workflow_id.as_str(), &r.idempotency_key],
                    context,
                )?,
                Record::StepRun(s) => c.query(
                    concat!(
                        "SELECT ",
                        step_run_columns!(),
                        ", pid_start_ms",
                        " FROM workflow_step_runs
                         WHERE id = $1 OR (workflow_run_id = $2 AND step_id = $3)"
                    ),
                    &[&id, &s.step.workflow_run_id.as_str(), &s.step.step_id],
                    context,
                )?,
                Record::Event(e) => c.query(
                    concat!(
                        "SELECT ",
                        event_columns!(),
                        " FROM workflow_events
                         WHERE id = $1 OR (workflow_run_id = $2 AND sequence = $3)"
                    ),
                    &[&id, &e.workflow_run_id.as_str(), &i64::from(e.sequence)],
                    context,
                )?,
            };
            found.iter().map(|row| decode(table, row)).collect()
        })
    }

    fn write_record(&self, record: &Record, over: Option<&Record>) -> Result<bool> {
        let (names, mut values) = cells(record)?;
        let table = record.table().sql_name();
        let Extras {
            exprs,
            exclusive,
            parent,
        } = extras(record);
        let slots: Vec<String> = (1..=names.len())
            .map(|i| {
                exprs
                    .iter()
                    .find(|(at, _)| *at == i)
                    .map_or_else(|| format!("${i}"), |(_, e)| (*e).to_owned())
            })
            .collect();
        let sql = if let Some(stored) = over {
            let extra = if exclusive {
                format!(", exclusive = ({EXCLUSIVE})")
            } else {
                String::new()
            };
            // The guard's values follow the columns' (`$n` from there on).
            let mut guard = String::new();
            for (column, observed) in over_guard(stored) {
                values.push(observed);
                guard.push_str(&format!(" AND {column} = ${}", values.len()));
            }
            format!(
                "UPDATE {table} SET ({}) = ({}){extra} WHERE id = $1{guard}",
                names[1..].join(", "),
                slots[1..].join(", ")
            )
        } else {
            let (col, expr) = if exclusive {
                (", exclusive".to_owned(), format!(", ({EXCLUSIVE})"))
            } else {
                (String::new(), String::new())
            };
            format!(
                "INSERT INTO {table} ({}{col}) VALUES ({}{expr}) ON CONFLICT DO NOTHING",
                names.join(", "),
                slots.join(", ")
            )
        };
        let context = if over.is_some() {
            "replacing an imported row"
        } else {
            "inserting an imported row"
        };
        let params: Vec<&(dyn ToSql + Sync)> =
            values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        self.write_tx(|c| {
            if let Some((parent, id)) = parent {
                let sql = format!("SELECT 1 FROM {parent} WHERE id = $1");
                if c.query(&sql, &[&id], context)?.is_empty() {
                    return Ok(false);
                }
            }
            let written = c.execute(&sql, &params, context)? == 1;
            if let Record::Loop(lp) = record
                && written
                && lp.status == LoopStatus::Active
            {
                c.notify(lp.id.as_str())?;
            }
            Ok(written)
        })
    }
}

/// What writing a row needs on PostgreSQL beyond its columns.
struct Extras<'r> {
    /// Expressions in place of some parameters, by position from 1.
    exprs: &'static [(usize, &'static str)],
    /// The row is a run, whose `exclusive` flag is computed.
    exclusive: bool,
    /// The table and id of the row it cannot exist without.
    parent: Option<(&'static str, &'r str)>,
}

/// The foreign keys SQLite never enforced: a dangling optional link is
/// cleared, and a row whose parent is missing is not written.
fn extras(record: &Record) -> Extras<'_> {
    let none = Extras {
        exprs: &[],
        exclusive: false,
        parent: None,
    };
    match record {
        Record::Run(_) => Extras {
            exclusive: true,
            ..none
        },
        Record::WorkflowRun(r) => Extras {
            exprs: &[
                (4, "(SELECT id FROM loops WHERE id = $4)"),
                (5, "(SELECT id FROM loop_runs WHERE id = $5)"),
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
        Record::Workflow(_) | Record::Loop(_) => none,
    }
}

fn export_tables(
    c: &mut Conn<'_>,
    tables: &[Table],
    each: &mut dyn FnMut(Record) -> ControlFlow<()>,
) -> Result<()> {
    for table in tables {
        let sql = match table {
            Table::Workflows => concat!(
                "SELECT ",
                workflow_columns!(),
                " FROM workflow_specs WHERE id > $1 ORDER BY id LIMIT $2"
            ),
            Table::Loops => concat!(
                "SELECT ",
                loop_columns!(),
                " FROM loops WHERE id > $1 ORDER BY id LIMIT $2"
            ),
            Table::Runs => concat!(
                "SELECT ",
                run_columns!(),
                " FROM loop_runs WHERE id > $1 ORDER BY id LIMIT $2"
            ),
            Table::WorkflowRuns => concat!(
                "SELECT ",
                workflow_run_columns!(),
                " FROM workflow_runs WHERE id > $1 ORDER BY id LIMIT $2"
            ),
            Table::StepRuns => concat!(
                "SELECT ",
                step_run_columns!(),
                ", pid_start_ms",
                " FROM workflow_step_runs WHERE id > $1 ORDER BY id LIMIT $2"
            ),
            Table::Events => concat!(
                "SELECT ",
                event_columns!(),
                " FROM workflow_events WHERE id > $1 ORDER BY id LIMIT $2"
            ),
        };
        let mut after = String::new();
        loop {
            let page = c.query(sql, &[&after, &PAGE], "exporting rows")?;
            for row in &page {
                let record = decode(*table, row)?;
                after.clear();
                after.push_str(record.id());
                if each(record).is_break() {
                    return Ok(());
                }
            }
            if page.len() < usize::try_from(PAGE).unwrap_or(usize::MAX) {
                break;
            }
        }
    }
    Ok(())
}

/// An additive column the shared mappers do not read.
fn extra<'a, T: FromSql<'a>>(row: &'a Row, i: usize) -> Result<T> {
    row.try_get(i)
        .map_err(StoreError::db("reading an exported row"))
}

/// A row of `table`, selected with its column list, as a [`Record`].
fn decode(table: Table, row: &Row) -> Result<Record> {
    let name = table.sql_name();
    Ok(match table {
        Table::Workflows => {
            Record::Workflow(Box::new(rows::decode(row, name, rows::workflow_row)?))
        }
        Table::Loops => {
            let mut lp = rows::decode(row, name, rows::loop_row)?;
            lp.paused_reason = extra(row, LOOP_PAUSED_REASON)?;
            Record::Loop(Box::new(lp))
        }
        Table::Runs => {
            let mut run = rows::decode(row, name, rows::run_row)?;
            run.claim_token = None;
            Record::Run(Box::new(ExportedRun {
                run,
                pid_start_ms: extra(row, RUN_PID_START)?,
                spawn_id: rows::decode(row, name, rows::run_spawn_id)?,
            }))
        }
        Table::WorkflowRuns => {
            Record::WorkflowRun(Box::new(rows::decode(row, name, rows::workflow_run_row)?))
        }
        Table::StepRuns => Record::StepRun(Box::new(ExportedStepRun {
            step: rows::decode(row, name, rows::step_run_row)?,
            pid_start_ms: extra(row, STEP_PID_START)?,
        })),
        Table::Events => Record::Event(Box::new(rows::decode(row, name, rows::event_row)?)),
    })
}

impl ToSql for Cell {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Cell::Text(v) => v.to_sql(ty, out),
            Cell::Int(v) => v.to_sql(ty, out),
            Cell::Instant(v) => v.map(Ts).to_sql(ty, out),
            Cell::Json(v) => v.as_deref().map(Json).to_sql(ty, out),
        }
    }

    fn accepts(_ty: &Type) -> bool {
        // Each value checks its own type, in `to_sql_checked`.
        true
    }

    fn to_sql_checked(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Cell::Text(v) => v.to_sql_checked(ty, out),
            Cell::Int(v) => v.to_sql_checked(ty, out),
            Cell::Instant(v) => v.map(Ts).to_sql_checked(ty, out),
            Cell::Json(v) => v.as_deref().map(Json).to_sql_checked(ty, out),
        }
    }
}
