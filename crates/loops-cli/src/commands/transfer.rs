//! `loops export --file <path> [--no-runs] [--force]` and `loops import
//! <file> [--apply] [--replace]` (issue 15): moving everything between
//! databases, SQLite or PostgreSQL, as one JSON document with ids kept.
//!
//! New in loops; the flag names are later OpenLoops versions'. The work
//! is `loops_store`'s (`Store::export`, `Store::import`); this module
//! opens the files and prints. The document holds the loops' targets as
//! stored, command `env` values and prompts included, so it is written
//! like the database itself: a new file of mode 0600, never through a
//! symbolic link, replacing an existing file only with `--force`; and
//! nothing here prints a record.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use loops_exec::{UserFileError, UserFileReader, open_user_file};
use loops_store::{
    ExportOptions, ExportSummary, ImportFinding, ImportOptions, ImportReport, Table, TransferError,
};
use serde::Serialize;

use super::now;
use crate::args::{ExportArgs, ImportArgs};
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::{self, Column, Printer};

/// The most an import reads (issue 25 §1): 1 GiB. An export with run
/// history holds up to twice the output cap (256 KiB a stream) for each
/// run, so a large history legitimately runs to hundreds of MiB; the
/// document is parsed a record at a time, so the limit bounds the time an
/// import takes more than its memory.
const IMPORT_MAX_BYTES: u64 = 1 << 30;

/// An export or import error for the exit code's walk of the chain: a
/// store error bare, so a damaged database still gets its advice.
fn lift(e: TransferError) -> anyhow::Error {
    match e {
        TransferError::Store(e) => e.into(),
        other => other.into(),
    }
}

/// `export`.
pub(crate) fn export(ctx: &Context, args: &ExportArgs, out: &mut Printer) -> Result<Outcome> {
    let store = ctx.open_store()?;
    let options = ExportOptions {
        history: !args.no_runs,
    };
    if args.file == "-" {
        // The document is the output; what was written goes to stderr.
        let mut doc = BufWriter::new(std::io::stdout().lock());
        let summary = store
            .export(&mut doc, options, now())
            .map_err(lift)
            .context("exporting to stdout")?;
        ctx.note("note", &format!("exported {}", totals(&summary)));
        return Ok(Outcome::Success);
    }
    let path = Path::new(&args.file);
    let summary = write_private(path, args.force, |file| {
        store.export(file, options, now()).map_err(lift)
    })
    .with_context(|| format!("exporting to {}", path.display()))?;
    if out.json {
        out.json_of(&ExportJson::new(path, &summary))?;
    } else {
        out.line(&format!("exported to {}", path.display()))?;
        for (table, n) in &summary.counts {
            if table.is_history() && !summary.history {
                continue;
            }
            out.line(&format!("  {:<15}{n:>8}", table.name()))?;
        }
        if !summary.history {
            out.line("  run history left out (--no-runs)")?;
        }
    }
    if summary.running > 0 {
        ctx.note(
            "note",
            &format!(
                "{} run(s), workflow run(s) or step run(s) were running; they are in the file as \
                 they were",
                summary.running
            ),
        );
    }
    ctx.note(
        "note",
        "the file holds the loops' commands, environment values and prompts as stored \
         (mode 0600); keep it private",
    );
    Ok(Outcome::Success)
}

/// Writes a new private file at `path` with `write`: mode 0600 whatever
/// the umask, never through a symbolic link, and over an existing file
/// only with `force`, so an export can neither leak through a planted
/// link nor clobber a file by mistake. A failed write leaves no file.
fn write_private<T>(
    path: &Path,
    force: bool,
    write: impl FnOnce(&mut dyn Write) -> Result<T>,
) -> Result<T> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => bail!(
            "refusing to write to {}: it is a symbolic link, and loops never writes an export \
             through one, even with --force; give the path it points to, or another path",
            path.display()
        ),
        Ok(meta) if !meta.is_file() => bail!(
            "refusing to write to {}: it exists and is not a regular file",
            path.display()
        ),
        Ok(_) if !force => bail!(
            "{} already exists; pass --force to replace it, or choose another path",
            path.display()
        ),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("checking {}", path.display())),
    }
    // With --force the document is written beside the old file and
    // renamed over it once complete, which replaces a link planted in the
    // meantime rather than following it. Without, it is created in place
    // with O_EXCL, which follows no link and clobbers nothing.
    let target = if force {
        temporary(path)?
    } else {
        path.to_owned()
    };
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&target)
        .with_context(|| format!("creating {}", target.display()))?;
    let written = fill(&file, write).and_then(|v| {
        if force {
            std::fs::rename(&target, path)
                .with_context(|| format!("replacing {}", path.display()))?;
        }
        Ok(v)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&target);
    }
    written
}

