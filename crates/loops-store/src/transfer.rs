//! Moving a store's contents between databases (issue 15): `loops export`
//! writes every loop and workflow, and optionally the run history, as one
//! JSON document, and `loops import` reads one into the current backend,
//! so SQLite → PostgreSQL → SQLite loses nothing.
//!
//! The document is one JSON object: a header (`format`, `formatVersion`,
//! `schemaVersion`, `exportedAt`, `history`), then one array per table in
//! the order an import writes them (`pools`, `workflows`, `loops`, `runs`,
//! `triggers`, `workflowRuns`, `stepRuns`, `events`), rows by id (a pool
//! by name). Each record is a whole row: the public JSON of the core type
//! (the same as `--json` prints) plus the additive columns that JSON
//! leaves out (a run's `pidStartMs`, `spawnId`, `pool` and `triggerId`, a
//! step's `pidStartMs`, a loop's stored `pausedReason` also when it is no
//! longer paused, and a trigger's `payload`). A run's claim token is left
//! out: it fences one claim on one database and means nothing on another.
//! Command `env` values, prompts and trigger payloads are in it as stored,
//! so the file is as private as the database. `pools` and `triggers`
//! (issue 30) are additive: a document written before them still imports.
//!
//! Both directions stream: an export writes each row as it is read, from
//! one read snapshot, and an import handles each record as it is parsed,
//! in batches of [`IMPORT_BATCH`] records, each batch one transaction.
//! An import keeps ids; a record whose id is already stored is left as it
//! is, or overwritten with `replace`; one whose other unique key (a run's
//! slot, an active workflow's name, …) another row holds is refused and
//! reported. Rows go in through plain `INSERT`s and `UPDATE`s, so the
//! triggers that keep `status_counts` see them.
//!
//! Issue 25: a loop or workflow that `loops create` would refuse is
//! refused with create's message (`import`), a run never goes backwards,
//! and a run that was running comes over finished, since no runner here
//! holds it (`history`).

mod cells;
mod document;
mod history;
mod import;
mod ops;
mod pools_triggers;

pub use self::history::EXPORTED_WHILE_RUNNING;
pub use self::pools_triggers::{ExportedPool, ExportedTrigger};

use std::io::{Read, Write};
use std::ops::ControlFlow;

use loops_core::{
    Loop, LoopRun, RunStatus, StepRun, StepRunStatus, Timestamp, WorkflowEvent, WorkflowRun,
    WorkflowRunStatus, WorkflowSpec,
};
use serde::{Deserialize, Serialize};

use crate::Store;
use crate::error::StoreError;

/// The `format` of an export document.
pub const EXPORT_FORMAT: &str = "loops-export";

/// The `formatVersion` this binary writes, and the newest it reads.
pub const EXPORT_FORMAT_VERSION: u32 = 1;

/// How many records one import transaction writes: large enough that
/// commits cost little, small enough that a batch holds the write lock
/// only briefly beside a running daemon.
pub const IMPORT_BATCH: usize = 500;

/// How many conflicts and notes an [`ImportReport`] lists; the counts
/// cover them all.
pub const IMPORT_LISTED: usize = 20;

/// A table an export document carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Table {
    /// `pools` (issue 30).
    Pools,
    /// `workflow_specs`.
    Workflows,
    /// `loops`.
    Loops,
    /// `loop_runs`.
    Runs,
    /// `loop_triggers` (issue 30).
    Triggers,
    /// `workflow_runs`.
    WorkflowRuns,
    /// `workflow_step_runs`.
    StepRuns,
    /// `workflow_events`.
    Events,
}

impl Table {
    /// Every table, in the order a document lists them and an import
    /// writes them (parents before the rows that point to them).
    pub const ALL: [Table; 8] = [
        Table::Pools,
        Table::Workflows,
        Table::Loops,
        Table::Runs,
        Table::Triggers,
        Table::WorkflowRuns,
        Table::StepRuns,
        Table::Events,
    ];

