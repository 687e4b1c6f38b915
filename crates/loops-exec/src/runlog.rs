//! A run's output as it is produced: one log file per run under
//! `$LOOPS_DATA_DIR/logs/`, which `loops logs -f` follows (issue 16 §4).
//!
//! **Layout.** `logs/<run-id>.log` holds stdout and stderr interleaved in
//! the order their lines arrived, as a terminal would show them. A retry
//! runs under its slot's run id again: its attempt starts the file over
//! (the old file is unlinked and a new one created), so the file is always
//! the attempt the run's stored output belongs to. A follower notices the
//! new file by its inode.
//!
//! **Lines, scrubbed.** A stream's bytes are written a whole line at a time,
//! each line scrubbed as the stored output is (`scrub.rs`: the run's `env`
//! and account values, token shapes), so a secret never reaches the file
//! cut in two. A line longer than [`MAX_LINE`] bytes is written in pieces,
//! and a last line without a line break when its stream ends. So a prompt
//! without a line break shows only once it is complete.
//!
//! **Bounded.** Each stream writes at most the runner's output cap
//! (`max_output_bytes`, 256 KiB by default) to the file. The line that
//! would pass it is replaced by one marker line,
//! `[loops: stdout passed <cap> bytes; the rest is not logged, the stored
//! output keeps its tail]`, and the stream writes nothing more. So a file
//! is at most twice the cap plus two markers, and it keeps the *head* of
//! a run while the stored output keeps the tail: together they show both
//! ends of a run that printed too much.
//!
//! **Never a link.** `logs/` is created 0700 and refused when it is a link,
//! another user's or not a directory; a file is created with `O_EXCL`
//! (`create_new`) and `O_NOFOLLOW`, then narrowed to 0600 through its
//! descriptor, whatever the umask. Readers open it with
//! [`open_no_follow`](crate::owner_only::open_no_follow).
//!
//! **Never fails a run.** A write error stops the file (the run goes on);
//! [`RunLog::error`] tells the runner, which notes it in its own log.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nix::fcntl::OFlag;

use crate::owner_only::effective_uid;
use crate::scrub::{Secrets, Shapes};

/// The name of the directory of run logs inside the data directory.
pub const LOGS_DIR: &str = "logs";

/// A line longer than this is written in pieces of this size.
pub(crate) const MAX_LINE: usize = 8192;

/// The log file of run `run_id` in the logs directory `logs`.
pub fn run_log_path(logs: &Path, run_id: &str) -> PathBuf {
    logs.join(format!("{run_id}.log"))
}

/// The run id a log file is named after: `None` for any other name.
pub fn run_id_of_log(name: &str) -> Option<&str> {
    let id = name.strip_suffix(".log")?;
    let hex = id.len() == 12
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    hex.then_some(id)
}

/// Creates `<data_dir>/logs` with mode 0700 when it is missing, and checks
/// it: a directory (not a link) of this user, narrowed to 0700 when wider.
/// Returns its path.
pub fn prepare_logs_dir(data_dir: &Path) -> io::Result<PathBuf> {
    let dir = data_dir.join(LOGS_DIR);
    match DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let handle = OpenOptions::new()
        .read(true)
        .custom_flags(OFlag::O_DIRECTORY.bits() | OFlag::O_NOFOLLOW.bits())
        .open(&dir)
        .map_err(|e| refused(&dir, e))?;
    let meta = handle.metadata()?;
    if meta.uid() != effective_uid() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} belongs to uid {}, not to this user; remove it",
                dir.display(),
                meta.uid()
            ),
        ));
    }
    if meta.mode() & 0o777 != 0o700 {
        // `fchmod` through the descriptor, never the path.
        handle.set_permissions(std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(dir)
}

/// `ELOOP` or `ENOTDIR` from the no-follow open: something other than a
/// directory sits at the path.
fn refused(dir: &Path, e: io::Error) -> io::Error {
    let errno = e.raw_os_error();
    if errno == Some(nix::errno::Errno::ELOOP as i32)
        || errno == Some(nix::errno::Errno::ENOTDIR as i32)
    {
        return io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is not a directory (a link?); loops never follows links for its own files (remove it)",
                dir.display()
            ),
        );
    }
    e
}

/// One run's log file, open for writing. Shared by reference with the
/// supervisor of the run's process.
#[derive(Debug)]
pub struct RunLog {
    file: File,
    path: PathBuf,
    failed: OnceLock<String>,
}

