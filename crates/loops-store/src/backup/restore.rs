//! Restoring a backup (issue 28, `loops restore`): a copy of a loops
//! SQLite database put back in place of `loops.db`.
//!
//! [`restore_backup`] goes in an order that leaves the database in place
//! as it is until the backup is known to be good:
//! 1. The backup is opened without following a link. It must be a regular
//!    file of this user that group and others cannot write: a file another
//!    user could have planted or changed would let that user add loops
//!    whose commands then run as this one. It is copied, no more than the
//!    size it had when opened, into a new private file in the data
//!    directory, which is synced.
//! 2. The copy is checked (`sqlite/backup.rs` `check_copy`): SQLite's full
//!    integrity check, a `loops` table, and a schema this binary knows.
//! 3. The database in place is kept, unless the caller says not to: backed
//!    up into `backups/` as `loops backup` does, without pruning any
//!    backup. One too damaged for SQLite to copy has its file and its WAL
//!    moved into `backups/` instead, named `loops-<second>-damaged.db`,
//!    which listing and pruning never match.
//! 4. The database's `-wal` and `-shm` files are removed: SQLite would
//!    otherwise replay the old database's WAL into the restored file.
//! 5. The copy is renamed over `loops.db`, which is atomic, and the
//!    directory is synced.
//!
//! A failure in steps 1 to 3 leaves the database in place as it was (the
//! copy is removed). The caller makes sure no loops process has the
//! database open: the CLI refuses while a daemon runs.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use loops_core::{Ownership, Timestamp, ownership};

use super::{Backup, MAX_PER_SECOND, backup_dir, ensure_dir, file_name, hex, second_of};
use crate::error::{OpenError, Result};
use crate::secure::{self, Found};
use crate::sqlite::backup::check_copy;

/// What [`restore_backup`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The database file, now a copy of the backup.
    pub db: PathBuf,
    /// The backup it is a copy of.
    pub from: PathBuf,
    /// What became of the database that was in place: `None` when there
    /// was none, or when the caller said not to keep it.
    pub kept: Option<Kept>,
    /// The old database's `-wal` and `-shm` files, removed.
    pub removed: Vec<PathBuf>,
}

/// How [`restore_backup`] kept the database that was in place.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kept {
    /// A backup in `backups/`, as `loops backup` takes one.
    Backup(Backup),
    /// SQLite could not copy it (`reason`: it is damaged, or not a
    /// database), so its file was moved to `path` in `backups/`, with its
    /// WAL beside it (`path` plus `-wal`), where SQLite finds the two
    /// together.
    Damaged {
        /// Where the file is now.
        path: PathBuf,
        /// Why it could not be copied.
        reason: String,
    },
}

impl Kept {
    /// The file the database in place was kept as.
    pub fn path(&self) -> &Path {
        match self {
            Kept::Backup(backup) => &backup.path,
            Kept::Damaged { path, .. } => path,
        }
    }
}

/// What [`secure::refuse`] calls the file to restore.
const WHAT: &str = "backup";

/// The bytes read and written at a time while copying a backup.
const CHUNK: usize = 64 * 1024;

