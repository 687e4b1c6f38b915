//! Files a user names by path: an agent's prompt file, a workflow file and
//! its steps' prompt files, an export being imported (issue 25 §1).
//!
//! Each is read bounded in size and in time:
//! - only a regular file is read. A named pipe would block `open` until a
//!   writer came, and a device like `/dev/zero` never ends; a directory or
//!   a socket is no text either. Opening a device can itself do something
//!   (a tape rewinds), so nothing that is not a regular file is opened for
//!   reading. On Linux the path is first opened with `O_PATH`, which names
//!   the file without opening it (no driver runs, a pipe does not wait),
//!   that descriptor is checked with `fstat`, and only a regular file is
//!   then opened for reading through `/proc/self/fd/<n>`, which reaches the
//!   very file checked even if the path was swapped meanwhile; its `fstat`
//!   must give the same device and inode. Elsewhere (and on Linux without
//!   `/proc`) the path is checked with `stat`, opened, and the descriptor
//!   checked again with `fstat`; a file swapped in between those two calls
//!   is opened before it is refused. Every open for reading uses
//!   `O_NONBLOCK` (a pipe swapped in cannot block it) and `O_NOCTTY`;
//! - at most `max_bytes` are read, and one byte more is asked for, so a
//!   file over the limit, even one that grows while it is read, is refused
//!   whole rather than cut short.
//!
//! A symbolic link is followed, to whatever it points to: prompt files are
//! often links (to a dotfiles checkout, say), and the checks apply to the
//! file the link leads to, which is what is read. These are files the user
//! chose, not loops' own files, which `owner_only.rs` opens without following
//! links.

use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use nix::fcntl::OFlag;

/// The most a prompt file may hold: 1 MiB.
pub const PROMPT_FILE_MAX_BYTES: u64 = 1 << 20;

/// `O_NONBLOCK` so that opening a named pipe never waits for a writer, and
/// `O_NOCTTY` so that opening a terminal never makes it this process's
/// controlling terminal. On a regular file, the only kind read, neither
/// changes anything.
const NO_WAIT: i32 = OFlag::O_NONBLOCK.bits() | OFlag::O_NOCTTY.bits();

/// Why a file a user named cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UserFileError {
    /// The file could not be opened or read: missing, not permitted, ….
    // The message includes the I/O error, so it is not also the source:
    // an error chain (`{:#}`) would say it twice.
    #[error("cannot read {subject}: {error}")]
    Unreadable {
        /// What the file is and its path, e.g. `prompt file /p.md`.
        subject: String,
        /// The error.
        error: io::Error,
    },
    /// The path names a named pipe, a device, a directory or a socket.
    #[error("{subject} is {kind}, not a regular file")]
    NotRegular {
        /// What the file is and its path.
        subject: String,
        /// What it is instead, with its article: `a named pipe (FIFO)`.
        kind: &'static str,
    },
    /// The file holds more than the limit.
    #[error("{subject} is larger than {}, the most loops reads", Size(*max_bytes))]
    TooLarge {
        /// What the file is and its path.
        subject: String,
        /// The limit, in bytes.
        max_bytes: u64,
    },
    /// The file is not UTF-8 text.
    #[error("{subject} is not UTF-8 text")]
    NotUtf8 {
        /// What the file is and its path.
        subject: String,
    },
}

