//! Refusing a data directory or database file that another user could
//! subvert: ssh's StrictModes rule, applied before anything is opened.
//!
//! The data directory and `loops.db` (with its `-wal` and `-shm`, when
//! present) must be owned by the user loops runs as, and must not be
//! writable by group or others: whoever can write them can add a loop whose
//! command then runs as this user. A symbolic link is never followed at the
//! database or its companions. A data directory given as a symbolic link
//! (macOS's `/tmp` is one, and some users keep their data on another disk)
//! is resolved once: the link must be this user's or root's, its target is
//! checked by the same rule, and the resolved directory is the one used
//! from then on, so retargeting the link later changes nothing.
//!
//! Only the data directory itself and the files in it are checked, never
//! its parents: a sticky world-writable `/tmp` is a fine parent.
//!
//! The checks read metadata by path (`lstat`) and open no file on the
//! common path: closing any descriptor of a database file drops the POSIX
//! locks SQLite holds on it in this process. A file whose mode only needs
//! tightening (readable by others, as the original left its database
//! under the default umask) is opened with `O_NOFOLLOW`, checked to be the
//! file that was inspected, and changed through that descriptor.
//!
//! What an owner and a mode mean is decided once, in
//! [`loops_core::ownership`], which loops-exec's checks of the daemon's own
//! files share; the metadata reads and the refusals are this module's.

use std::fs::{Metadata, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use loops_core::{Ownership, ownership};

use crate::error::{OpenError, Result};

/// The effective uid this process runs as: the owner of what it creates.
pub(crate) fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The refusal of `path`, a `what` ("data directory", "database", ...).
pub(crate) fn refuse(what: &'static str, path: &Path, problem: String, fix: String) -> OpenError {
    OpenError::Unsafe {
        what,
        path: path.to_owned(),
        problem,
        fix,
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OpenError + '_ {
    move |error| OpenError::Io {
        path: path.to_owned(),
        error,
    }
}

/// The permission bits of `meta`, for messages.
pub(crate) fn mode(meta: &Metadata) -> u32 {
    meta.permissions().mode() & 0o7777
}

/// Checks that the data directory `dir` is safe to use: a directory owned
/// by the user loops runs as and not writable by group or others. A `dir`
/// that is a symbolic link must be owned by this user or root; it is
/// resolved, and its target is checked instead.
///
/// Returns the directory to use from then on: `dir` itself, or the link's
/// target. Nothing is created or changed. Every error is
/// [`OpenError::Unsafe`] (saying what is wrong and how to fix it), or
/// [`OpenError::Io`] when `dir` cannot be inspected (it does not exist).
///
/// ```
/// # use std::os::unix::fs::PermissionsExt;
/// let dir = tempfile::tempdir().unwrap();
/// // Private whatever the umask the temp dir was made under.
/// std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
/// assert!(loops_store::check_data_dir(dir.path()).is_ok());
/// std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
/// let refused = loops_store::check_data_dir(dir.path()).unwrap_err();
/// assert!(refused.to_string().contains("writable by group or others"));
/// ```
pub fn check_data_dir(dir: &Path) -> Result<PathBuf, OpenError> {
    const WHAT: &str = "data directory";
    let me = euid();
    let meta = std::fs::symlink_metadata(dir).map_err(io(dir))?;
    let (target, meta) = if meta.file_type().is_symlink() {
        if meta.uid() != me && meta.uid() != 0 {
            return Err(refuse(
                WHAT,
                dir,
                format!(
                    "it is a symbolic link owned by uid {}, not by uid {me} that runs loops, \
                     so that user chooses where loops keeps its data",
                    meta.uid()
                ),
                format!(
                    "remove the link, or set LOOPS_DATA_DIR to a directory of your own \
                     (the link points to {})",
                    std::fs::read_link(dir)
                        .map_or_else(|_| "?".to_owned(), |t| t.display().to_string())
                ),
            ));
        }
        let target = std::fs::canonicalize(dir).map_err(io(dir))?;
        let meta = std::fs::symlink_metadata(&target).map_err(io(&target))?;
        (target, meta)
    } else {
        (dir.to_owned(), meta)
    };
    // Messages name the resolved directory, and the link when there was one.
    let shown = if target == dir {
        target.clone()
    } else {
        PathBuf::from(format!(
            "{} (the target of {})",
            target.display(),
            dir.display()
        ))
    };
    if !meta.is_dir() {
        return Err(refuse(
            WHAT,
            &shown,
            "it is not a directory".to_owned(),
            "move the file aside, or set LOOPS_DATA_DIR to a directory".to_owned(),
        ));
    }
    match ownership(meta.uid(), meta.mode(), me) {
        Ownership::Foreign { owner } => Err(refuse(
            WHAT,
            &shown,
            format!("it is owned by uid {owner}, not by uid {me} that runs loops"),
            format!(
                "set LOOPS_DATA_DIR to a directory of your own, or have its owner or root run \
                 chown {me} {}",
                target.display()
            ),
        )),
        Ownership::WritableByOthers => {
            // A sticky shared directory such as /tmp is meant to stay open.
            let fix = if mode(&meta) & 0o1000 != 0 {
                format!(
                    "set LOOPS_DATA_DIR to a new directory inside it, such as {}",
                    target.join("loops").display()
                )
            } else {
                format!("run chmod 700 {}", target.display())
            };
            Err(refuse(
                WHAT,
                &shown,
                format!(
                    "it is writable by group or others (mode {:04o})",
                    mode(&meta)
                ),
                fix,
            ))
        }
        Ownership::ReadableByOthers | Ownership::OwnerOnly => Ok(target),
    }
}

/// What [`check_file`] found at a path.
pub(crate) enum Found {
    /// Nothing: the file does not exist.
    Missing,
    /// A regular file of this user that others cannot write (and, once
    /// checked, cannot read either).
    Safe,
}

/// Checks the file at `path` (the database, or its `-wal` or `-shm`): it
/// must not be a symbolic link, must be a regular file of this user, and
/// must not be writable by group or others. A file readable by group or
/// others is made 0600 through a descriptor opened with `O_NOFOLLOW`.
pub(crate) fn check_file(what: &'static str, path: &Path) -> Result<Found, OpenError> {
    check_owned(what, path, Kind::File)
}

/// Checks a directory loops keeps inside the data directory, such as
/// `backups/`: unlike the data directory itself, a symbolic link there is
/// never followed (loops creates the directory, so a link is someone
/// else's doing), and it must be this user's and not writable by group or
/// others. One that group or others may read or search is made 0700
/// through a descriptor: it holds copies of the database.
pub(crate) fn check_private_dir(what: &'static str, dir: &Path) -> Result<Found, OpenError> {
    check_owned(what, dir, Kind::Dir)
}

/// What [`check_owned`] expects at a path loops creates itself.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A regular file, private at 0600.
    File,
    /// A directory, private at 0700.
    Dir,
}

impl Kind {
    fn is(self, meta: &Metadata) -> bool {
        match self {
            Kind::File => meta.is_file(),
            Kind::Dir => meta.is_dir(),
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Dir => "directory",
        }
    }

    /// Why a path of another type is refused, and what to do.
    fn not_it(self) -> (&'static str, &'static str) {
        match self {
            Kind::File => ("it is not a regular file", "move it aside"),
            Kind::Dir => (
                "it is not a directory",
                "move it aside; loops creates the directory itself",
            ),
        }
    }

    fn private_mode(self) -> u32 {
        match self {
            Kind::File => 0o600,
            Kind::Dir => 0o700,
        }
    }

    /// How [`make_private`] opens it: never through a link, and a FIFO
    /// planted in a file's place does not block.
    fn open_flags(self) -> i32 {
        match self {
            Kind::File => libc::O_NOFOLLOW | libc::O_NONBLOCK,
            Kind::Dir => libc::O_DIRECTORY | libc::O_NOFOLLOW,
        }
    }
}

/// The checks of [`check_file`] and [`check_private_dir`]: not a symbolic
/// link, of the expected `kind`, this user's, not writable by group or
/// others, and made private when group or others may read it.
fn check_owned(what: &'static str, path: &Path, kind: Kind) -> Result<Found, OpenError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Found::Missing),
        Err(e) => return Err(io(path)(e)),
    };
    if meta.file_type().is_symlink() {
        let target =
            std::fs::read_link(path).map_or_else(|_| "?".to_owned(), |t| t.display().to_string());
        return Err(refuse(
            what,
            path,
            format!("it is a symbolic link (to {target}), which loops never follows"),
            format!(
                "remove the link (rm {}); loops creates the {} itself",
                path.display(),
                kind.noun()
            ),
        ));
    }
    if !kind.is(&meta) {
        let (why, fix) = kind.not_it();
        return Err(refuse(what, path, why.to_owned(), fix.to_owned()));
    }
    let me = euid();
    match ownership(meta.uid(), meta.mode(), me) {
        Ownership::Foreign { owner } => Err(refuse(
            what,
            path,
            format!("it is owned by uid {owner}, not by uid {me} that runs loops"),
            format!(
                "check that no one else changed it, then have its owner or root run chown {me} {}",
                path.display()
            ),
        )),
        Ownership::WritableByOthers => Err(refuse(
            what,
            path,
            format!(
                "it is writable by group or others (mode {:04o}), so another user may have changed it",
                mode(&meta)
            ),
            format!(
                "check that no one else changed it, then run chmod {:o} {}",
                kind.private_mode(),
                path.display()
            ),
        )),
        Ownership::ReadableByOthers => {
            make_private(what, path, &meta, kind)?;
            Ok(Found::Safe)
        }
        Ownership::OwnerOnly => Ok(Found::Safe),
    }
}

