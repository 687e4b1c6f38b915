//! An import: each parsed record is compared with the stored rows that
//! share its id or another unique key, counted, and with `apply` written,
//! in batches of [`IMPORT_BATCH`] records, each batch one
//! [`Store::transaction`].
//!
//! The decision for one record, the same in a dry run and an applied one:
//! - no row has its id: new, inserted, unless another row holds one of its
//!   unique keys (a conflict, refused);
//! - a row has its id and the same columns: left as it is;
//! - a row has its id and differs: left as it is, or with `replace`
//!   overwritten, unless another row holds one of the record's unique keys.
//!
//! A loop whose name another stored loop has is imported all the same
//! (names need not be unique, as in the original) and reported.

use std::io::Read;

use super::document::{self, Sink};
use super::{
    IMPORT_BATCH, IMPORT_LISTED, ImportFinding, ImportOptions, ImportReport, Record, Table,
    TableImport, TransferError,
};
use crate::Store;
use crate::error::StoreError;

/// Imports the document from `input` into `store` (see
/// [`Store::import`]).
pub(super) fn run(
    store: &Store,
    input: &mut dyn Read,
    options: ImportOptions,
) -> Result<ImportReport, TransferError> {
    let mut importer = Importer {
        store,
        options,
        batch: Vec::with_capacity(IMPORT_BATCH),
        read: [0; 6],
        tally: Tally::new(),
    };
    let header = document::read(input, &mut importer)?;
    importer.flush()?;
    let tally = importer.tally;
    Ok(ImportReport {
        applied: options.apply,
        replace: options.replace,
        exported_at: header.exported_at,
        schema_version: header.schema_version.unwrap_or_default(),
        history: header.history.unwrap_or(true),
        tables: tally.tables.to_vec(),
        conflicts: tally.conflicts,
        shared_names: tally.shared_names,
        shared_name_count: tally.shared_name_count,
    })
}

/// The counts and findings so far.
#[derive(Clone)]
struct Tally {
    tables: [TableImport; 6],
    conflicts: Vec<ImportFinding>,
    shared_names: Vec<ImportFinding>,
    shared_name_count: u64,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            tables: Table::ALL.map(TableImport::new),
            conflicts: Vec::new(),
            shared_names: Vec::new(),
            shared_name_count: 0,
        }
    }

    fn of(&mut self, table: Table) -> &mut TableImport {
        &mut self.tables[table.index()]
    }

    fn conflict(&mut self, record: &Record, message: String) {
        self.of(record.table()).conflicts += 1;
        if self.conflicts.len() < IMPORT_LISTED {
            self.conflicts.push(finding(record, message));
        }
    }
}

fn finding(record: &Record, message: String) -> ImportFinding {
    ImportFinding {
        table: record.table(),
        id: record.id().to_owned(),
        message,
    }
}

struct Importer<'s> {
    store: &'s Store,
    options: ImportOptions,
    /// Records waiting to be handled, each with its position in its
    /// table's array.
    batch: Vec<(u64, Record)>,
    /// Records read per table.
    read: [u64; 6],
    tally: Tally,
}

impl Sink for Importer<'_> {
    fn record(&mut self, record: Record) -> Result<(), TransferError> {
        let read = &mut self.read[record.table().index()];
        *read += 1;
        self.batch.push((*read, record));
        if self.batch.len() >= IMPORT_BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn end_table(&mut self, _table: Table) -> Result<(), TransferError> {
        self.flush()
    }
}