/// Puts the backup `from` in place of the database file `db`, keeping the
/// database in place first as a backup named after `keep_current` (`None`:
/// not kept, as `LOOPS_SKIP_BACKUP` asks), in the steps of the module
/// docs. The data directory is created 0700 when missing, so a backup can
/// be restored on a new machine.
///
/// A backup that is not a usable loops database, or that changes while it
/// is copied, is [`OpenError::BadBackup`]; one another user owns or may
/// write, or a symbolic link, is [`OpenError::Unsafe`]; a database in
/// place that cannot be backed up (a full disk) is [`OpenError::Backup`].
/// In each case the database in place is left as it was.
pub fn restore_backup(
    db: &Path,
    from: &Path,
    keep_current: Option<Timestamp>,
) -> Result<Restored, OpenError> {
    let Some(name) = db.file_name() else {
        return Err(OpenError::Io {
            path: db.to_owned(),
            error: std::io::Error::new(
                ErrorKind::InvalidInput,
                "the database path does not name a file",
            ),
        });
    };
    let dir = super::dir_of(db);
    crate::sqlite::open::create_private_dir(dir)?;
    let dir = secure::check_data_dir(dir)?;
    let db = dir.join(name);
    let current = secure::check_file("database", &db)?;
    let companions = [companion(&db, "-wal"), companion(&db, "-shm")];
    for (path, what) in companions
        .iter()
        .zip(["database WAL", "database shared-memory file"])
    {
        secure::check_file(what, path)?;
    }

    let (source, meta) = open_backup(from)?;
    if let Found::Safe = current
        && let Ok(in_place) = std::fs::symlink_metadata(&db)
        && (in_place.dev(), in_place.ino()) == (meta.dev(), meta.ino())
    {
        return Err(bad(from, "it is the database in place itself"));
    }
    let mut copy = Scratch::create(&dir)?;
    copy_bounded(&source, meta.len(), &mut copy, from)?;
    drop(source);
    check_copy(&copy.path).map_err(|reason| bad(from, &reason))?;
    copy.remove_companions();

    let kept = match (current, keep_current) {
        (Found::Safe, Some(now)) => Some(keep(&db, &dir, now)?),
        _ => None,
    };
    let mut removed = Vec::new();
    for path in companions {
        match std::fs::remove_file(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(error) => return Err(OpenError::Io { path, error }),
        }
    }
    std::fs::rename(&copy.path, &db).map_err(|error| OpenError::Io {
        path: db.clone(),
        error,
    })?;
    copy.placed = true;
    // Best effort: the copy itself is synced; a lost rename after a power
    // cut leaves the database as it was, with its backup kept.
    let _ = File::open(&dir).and_then(|d| d.sync_all());
    Ok(Restored {
        db,
        from: from.to_owned(),
        kept,
        removed,
    })
}

/// The refusal of the backup `from` for `reason`.
fn bad(from: &Path, reason: &str) -> OpenError {
    OpenError::BadBackup {
        path: from.to_owned(),
        reason: reason.to_owned(),
    }
}

/// `path` with `suffix` appended to its file name (`loops.db-wal`).
fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Opens the backup `from` for reading: never through a symbolic link, and
/// only a regular file of this user that group and others cannot write.
/// Returns the file and its metadata, read from the open descriptor.
fn open_backup(from: &Path) -> Result<(File, Metadata), OpenError> {
    let io = |error: std::io::Error| match error.kind() {
        ErrorKind::NotFound => bad(from, "there is no such file"),
        _ => bad(from, &format!("it cannot be read ({error})")),
    };
    let seen = std::fs::symlink_metadata(from).map_err(io)?;
    if seen.file_type().is_symlink() {
        let target =
            std::fs::read_link(from).map_or_else(|_| "?".to_owned(), |t| t.display().to_string());
        return Err(secure::refuse(
            WHAT,
            from,
            format!("it is a symbolic link (to {target}), which loops never follows"),
            "give the path of the file itself".to_owned(),
        ));
    }
    if !seen.is_file() {
        return Err(bad(from, "it is not a regular file"));
    }
    // `O_NONBLOCK`: a FIFO put in its place meanwhile does not block the
    // open; it is then refused as not the file inspected.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(from)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() || (meta.dev(), meta.ino()) != (seen.dev(), seen.ino()) {
        return Err(secure::refuse(
            WHAT,
            from,
            "it was replaced while loops was opening it".to_owned(),
            "check who else can write its directory, then try again".to_owned(),
        ));
    }
    let me = secure::euid();
    match ownership(meta.uid(), meta.mode(), me) {
        Ownership::Foreign { owner } => Err(secure::refuse(
            WHAT,
            from,
            format!(
                "it is owned by uid {owner}, not by uid {me} that runs loops, so that user could \
                 have planted it"
            ),
            "restore only a backup of your own; if you trust this one, copy it (cp) to a file of \
             yours and restore the copy"
                .to_owned(),
        )),
        Ownership::WritableByOthers => Err(secure::refuse(
            WHAT,
            from,
            format!(
                "it is writable by group or others (mode {:04o}), so another user may have \
                 changed it",
                secure::mode(&meta)
            ),
            format!(
                "check that no one else changed it, then run chmod 600 {}",
                from.display()
            ),
        )),
        Ownership::ReadableByOthers | Ownership::OwnerOnly => Ok((file, meta)),
    }
}

/// The private file in the data directory that the backup is copied into,
/// removed (with any `-wal` and `-shm` SQLite left beside it) unless it
/// was put in place.
struct Scratch {
    path: PathBuf,
    file: File,
    placed: bool,
}

