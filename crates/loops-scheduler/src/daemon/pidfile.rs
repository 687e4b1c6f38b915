//! The pid file, `<data dir>/daemon.pid` (SPEC §7.6): a decimal pid with no
//! newline. Read trimmed; anything that is not a positive integer counts as
//! no pid.
//!
//! The file keeps the original's format, and its modification time says
//! when the daemon wrote it: a process with that pid that started later is
//! not the daemon but a reused pid (see `control.rs`).
//!
//! It is never read or written through a symbolic link: it is read with
//! `O_NOFOLLOW` (a link counts as no pid), and written under a random
//! temporary name created exclusively, then renamed over the old file, so
//! a link planted at either name is replaced, never followed.
//!
//! Invariant: a daemon removes the file only while it still names the
//! daemon itself, so a daemon that exits late never deletes the pid file of
//! the daemon that replaced it.

use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use loops_core::Timestamp;

/// The pid file's name inside the data directory.
pub const PID_FILE: &str = "daemon.pid";

/// What the pid file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PidRecord {
    /// The pid it names.
    pub pid: u32,
    /// When it was written (its modification time), if the OS tells.
    pub written: Option<Timestamp>,
}

/// The pid the file names, if it names one.
pub fn read_pid(path: &Path) -> Option<u32> {
    read_pid_record(path).map(|r| r.pid)
}

/// The pid the file names and when it was written; `None` when there is no
/// file, it is a symbolic link, or it names no pid.
pub fn read_pid_record(path: &Path) -> Option<PidRecord> {
    let mut file = loops_exec::owner_only::open_no_follow(path).ok()?;
    let written = file
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_millis()).ok())
        .and_then(Timestamp::from_millis);
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    let pid = text.trim().parse::<u32>().ok().filter(|p| *p > 0)?;
    Some(PidRecord { pid, written })
}

/// Writes `pid`, replacing the file atomically (see the module docs).
pub(crate) fn write_pid(path: &Path, pid: u32) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", loops_store::new_lease_id()));
    let tmp = PathBuf::from(tmp);
    // `create_new` is O_EXCL: it never follows a link and fails on
    // anything already there.
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(pid.to_string().as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Removes the file if it names `pid` (or nothing readable).
pub fn remove_pid_if(path: &Path, pid: u32) {
    match read_pid(path) {
        Some(p) if p != pid => {}
        _ => {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The pid file of a running daemon, removed when dropped.
pub(crate) struct PidFile {
    path: PathBuf,
    pid: u32,
}

impl PidFile {
    pub(crate) fn write(path: &Path, pid: u32) -> io::Result<PidFile> {
        write_pid(path, pid)?;
        Ok(PidFile {
            path: path.to_owned(),
            pid,
        })
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        remove_pid_if(&self.path, self.pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_positive_integers_are_pids() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PID_FILE);
        assert_eq!(read_pid(&path), None);
        for (text, pid) in [
            ("123", Some(123)),
            (" 42\n", Some(42)),
            ("0", None),
            ("-1", None),
            ("x", None),
        ] {
            std::fs::write(&path, text).unwrap();
            assert_eq!(read_pid(&path), pid, "{text:?}");
        }
    }

    #[test]
    fn the_file_is_removed_only_while_it_names_the_daemon() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PID_FILE);
        let file = PidFile::write(&path, 7).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "7");
        write_pid(&path, 8).unwrap();
        drop(file);
        assert_eq!(read_pid(&path), Some(8), "another daemon's file is kept");
        remove_pid_if(&path, 8);
        assert!(!path.exists());
    }

    #[test]
    fn a_planted_link_is_replaced_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PID_FILE);
        let target = dir.path().join("precious");
        std::fs::write(&target, "42").unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert_eq!(read_pid(&path), None, "a link names no pid");
        write_pid(&path, 7).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "42");
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(read_pid(&path), Some(7));
        let record = read_pid_record(&path).unwrap();
        assert!(record.written.is_some());
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 2, "no temporary file is left: {left:?}");
    }
}
