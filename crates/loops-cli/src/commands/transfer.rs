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
//! nothing here prints a record. `import` is `transfer/import.rs`.

mod import;

pub(crate) use import::import;

use std::cell::OnceCell;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use loops_store::{ExportOptions, ExportSummary, Store, TransferError};
use serde::Serialize;

use super::apply::{self, export::LoopsFile, export::Select, export::directory_of};
use super::now;
use crate::args::ExportArgs;
use crate::args::ExportFormat;
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::Printer;
use crate::request::{self, Document, Request, Warnings};

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
    request::serve(ctx, out, |_| {
        let toml = match args.format {
            ExportFormat::Toml => Some(Select {
                labels: crate::resolve::policy::labels(&args.labels)?,
                scope: args.scope.clone(),
            }),
            ExportFormat::Json if !args.labels.is_empty() || args.scope.is_some() => bail!(
                "--label and --scope pick the loops of a --format toml export; a JSON export \
                 holds the whole store"
            ),
            ExportFormat::Json => None,
        };
        Ok(Export {
            to: if args.file == "-" {
                ExportTo::Stdout
            } else {
                ExportTo::File {
                    path: PathBuf::from(&args.file),
                    force: args.force,
                }
            },
            options: ExportOptions {
                history: !args.no_runs,
            },
            toml,
        })
    })
}

/// The typed request of `export`: where the document goes, and what it
/// holds.
struct Export {
    to: ExportTo,
    options: ExportOptions,
    /// `--format toml`: the loops to write as a loops file.
    toml: Option<Select>,
}

/// Where an export goes.
enum ExportTo {
    /// `--file -`: the document is the output.
    Stdout,
    /// A new private file (see [`write_private`]).
    File { path: PathBuf, force: bool },
}

/// What `export` returns.
enum Exported {
    /// An export to stdout, written as it is read in the render step (the
    /// document can run to hundreds of MiB); the totals, once written, for
    /// the note after it.
    Stream {
        store: Store,
        options: ExportOptions,
        summary: OnceCell<ExportSummary>,
    },
    /// The file written, and what it holds.
    File {
        path: PathBuf,
        summary: ExportSummary,
    },
    /// A loops file (`--format toml`), and where it was written (`None`:
    /// it is the output).
    Toml {
        path: Option<PathBuf>,
        file: LoopsFile,
    },
}

impl Request for Export {
    type Document = Exported;

    fn run(self, ctx: &Context, warnings: &mut Warnings) -> Result<Exported> {
        let store = ctx.open_store()?;
        if let Some(select) = &self.toml {
            return toml_export(&store, select, self.to, warnings);
        }
        let options = self.options;
        let ExportTo::File { path, force } = self.to else {
            return Ok(Exported::Stream {
                store,
                options,
                summary: OnceCell::new(),
            });
        };
        let summary = write_private(&path, force, |file| {
            store.export(file, options, now()).map_err(lift)
        })
        .with_context(|| format!("exporting to {}", path.display()))?;
        Ok(Exported::File { path, summary })
    }
}

/// `export --format toml`: the loops file of `select`, written to `to`.
fn toml_export(
    store: &Store,
    select: &Select,
    to: ExportTo,
    warnings: &mut Warnings,
) -> Result<Exported> {
    let path = match &to {
        ExportTo::File { path, .. } => Some(path.clone()),
        ExportTo::Stdout => None,
    };
    let file = apply::export::write(store, select, &directory_of(path.as_deref()), now())?;
    for line in &file.lossy {
        warnings.push(line.clone());
    }
    if let ExportTo::File { path, force } = &to {
        write_private(path, *force, |w| Ok(w.write_all(file.text.as_bytes())?))
            .with_context(|| format!("exporting to {}", path.display()))?;
    }
    Ok(Exported::Toml { path, file })
}

impl Exported {
    /// Streams the document to stdout, whatever the output format (it is
    /// JSON), straight to the stream rather than through the printer.
    fn stream(store: &Store, options: ExportOptions) -> Result<ExportSummary> {
        let mut doc = BufWriter::new(std::io::stdout().lock());
        store
            .export(&mut doc, options, now())
            .map_err(lift)
            .context("exporting to stdout")
    }
}

impl Document for Exported {
    fn json(&self, out: &mut Printer) -> Result<()> {
        match self {
            Exported::Stream {
                store,
                options,
                summary,
            } => {
                let _ = summary.set(Exported::stream(store, *options)?);
                Ok(())
            }
            Exported::File { path, summary } => Ok(out.json_of(&ExportJson::new(path, summary))?),
            Exported::Toml { path: None, file } => Ok(out.line(file.text.trim_end())?),
            Exported::Toml {
                path: Some(path),
                file,
            } => Ok(out.json(&serde_json::json!({
                "path": path.display().to_string(),
                "format": "toml",
                "counts": {"workflows": file.workflows, "loops": file.loops},
            }))?),
        }
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        if let Exported::Toml {
            path: Some(path),
            file,
        } = self
        {
            let n = |count: usize, what: &str| match count {
                1 => format!("1 {what}"),
                n => format!("{n} {what}s"),
            };
            out.line(&format!(
                "exported {} and {} to {}",
                n(file.loops, "loop"),
                n(file.workflows, "workflow"),
                path.display()
            ))?;
            return Ok(());
        }
        let Exported::File { path, summary } = self else {
            return self.json(out);
        };
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
        Ok(())
    }

    /// What was written to stdout; or, for a file, that it holds runs as
    /// they were and is private.
    fn notes(&self, ctx: &Context) {
        let summary = match self {
            Exported::Stream { summary, .. } => {
                if let Some(summary) = summary.get() {
                    ctx.note("note", &format!("exported {}", totals(summary)));
                }
                return;
            }
            Exported::File { summary, .. } => summary,
            Exported::Toml { file, .. } => {
                if file.text.contains("env = ") || file.text.contains("[loop.env]") {
                    ctx.note(
                        "note",
                        "the file holds the loops' environment values as stored (mode 0600); \
                         keep secrets out of git",
                    );
                }
                return;
            }
        };
        if summary.running > 0 {
            ctx.note(
                "note",
                &format!(
                    "{} run(s), workflow run(s) or step run(s) were running; they are in the file \
                     as they were",
                    summary.running
                ),
            );
        }
        ctx.note(
            "note",
            "the file holds the loops' commands, environment values and prompts as stored \
             (mode 0600); keep it private",
        );
    }
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
