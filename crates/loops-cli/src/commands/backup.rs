//! `loops backup [--keep N] [--list]` (issue 14): a consistent copy of the
//! database in `$LOOPS_DATA_DIR/backups/`, keeping the newest N, or the
//! list of backups; and the automatic backups other commands take, which
//! `LOOPS_SKIP_BACKUP` turns off.
//!
//! New in loops; the original has no backups. The work is
//! `loops_store`'s (`take_backup`, `auto_backup`); this module reads the
//! clock and the environment, and prints.

use std::path::Path;

use anyhow::{Context, Result, bail};
use loops_core::Timestamp;
use loops_store::{AutoBackup, Backup, DB_FILE, Store, backup_dir, list_backups, take_backup};
use serde::Serialize;

use super::now;
use crate::args::BackupArgs;
use crate::exit::Outcome;
use crate::paths;
use crate::render::{self, Column, Printer, Table};
use crate::resolve;

/// Set to anything but empty or `0`, the automatic backups are skipped:
/// the way on when one cannot be taken (a full disk) and the user accepts
/// going on without it.
pub(crate) const SKIP_ENV: &str = "LOOPS_SKIP_BACKUP";

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
pub(crate) fn run(args: &BackupArgs, out: &mut Printer) -> Result<Outcome> {
    let data_dir = paths::data_dir()?;
    if args.list {
        return list(&backup_dir(&data_dir), out);
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
fn list(dir: &Path, out: &mut Printer) -> Result<Outcome> {
    let backups =
        list_backups(dir).with_context(|| format!("listing the backups in {}", dir.display()))?;
    if out.json {
        out.json_of(&backups.iter().map(BackupJson::from).collect::<Vec<_>>())?;
        return Ok(Outcome::Success);
    }
    if backups.is_empty() {
        render::note(
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

/// The automatic backup an opening of the store takes before a migration
/// changes the schema, at the current instant; `None` when
/// [`SKIP_ENV`] says to skip it.
pub(crate) fn automatic() -> Option<AutoBackup> {
    automatic_at(now())
}

/// [`automatic`] at `now`.
pub(crate) fn automatic_at(now: Timestamp) -> Option<AutoBackup> {
    let skip = std::env::var_os(SKIP_ENV).is_some_and(|v| !v.is_empty() && v != "0");
    (!skip).then(|| AutoBackup::at(now))
}

/// Says on stderr that an automatic backup was taken, and why.
pub(crate) fn report(backup: &Backup, before: &str) {
    render::note(
        "note",
        &format!(
            "backed up the database to {} {before}",
            backup.path.display()
        ),
    );
}

/// The automatic backup of `store`'s database `before` a change that
/// cannot be undone (`"before loops gc --apply"`), at `now`: at most one
/// an hour (none when the newest backup is younger), keeping the newest
/// three, reported on stderr; skipped when [`SKIP_ENV`] says so, or for a
/// database in memory.
///
/// An error means no backup could be taken, and its message names the
/// cause and [`SKIP_ENV`]: the caller should stop before the change.
pub(crate) fn auto_backup(
    store: &Store,
    now: Timestamp,
    before: &'static str,
) -> Result<Option<Backup>> {
    let Some(db) = store.path() else {
        return Ok(None);
    };
    let Some(auto) = automatic_at(now) else {
        return Ok(None);
    };
    let taken = loops_store::auto_backup(db, auto, before)?;
    let backup = taken.map(|t| t.backup);
    if let Some(backup) = &backup {
        report(backup, before);
    }
    Ok(backup)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    use super::auto_backup;

    #[test]
    fn an_automatic_backup_is_taken_at_most_hourly() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let store = loops_store::Store::open_in_dir(dir.path(), Arc::new(|_| false)).unwrap();
        let at = |t: &str| t.parse().unwrap();
        let before = "before a test";
        let first = auto_backup(&store, at("2026-12-01T17:00:00Z"), before).unwrap();
        let first = first.expect("a first backup");
        assert!(first.path.starts_with(dir.path().join("backups")));
        let again = auto_backup(&store, at("2026-12-01T17:59:00Z"), before).unwrap();
        assert_eq!(again, None);
        let later = auto_backup(&store, at("2026-12-01T18:00:00Z"), before).unwrap();
        assert!(later.is_some());
    }
}