impl RunLog {
    /// Starts the log of run `run_id` in `logs` (a directory from
    /// [`prepare_logs_dir`]): removes the file of an earlier attempt, then
    /// creates a new one, 0600, never through a link.
    pub fn create(logs: &Path, run_id: &str) -> io::Result<RunLog> {
        let path = run_log_path(logs, run_id);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let file = crate::owner_only::open_private_append(&path)?;
        Ok(RunLog {
            file,
            path,
            failed: OnceLock::new(),
        })
    }

    /// Where the log is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The first write error, after which nothing more was written.
    pub fn error(&self) -> Option<&str> {
        self.failed.get().map(String::as_str)
    }

    /// Appends `bytes`; after the first error, does nothing.
    fn write(&self, bytes: &[u8]) {
        if bytes.is_empty() || self.failed.get().is_some() {
            return;
        }
        let mut file = &self.file;
        if let Err(e) = file.write_all(bytes) {
            let _ = self
                .failed
                .set(format!("writing {}: {e}", self.path.display()));
        }
    }
}

/// Which of a child's streams a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// What a stream has not yet written, and what it has.
#[derive(Debug, Default)]
struct Line {
    pending: Vec<u8>,
    written: usize,
    stopped: bool,
}

/// Writes one run's chunks to its [`RunLog`], line by line, scrubbed and
/// bounded (see the module docs).
pub(crate) struct LogTee<'a> {
    log: &'a RunLog,
    secrets: &'a Secrets,
    cap: usize,
    lines: [Line; 2],
}

impl<'a> LogTee<'a> {
    pub(crate) fn new(log: &'a RunLog, secrets: &'a Secrets, cap: usize) -> LogTee<'a> {
        LogTee {
            log,
            secrets,
            cap,
            lines: [Line::default(), Line::default()],
        }
    }

    /// Takes a chunk just read from `stream`; writes its complete lines at
    /// once, in one write.
    pub(crate) fn chunk(&mut self, stream: Stream, bytes: &[u8]) {
        let mut out = Vec::new();
        let line = &mut self.lines[stream as usize];
        if line.stopped {
            return;
        }
        line.pending.extend_from_slice(bytes);
        let mut start = 0;
        loop {
            let rest = &line.pending[start..];
            let end = match rest.iter().position(|&b| b == b'\n') {
                Some(i) if i < MAX_LINE => i + 1,
                _ if rest.len() >= MAX_LINE => char_floor(rest, MAX_LINE),
                _ => break,
            };
            let piece = line.pending[start..start + end].to_vec();
            start += end;
            if !emit(line, &piece, self.secrets, self.cap, stream, &mut out) {
                break;
            }
        }
        line.pending.drain(..start.min(line.pending.len()));
        self.log.write(&out);
    }

    /// The stream ended: writes what it left without a line break.
    pub(crate) fn finish(&mut self) {
        let mut out = Vec::new();
        for (line, stream) in self.lines.iter_mut().zip([Stream::Stdout, Stream::Stderr]) {
            let rest = std::mem::take(&mut line.pending);
            if !rest.is_empty() && !line.stopped {
                let mut piece = rest;
                piece.push(b'\n');
                emit(line, &piece, self.secrets, self.cap, stream, &mut out);
            }
        }
        self.log.write(&out);
    }
}

/// Adds one line, scrubbed, to `out`, or the marker when it would pass the
/// cap; returns whether the stream goes on.
fn emit(
    line: &mut Line,
    piece: &[u8],
    secrets: &Secrets,
    cap: usize,
    stream: Stream,
    out: &mut Vec<u8>,
) -> bool {
    let text = String::from_utf8_lossy(piece);
    let text = secrets.scrub(&text, Shapes::Prefixed);
    if line.written + text.len() > cap {
        line.stopped = true;
        line.pending.clear();
        out.extend_from_slice(
            format!(
                "[loops: {} passed {cap} bytes; the rest is not logged, the stored output keeps its tail]\n",
                stream.name()
            )
            .as_bytes(),
        );
        return false;
    }
    line.written += text.len();
    out.extend_from_slice(text.as_bytes());
    true
}