    /// The definitions: what `--no-runs` keeps.
    pub const DEFINITIONS: [Table; 3] = [Table::Pools, Table::Workflows, Table::Loops];

    /// How many tables a document carries.
    pub(crate) const COUNT: usize = Table::ALL.len();

    /// The table's key in the document, e.g. `workflowRuns`.
    pub fn key(self) -> &'static str {
        match self {
            Table::Pools => "pools",
            Table::Workflows => "workflows",
            Table::Loops => "loops",
            Table::Runs => "runs",
            Table::Triggers => "triggers",
            Table::WorkflowRuns => "workflowRuns",
            Table::StepRuns => "stepRuns",
            Table::Events => "events",
        }
    }

    /// The table's name for people, e.g. `workflow runs`.
    pub fn name(self) -> &'static str {
        match self {
            Table::Pools => "pools",
            Table::Workflows => "workflows",
            Table::Loops => "loops",
            Table::Runs => "runs",
            Table::Triggers => "triggers",
            Table::WorkflowRuns => "workflow runs",
            Table::StepRuns => "step runs",
            Table::Events => "events",
        }
    }

    /// The table's name in the schema, e.g. `workflow_runs`.
    pub(crate) fn sql_name(self) -> &'static str {
        match self {
            Table::Pools => "pools",
            Table::Workflows => "workflow_specs",
            Table::Loops => "loops",
            Table::Runs => "loop_runs",
            Table::Triggers => "loop_triggers",
            Table::WorkflowRuns => "workflow_runs",
            Table::StepRuns => "workflow_step_runs",
            Table::Events => "workflow_events",
        }
    }

    /// The table of a document key.
    pub fn from_key(key: &str) -> Option<Table> {
        Table::ALL.into_iter().find(|t| t.key() == key)
    }

    /// True for the run history, which `--no-runs` leaves out: runs,
    /// triggers, workflow runs, step runs and events.
    pub fn is_history(self) -> bool {
        !Table::DEFINITIONS.contains(&self)
    }

    /// How deep the table sits under the rows it points to: a document
    /// must list a table after every table of a lower rank. A loop names
    /// its pool (by name, with no foreign key: pools come first all the
    /// same, so no member is stored before the limit that bounds it), and
    /// a trigger its loop and the run it started.
    fn rank(self) -> u8 {
        match self {
            Table::Pools => 0,
            Table::Workflows | Table::Loops => 1,
            Table::Runs => 2,
            Table::Triggers | Table::WorkflowRuns => 3,
            Table::StepRuns | Table::Events => 4,
        }
    }

    fn index(self) -> usize {
        Table::ALL.iter().position(|t| *t == self).unwrap_or(0)
    }
}

/// A `loop_runs` row as an export document holds it: the run's JSON plus
/// the additive columns it does not print.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportedRun {
    /// The run, as `--json` prints it.
    #[serde(flatten)]
    pub run: LoopRun,
    /// The recorded child's start time, next to its pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_start_ms: Option<i64>,
    /// The spawn id every process of the run carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawn_id: Option<String>,
    /// The pool its loop had when it was claimed (issue 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// The trigger that started it (issue 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_id: Option<String>,
}

/// A `workflow_step_runs` row as an export document holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportedStepRun {
    /// The step run, as `--json` prints it.
    #[serde(flatten)]
    pub step: StepRun,
    /// The recorded child's start time, next to its pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_start_ms: Option<i64>,
}

/// One row of any table a document carries. Each backend reads and
/// writes rows as these.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Record {
    Pool(Box<ExportedPool>),
    Workflow(Box<WorkflowSpec>),
    /// A loop; its `paused_reason` is the stored column, also when the
    /// loop is no longer paused.
    Loop(Box<Loop>),
    Run(Box<ExportedRun>),
    Trigger(Box<ExportedTrigger>),
    WorkflowRun(Box<WorkflowRun>),
    StepRun(Box<ExportedStepRun>),
    Event(Box<WorkflowEvent>),
}

