//! The pid file, `<data dir>/daemon.pid` (SPEC §7.6): a decimal pid with no
//! newline. Read trimmed; anything that is not a positive integer counts as
//! no pid.
//!
//! Invariant: a daemon removes the file only while it still names the
//! daemon itself, so a daemon that exits late never deletes the pid file of
//! the daemon that replaced it.

use std::io;
use std::path::{Path, PathBuf};

/// The pid file's name inside the data directory.
pub const PID_FILE: &str = "daemon.pid";

/// The pid the file names, if it names one.
pub fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path)
        .ok()?
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|p| *p > 0)
}

/// Writes `pid`, replacing the file atomically.
pub(crate) fn write_pid(path: &Path, pid: u32) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{pid}.tmp"));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, pid.to_string())?;
    std::fs::rename(&tmp, path)
}

/// Removes the file if it names `pid` (or nothing readable).
pub(crate) fn remove_pid_if(path: &Path, pid: u32) {
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
}