/// The largest cut at most `max` that does not split a UTF-8 character.
fn char_floor(bytes: &[u8], max: usize) -> usize {
    let mut end = max.min(bytes.len());
    while end > max.saturating_sub(3) && end < bytes.len() && bytes[end] & 0xC0 == 0x80 {
        end -= 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tee_into(
        cap: usize,
        secrets: &Secrets,
        chunks: &[(Stream, &[u8])],
    ) -> (String, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let logs = prepare_logs_dir(dir.path()).unwrap();
        let log = RunLog::create(&logs, "0123456789ab").unwrap();
        let mut tee = LogTee::new(&log, secrets, cap);
        for (stream, bytes) in chunks {
            tee.chunk(*stream, bytes);
        }
        tee.finish();
        assert_eq!(log.error(), None);
        let text = std::fs::read_to_string(log.path()).unwrap();
        (text, dir)
    }

    #[test]
    fn whole_lines_interleave_in_arrival_order() {
        let (text, _dir) = tee_into(
            1024,
            &Secrets::default(),
            &[
                (Stream::Stdout, b"one\ntw"),
                (Stream::Stderr, b"oops\n"),
                (Stream::Stdout, b"o\nthree"),
            ],
        );
        // `two` is written when its line break arrives, `three` at the end.
        assert_eq!(text, "one\noops\ntwo\nthree\n");
    }

    #[test]
    fn a_secret_split_across_chunks_is_masked_whole() {
        let mut secrets = Secrets::default();
        secrets.extend(["correct-horse-battery"]);
        let (text, _dir) = tee_into(
            1024,
            &secrets,
            &[
                (Stream::Stdout, b"key=correct-ho"),
                (Stream::Stdout, b"rse-battery\n"),
            ],
        );
        assert_eq!(text, "key=[redacted]\n");
    }

    #[test]
    fn a_stream_past_the_cap_stops_with_one_marker() {
        let (text, _dir) = tee_into(
            10,
            &Secrets::default(),
            &[
                (Stream::Stdout, b"12345\n"),
                (Stream::Stdout, b"67890\nmore\n"),
                (Stream::Stderr, b"err\n"),
                (Stream::Stdout, b"still more\n"),
            ],
        );
        assert_eq!(
            text,
            "12345\n[loops: stdout passed 10 bytes; the rest is not logged, \
             the stored output keeps its tail]\nerr\n"
        );
    }

    #[test]
    fn the_file_stays_bounded_however_much_is_printed() {
        let dir = tempfile::tempdir().unwrap();
        let logs = prepare_logs_dir(dir.path()).unwrap();
        let log = RunLog::create(&logs, "0123456789ab").unwrap();
        let secrets = Secrets::default();
        let mut tee = LogTee::new(&log, &secrets, 4096);
        for _ in 0..1000 {
            tee.chunk(Stream::Stdout, &[b'x'; 1000]);
            tee.chunk(Stream::Stderr, b"line\n");
        }
        tee.finish();
        let len = std::fs::metadata(log.path()).unwrap().len();
        assert!(len <= 2 * 4096 + 200, "{len}");
    }

    #[test]
    fn a_long_line_is_cut_between_characters() {
        // One ASCII byte first, so a cut at MAX_LINE bytes would fall
        // inside a two-byte character.
        let mut long = format!("a{}", "é".repeat(MAX_LINE));
        long.push('\n');
        let (text, _dir) = tee_into(
            usize::MAX,
            &Secrets::default(),
            &[(Stream::Stdout, long.as_bytes())],
        );
        assert!(!text.contains('\u{fffd}'));
        assert_eq!(text.replace('\n', ""), format!("a{}", "é".repeat(MAX_LINE)));
    }

    #[test]
    fn files_are_private_and_a_retry_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let logs = prepare_logs_dir(dir.path()).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&logs), 0o700);
        let first = RunLog::create(&logs, "0123456789ab").unwrap();
        first.write(b"attempt 1\n");
        assert_eq!(mode(first.path()), 0o600);
        let second = RunLog::create(&logs, "0123456789ab").unwrap();
        second.write(b"attempt 2\n");
        assert_eq!(
            std::fs::read_to_string(second.path()).unwrap(),
            "attempt 2\n"
        );
    }

    #[test]
    fn planted_links_are_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        // A link at `logs/` is refused.
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join(LOGS_DIR)).unwrap();
        let e = prepare_logs_dir(dir.path()).unwrap_err();
        assert!(e.to_string().contains("never follows links"), "{e}");
        // A link at a run's file is replaced, and its target left alone.
        let logs = prepare_logs_dir(elsewhere.path()).unwrap();
        let victim = elsewhere.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, run_log_path(&logs, "0123456789ab")).unwrap();
        let log = RunLog::create(&logs, "0123456789ab").unwrap();
        log.write(b"out\n");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(log.path()).unwrap().is_symlink());
    }

    #[test]
    fn only_run_ids_name_log_files() {
        assert_eq!(run_id_of_log("0123456789ab.log"), Some("0123456789ab"));
        for other in [
            "0123456789ab",
            "0123456789AB.log",
            "x.log",
            "0123456789abc.log",
        ] {
            assert_eq!(run_id_of_log(other), None, "{other}");
        }
    }
}
