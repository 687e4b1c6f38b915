//! Doctor's `database-integrity` check on SQLite: `PRAGMA quick_check`
//! within a budget that grows with the file's size, and the recovery steps
//! a damaged file's report (and any command's error) names.

use std::path::Path;

use loops_store::{Integrity, backup_dir, check_integrity, integrity_budget, newest_backup};

use super::*;

/// `PRAGMA quick_check` within a budget that grows with the file's size: a
/// damaged file fails the report and says how to recover; a check that ran
/// out of time only warns.
pub(super) fn check_damage(db: &Path) -> Check {
    let shown = db.display().to_string();
    let size = std::fs::metadata(db).map_or(0, |m| m.len());
    match check_integrity(db, integrity_budget(size)) {
        Ok(Integrity::Missing) => Check::new(
            "database-integrity",
            CheckStatus::Ok,
            "no database yet; nothing to check",
        )
        .detail(shown),
        Ok(Integrity::Ok) => Check::new(
            "database-integrity",
            CheckStatus::Ok,
            "database passes SQLite's quick check",
        )
        .detail(shown),
        Ok(Integrity::Damaged(problems)) => Check::new(
            "database-integrity",
            CheckStatus::Fail,
            format!(
                "database is damaged; to recover, stop the daemon (loops daemon stop), {}",
                recovery(db)
            ),
        )
        .detail(problems.join("; ")),
        Ok(Integrity::Unfinished { budget }) => Check::new(
            "database-integrity",
            CheckStatus::Warn,
            format!(
                "database was not checked fully within {} ms; run sqlite3 {shown} \"PRAGMA quick_check\" to check it",
                budget.as_millis()
            ),
        )
        .detail(shown),
        Err(e) => Check::new(
            "database-integrity",
            CheckStatus::Fail,
            "database cannot be checked for damage",
        )
        .detail(e.to_string()),
    }
}

/// How to recover the damaged database `db`, after stopping the daemon:
/// restore the newest backup of `backups/` (issue 14), when there is one,
/// or salvage what the file still holds with SQLite's `.recover`.
pub(crate) fn recovery(db: &Path) -> String {
    let shown = db.display();
    let salvage = format!(
        "back up {shown}, then run: sqlite3 {shown} \".recover\" | sqlite3 recovered.db \
         and move recovered.db into its place"
    );
    let dir = backup_dir(db.parent().unwrap_or(Path::new(".")));
    match newest_backup(&dir) {
        // The stale WAL and shared-memory file go first: SQLite would
        // replay the damaged file's WAL into the restored copy.
        Ok(Some(b)) => format!(
            "then restore the newest backup, taken {}: rm -f {shown}-wal {shown}-shm && \
             cp {} {shown}; or, to salvage what the damaged file still holds, {salvage}",
            b.taken_at,
            b.path.display()
        ),
        Ok(None) => format!(
            "{salvage}; there is no backup in {} to restore (loops backup takes one)",
            dir.display()
        ),
        Err(e) => format!("{salvage}; the backups cannot be listed: {e}"),
    }
}
