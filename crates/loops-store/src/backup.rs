//! Backups of the database (issue 14): consistent copies in
//! `<data dir>/backups/`, taken by `loops backup`, and automatically, at
//! most once an hour, before a migration changes the schema of an existing
//! database and before `loops gc --apply`.
//!
//! A backup is named after the UTC second it was taken,
//! `loops-20261201T170512Z.db`, with `-2`, `-3`, … before `.db` when
//! another backup took the same second. The name is the backup's time:
//! listing and pruning read names, never file times or contents, and never
//! touch a file whose name does not match that pattern.
//!
//! SQLite's `VACUUM INTO` writes each copy (`sqlite/backup.rs`). It is a
//! read transaction, so a daemon writing alongside neither waits for it nor
//! makes it fail. It writes into a new temporary file in `backups/`, which
//! gets its name only once it is complete and synced, so a half-written
//! copy never carries a backup's name. `backups/` is created 0700 and each
//! backup is 0600: the database holds prompts and run output. A `backups`
//! that is a symbolic link, or that another user owns or can write, is
//! refused.
//!
//! `loops restore` puts a backup back in place (`backup/restore.rs`).
//!
//! Nothing here reads a clock: every instant is the caller's `now`.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use loops_core::Timestamp;

use crate::error::{OpenError, Result};
use crate::secure::{self, Found};
use crate::sqlite::backup as sql;

mod restore;

pub use restore::{Kept, Restored, restore_backup};

/// The directory of backups inside the data directory.
pub const BACKUP_DIR: &str = "backups";

/// How many backups `loops backup` and the automatic backups keep unless
/// told otherwise: the newest three.
pub const DEFAULT_BACKUP_KEEP: usize = 3;

/// An automatic backup is skipped when the newest backup is younger than
/// this: one hour.
pub const AUTO_BACKUP_INTERVAL_MS: i64 = 60 * 60 * 1000;

/// What [`check_private_dir`](secure::check_private_dir) calls `backups/`.
const WHAT: &str = "backups directory";

/// The most backups one second can hold (`-2` … `-N`): a bound on the
/// search for a free name, far beyond anything a person or a script does.
const MAX_PER_SECOND: u32 = 10_000;

/// One backup file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backup {
    /// The file.
    pub path: PathBuf,
    /// When it was taken, to the second (from its name).
    pub taken_at: Timestamp,
    /// Its size in bytes.
    pub size_bytes: u64,
}

/// A backup just taken, and the older ones removed to keep the newest N.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// The new backup.
    pub backup: Backup,
    /// The backups removed after it, newest first.
    pub removed: Vec<Backup>,
}

/// An automatic backup: when it is taken (the caller's clock) and how many
/// backups to keep after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoBackup {
    /// The current instant.
    pub now: Timestamp,
    /// How many backups to keep, the new one included (at least 1).
    pub keep: usize,
}

impl AutoBackup {
    /// An automatic backup at `now` that keeps the default
    /// [`DEFAULT_BACKUP_KEEP`].
    pub fn at(now: Timestamp) -> AutoBackup {
        AutoBackup {
            now,
            keep: DEFAULT_BACKUP_KEEP,
        }
    }
}

/// The backups directory of the data directory `data_dir`.
pub fn backup_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(BACKUP_DIR)
}

/// Backs up the database at `db` into the `backups/` beside it (created
/// 0700 when missing), then removes all but the newest `keep` backups (at
/// least 1; the new one is always kept).
///
/// The database is copied as it is: it is neither migrated nor otherwise
/// written, so a database a newer loops wrote can be backed up too. A
/// missing database is an error ([`OpenError::Io`], not found), and so
/// is a data directory, database or `backups/` another user could change
/// ([`OpenError::Unsafe`]).
pub fn take_backup(db: &Path, now: Timestamp, keep: usize) -> Result<Taken, OpenError> {
    let conn = sql::open_source(db)?;
    take_with(&backup_dir(dir_of(db)), now, keep, |tmp| {
        sql::vacuum_into(&conn, tmp)
    })
}

/// The automatic backup of the database at `db`, taken `before` a change
/// that cannot be undone (`"before loops gc --apply"`): skipped (`None`)
/// when the newest backup is younger than an hour
/// ([`auto_backup_due`]); otherwise taken as [`take_backup`] does, keeping
/// `auto.keep`.
///
/// Any failure is [`OpenError::Backup`], whose message names the cause
/// and says how to go on without a backup: the caller should then not
/// make the change.
pub fn auto_backup(
    db: &Path,
    auto: AutoBackup,
    before: &'static str,
) -> Result<Option<Taken>, OpenError> {
    auto_with(&backup_dir(dir_of(db)), auto, before, |tmp| {
        sql::vacuum_into(&sql::open_source(db)?, tmp)
    })
}

