//! The automatic backups (issue 14): the one an opening of the store takes
//! before a migration changes the schema, and the one taken before a change
//! that cannot be undone (`gc --apply`, `import --apply`). Setting
//! `LOOPS_SKIP_BACKUP` turns them off. The work is `loops_store`'s
//! (`auto_backup`); this module reads the environment and says on stderr
//! what it took.

use anyhow::Result;
use loops_core::Timestamp;
use loops_store::{AutoBackup, Backup, Store};

use crate::render;

/// Set to anything but empty or `0`, the automatic backups are skipped:
/// the way on when one cannot be taken (a full disk) and the user accepts
/// going on without it.
pub(crate) const SKIP_ENV: &str = "LOOPS_SKIP_BACKUP";

/// The automatic backup an opening of the store takes before a migration
/// changes the schema, at the current instant; `None` when
/// [`SKIP_ENV`] says to skip it.
pub(crate) fn automatic() -> Option<AutoBackup> {
    automatic_at(loops_core::Clock::now(&loops_exec::SystemClock))
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