impl Scratch {
    /// A new, empty file `.loops-restore-<random>.tmp` in `dir`, 0600
    /// whatever the umask; `create_new` never follows a link.
    fn create(dir: &Path) -> Result<Scratch, OpenError> {
        let path = dir.join(format!(
            ".loops-restore-{}.tmp",
            hex(&crate::random_id_bytes())
        ));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|error| OpenError::Io {
                path: path.clone(),
                error,
            })?;
        Ok(Scratch {
            path,
            file,
            placed: false,
        })
    }

    /// Removes what SQLite may have left beside the copy while checking
    /// it.
    fn remove_companions(&self) {
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(companion(&self.path, suffix));
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.placed {
            let _ = std::fs::remove_file(&self.path);
            self.remove_companions();
        }
    }
}

/// Copies the `len` bytes the backup `source` (at `from`) had when it was
/// opened into `copy`, then syncs the copy. The read is bounded: it stops
/// one byte past `len`, and a backup that grew or shrank meanwhile is
/// refused.
fn copy_bounded(source: &File, len: u64, copy: &mut Scratch, from: &Path) -> Result<(), OpenError> {
    let written = |error| OpenError::Io {
        path: copy.path.clone(),
        error,
    };
    let mut reader = source.take(len.saturating_add(1));
    let mut buf = vec![0u8; CHUNK];
    let mut copied: u64 = 0;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(error) => {
                return Err(OpenError::Io {
                    path: from.to_owned(),
                    error,
                });
            }
        };
        copy.file.write_all(&buf[..n]).map_err(written)?;
        copied += n as u64;
    }
    if copied != len {
        return Err(bad(
            from,
            &format!("it changed while it was being copied ({len} bytes, then {copied})"),
        ));
    }
    // The copy replaces the database: it must survive a power cut once it
    // has the database's name.
    copy.file.sync_all().map_err(written)
}

/// Keeps the database `db` of the data directory `dir` before it is
/// replaced: a backup taken at `now`, pruning nothing (the backup being
/// restored may be the oldest); or, when SQLite cannot copy it, its files
/// moved into `backups/`.
fn keep(db: &Path, dir: &Path, now: Timestamp) -> Result<Kept, OpenError> {
    match super::take_backup(db, now, usize::MAX) {
        Ok(taken) => Ok(Kept::Backup(taken.backup)),
        Err(e) if e.is_corrupt() => move_damaged(db, &backup_dir(dir), now, e.to_string()),
        Err(e) => Err(OpenError::Backup {
            dir: backup_dir(dir),
            before: "before restoring a backup over it",
            reason: e.to_string(),
        }),
    }
}

/// Moves the database `db`, which SQLite could not copy (`reason`), and
/// its WAL into `backups` as `loops-<second>-damaged.db` (and `-wal`): the
/// WAL first, so a failure leaves no database without its WAL.
fn move_damaged(
    db: &Path,
    backups: &Path,
    now: Timestamp,
    reason: String,
) -> Result<Kept, OpenError> {
    ensure_dir(backups)?;
    let second = second_of(now);
    let free = |path: &PathBuf| {
        [path.clone(), companion(path, "-wal")]
            .iter()
            .all(|p| std::fs::symlink_metadata(p).is_err())
    };
    let Some(path) = (1..=MAX_PER_SECOND)
        .map(|seq| backups.join(damaged_name(second, seq)))
        .find(free)
    else {
        return Err(OpenError::Io {
            path: backups.to_owned(),
            error: std::io::Error::new(
                ErrorKind::AlreadyExists,
                format!("{MAX_PER_SECOND} damaged databases already carry this second's name"),
            ),
        });
    };
    let (wal, kept_wal) = (companion(db, "-wal"), companion(&path, "-wal"));
    let moved_wal = match std::fs::rename(&wal, &kept_wal) {
        Ok(()) => true,
        Err(e) if e.kind() == ErrorKind::NotFound => false,
        Err(error) => return Err(OpenError::Io { path: wal, error }),
    };
    if let Err(error) = std::fs::rename(db, &path) {
        if moved_wal {
            let _ = std::fs::rename(&kept_wal, &wal);
        }
        return Err(OpenError::Io {
            path: db.to_owned(),
            error,
        });
    }
    Ok(Kept::Damaged { path, reason })
}

/// `loops-20261201T170512Z-damaged.db` for `seq` 1,
/// `loops-20261201T170512Z-2-damaged.db` for 2: not a backup's name, so
/// listing and pruning leave it alone.
fn damaged_name(second: Timestamp, seq: u32) -> String {
    let name = file_name(second, seq);
    let stem = name.strip_suffix(".db").unwrap_or(&name);
    format!("{stem}-damaged.db")
}

#[cfg(test)]
mod tests;