impl Record {
    /// The record's table.
    pub(crate) fn table(&self) -> Table {
        match self {
            Record::Pool(_) => Table::Pools,
            Record::Workflow(_) => Table::Workflows,
            Record::Loop(_) => Table::Loops,
            Record::Run(_) => Table::Runs,
            Record::Trigger(_) => Table::Triggers,
            Record::WorkflowRun(_) => Table::WorkflowRuns,
            Record::StepRun(_) => Table::StepRuns,
            Record::Event(_) => Table::Events,
        }
    }

    /// The row's id (a pool's name).
    pub(crate) fn id(&self) -> &str {
        match self {
            Record::Pool(p) => p.name.as_str(),
            Record::Workflow(w) => w.id.as_str(),
            Record::Loop(l) => l.id.as_str(),
            Record::Run(r) => r.run.id.as_str(),
            Record::Trigger(t) => t.id.as_str(),
            Record::WorkflowRun(r) => r.id.as_str(),
            Record::StepRun(s) => s.step.id.as_str(),
            Record::Event(e) => e.id.as_str(),
        }
    }

    /// True for a run, workflow run or step run that is running: in an
    /// export it is written as it is, and an import writes it finished,
    /// since the runner that held it is on the other database.
    fn is_running(&self) -> bool {
        match self {
            Record::Run(r) => r.run.status == RunStatus::Running,
            Record::WorkflowRun(r) => r.status == WorkflowRunStatus::Running,
            Record::StepRun(s) => s.step.status == StepRunStatus::Running,
            _ => false,
        }
    }

    /// Writes the record's JSON.
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()> {
        match self {
            Record::Pool(p) => serde_json::to_writer(out, p),
            Record::Workflow(w) => serde_json::to_writer(out, w),
            Record::Loop(l) => serde_json::to_writer(out, l),
            Record::Run(r) => serde_json::to_writer(out, r),
            Record::Trigger(t) => serde_json::to_writer(out, t),
            Record::WorkflowRun(r) => serde_json::to_writer(out, r),
            Record::StepRun(s) => serde_json::to_writer(out, s),
            Record::Event(e) => serde_json::to_writer(out, e),
        }
    }
}

/// What [`Store::export`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportOptions {
    /// Also the run history: runs, triggers, workflow runs, step runs and
    /// events (`loops export` without `--no-runs`).
    pub history: bool,
}

/// What [`Store::export`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSummary {
    /// The document's `exportedAt`.
    pub exported_at: Timestamp,
    /// Whether the run history is in it.
    pub history: bool,
    /// Rows written per table, in [`Table::ALL`] order.
    pub counts: Vec<(Table, u64)>,
    /// Runs, workflow runs and step runs that were running: they are in
    /// the document as they were.
    pub running: u64,
}

impl ExportSummary {
    /// The rows written of `table`.
    pub fn count(&self, table: Table) -> u64 {
        self.counts
            .iter()
            .find(|(t, _)| *t == table)
            .map_or(0, |(_, n)| *n)
    }
}

/// How [`Store::import`] treats the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImportOptions {
    /// Write (`--apply`); otherwise only count what would change.
    pub apply: bool,
    /// Overwrite a stored row with the same id whose columns differ
    /// (`--replace`); otherwise it is left as it is.
    pub replace: bool,
}

