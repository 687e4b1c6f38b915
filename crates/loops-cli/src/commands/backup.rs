//! `loops backup [--keep N] [--list]` (issue 14): a consistent copy of the
//! database in `$LOOPS_DATA_DIR/backups/`, keeping the newest N, or the
//! list of backups. The automatic backups other commands take are
//! `auto_backup`'s.
//!
//! New in loops; the original has no backups. The work is
//! `loops_store`'s (`take_backup`, `auto_backup`); this module reads the
//! clock and the environment, and prints.

use std::path::Path;

use anyhow::{Context as _, Result, bail};
use loops_core::Timestamp;
use loops_store::{Backup, DB_FILE, backup_dir, list_backups, take_backup};
use serde::Serialize;

use super::now;
use crate::args::BackupArgs;
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::{self, Column, Printer, Table};
use crate::resolve;

/// A backup as `--json` prints it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BackupJson {
    path: String,
    taken_at: Timestamp,
    size_bytes: u64,
}

impl From<&Backup> for BackupJson {
    fn from(b: &Backup) -> BackupJson {
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
    let data_dir = ctx.data_dir()?;
    if args.list {
        return list(ctx, &backup_dir(&data_dir), out);
    }
    let keep = resolve::positive_int(&args.keep, "--keep")?;
    let db = data_dir.join(DB_FILE);
    if std::fs::symlink_metadata(&db).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        bail!(
            "there is no database at {} yet, so nothing to back up",
            db.display()
        );
    }
    // The file is copied as it is, not opened as a store: a backup never
    // migrates, so one taken before an upgrade holds the old schema.
    let taken = take_backup(&db, now(), usize::try_from(keep).unwrap_or(usize::MAX))
        .with_context(|| format!("backing up {}", db.display()))?;
    if out.json {
        out.json_of(&TakenJson {
            backup: BackupJson::from(&taken.backup),
            removed: taken.removed.iter().map(BackupJson::from).collect(),
        })?;
        return Ok(Outcome::Success);
    }
    out.line(&format!(
        "backed up to {} ({})",
        taken.backup.path.display(),
        render::bytes(taken.backup.size_bytes)
    ))?;
    for old in &taken.removed {
        out.line(&format!("removed {}", old.path.display()))?;
    }
    Ok(Outcome::Success)
}

/// `backup --list`: newest first.
fn list(ctx: &Context, dir: &Path, out: &mut Printer) -> Result<Outcome> {
    let backups =
        list_backups(dir).with_context(|| format!("listing the backups in {}", dir.display()))?;
    if out.json {
        out.json_of(&backups.iter().map(BackupJson::from).collect::<Vec<_>>())?;
        return Ok(Outcome::Success);
    }
    if backups.is_empty() {
        ctx.note(
            "hint",
            &format!(
                "no backups in {} yet; run `loops backup` to take one",
                dir.display()
            ),
        );
        return Ok(Outcome::Success);
    }
    let mut table = Table::new(vec![
        Column { header: "TAKEN" },
        Column { header: "SIZE" },
        Column { header: "PATH" },
    ]);
    for b in &backups {
        table.row(vec![
            b.taken_at.to_string(),
            render::bytes(b.size_bytes),
            b.path.display().to_string(),
        ]);
    }
    out.table(&table, |_| Vec::new())?;
    Ok(Outcome::Success)
}
