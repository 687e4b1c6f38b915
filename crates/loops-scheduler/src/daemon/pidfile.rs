//! The pid file, `<data dir>/daemon.pid` (SPEC §7.6): the decimal pid on
//! the first line, then (issue 32) the daemon's identity, `boot=<uuid>
//! start=<ticks>`: the boot id and its start time in clock ticks since boot
//! ([`loops_exec::ProcessIdentity`]), which no wall-clock step moves. The
//! file still starts with the pid, so the original (a JS `parseInt`) reads
//! it. The first line is read trimmed; anything that is not a positive
//! integer counts as no pid, and a second line that is not an identity
//! counts as none.
//!
//! A file with an identity names the daemon only while a process of that
//! boot, pid and start tick runs. A file in the original's format (a bare
//! pid, or an identity the platform cannot read) falls back to its
//! modification time, which says when the daemon wrote it: a process with
//! that pid that started later is not the daemon but a reused pid (see the
//! CLI's `service/control.rs`).
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
use loops_exec::{ProcessIdentity, is_same_process, process_identity, started_by};

/// The pid file's name inside the data directory.
pub const PID_FILE: &str = "daemon.pid";

/// What the pid file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PidRecord {
    /// The pid it names.
    pub pid: u32,
    /// When it was written (its modification time), if the OS tells.
    pub written: Option<Timestamp>,
    /// The daemon's identity from the second line, if the file has one.
    pub identity: Option<ProcessIdentity>,
}

impl PidRecord {
    /// Whether the process the file names runs and is the daemon that
    /// wrote it, not a reused pid: by its identity when the file records
    /// one, else by its start time against the file's modification time.
    pub fn is_daemon(&self) -> bool {
        match (self.identity, self.written) {
            (Some(identity), _) => is_same_process(self.pid, identity),
            (None, Some(written)) => started_by(self.pid, written),
            (None, None) => loops_exec::is_running(self.pid),
        }
    }

    /// Whether the process the file names is the holder of a lease taken
    /// at `taken`: by its identity when the file records one (the daemon
    /// writes the file once it holds the lease), else by its start time
    /// against `taken`, which a wall-clock step can defeat.
    pub fn took_lease_at(&self, taken: Timestamp) -> bool {
        match self.identity {
            Some(identity) => is_same_process(self.pid, identity),
            None => started_by(self.pid, taken),
        }
    }
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
    let mut lines = text.splitn(2, '\n');
    let pid = lines
        .next()?
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|p| *p > 0)?;
    let identity = lines.next().and_then(|l| l.trim().parse().ok());
    Some(PidRecord {
        pid,
        written,
        identity,
    })
}

/// The file's text for the daemon `pid`: the pid, then its identity where
/// the platform tells.
fn pid_text(pid: u32) -> String {
    match process_identity(pid) {
        Some(identity) => format!("{pid}\n{identity}\n"),
        None => pid.to_string(),
    }
}

/// Writes `pid` and its identity, replacing the file atomically (see the module docs).
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
        .and_then(|mut f| f.write_all(pid_text(pid).as_bytes()))
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
        // pid_max on Linux is at most 2^22: these pids name no process, so
        // the files hold the bare pid.
        let (first, second) = (4_194_305, 4_194_306);
        let file = PidFile::write(&path, first).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "4194305");
        write_pid(&path, second).unwrap();
        drop(file);
        assert_eq!(
            read_pid(&path),
            Some(second),
            "another daemon's file is kept"
        );
        remove_pid_if(&path, second);
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
        write_pid(&path, 4_194_305).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "42");
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(read_pid(&path), Some(4_194_305));
        let record = read_pid_record(&path).unwrap();
        assert!(record.written.is_some());
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 2, "no temporary file is left: {left:?}");
    }

    #[test]
    fn the_file_starts_with_the_pid_then_names_the_daemon_by_its_identity() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PID_FILE);
        let me = std::process::id();
        write_pid(&path, me).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let record = read_pid_record(&path).unwrap();
        assert_eq!(record.pid, me);
        assert!(record.is_daemon());
        let Some(identity) = process_identity(me) else {
            assert_eq!(text, me.to_string(), "no identity where none is told");
            return;
        };
        // The original reads the pid with a JS parseInt: leading digits.
        assert_eq!(text, format!("{me}\n{identity}\n"));
        assert_eq!(record.identity, Some(identity));
        // A reused pid: same pid, another start tick.
        let reused = PidRecord {
            identity: Some(ProcessIdentity {
                start_ticks: identity.start_ticks + 1,
                ..identity
            }),
            ..record
        };
        assert!(!reused.is_daemon());
        let started = loops_exec::process_start_ms(me).unwrap();
        let after = Timestamp::from_millis(started + 3_600_000).unwrap();
        assert!(!reused.took_lease_at(after), "the identity decides");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_wall_clock_step_moves_the_fallback_but_not_the_identity() {
        // The clock stepped forward by an hour after the daemon wrote the
        // file and took its lease: by the stepped clock the daemon started
        // an hour after both. Simulated by dating the file and the lease an
        // hour before the daemon's start as `/proc` and `btime` now tell it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PID_FILE);
        let me = std::process::id();
        write_pid(&path, me).unwrap();
        let started = loops_exec::process_start_ms(me).unwrap();
        let before = Timestamp::from_millis(started - 3_600_000).unwrap();
        let record = PidRecord {
            written: Some(before),
            ..read_pid_record(&path).unwrap()
        };
        assert!(record.is_daemon());
        assert!(record.took_lease_at(before));
        // The original's bare pid keeps the wall-clock check.
        let bare = PidRecord {
            identity: None,
            ..record
        };
        assert!(!bare.is_daemon());
        assert!(!bare.took_lease_at(before));
    }

    #[test]
    fn a_bare_pid_or_a_garbled_identity_reads_as_the_original_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PID_FILE);
        for text in ["4194305", "4194305\n", "4194305\nboot=x start=1\n"] {
            std::fs::write(&path, text).unwrap();
            let record = read_pid_record(&path).unwrap();
            assert_eq!((record.pid, record.identity), (4_194_305, None), "{text:?}");
            assert!(!record.is_daemon(), "no such process");
        }
    }
}
