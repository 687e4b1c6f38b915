//! `loops import <file> [--apply] [--replace]` (issue 15): reading an
//! export into this database, or with a dry run saying what it would
//! change. The work is `Store::import`'s; this module opens the document,
//! bounded as every file loops reads is, and renders the report.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use anyhow::{Context as _, Result, bail};
use loops_exec::{UserFileError, UserFileReader, open_user_file};
use loops_store::{ImportFinding, ImportOptions, ImportReport, Table};
use serde::Serialize;

use super::lift;
use crate::args::ImportArgs;
use crate::commands::now;
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::{self, Column, Printer};
use crate::request::{self, Document, Request, Warnings};

/// The most an import reads (issue 25 §1): 1 GiB. An export with run
/// history holds up to twice the output cap (256 KiB a stream) for each
/// run, so a large history legitimately runs to hundreds of MiB; the
/// document is parsed a record at a time, so the limit bounds the time an
/// import takes more than its memory.
const IMPORT_MAX_BYTES: u64 = 1 << 30;

/// `import`.
pub(crate) fn import(ctx: &Context, args: &ImportArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(Import {
            file: args.file.clone(),
            options: ImportOptions {
                apply: args.apply,
                replace: args.replace,
            },
        })
    })
}

/// The typed request of `import`: the document (a path, or `-` for
/// stdin), and whether to write and replace.
struct Import {
    file: String,
    options: ImportOptions,
}

/// What `import` returns: the report, and the file it was made from.
struct Imported {
    file: String,
    report: ImportReport,
}

impl Request for Import {
    type Document = Imported;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<Imported> {
        // The file first, so a missing one fails before the store is opened.
        let mut input: Box<dyn Read> = if self.file == "-" {
            let stdin = std::io::stdin().lock();
            Box::new(UserFileReader::new(
                stdin,
                "standard input".to_owned(),
                IMPORT_MAX_BYTES,
            ))
        } else {
            Box::new(open_import(Path::new(&self.file))?)
        };
        let store = ctx.open_store()?;
        if self.options.apply {
            ctx.auto_backup(&store, now(), "before loops import --apply")?;
        }
        let report = store
            .import(&mut input, self.options)
            .map_err(lift)
            .with_context(|| format!("importing {}", self.file))?;
        Ok(Imported {
            file: self.file,
            report,
        })
    }
}

impl Document for Imported {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json_of(&ImportJson::new(&self.file, &self.report))?)
    }

    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        human(ctx, &self.file, &self.report, out)
    }

    fn notes(&self, ctx: &Context) {
        let report = &self.report;
        if !report.applied && report.written() > 0 {
            let replace = if report.replace { " --replace" } else { "" };
            ctx.note(
                "hint",
                &format!(
                    "nothing was written; run `loops import {} --apply{replace}` to import",
                    render::shell_word(&self.file)
                ),
            );
        }
    }
}

/// The import file at `path`, bounded as every file loops reads is (issue
/// 25 §1): a regular file only (a pipe is read through `-`), failing past
/// [`IMPORT_MAX_BYTES`].
fn open_import(path: &Path) -> Result<UserFileReader<File>> {
    match open_user_file(path, "import file", IMPORT_MAX_BYTES) {
        Ok(reader) => Ok(reader),
        Err(e @ UserFileError::NotRegular { .. }) => {
            bail!("{e}; to import from a pipe, run `loops import -` with the document on stdin")
        }
        Err(e) => Err(e.into()),
    }
}

