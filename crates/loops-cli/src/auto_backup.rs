//! The automatic backups (issue 14): the one an opening of the store takes
//! before a migration changes the schema, and the one taken before a change
//! that cannot be undone (`gc --apply`, `import --apply`). Setting
//! `LOOPS_SKIP_BACKUP` turns them off. The work is `loops_store`'s
//! (`auto_backup`); this module reads the environment, and
//! `Context::auto_backup` says on stderr what it took.

use loops_core::Timestamp;
use loops_store::AutoBackup;

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
