//! The daemon's log file, `<data dir>/daemon.log` (SPEC §7.6; §9 item 37).
//!
//! Every line is `<instant> [loops-daemon] <message>`, with the instant in
//! the SPEC §0 form, so a log read months later still says when things
//! happened. The file is rotated by size: when a write would take it past
//! [`LogConfig::max_bytes`] (10 MiB by default) it becomes `daemon.log.1`,
//! older files shift up to [`LogConfig::keep`] (3), and the oldest is
//! dropped. The original's log had neither timestamps nor rotation.
//!
//! The file is opened with `O_NOFOLLOW` and must be a regular file of the
//! daemon's user: a `daemon.log` link planted by someone else is refused,
//! never appended to, and `daemon logs` does not read through one either.
//!
//! Readers: [`tail_lines`] for `loops daemon logs -n N`, and [`follow`] for
//! `-f`, which keeps reading across a rotation. Both hand on text fit for a
//! terminal: the file may hold lines the daemon did not write through
//! [`format_line`] (launchd sends the daemon's stdout and stderr, a panic
//! included, to this file; older versions did not escape), so `-f` escapes
//! what it prints as `-n` does through the printer, and a character cut
//! between two reads is held back until its last byte comes.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use loops_core::Timestamp;
#[cfg(test)]
use loops_scheduler::LOG_FILE;

/// When the log rotates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogConfig {
    /// Rotate before a write would take the file past this size.
    pub(crate) max_bytes: u64,
    /// Rotated files kept (`daemon.log.1` … `daemon.log.<keep>`).
    pub(crate) keep: usize,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            max_bytes: 10 * 1024 * 1024,
            keep: 3,
        }
    }
}

/// The daemon's log writer.
#[derive(Debug)]
pub(crate) struct DaemonLog {
    path: PathBuf,
    config: LogConfig,
    mirror_stderr: bool,
    state: Mutex<Option<(File, u64)>>,
}

impl DaemonLog {
    /// A log appending to `path`. With `mirror_stderr`, each line is also
    /// written to stderr (a foreground daemon on a terminal, or under a
    /// service manager that collects stderr).
    pub(crate) fn open(
        path: &Path,
        config: LogConfig,
        mirror_stderr: bool,
    ) -> io::Result<DaemonLog> {
        let file = open_append(path)?;
        let size = file.metadata()?.len();
        Ok(DaemonLog {
            path: path.to_owned(),
            config,
            mirror_stderr,
            state: Mutex::new(Some((file, size))),
        })
    }

    /// Writes one line stamped `now`. A failing write (a full disk) is
    /// dropped: the daemon keeps scheduling.
    pub(crate) fn line(&self, now: Timestamp, message: &str) {
        let text = format_line(now, message);
        if self.mirror_stderr {
            let _ = io::stderr().lock().write_all(text.as_bytes());
        }
        self.append(&text);
    }

    /// [`DaemonLog::line`] to the file only, for what the caller reports on
    /// stderr itself.
    pub(crate) fn file_line(&self, now: Timestamp, message: &str) {
        self.append(&format_line(now, message));
    }

    fn append(&self, text: &str) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let len = text.len() as u64;
        let full = state
            .as_ref()
            .is_some_and(|(_, size)| *size > 0 && size + len > self.config.max_bytes);
        if full || state.is_none() {
            *state = None;
            if full {
                let _ = rotate(&self.path, self.config.keep);
            }
            *state = open_append(&self.path)
                .and_then(|f| Ok((f.metadata()?.len(), f)))
                .ok()
                .map(|(size, f)| (f, size));
        }
        if let Some((file, size)) = state.as_mut() {
            if file.write_all(text.as_bytes()).is_ok() {
                *size += len;
            } else {
                *state = None;
            }
        }
    }
}

/// `<instant> [loops-daemon] <message>\n`, one line whatever the message
/// holds: a message may quote a loop's name, a hook's stderr or an error,
/// so its control characters (line breaks included) are written escaped,
/// never raw into the log or onto a terminal mirroring it.
pub(crate) fn format_line(now: Timestamp, message: &str) -> String {
    let message = crate::render::escape_controls(message, &[]);
    format!("{now} [loops-daemon] {message}\n")
}

/// Never through a symbolic link, and only a regular file of this user,
/// narrowed to 0600 through its descriptor (`loops_exec::owner_only`).
fn open_append(path: &Path) -> io::Result<File> {
    loops_exec::owner_only::open_private_append(path)
}