/// Reads the regular file at `path` as UTF-8 text, refusing anything else
/// and anything over `max_bytes` (see the module docs). `what` names the
/// file in errors, before its path: `prompt file`, `workflow file`.
///
/// ```
/// use loops_exec::{PROMPT_FILE_MAX_BYTES, UserFileError, read_user_file};
///
/// let refused = read_user_file("/dev/null".as_ref(), "prompt file", PROMPT_FILE_MAX_BYTES);
/// assert!(matches!(refused, Err(UserFileError::NotRegular { .. })));
/// assert_eq!(
///     refused.unwrap_err().to_string(),
///     "prompt file /dev/null is a character device, not a regular file"
/// );
/// ```
pub fn read_user_file(path: &Path, what: &str, max_bytes: u64) -> Result<String, UserFileError> {
    let (file, meta) = open(path, what)?;
    let subject = || subject(what, path);
    if meta.len() > max_bytes {
        return Err(UserFileError::TooLarge {
            subject: subject(),
            max_bytes,
        });
    }
    let hint = usize::try_from(meta.len()).unwrap_or(0);
    let mut bytes = Vec::with_capacity(hint);
    let mut limited = UserFileReader::new(file, subject(), max_bytes);
    limited.read_to_end(&mut bytes).map_err(|error| {
        match error
            .get_ref()
            .and_then(|e| e.downcast_ref::<UserFileError>())
        {
            Some(UserFileError::TooLarge { .. }) => UserFileError::TooLarge {
                subject: subject(),
                max_bytes,
            },
            _ => UserFileError::Unreadable {
                subject: subject(),
                error,
            },
        }
    })?;
    String::from_utf8(bytes).map_err(|_| UserFileError::NotUtf8 { subject: subject() })
}

/// Opens the regular file at `path` for reading as a stream, checked as
/// [`read_user_file`] checks it; the reader fails once more than
/// `max_bytes` have come.
pub fn open_user_file(
    path: &Path,
    what: &str,
    max_bytes: u64,
) -> Result<UserFileReader<File>, UserFileError> {
    let (file, meta) = open(path, what)?;
    if meta.len() > max_bytes {
        return Err(UserFileError::TooLarge {
            subject: subject(what, path),
            max_bytes,
        });
    }
    Ok(UserFileReader::new(file, subject(what, path), max_bytes))
}

/// A reader that fails with [`UserFileError::TooLarge`] (as the source of
/// an [`io::Error`] of kind `FileTooLarge`) once its input gives more than
/// its limit, instead of stopping short as [`Read::take`] would.
#[derive(Debug)]
pub struct UserFileReader<R> {
    inner: R,
    /// Bytes still allowed.
    left: u64,
    /// What is read, for the error.
    subject: String,
    /// The limit, for the error.
    max_bytes: u64,
}

impl<R: Read> UserFileReader<R> {
    /// `inner`, failing after `max_bytes`; `subject` names the input in the
    /// error (`standard input`).
    pub fn new(inner: R, subject: String, max_bytes: u64) -> UserFileReader<R> {
        UserFileReader {
            inner,
            left: max_bytes,
            subject,
            max_bytes,
        }
    }
}

impl<R: Read> Read for UserFileReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // One byte past the limit is asked for, so that reaching the limit
        // exactly is not mistaken for going over it.
        let room = usize::try_from(self.left.saturating_add(1)).unwrap_or(usize::MAX);
        let want = buf.len().min(room);
        let n = self.inner.read(&mut buf[..want])?;
        let n64 = n as u64;
        if n64 > self.left {
            self.left = 0;
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                UserFileError::TooLarge {
                    subject: self.subject.clone(),
                    max_bytes: self.max_bytes,
                },
            ));
        }
        self.left -= n64;
        Ok(n)
    }
}

/// `what` and the path, as errors name the file.
fn subject(what: &str, path: &Path) -> String {
    format!("{what} {}", path.display())
}

/// Opens `path` for reading when it is a regular file (see the module
/// docs), and gives its metadata.
fn open(path: &Path, what: &str) -> Result<(File, Metadata), UserFileError> {
    let unreadable = |error| UserFileError::Unreadable {
        subject: subject(what, path),
        error,
    };
    let regular = |meta: Metadata| match kind(&meta) {
        None => Ok(meta),
        Some(kind) => Err(UserFileError::NotRegular {
            subject: subject(what, path),
            kind,
        }),
    };
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let (file, checked) = {
        let handle = path_handle(path).map_err(unreadable)?;
        let checked = regular(handle.metadata().map_err(unreadable)?)?;
        (reopen(&handle, path).map_err(unreadable)?, checked)
    };
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let (file, checked) = {
        let checked = regular(std::fs::metadata(path).map_err(unreadable)?)?;
        (open_for_reading(path).map_err(unreadable)?, checked)
    };
    let meta = regular(file.metadata().map_err(unreadable)?)?;
    if !same_file(&meta, &checked) {
        return Err(unreadable(io::Error::other(
            "it was replaced while it was opened; try again",
        )));
    }
    Ok((file, meta))
}