/// Makes the file or directory at `path`, inspected as `meta`, private
/// through a descriptor, never the path: opened with `O_NOFOLLOW`, and
/// changed only when it is still the one inspected.
fn make_private(
    what: &'static str,
    path: &Path,
    meta: &Metadata,
    kind: Kind,
) -> Result<(), OpenError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(kind.open_flags())
        .open(path)
        .map_err(io(path))?;
    let opened = file.metadata().map_err(io(path))?;
    if opened.dev() != meta.dev() || opened.ino() != meta.ino() {
        return Err(refuse(
            what,
            path,
            "it was replaced while loops was checking it".to_owned(),
            "check that no one else can write the data directory, then try again".to_owned(),
        ));
    }
    file.set_permissions(std::fs::Permissions::from_mode(kind.private_mode()))
        .map_err(io(path))
}

/// Creates the database file at `path` with mode 0600 when missing, so
/// SQLite never creates it with the process umask. `O_CREAT | O_EXCL`
/// never follows a symbolic link; a file that appeared meanwhile (another
/// process creating it too) is checked like any existing one.
pub(crate) fn create_private_file(what: &'static str, path: &Path) -> Result<(), OpenError> {
    if let Found::Safe = check_file(what, path)? {
        return Ok(());
    }
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => check_file(what, path).map(drop),
        Err(e) => Err(io(path)(e)),
    }
}