fn rotated(path: &Path, n: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// Shifts `path.1` … up by one, dropping the oldest, and renames `path` to
/// `path.1`.
fn rotate(path: &Path, keep: usize) -> io::Result<()> {
    if keep == 0 {
        return std::fs::remove_file(path);
    }
    for n in (1..keep).rev() {
        let from = rotated(path, n);
        if from.exists() {
            std::fs::rename(&from, rotated(path, n + 1))?;
        }
    }
    std::fs::rename(path, rotated(path, 1))
}

/// The last `lines` lines of the file at `path`, without the trailing
/// newline; the whole file when `lines` is 0; empty when there is no file
/// (SPEC §7.6 `daemon logs`). Also returns how many bytes were read, where
/// [`follow`] picks up.
pub(crate) fn tail_lines(path: &Path, lines: usize) -> io::Result<(String, u64)> {
    let mut bytes = Vec::new();
    match loops_exec::owner_only::open_no_follow(path) {
        Ok(mut f) => {
            f.read_to_end(&mut bytes)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((String::new(), 0)),
        Err(e) => return Err(e),
    }
    let read = bytes.len() as u64;
    let text = String::from_utf8_lossy(&bytes);
    let text = text.strip_suffix('\n').unwrap_or(&text);
    if lines == 0 {
        return Ok((text.to_owned(), read));
    }
    let start = text
        .rmatch_indices('\n')
        .nth(lines - 1)
        .map_or(0, |(i, _)| i + 1);
    Ok((text[start..].to_owned(), read))
}

/// Follows the file at `path` from byte `offset` on, like `tail -F`:
/// every `poll`, new text is handed to `emit`, escaped for a terminal
/// ([`Decoder`]). When the file is replaced (rotated) the rest of the old
/// file is read, then the new one from its start; when it shrinks
/// (truncated), reading restarts at its start. A missing file is waited
/// for. Returns only when `emit` fails (a closed stdout).
pub(crate) fn follow(
    path: &Path,
    mut offset: u64,
    poll: Duration,
    emit: &mut dyn FnMut(&str) -> io::Result<()>,
) -> io::Result<()> {
    let mut current: Option<(File, u64)> = None;
    let mut decoder = Decoder::default();
    loop {
        if current.is_none()
            && let Ok(f) = loops_exec::owner_only::open_no_follow(path)
        {
            let ino = f.metadata()?.ino();
            current = Some((f, ino));
        }
        if let Some((file, ino)) = current.as_mut() {
            let len = file.metadata()?.len();
            if len < offset {
                offset = 0;
                emit_text(&decoder.finish(), emit)?;
            }
            offset += drain(file, offset, &mut decoder, emit)?;
            let replaced = std::fs::metadata(path).map_or(true, |m| m.ino() != *ino);
            if replaced {
                // Whatever the writer added before the rename is in the old
                // file; read it, then switch. A character the old file
                // ends inside is never completed.
                drain(file, offset, &mut decoder, emit)?;
                emit_text(&decoder.finish(), emit)?;
                current = None;
                offset = 0;
                continue;
            }
        }
        std::thread::sleep(poll);
    }
}

/// Emits what `file` holds past `offset`; returns the bytes read.
fn drain(
    file: &mut File,
    offset: u64,
    decoder: &mut Decoder,
    emit: &mut dyn FnMut(&str) -> io::Result<()>,
) -> io::Result<u64> {
    file.seek(SeekFrom::Start(offset))?;
    let mut buf = Vec::new();
    file.read_to_end(&mut buf)?;
    emit_text(&decoder.push(&buf), emit)?;
    Ok(buf.len() as u64)
}

fn emit_text(text: &str, emit: &mut dyn FnMut(&str) -> io::Result<()>) -> io::Result<()> {
    if text.is_empty() {
        return Ok(());
    }
    emit(text)
}

/// Turns the bytes [`follow`] reads, in whatever pieces they come, into
/// text for a terminal.
///
/// Each piece is decoded up to its last whole character; the bytes of a
/// character the writer had not finished (at most three) wait for the next
/// piece, so a character cut between two reads is not shown as two U+FFFD.
/// Every character a terminal would act on or hide (ESC, CR, bidi and
/// zero-width characters) is escaped as the printer escapes a line;
/// escaping goes character by character, so a piece ending mid-line
/// prints as its whole line would, and a line without its line break yet
/// (a panic cut short) shows at once rather than waiting.
#[derive(Debug, Default)]
struct Decoder {
    cut: Vec<u8>,
}

impl Decoder {
    /// The text of `bytes`, after what came before, up to its last whole
    /// character, escaped.
    fn push(&mut self, bytes: &[u8]) -> String {
        self.cut.extend_from_slice(bytes);
        let whole = self.cut.len() - unfinished_len(&self.cut);
        let text = escape_text(&String::from_utf8_lossy(&self.cut[..whole]));
        self.cut.drain(..whole);
        text
    }

    /// What is still held: the start of a character the file ended inside,
    /// shown as U+FFFD.
    fn finish(&mut self) -> String {
        let text = escape_text(&String::from_utf8_lossy(&self.cut));
        self.cut.clear();
        text
    }
}

/// How many bytes at the end of `bytes` begin a UTF-8 character that is
/// not complete yet: 0 to 3.
fn unfinished_len(bytes: &[u8]) -> usize {
    // A character is at most four bytes, so the last one starts within
    // the last four; look for its first byte (not a continuation byte).
    let from = bytes.len().saturating_sub(4);
    let Some(start) = (from..bytes.len()).rev().find(|&i| bytes[i] & 0xc0 != 0x80) else {
        return 0;
    };
    match std::str::from_utf8(&bytes[start..]) {
        // Valid so far but cut short: wait for the rest.
        Err(e) if e.error_len().is_none() => bytes.len() - start,
        _ => 0,
    }
}

/// `text` as the printer writes a line: tabs and line breaks kept,
/// everything else a terminal would not show as itself escaped.
fn escape_text(text: &str) -> String {
    crate::render::escape_controls(text, &['\n', '\t']).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_message_is_one_line_with_its_controls_escaped() {
        let now = ts("2026-11-30T09:00:00.000Z");
        assert_eq!(
            format_line(now, "hook failed: \u{1b}[2Jgone\nforged line"),
            "2026-11-30T09:00:00.000Z [loops-daemon] hook failed: \\u{1b}[2Jgone\\nforged line\n"
        );
    }

    #[test]
    fn followed_text_is_escaped_and_a_cut_character_waits_for_its_end() {
        let mut d = Decoder::default();
        assert_eq!(
            d.push("a\u{1b}[2J\u{202e}b\tc\r\n".as_bytes()),
            "a\\u{1b}[2J\\u{202e}b\tc\\r\n"
        );
        // "é" (C3 A9) and "🦀" (F0 9F A6 80), each cut between reads.
        assert_eq!(d.push(b"caf\xc3"), "caf");
        assert_eq!(d.push(b"\xa9 \xf0"), "é ");
        assert_eq!(d.push(b"\x9f"), "");
        assert_eq!(d.push(b"\xa6"), "");
        assert_eq!(d.push(b"\x80!\n"), "🦀!\n");
        // Bytes that can never be UTF-8 are shown as U+FFFD at once.
        assert_eq!(d.push(b"x\xff\xc3"), "x\u{fffd}");
        // A file that ends inside a character: the start shows as U+FFFD.
        assert_eq!(d.finish(), "\u{fffd}");
        assert_eq!(d.finish(), "");
        assert_eq!(d.push(b"\xa9"), "\u{fffd}");
    }

    #[test]
    fn follow_prints_a_character_cut_between_two_writes_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        std::fs::write(&path, b"caf\xc3").unwrap();
        let mut seen = String::new();
        let mut writes = 0;
        // `emit` appends the rest of the line after the first read, and
        // ends the follow (as a closed stdout does) after the second.
        let ended = follow(&path, 0, Duration::from_millis(1), &mut |text| {
            seen.push_str(text);
            writes += 1;
            if writes == 2 {
                return Err(io::Error::other("done"));
            }
            let mut f = std::fs::OpenOptions::new().append(true).open(&path)?;
            f.write_all(b"\xa9 \x1b[31m\n")
        });
        assert_eq!(ended.unwrap_err().to_string(), "done");
        assert_eq!(seen, "café \\u{1b}[31m\n");
    }

    #[test]
    fn lines_are_stamped_and_rotate_by_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let config = LogConfig {
            max_bytes: 200,
            keep: 2,
        };
        let log = DaemonLog::open(&path, config, false).unwrap();
        let now = ts("2026-11-30T09:00:00.000Z");
        log.line(now, "started pid=1");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "2026-11-30T09:00:00.000Z [loops-daemon] started pid=1\n"
        );
        // Each line is 60 bytes: three fit under 200, the fourth rotates.
        for i in 0..10 {
            log.line(now, &format!("line {i:02} ..............."));
        }
        let current = std::fs::read_to_string(&path).unwrap();
        assert!(current.len() <= 200, "{current}");
        assert!(current.ends_with("line 09 ...............\n"), "{current}");
        assert!(rotated(&path, 1).exists());
        assert!(rotated(&path, 2).exists());
        assert!(
            !rotated(&path, 3).exists(),
            "only two rotated files are kept"
        );
    }

    #[test]
    fn tail_takes_the_last_lines_and_tolerates_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        assert_eq!(tail_lines(&path, 5).unwrap(), (String::new(), 0));
        std::fs::write(&path, "a\nb\nc\n").unwrap();
        assert_eq!(tail_lines(&path, 2).unwrap(), ("b\nc".to_owned(), 6));
        assert_eq!(tail_lines(&path, 10).unwrap().0, "a\nb\nc");
        assert_eq!(tail_lines(&path, 0).unwrap().0, "a\nb\nc");
    }

    #[test]
    fn a_planted_link_is_never_appended_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOG_FILE);
        let target = dir.path().join("precious");
        std::fs::write(&target, "keep\n").unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let err = DaemonLog::open(&path, LogConfig::default(), false).unwrap_err();
        assert!(err.to_string().contains("is a symbolic link"), "{err}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep\n");
    }
}