impl Importer<'_> {
    /// Handles the waiting records: with `apply` in one transaction, whose
    /// counts join the report only once it committed.
    fn flush(&mut self) -> Result<(), TransferError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.batch);
        let mut tally = self.tally.clone();
        let handle_all = |tally: &mut Tally| {
            for (index, record) in &batch {
                self.handle(record, tally)
                    .map_err(|e| TransferError::Record {
                        table: record.table(),
                        index: *index,
                        id: record.id().to_owned(),
                        source: Box::new(e),
                    })?;
            }
            Ok::<(), TransferError>(())
        };
        if self.options.apply {
            self.store.transaction(|| handle_all(&mut tally))?;
        } else {
            handle_all(&mut tally)?;
        }
        self.tally = tally;
        self.batch = batch;
        self.batch.clear();
        Ok(())
    }

    /// Decides one record, counts it, and with `apply` writes it.
    fn handle(&self, record: &Record, tally: &mut Tally) -> Result<(), StoreError> {
        let db = self.store.backend();
        let rows = db.matching_rows(record)?;
        let table = record.table();
        let counts = tally.of(table);
        counts.records += 1;
        if record.is_running() {
            counts.running += 1;
        }
        let stored = rows.iter().find(|r| r.id() == record.id());
        let other = rows.iter().find(|r| r.id() != record.id());
        let holder = other.filter(|_| table != Table::Loops);
        match stored {
            None => {
                if let Some(holder) = holder {
                    tally.conflict(record, clash(record, holder));
                    return Ok(());
                }
                if self.options.apply && !db.write_record(record, false)? {
                    tally.conflict(record, not_written(record));
                    return Ok(());
                }
                tally.of(table).new += 1;
                if let (Record::Loop(lp), Some(namesake)) = (record, other) {
                    tally.shared_name_count += 1;
                    if tally.shared_names.len() < IMPORT_LISTED {
                        let message = format!(
                            "loop {} already has the name {:?}; names need not be unique, so \
                             it is imported too, and a lookup by that name picks the newest",
                            namesake.id(),
                            lp.name
                        );
                        tally.shared_names.push(finding(record, message));
                    }
                }
            }
            Some(stored) if stored == record || !self.options.replace => {
                let counts = tally.of(table);
                counts.existing += 1;
                if stored != record {
                    counts.differ += 1;
                }
            }
            Some(_) => {
                if let Some(holder) = holder {
                    tally.conflict(record, clash(record, holder));
                    return Ok(());
                }
                if self.options.apply && !db.write_record(record, true)? {
                    tally.conflict(record, not_written(record));
                    return Ok(());
                }
                let counts = tally.of(table);
                counts.existing += 1;
                counts.differ += 1;
                counts.replaced += 1;
            }
        }
        Ok(())
    }
}

/// Why `record` cannot go in: `holder`, another row, has one of its
/// unique keys.
fn clash(record: &Record, holder: &Record) -> String {
    let other = holder.id();
    match record {
        Record::Workflow(w) => {
            format!(
                "the active workflow {other} already has the name {:?}",
                w.name
            )
        }
        Record::Run(r) => format!(
            "run {other} already holds slot {} of loop {}",
            r.run.scheduled_for, r.run.loop_id
        ),
        Record::WorkflowRun(r) => format!(
            "workflow run {other} of workflow {} already has idempotency key {:?}",
            r.workflow_id,
            r.idempotency_key.as_deref().unwrap_or_default()
        ),
        Record::StepRun(s) => format!(
            "step run {other} already records step {:?} of workflow run {}",
            s.step.step_id, s.step.workflow_run_id
        ),
        Record::Event(e) => format!(
            "event {other} already has sequence {} of workflow run {}",
            e.sequence, e.workflow_run_id
        ),
        Record::Loop(_) => format!("loop {other} conflicts with it"),
    }
}

/// Why a write that the checks allowed wrote nothing.
fn not_written(record: &Record) -> String {
    let parent = match record {
        Record::WorkflowRun(r) => format!(" (its workflow {})", r.workflow_id),
        Record::StepRun(s) => format!(" (its workflow run {})", s.step.workflow_run_id),
        Record::Event(e) => format!(" (its workflow run {})", e.workflow_run_id),
        _ => String::new(),
    };
    format!(
        "not written: another row took one of its unique keys meanwhile, or the row it belongs \
         to{parent} is not in the database"
    )
}