/// Opens `path` for reading, without waiting (see [`NO_WAIT`]).
fn open_for_reading(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(NO_WAIT)
        .open(path)
}

/// A descriptor that names the file at `path`, following links, without
/// opening it (`O_PATH`): no device driver's `open` runs and a named pipe
/// does not wait for a writer. It can only be `fstat`ed and reopened.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn path_handle(path: &Path) -> io::Result<File> {
    // std wants an access mode; with `O_PATH` the kernel ignores it.
    OpenOptions::new()
        .read(true)
        .custom_flags(OFlag::O_PATH.bits())
        .open(path)
}

/// Opens for reading the very file `handle` names, through
/// `/proc/self/fd/<n>`, whatever is at `path` now. Without `/proc` (a
/// chroot, say) it opens `path`, and [`open`] compares the inodes.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn reopen(handle: &File, path: &Path) -> io::Result<File> {
    use std::os::fd::AsRawFd;
    let link = format!("/proc/self/fd/{}", handle.as_raw_fd());
    match open_for_reading(Path::new(&link)) {
        Err(e) if e.kind() == io::ErrorKind::NotFound && !Path::new("/proc/self/fd").exists() => {
            open_for_reading(path)
        }
        opened => opened,
    }
}

/// Whether two metadata describe one file: the same device and inode.
fn same_file(a: &Metadata, b: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (a.dev(), a.ino()) == (b.dev(), b.ino())
}

/// What a file that is not regular is, or `None` for a regular file.
fn kind(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    Some(if t.is_file() {
        return None;
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a named pipe (FIFO)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    })
}