/// The report for people: what the document is, a row per table, then
/// the records refused and the loop names shared.
fn human(ctx: &Context, file: &str, report: &ImportReport, out: &mut Printer) -> Result<()> {
    let verb = if report.applied {
        format!("imported {file}")
    } else {
        format!("dry run of {file}: nothing was written")
    };
    let history = if report.history {
        "with run history"
    } else {
        "without run history"
    };
    out.line(&format!(
        "{verb} (exported {}, schema version {}, {history})",
        report
            .exported_at
            .as_deref()
            .unwrap_or("at an unknown time"),
        report.schema_version
    ))?;
    let mut columns = vec![
        Column::keep("TABLE"),
        Column::keep("IN FILE"),
        Column::keep("NEW"),
        Column::keep("EXISTING"),
        Column::keep("DIFFER"),
        Column::keep("SKIPPED"),
    ];
    if report.replace {
        columns.push(Column::keep("REPLACED"));
    }
    columns.extend([Column::keep("CONFLICTS"), Column::keep("RUNNING")]);
    // Issue 25: shown when there is something to count.
    let kept = report.kept_count() > 0;
    let invalid = report.invalid_count() > 0;
    if kept {
        columns.push(Column::keep("KEPT"));
    }
    if invalid {
        columns.push(Column::keep("INVALID"));
    }
    let mut table = render::Table::new(columns);
    for t in &report.tables {
        let mut cells = vec![
            t.table.name().to_owned(),
            t.records.to_string(),
            t.new.to_string(),
            t.existing.to_string(),
            t.differ.to_string(),
            t.skipped().to_string(),
        ];
        if report.replace {
            cells.push(t.replaced.to_string());
        }
        cells.extend([t.conflicts.to_string(), t.running.to_string()]);
        if kept {
            cells.push(t.kept.to_string());
        }
        if invalid {
            cells.push(t.invalid.to_string());
        }
        table.row(cells);
    }
    out.table(&table, |_| Vec::new())?;
    findings(out, "invalid", &report.invalid, report.invalid_count())?;
    findings(out, "conflict", &report.conflicts, report.conflict_count())?;
    findings(out, "kept", &report.kept, report.kept_count())?;
    findings(
        out,
        "shared name",
        &report.shared_names,
        report.shared_name_count,
    )?;
    let running: u64 = report.tables.iter().map(|t| t.running).sum();
    if running > 0 {
        ctx.note(
            "note",
            &format!(
                "{running} record(s) were running when exported; no runner here holds them, so \
                 they come over finished (runs abandoned, workflow runs failed, steps skipped), \
                 unless this database has them further along"
            ),
        );
    }
    Ok(())
}

/// One line per listed finding, then how many more there are.
fn findings(out: &mut Printer, label: &str, listed: &[ImportFinding], total: u64) -> Result<()> {
    for f in listed {
        out.line(&format!(
            "{label}: {} {}: {}",
            f.table.name(),
            f.id,
            f.message
        ))?;
    }
    let more = total.saturating_sub(u64::try_from(listed.len()).unwrap_or(u64::MAX));
    if more > 0 {
        out.line(&format!("{label}: … and {more} more"))?;
    }
    Ok(())
}

/// What `import --json` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ImportJson {
    file: String,
    applied: bool,
    replace: bool,
    exported_at: Option<String>,
    schema_version: i64,
    history: bool,
    tables: serde_json::Map<String, serde_json::Value>,
    conflict_count: u64,
    conflicts: Vec<FindingJson>,
    shared_name_count: u64,
    shared_names: Vec<FindingJson>,
    kept_count: u64,
    kept: Vec<FindingJson>,
    invalid_count: u64,
    invalid: Vec<FindingJson>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TableJson {
    records: u64,
    new: u64,
    existing: u64,
    differ: u64,
    skipped: u64,
    replaced: u64,
    conflicts: u64,
    running: u64,
    kept: u64,
    invalid: u64,
}

#[derive(Serialize)]
struct FindingJson {
    table: &'static str,
    id: String,
    message: String,
}

impl From<&ImportFinding> for FindingJson {
    fn from(f: &ImportFinding) -> FindingJson {
        FindingJson {
            table: f.table.key(),
            id: f.id.clone(),
            message: f.message.clone(),
        }
    }
}

impl ImportJson {
    fn new(file: &str, report: &ImportReport) -> ImportJson {
        let table = |t: Table| {
            let t = report.table(t);
            TableJson {
                records: t.records,
                new: t.new,
                existing: t.existing,
                differ: t.differ,
                skipped: t.skipped(),
                replaced: t.replaced,
                conflicts: t.conflicts,
                running: t.running,
                kept: t.kept,
                invalid: t.invalid,
            }
        };
        ImportJson {
            file: file.to_owned(),
            applied: report.applied,
            replace: report.replace,
            exported_at: report.exported_at.clone(),
            schema_version: report.schema_version,
            history: report.history,
            tables: Table::ALL
                .iter()
                .map(|t| {
                    let value = serde_json::to_value(table(*t)).unwrap_or_default();
                    (t.key().to_owned(), value)
                })
                .collect(),
            conflict_count: report.conflict_count(),
            conflicts: report.conflicts.iter().map(FindingJson::from).collect(),
            shared_name_count: report.shared_name_count,
            shared_names: report.shared_names.iter().map(FindingJson::from).collect(),
            kept_count: report.kept_count(),
            kept: report.kept.iter().map(FindingJson::from).collect(),
            invalid_count: report.invalid_count(),
            invalid: report.invalid.iter().map(FindingJson::from).collect(),
        }
    }
}