/// Whether an automatic backup is due at `now`, given the newest backup:
/// when there is none, or it was taken an hour ago or more. A backup dated
/// after `now` (the clock was set back) counts as recent.
pub fn auto_backup_due(newest: Option<&Backup>, now: Timestamp) -> bool {
    newest.is_none_or(|b| now.millis_since(b.taken_at) >= AUTO_BACKUP_INTERVAL_MS)
}

/// The backups in `dir`, newest first: the regular files whose names match
/// the backup pattern, nothing else. A missing `dir` holds none.
pub fn list_backups(dir: &Path) -> Result<Vec<Backup>, OpenError> {
    Ok(listed(dir)?.into_iter().map(|(_, backup)| backup).collect())
}

/// The newest backup in `dir`, if there is one.
pub fn newest_backup(dir: &Path) -> Result<Option<Backup>, OpenError> {
    Ok(list_backups(dir)?.into_iter().next())
}

/// Removes all but the newest `keep` backups in `dir` and returns the
/// removed ones, newest first. Only files named as backups are removed.
pub fn prune_backups(dir: &Path, keep: usize) -> Result<Vec<Backup>, OpenError> {
    prune(dir, keep, None)
}

/// [`auto_backup`] with the copy made by `copy` (into the path it is
/// given): opening a database takes its backup through the connection it
/// is migrating.
pub(crate) fn auto_with(
    dir: &Path,
    auto: AutoBackup,
    before: &'static str,
    copy: impl FnOnce(&Path) -> Result<(), OpenError>,
) -> Result<Option<Taken>, OpenError> {
    let failed = |e: OpenError| OpenError::Backup {
        dir: dir.to_owned(),
        before,
        reason: e.to_string(),
    };
    let newest = newest_backup(dir).map_err(failed)?;
    if !auto_backup_due(newest.as_ref(), auto.now) {
        return Ok(None);
    }
    take_with(dir, auto.now, auto.keep, copy)
        .map(Some)
        .map_err(failed)
}

/// Takes a backup into `dir` with `copy`, names it after `now`, then
/// prunes to `keep`, sparing the new one.
fn take_with(
    dir: &Path,
    now: Timestamp,
    keep: usize,
    copy: impl FnOnce(&Path) -> Result<(), OpenError>,
) -> Result<Taken, OpenError> {
    ensure_dir(dir)?;
    let io = |path: &Path| {
        let path = path.to_owned();
        move |error| OpenError::Io { path, error }
    };
    // A fresh, empty, private file: `VACUUM INTO` accepts an empty target
    // and keeps its mode, so the copy is never readable by others, whatever
    // the umask. `create_new` never follows a link.
    let tmp = dir.join(format!(
        ".loops-backup-{}.tmp",
        hex(&crate::random_id_bytes())
    ));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(io(&tmp))?;
    let named = copy(&tmp)
        // SQLite does not sync what `VACUUM INTO` writes; a backup taken
        // before a migration must survive a power cut after it.
        .and_then(|()| file.sync_all().map_err(io(&tmp)))
        .and_then(|()| name(dir, &tmp, second_of(now)));
    // The temporary name goes either way: after a failure, or because the
    // backup now has its own name (a hard link to the same file).
    let _ = std::fs::remove_file(&tmp);
    let path = named?;
    // Best effort: the copy itself is synced, and a lost directory entry
    // after a power cut loses only this backup.
    let _ = File::open(dir).and_then(|d| d.sync_all());
    let size_bytes = std::fs::symlink_metadata(&path).map_err(io(&path))?.len();
    let backup = Backup {
        path,
        taken_at: second_of(now),
        size_bytes,
    };
    let removed = prune(dir, keep, Some(&backup.path))?;
    Ok(Taken { backup, removed })
}

/// Gives the complete copy `tmp` the first free backup name of `second`:
/// a hard link, which fails rather than replace a backup another process
/// named in the same second. Returns the name.
fn name(dir: &Path, tmp: &Path, second: Timestamp) -> Result<PathBuf, OpenError> {
    for seq in 1..=MAX_PER_SECOND {
        let path = dir.join(file_name(second, seq));
        match std::fs::hard_link(tmp, &path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            // A file system without hard links: a rename to a name that is
            // free now. Only another backup at the same second and instant
            // could take it in between.
            Err(_) if !path_exists(&path) => {
                return std::fs::rename(tmp, &path)
                    .map(|()| path.clone())
                    .map_err(|error| OpenError::Io { path, error });
            }
            Err(_) => {}
        }
    }
    Err(OpenError::Io {
        path: dir.to_owned(),
        error: std::io::Error::new(
            ErrorKind::AlreadyExists,
            format!("{MAX_PER_SECOND} backups already carry this second's name"),
        ),
    })
}