/// What an import found (and with `apply`, did) for one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableImport {
    /// The table.
    pub table: Table,
    /// Records of this table in the document.
    pub records: u64,
    /// Records whose id is not stored: inserted (or would be).
    pub new: u64,
    /// Records whose id is already stored.
    pub existing: u64,
    /// Of `existing`, those whose stored row differs from the record.
    pub differ: u64,
    /// Of `differ`, those overwritten (or that would be) with `replace`.
    pub replaced: u64,
    /// Records refused because another row holds one of their unique
    /// keys (or, on PostgreSQL, the row they belong to is missing).
    pub conflicts: u64,
    /// Runs, workflow runs or step runs that were running when exported:
    /// they come over finished (see [`EXPORTED_WHILE_RUNNING`]).
    pub running: u64,
    /// Of `differ`, the runs, workflow runs and step runs whose stored row
    /// is further along (a later attempt, a finished run the record has
    /// running): kept as stored, also with `replace`.
    pub kept: u64,
    /// Loops, workflows, pools and triggers refused because `loops
    /// create` (or `loops workflows create`, `loops pools set`, `loops
    /// trigger`) would refuse them.
    pub invalid: u64,
}

impl TableImport {
    fn new(table: Table) -> TableImport {
        TableImport {
            table,
            records: 0,
            new: 0,
            existing: 0,
            differ: 0,
            replaced: 0,
            conflicts: 0,
            running: 0,
            kept: 0,
            invalid: 0,
        }
    }

    /// Existing records left as they are: identical ones, differing ones
    /// without `replace`, and those [`TableImport::kept`].
    pub fn skipped(&self) -> u64 {
        self.existing - self.replaced
    }
}

/// One record an import refused or has something to say about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportFinding {
    /// Its table.
    pub table: Table,
    /// Its id.
    pub id: String,
    /// What is the matter, e.g. `run 0123456789ab already holds slot … of
    /// loop …`.
    pub message: String,
}

/// What [`Store::import`] found, and with `apply` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportReport {
    /// Whether anything was written.
    pub applied: bool,
    /// Whether differing rows were overwritten.
    pub replace: bool,
    /// The document's `exportedAt`, as written.
    pub exported_at: Option<String>,
    /// The document's `schemaVersion`.
    pub schema_version: i64,
    /// The document's `history`: false for an export made with `--no-runs`.
    pub history: bool,
    /// Per table, in [`Table::ALL`] order.
    pub tables: Vec<TableImport>,
    /// The first [`IMPORT_LISTED`] records refused.
    pub conflicts: Vec<ImportFinding>,
    /// The first [`IMPORT_LISTED`] loops imported under a name another
    /// loop already has (names need not be unique, so they are imported).
    pub shared_names: Vec<ImportFinding>,
    /// How many loops of the document share a name with another stored
    /// loop.
    pub shared_name_count: u64,
    /// The first [`IMPORT_LISTED`] records kept because the stored row is
    /// newer (see [`TableImport::kept`]).
    pub kept: Vec<ImportFinding>,
    /// The first [`IMPORT_LISTED`] records refused with `loops create`'s
    /// message (see [`TableImport::invalid`]).
    pub invalid: Vec<ImportFinding>,
}

impl ImportReport {
    /// The counts of `table`.
    pub fn table(&self, table: Table) -> &TableImport {
        &self.tables[table.index()]
    }

    /// Records refused, over every table.
    pub fn conflict_count(&self) -> u64 {
        self.tables.iter().map(|t| t.conflicts).sum()
    }

    /// Records kept because the stored row is newer, over every table.
    pub fn kept_count(&self) -> u64 {
        self.tables.iter().map(|t| t.kept).sum()
    }

    /// Records refused as `loops create` would refuse them, over every
    /// table.
    pub fn invalid_count(&self) -> u64 {
        self.tables.iter().map(|t| t.invalid).sum()
    }

    /// Records written (or that would be): new plus replaced.
    pub fn written(&self) -> u64 {
        self.tables.iter().map(|t| t.new + t.replaced).sum()
    }
}

