//! `loops backup [--keep N] [--list]` (issue 14): a consistent copy of the
//! database in `$LOOPS_DATA_DIR/backups/`, keeping the newest N, or the
//! list of backups. The automatic backups other commands take are
//! `auto_backup`'s.
//!
//! New in loops; the original has no backups. The work is
//! `loops_store`'s (`take_backup`, `auto_backup`); this module reads the
//! clock and the environment, and prints.

use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use loops_core::Timestamp;
use loops_store::{DB_FILE, backup_dir, list_backups, take_backup};
use serde::Serialize;

use super::now;
use crate::args::BackupArgs;
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::{self, Column, Printer, Table};
use crate::request::{self, Document, Request, Warnings};
use crate::resolve;

/// A backup as `--json` prints it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BackupJson {
    path: String,
    taken_at: Timestamp,
    size_bytes: u64,
}

impl From<&loops_store::Backup> for BackupJson {
    fn from(b: &loops_store::Backup) -> BackupJson {
        BackupJson {
            path: b.path.display().to_string(),
            taken_at: b.taken_at,
            size_bytes: b.size_bytes,
        }
    }
}

/// What `backup --json` prints: the new backup, and the ones removed.
#[derive(Serialize)]
struct TakenJson {
    #[serde(flatten)]
    backup: BackupJson,
    removed: Vec<BackupJson>,
}

/// `backup`.
pub(crate) fn run(ctx: &Context, args: &BackupArgs, out: &mut Printer) -> Result<Outcome> {
    if args.list {
        return request::serve(ctx, out, |_| {
            Ok(ListBackups {
                dir: backup_dir(&ctx.data_dir()?),
            })
        });
    }
    request::serve(ctx, out, |_| {
        let db = ctx.data_dir()?.join(DB_FILE);
        let keep = resolve::positive_int(&args.keep, "--keep")?;
        Ok(Backup {
            db,
            keep: usize::try_from(keep).unwrap_or(usize::MAX),
        })
    })
}

/// The typed request of `backup`: a copy of the database, keeping the
/// newest `keep`.
struct Backup {
    /// The database file.
    db: PathBuf,
    keep: usize,
}

/// What `backup` returns: the new backup, and the old ones removed.
struct Taken(loops_store::Taken);

impl Request for Backup {
    type Document = Taken;

    fn run(self, _: &Context, _: &mut Warnings) -> Result<Taken> {
        let db = &self.db;
        if std::fs::symlink_metadata(db).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
            bail!(
                "there is no database at {} yet, so nothing to back up",
                db.display()
            );
        }
        // The file is copied as it is, not opened as a store: a backup never
        // migrates, so one taken before an upgrade holds the old schema.
        let taken = take_backup(db, now(), self.keep)
            .with_context(|| format!("backing up {}", db.display()))?;
        Ok(Taken(taken))
    }
}

impl Document for Taken {
    fn json(&self, out: &mut Printer) -> Result<()> {
        let taken = &self.0;
        Ok(out.json_of(&TakenJson {
            backup: BackupJson::from(&taken.backup),
            removed: taken.removed.iter().map(BackupJson::from).collect(),
        })?)
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        let taken = &self.0;
        out.line(&format!(
            "backed up to {} ({})",
            taken.backup.path.display(),
            render::bytes(taken.backup.size_bytes)
        ))?;
        for old in &taken.removed {
            out.line(&format!("removed {}", old.path.display()))?;
        }
        Ok(())
    }
}

/// The typed request of `backup --list`: the backups in `dir`.
struct ListBackups {
    dir: PathBuf,
}

/// What `backup --list` returns: the backups, newest first.
struct Backups {
    dir: PathBuf,
    backups: Vec<loops_store::Backup>,
}

impl Request for ListBackups {
    type Document = Backups;

    fn run(self, _: &Context, _: &mut Warnings) -> Result<Backups> {
        let backups = list_backups(&self.dir)
            .with_context(|| format!("listing the backups in {}", self.dir.display()))?;
        Ok(Backups {
            dir: self.dir,
            backups,
        })
    }
}

impl Document for Backups {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json_of(
            &self
                .backups
                .iter()
                .map(BackupJson::from)
                .collect::<Vec<_>>(),
        )?)
    }

    fn human(&self, ctx: &Context, out: &mut Printer) -> Result<()> {
        if self.backups.is_empty() {
            ctx.note(
                "hint",
                &format!(
                    "no backups in {} yet; run `loops backup` to take one",
                    self.dir.display()
                ),
            );
            return Ok(());
        }
        // On a terminal the table fits its width (issue 28): PATH is cut
        // at its start with `…`, so the file name stays. Times are local
        // (`--json` keeps UTC).
        let mut table = Table::new(vec![
            Column::keep("TAKEN"),
            Column::keep("SIZE"),
            Column::shrink_start("PATH"),
        ]);
        for b in &self.backups {
            table.row(vec![
                crate::human::local_seconds(b.taken_at),
                render::bytes(b.size_bytes),
                b.path.display().to_string(),
            ]);
        }
        Ok(out.table(&table, |_| Vec::new())?)
    }
}