fn path_exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Removes all but the newest `keep` backups of `dir` (at least one), never
/// `spare` (a backup just taken, which a clock set back would date before
/// older ones).
fn prune(dir: &Path, keep: usize, spare: Option<&Path>) -> Result<Vec<Backup>, OpenError> {
    let keep = keep.max(1);
    let mut removed = Vec::new();
    for (i, backup) in list_backups(dir)?.into_iter().enumerate() {
        if i < keep || spare == Some(backup.path.as_path()) {
            continue;
        }
        match std::fs::remove_file(&backup.path) {
            Ok(()) => removed.push(backup),
            // Another process pruned it first.
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(error) => {
                return Err(OpenError::Io {
                    path: backup.path,
                    error,
                });
            }
        }
    }
    Ok(removed)
}

/// The backups of `dir` with their sequence numbers, newest first.
fn listed(dir: &Path) -> Result<Vec<(u32, Backup)>, OpenError> {
    if let Found::Missing = secure::check_private_dir(WHAT, dir)? {
        return Ok(Vec::new());
    }
    let io = |error| OpenError::Io {
        path: dir.to_owned(),
        error,
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let Some((taken_at, seq)) = entry.file_name().to_str().and_then(parse_name) else {
            continue;
        };
        // `DirEntry::metadata` does not follow a link: only regular files
        // count.
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        found.push((
            seq,
            Backup {
                path: entry.path(),
                taken_at,
                size_bytes: meta.len(),
            },
        ));
    }
    found.sort_by_key(|(seq, b)| std::cmp::Reverse((b.taken_at, *seq)));
    Ok(found)
}

/// Creates `dir` 0700 when missing, or checks the one there.
fn ensure_dir(dir: &Path) -> Result<(), OpenError> {
    if let Found::Safe = secure::check_private_dir(WHAT, dir)? {
        return Ok(());
    }
    match DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(()),
        // Another process created it meanwhile.
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            secure::check_private_dir(WHAT, dir).map(drop)
        }
        Err(error) => Err(OpenError::Io {
            path: dir.to_owned(),
            error,
        }),
    }
}

/// The directory of the database file `db` (`.` for a bare file name).
fn dir_of(db: &Path) -> &Path {
    db.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// `now` without its milliseconds: a backup's name holds whole seconds.
fn second_of(now: Timestamp) -> Timestamp {
    Timestamp::from_millis(now.as_millis().div_euclid(1000) * 1000).unwrap_or(now)
}

/// `loops-20261201T170512Z.db` for `seq` 1, `loops-20261201T170512Z-2.db`
/// for 2.
fn file_name(second: Timestamp, seq: u32) -> String {
    // `2026-12-01T17:05:12.000Z` without its separators and fraction.
    let text = second.to_string();
    let digits: String = text[..19]
        .chars()
        .filter(|c| *c != '-' && *c != ':')
        .collect();
    if seq <= 1 {
        format!("loops-{digits}Z.db")
    } else {
        format!("loops-{digits}Z-{seq}.db")
    }
}

/// The time and sequence number of a backup's file name; `None` for any
/// other name, including one [`file_name`] would write differently.
fn parse_name(name: &str) -> Option<(Timestamp, u32)> {
    let rest = name.strip_prefix("loops-")?.strip_suffix(".db")?;
    let stamp = rest.get(..16)?;
    let seq = match rest.get(16..)? {
        "" => 1,
        more => more.strip_prefix('-')?.parse::<u32>().ok()?,
    };
    let b = stamp.as_bytes();
    let digits_at = |range: std::ops::Range<usize>| b[range].iter().all(u8::is_ascii_digit);
    if !(digits_at(0..8) && b[8] == b'T' && digits_at(9..15) && b[15] == b'Z') {
        return None;
    }
    let iso = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &stamp[0..4],
        &stamp[4..6],
        &stamp[6..8],
        &stamp[9..11],
        &stamp[11..13],
        &stamp[13..15]
    );
    let taken_at = Timestamp::parse(&iso).ok()?;
    (file_name(taken_at, seq) == name).then_some((taken_at, seq))
}

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