/// Narrows `file` to 0600 (the umask may have left less, never more),
/// fills it with `write` and syncs it.
fn fill<T>(file: &File, write: impl FnOnce(&mut dyn Write) -> Result<T>) -> Result<T> {
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .context("setting the file's mode to 0600")?;
    let mut buffered = BufWriter::with_capacity(1 << 16, file);
    let value = write(&mut buffered)?;
    buffered.flush().context("writing the file")?;
    drop(buffered);
    file.sync_all().context("syncing the file")?;
    Ok(value)
}

/// A new name beside `path` for the file that replaces it.
fn temporary(path: &Path) -> Result<PathBuf> {
    let Some(name) = path.file_name() else {
        bail!("{} does not name a file", path.display());
    };
    let mut tmp = std::ffi::OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".loops-export-{}", std::process::id()));
    Ok(path.with_file_name(tmp))
}

/// `5 workflows, 12 loops, …` for a one-line summary.
fn totals(summary: &ExportSummary) -> String {
    let parts: Vec<String> = summary
        .counts
        .iter()
        .filter(|(table, _)| summary.history || !table.is_history())
        .map(|(table, n)| format!("{n} {}", table.name()))
        .collect();
    let mut line = parts.join(", ");
    if !summary.history {
        line.push_str(" (no run history)");
    }
    line
}

/// What `export --json` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExportJson {
    path: String,
    exported_at: String,
    history: bool,
    counts: serde_json::Map<String, serde_json::Value>,
    running: u64,
}

impl ExportJson {
    fn new(path: &Path, summary: &ExportSummary) -> ExportJson {
        ExportJson {
            path: path.display().to_string(),
            exported_at: summary.exported_at.to_string(),
            history: summary.history,
            counts: summary
                .counts
                .iter()
                .map(|(table, n)| (table.key().to_owned(), (*n).into()))
                .collect(),
            running: summary.running,
        }
    }
}

/// `import`.
pub(crate) fn import(ctx: &Context, args: &ImportArgs, out: &mut Printer) -> Result<Outcome> {
    let mut input: Box<dyn Read> = if args.file == "-" {
        let stdin = std::io::stdin().lock();
        Box::new(UserFileReader::new(
            stdin,
            "standard input".to_owned(),
            IMPORT_MAX_BYTES,
        ))
    } else {
        Box::new(open_import(Path::new(&args.file))?)
    };
    let store = ctx.open_store()?;
    if args.apply {
        ctx.auto_backup(&store, now(), "before loops import --apply")?;
    }
    let options = ImportOptions {
        apply: args.apply,
        replace: args.replace,
    };
    let report = store
        .import(&mut input, options)
        .map_err(lift)
        .with_context(|| format!("importing {}", args.file))?;
    if out.json {
        out.json_of(&ImportJson::new(&args.file, &report))?;
    } else {
        human(ctx, &args.file, &report, out)?;
    }
    if !report.applied && report.written() > 0 {
        let replace = if report.replace { " --replace" } else { "" };
        ctx.note(
            "hint",
            &format!(
                "nothing was written; run `loops import {} --apply{replace}` to import",
                render::shell_word(&args.file)
            ),
        );
    }
    Ok(Outcome::Success)
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
        Column { header: "TABLE" },
        Column { header: "IN FILE" },
        Column { header: "NEW" },
        Column { header: "EXISTING" },
        Column { header: "DIFFER" },
        Column { header: "SKIPPED" },
    ];
    if report.replace {
        columns.push(Column { header: "REPLACED" });
    }
    columns.extend([
        Column {
            header: "CONFLICTS",
        },
        Column { header: "RUNNING" },
    ]);
    // Issue 25: shown when there is something to count.
    let kept = report.kept_count() > 0;
    let invalid = report.invalid_count() > 0;
    if kept {
        columns.push(Column { header: "KEPT" });
    }
    if invalid {
        columns.push(Column { header: "INVALID" });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_file_is_0600_and_never_clobbered_without_force() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("export.json");
        write_private(&path, false, |w| Ok(w.write_all(b"one")?)).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let err = write_private(&path, false, |w| Ok(w.write_all(b"two")?)).unwrap_err();
        assert!(err.to_string().contains("pass --force"), "{err}");
        write_private(&path, true, |w| Ok(w.write_all(b"two")?)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        // Only the export is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_failed_export_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("export.json");
        let failing = |w: &mut dyn Write| -> Result<()> {
            w.write_all(b"half")?;
            bail!("the database went away")
        };
        let err = write_private(&path, false, failing).unwrap_err();
        assert!(err.to_string().contains("went away"));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // With --force, the old file stays as it was.
        std::fs::write(&path, "old").unwrap();
        write_private(&path, true, failing).unwrap_err();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
    }
}
