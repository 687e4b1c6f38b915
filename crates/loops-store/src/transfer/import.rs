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
//!
//! Issue 25. Before any of that, a loop or workflow that `loops create`
//! would refuse is refused with create's message ([`create_refuses`]), so
//! an import stores nothing create could not. A run, workflow run or step
//! run that was running is decided as the finished row an import writes
//! in its place ([`Arrival`]), and a stored row further along than the
//! document's is kept as stored, also with `replace`
//! ([`stored_is_newer`]). The read takes no lock, so on PostgreSQL a
//! runner may move the row on before the write: the overwrite is guarded
//! by what was read, and when it writes nothing the row is kept as the
//! runner left it ([`changed_message`]).

use std::io::Read;

use loops_core::{Timestamp, validate_new_loop, workflow_from_json};

use super::document::{self, Header, Sink};
use super::history::{Arrival, changed_message, kept_message, stored_is_newer};
use super::pools_triggers::{pool_refused, trigger_refused};
use super::{
    IMPORT_BATCH, IMPORT_LISTED, ImportFinding, ImportOptions, ImportReport, Record, Table,
    TableImport, TransferError,
};
use crate::Store;
use crate::error::StoreError;
use crate::loops::loop_settings;

/// The longest message a finding of a refused record carries, in
/// characters: create's message may quote the value it refuses, which a
/// document can make as long as it likes.
const MESSAGE_CHARS: usize = 300;

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
        read: [0; Table::COUNT],
        tally: Tally::new(),
        arrival: Arrival::default(),
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
        kept: tally.kept,
        invalid: tally.invalid,
    })
}

/// The counts and findings so far.
#[derive(Clone)]
struct Tally {
    tables: [TableImport; Table::COUNT],
    conflicts: Vec<ImportFinding>,
    shared_names: Vec<ImportFinding>,
    shared_name_count: u64,
    kept: Vec<ImportFinding>,
    invalid: Vec<ImportFinding>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            tables: Table::ALL.map(TableImport::new),
            conflicts: Vec::new(),
            shared_names: Vec::new(),
            shared_name_count: 0,
            kept: Vec::new(),
            invalid: Vec::new(),
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

    fn invalid(&mut self, record: &Record, message: String) {
        self.of(record.table()).invalid += 1;
        if self.invalid.len() < IMPORT_LISTED {
            self.invalid.push(finding(record, message));
        }
    }