/// Everything an export or an import can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransferError {
    /// A store operation failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writing the document failed.
    // The message includes the I/O error, so it is not also the source:
    // an error chain (`{:#}`) would say it twice.
    #[error("could not write the export document: {0}")]
    Write(std::io::Error),
    /// Reading the document failed.
    #[error("could not read the document: {0}")]
    Read(std::io::Error),
    /// The document is not JSON, or not the shape of an export.
    #[error("the document is not a valid loops export: {0}")]
    Malformed(String),
    /// The document's `format` is not [`EXPORT_FORMAT`].
    #[error(
        "not a loops export document: its \"format\" is {found}, not \"loops-export\"; \
         import a file written by `loops export`"
    )]
    Format {
        /// The format found, quoted, or `missing`.
        found: String,
    },
    /// The document's `formatVersion` is newer than this binary reads.
    #[error(
        "the document has format version {found}, newer than the {supported} this loops \
         reads; import it with the newer loops that wrote it"
    )]
    NewerFormat {
        /// The version found.
        found: u64,
        /// The newest version this binary reads.
        supported: u32,
    },
    /// The document comes from a database schema newer than this binary's.
    #[error(
        "the document was exported from schema version {found}, newer than the {supported} \
         this loops knows; import it with the newer loops that wrote it"
    )]
    NewerSchema {
        /// The schema version found.
        found: i64,
        /// The newest schema version this binary knows.
        supported: i64,
    },
    /// Writing one record failed: its batch was rolled back, and the
    /// batches before it stay imported.
    #[error(
        "importing {table} record {index} (id {id}) failed: {source}; its batch of up to \
         {batch} {table} was rolled back and the records before that batch stay imported. \
         Fix the cause and run the same import again: records already there are skipped",
        table = table.name(),
        batch = IMPORT_BATCH
    )]
    Record {
        /// The record's table.
        table: Table,
        /// The record's position in its table's array, from 1.
        index: u64,
        /// The record's id.
        id: String,
        /// What failed.
        source: Box<StoreError>,
    },
}

impl Store {
    /// Writes this store's pools, loops and workflows, and with
    /// `options.history` its run history, to `out` as one export document
    /// stamped `now`, reading every table from one consistent snapshot and
    /// writing each row as it is read. Writes nothing to the database.
    ///
    /// The document holds the loops' targets as stored, `env` values and
    /// prompts included: the caller should keep it private.
    pub fn export(
        &self,
        out: &mut dyn Write,
        options: ExportOptions,
        now: Timestamp,
    ) -> Result<ExportSummary, TransferError> {
        let mut doc = document::Writer::start(out, now, options.history)?;
        let tables: &[Table] = if options.history {
            &Table::ALL
        } else {
            &Table::DEFINITIONS
        };
        let mut failed = None;
        self.backend()
            .export_rows(tables, &mut |record| match doc.record(&record) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    failed = Some(e);
                    ControlFlow::Break(())
                }
            })?;
        if let Some(e) = failed {
            return Err(e);
        }
        doc.finish()
    }

    /// Reads an export document from `input` into this store, keeping ids
    /// (see the module documentation), and reports per table how many
    /// records are new, already stored, differing, replaced, kept as
    /// stored because the stored row is newer, or refused.
    ///
    /// A loop or workflow that `loops create` would refuse is refused with
    /// create's message. A run, workflow run or step run that was running
    /// when exported is written finished, as this store's recovery would
    /// record it (abandoned, failed, skipped), with the error
    /// [`EXPORTED_WHILE_RUNNING`]; and one whose stored row is further
    /// along (a later attempt, a finished run) is kept as stored, also
    /// with `replace`.
    ///
    /// Without `options.apply` nothing is written: the report says what an
    /// import would do. With it, records are written in batches of
    /// [`IMPORT_BATCH`], each one transaction; a record that fails rolls
    /// back its batch and stops the import ([`TransferError::Record`]),
    /// and importing the same document again finishes it.
    ///
    /// A document whose `format` is not [`EXPORT_FORMAT`], or whose
    /// `formatVersion` or `schemaVersion` is newer than this binary's, is
    /// refused before anything is written.
    pub fn import(
        &self,
        input: &mut dyn Read,
        options: ImportOptions,
    ) -> Result<ImportReport, TransferError> {
        import::run(self, input, options)
    }
}

#[cfg(test)]
mod tests;