/// A byte count as errors give limits: `1 MiB`, `1 GiB`, or bytes.
struct Size(u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
        for (unit, name) in UNITS {
            if self.0 >= unit && self.0.is_multiple_of(unit) {
                return write!(f, "{} {name}", self.0 / unit);
            }
        }
        write!(f, "{} bytes", self.0)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixListener;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// `read_user_file` of `path`, on a thread the test does not wait for
    /// past a deadline, so a read that blocks fails the test instead of
    /// hanging it.
    fn read_within_deadline(path: &Path) -> Result<String, UserFileError> {
        let (tx, rx) = mpsc::channel();
        let path = path.to_owned();
        std::thread::spawn(move || {
            let _ = tx.send(read_user_file(&path, "prompt file", PROMPT_FILE_MAX_BYTES));
        });
        rx.recv_timeout(Duration::from_secs(20))
            .expect("the read ends instead of blocking")
    }

    fn refused_as(path: &Path, kind: &str) {
        let error = read_within_deadline(path).expect_err("refused");
        assert_eq!(
            error.to_string(),
            format!(
                "prompt file {} is {kind}, not a regular file",
                path.display()
            )
        );
    }

    #[test]
    fn a_regular_file_is_read_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.md");
        std::fs::write(&file, "the prompt").unwrap();
        assert_eq!(read_within_deadline(&file).unwrap(), "the prompt");
        let link = dir.path().join("link.md");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_within_deadline(&link).unwrap(), "the prompt");
    }

    #[test]
    fn a_named_pipe_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("p.md");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        refused_as(&fifo, "a named pipe (FIFO)");
    }

    #[test]
    fn a_link_to_dev_zero_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("p.md");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        refused_as(&link, "a character device");
    }

    #[test]
    fn a_directory_and_a_socket_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        refused_as(dir.path(), "a directory");
        let socket = dir.path().join("s");
        let _listener = UnixListener::bind(&socket).unwrap();
        refused_as(&socket, "a socket");
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn a_path_handle_opens_neither_a_pipe_nor_a_device() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("p.md");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // No `O_NONBLOCK` here: a real open of a pipe without a writer
        // would wait for one, and fail the test at the deadline.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(path_handle(&fifo).and_then(|h| h.metadata()));
        });
        let meta = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("naming a pipe does not wait for a writer")
            .unwrap();
        assert_eq!(kind(&meta), Some("a named pipe (FIFO)"));
        let mut zero = path_handle(Path::new("/dev/zero")).unwrap();
        assert_eq!(kind(&zero.metadata().unwrap()), Some("a character device"));
        // The device was not opened: the handle cannot be read.
        assert!(zero.read(&mut [0; 8]).is_err());
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn the_reopened_file_is_the_one_checked_even_when_the_path_is_swapped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.md");
        std::fs::write(&path, "the checked text").unwrap();
        let handle = path_handle(&path).unwrap();
        let checked = handle.metadata().unwrap();
        // Between the check and the open, a pipe takes the file's place.
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::fs::rename(&fifo, &path).unwrap();
        let mut file = reopen(&handle, &path).unwrap();
        assert!(same_file(&file.metadata().unwrap(), &checked));
        let mut text = String::new();
        file.read_to_string(&mut text).unwrap();
        assert_eq!(text, "the checked text");
        // Opened by its path, the pipe is another file, which `open` refuses.
        let swapped = open_for_reading(&path).unwrap();
        assert!(!same_file(&swapped.metadata().unwrap(), &checked));
    }

    #[test]
    fn a_file_over_the_limit_is_refused_and_one_at_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.md");
        let max = PROMPT_FILE_MAX_BYTES as usize;
        std::fs::write(&file, "x".repeat(max)).unwrap();
        assert_eq!(read_within_deadline(&file).unwrap().len(), max);
        std::fs::write(&file, "x".repeat(max + 1)).unwrap();
        let error = read_within_deadline(&file).expect_err("too large");
        assert_eq!(
            error.to_string(),
            format!(
                "prompt file {} is larger than 1 MiB, the most loops reads",
                file.display()
            )
        );
    }

    #[test]
    fn a_stream_over_the_limit_fails_even_when_its_size_was_small() {
        // As a file that grows while it is read: the size checked first says
        // nothing, the reader still stops one byte past the limit.
        let mut reader = UserFileReader::new(io::repeat(b'x'), "standard input".into(), 10);
        let mut bytes = Vec::new();
        let error = reader.read_to_end(&mut bytes).expect_err("too large");
        assert_eq!(error.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(
            error.to_string(),
            "standard input is larger than 10 bytes, the most loops reads"
        );
        assert!(bytes.len() <= 10, "{}", bytes.len());
        let mut exact = UserFileReader::new(&b"0123456789"[..], "x".into(), 10);
        let mut bytes = Vec::new();
        exact.read_to_end(&mut bytes).unwrap();
        assert_eq!(bytes, b"0123456789");
    }

    #[test]
    fn missing_and_binary_files_say_so() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.md");
        let error = read_within_deadline(&file).expect_err("missing");
        assert!(
            error
                .to_string()
                .starts_with(&format!("cannot read prompt file {}: ", file.display())),
            "{error}"
        );
        std::fs::write(&file, [0xff, 0xfe]).unwrap();
        let error = read_within_deadline(&file).expect_err("not UTF-8");
        assert!(matches!(error, UserFileError::NotUtf8 { .. }), "{error}");
    }

    #[test]
    fn sizes_read_as_units() {
        assert_eq!(Size(1 << 20).to_string(), "1 MiB");
        assert_eq!(Size(256 << 20).to_string(), "256 MiB");
        assert_eq!(Size(1 << 30).to_string(), "1 GiB");
        assert_eq!(Size(1500).to_string(), "1500 bytes");
    }
}