    fn kept(&mut self, record: &Record, message: String) {
        let counts = self.of(record.table());
        counts.existing += 1;
        counts.differ += 1;
        counts.kept += 1;
        if self.kept.len() < IMPORT_LISTED {
            self.kept.push(finding(record, message));
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
    /// table's array and, for a record that was running, the finished row
    /// written in its place.
    batch: Vec<(u64, Record, Option<Record>)>,
    /// Records read per table.
    read: [u64; Table::COUNT],
    tally: Tally,
    arrival: Arrival,
}

impl Sink for Importer<'_> {
    fn header(&mut self, header: &Header) -> Result<(), TransferError> {
        let exported_at = header
            .exported_at
            .as_deref()
            .and_then(|t| t.parse::<Timestamp>().ok());
        self.arrival = Arrival::new(exported_at);
        Ok(())
    }

    fn record(&mut self, record: Record) -> Result<(), TransferError> {
        let read = &mut self.read[record.table().index()];
        *read += 1;
        let arrived = self.arrival.of(&record);
        self.batch.push((*read, record, arrived));
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
            for (index, record, arrived) in &batch {
                self.handle(record, arrived.as_ref(), tally).map_err(|e| {
                    TransferError::Record {
                        table: record.table(),
                        index: *index,
                        id: record.id().to_owned(),
                        source: Box::new(e),
                    }
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

    /// Decides one record, counts it, and with `apply` writes it, or the
    /// finished row `arrived` in its place.
    fn handle(
        &self,
        original: &Record,
        arrived: Option<&Record>,
        tally: &mut Tally,
    ) -> Result<(), StoreError> {
        let record = arrived.unwrap_or(original);
        let table = record.table();
        let counts = tally.of(table);
        counts.records += 1;
        if original.is_running() {
            counts.running += 1;
        }
        if let Some(message) = create_refuses(record) {
            tally.invalid(record, message);
            return Ok(());
        }
        let db = self.store.backend();
        let rows = db.matching_rows(record)?;
        #[cfg(test)]
        seam::between_read_and_write(self.store, record);
        let stored = rows.iter().find(|r| r.id() == record.id());
        let other = rows.iter().find(|r| r.id() != record.id());
        let holder = other.filter(|_| table != Table::Loops);
        match stored {
            None => {
                if let Some(holder) = holder {
                    tally.conflict(record, clash(record, holder));
                    return Ok(());
                }
                if self.options.apply && !db.write_record(record, None)? {
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
            Some(stored) if stored != record && stored_is_newer(stored, original) => {
                tally.kept(record, kept_message(stored, original));
            }
            Some(stored) if stored == record || !self.options.replace => {
                let counts = tally.of(table);
                counts.existing += 1;
                if stored != record {
                    counts.differ += 1;
                }
            }
            Some(stored) => {
                if let Some(holder) = holder {
                    tally.conflict(record, clash(record, holder));
                    return Ok(());
                }
                if self.options.apply && !db.write_record(record, Some(stored))? {
                    // Either the row changed since it was read (a runner
                    // here claimed, finished or retried it) or the row the
                    // record belongs to is missing: the row as it is now
                    // tells which.
                    let now = db.matching_rows(record)?;
                    match now.iter().find(|r| r.id() == record.id()) {
                        Some(now) if now != stored => tally.kept(record, changed_message(now)),
                        Some(_) => tally.conflict(record, not_written(record)),
                        None => tally.conflict(record, vanished()),
                    }
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
        Record::Trigger(t) => match (&t.source_run_id, &t.idempotency_key) {
            (Some(run), _) if holder_has_source(holder, run.as_str()) => format!(
                "trigger {other} of loop {} was already fired by run {run}",
                t.loop_id
            ),
            (_, Some(key)) => format!(
                "trigger {other} of loop {} already has idempotency key {key:?}",
                t.loop_id
            ),
            _ => format!("trigger {other} conflicts with it"),
        },
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
        Record::Pool(_) => format!("pool {other} conflicts with it"),
    }
}

/// Whether `holder`, a stored trigger, was fired by upstream run `run`.
fn holder_has_source(holder: &Record, run: &str) -> bool {
    matches!(holder, Record::Trigger(h)
        if h.source_run_id.as_ref().is_some_and(|r| r.as_str() == run))
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

/// Why a record whose stored row was deleted during the import was not
/// written.
fn vanished() -> String {
    "not written: its stored row was deleted during the import".to_owned()
}

/// `loops create`'s message for a loop or workflow it would refuse (issue
/// 25 item 6): the core validation create runs, on the settings the record
/// holds, so an import stores nothing create could not (an `env` name
/// `""` or `"A=B"`, a name of megabytes, an option-like agent value, …).
/// The same for a pool (`loops pools set`) and a trigger's payload and key
/// (`loops trigger`).
fn create_refuses(record: &Record) -> Option<String> {
    let mut message = match record {
        Record::Pool(p) => pool_refused(p)?,
        Record::Trigger(t) => trigger_refused(t)?,
        Record::Loop(lp) => {
            refused_as("loops create", validate_new_loop(&loop_settings(lp)).err()?)
        }
        Record::Workflow(w) => {
            let file = serde_json::json!({
                "name": w.name,
                "description": w.description,
                "version": w.version,
                "steps": w.steps,
                "maxParallel": w.max_parallel,
            });
            refused_as(
                "loops workflows create",
                workflow_from_json(&file, None).err()?,
            )
        }
        _ => return None,
    };
    if let Some((cut, _)) = message.char_indices().nth(MESSAGE_CHARS) {
        message.truncate(cut);
        message.push('…');
    }
    Some(message)
}

/// A finding's message for a record `command` would refuse with `error`.
pub(super) fn refused_as(command: &str, error: impl std::fmt::Display) -> String {
    format!("refused as `{command}` refuses it: {error}")
}

/// A test's hook between an import's read of a record's stored rows and
/// its write: where, on PostgreSQL, a writer on another connection may
/// commit, since the read takes no lock.
#[cfg(test)]
pub(super) mod seam {
    use std::cell::RefCell;

    use super::{Record, Store};

    /// What a test runs there.
    pub(in crate::transfer) type Hook = Box<dyn Fn(&Store, &Record)>;

    thread_local! {
        static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
    }

    /// Runs `f` with `hook` between each read and write of this thread's
    /// imports.
    pub(in crate::transfer) fn with_hook<T>(hook: Hook, f: impl FnOnce() -> T) -> T {
        HOOK.set(Some(hook));
        let out = f();
        HOOK.set(None);
        out
    }

    pub(super) fn between_read_and_write(store: &Store, record: &Record) {
        HOOK.with_borrow(|hook| {
            if let Some(hook) = hook {
                hook(store, record);
            }
        });
    }
}
