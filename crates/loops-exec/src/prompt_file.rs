//! An agent's prompt file, read at each run (issues 17 and 25): bounded in
//! kind and size by `user_file.rs`, and in time here.
//!
//! Even a regular file can block a read for good, one on a hung NFS or
//! FUSE mount, say, and nothing has been spawned yet that a timeout could
//! kill. So the file is read on a thread of its own, and the run waits for
//! it only within the run's timeout and until its cancel token fires: a
//! read that outlives the timeout fails the run as `timed_out`, a cancel
//! fails it with the token's reason, as a cancel during a run does. A read
//! still blocked then is left behind: its thread holds the path and, at
//! most, one file descriptor, and ends, its text unused, if the file system
//! ever answers.
//!
//! The file is read once per run, when the run's spec is made
//! (`ProcessSpec::of`); the text read is the text sent.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use crate::cancel::CancelToken;
use crate::user_file::{PROMPT_FILE_MAX_BYTES, UserFileError, read_user_file};

/// How a prompt file's text is had: [`file_reader`] in production; tests
/// give one that blocks until they release it.
pub(crate) type Reader = Arc<dyn Fn(&Path) -> Result<String, UserFileError> + Send + Sync>;

/// The production [`Reader`]: `read_user_file`, at most
/// [`PROMPT_FILE_MAX_BYTES`].
pub(crate) fn file_reader() -> Reader {
    Arc::new(|path| read_user_file(path, "prompt file", PROMPT_FILE_MAX_BYTES))
}

/// How one run reads its prompt file.
#[derive(Clone, Copy)]
pub(crate) struct PromptRead<'a> {
    /// The run's cancel token: a cancel ends the wait at once.
    pub(crate) cancel: Option<&'a CancelToken>,
    /// The workflow step the prompt belongs to (`None`: a loop's), which
    /// the hint of an error names.
    pub(crate) step: Option<&'a str>,
    /// What reads the file.
    pub(crate) reader: &'a Reader,
}

/// Why a run has no prompt text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PromptError {
    /// The file cannot be used: missing, unreadable, not a regular file,
    /// too large, not UTF-8 or blank. The run's error, with its hint.
    Unusable(String),
    /// The read did not finish within the run's timeout, or the run was
    /// cancelled during it.
    Interrupted(Interrupted),
}

/// A run that ended while its prompt file was being read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Interrupted {
    /// The run's timeout passed: its error.
    TimedOut(String),
    /// The run was cancelled: the token's reason.
    Cancelled(String),
}

/// What the reading thread or the cancel token says first.
enum Message {
    Read(Result<String, UserFileError>),
    Cancelled,
}

/// The text of the prompt file at `path`, waited for at most `timeout`
/// (the run's) and until `how.cancel` fires (see the module docs).
pub(crate) fn read_prompt_file(
    path: &str,
    timeout: Duration,
    how: &PromptRead<'_>,
) -> Result<String, PromptError> {
    let (tx, rx) = mpsc::channel();
    let cancelled = |token: &CancelToken| {
        let reason = token.reason().unwrap_or_else(|| "cancelled".to_owned());
        PromptError::Interrupted(Interrupted::Cancelled(reason))
    };
    // The waker only sends on a channel: it never calls the token.
    let _subscription = how.cancel.map(|token| {
        let tx = tx.clone();
        token.subscribe(move || {
            let _ = tx.send(Message::Cancelled);
        })
    });
    if let Some(token) = how.cancel.filter(|t| t.is_cancelled()) {
        return Err(cancelled(token));
    }
    let reader = Arc::clone(how.reader);
    let file = PathBuf::from(path);
    std::thread::Builder::new()
        .name("loops-prompt-file".to_owned())
        .spawn(move || {
            // The run may have stopped waiting: then nobody hears this.
            let _ = tx.send(Message::Read(reader(&file)));
        })
        .map_err(|e| {
            PromptError::Unusable(format!(
                "cannot read prompt file {path}: cannot start a thread to read it: {e}; \
                 try again when the system has more resources"
            ))
        })?;
    match rx.recv_timeout(timeout) {
        Ok(Message::Read(read)) => usable(path, read, how.step),
        Ok(Message::Cancelled) => Err(cancelled(how.cancel.expect("only a token sends Cancelled"))),
        Err(RecvTimeoutError::Timeout) => {
            Err(PromptError::Interrupted(Interrupted::TimedOut(format!(
                "reading prompt file {path} did not finish within {}ms, the run's timeout; \
                 check the file system the file is on (a network mount that stopped \
                 answering?)",
                timeout.as_millis()
            ))))
        }
        // The reader panicked: its end of the channel is gone.
        Err(RecvTimeoutError::Disconnected) => Err(PromptError::Unusable(format!(
            "cannot read prompt file {path}: the read failed unexpectedly; {}",
            remedy(how.step, "restore the file")
        ))),
    }
}

/// The prompt `read` gave, or the run's error when it cannot be used.
fn usable(
    path: &str,
    read: Result<String, UserFileError>,
    step: Option<&str>,
) -> Result<String, PromptError> {
    let error = match read {
        Ok(text) if text.trim().is_empty() => format!(
            "prompt file {path} is empty; {}",
            remedy(step, "write the prompt into it")
        ),
        Ok(text) => return Ok(text),
        Err(e @ UserFileError::TooLarge { .. }) => {
            format!("{e}; {}", remedy(step, "shorten it"))
        }
        Err(e) => format!("{e}; {}", remedy(step, "restore the file")),
    };
    Err(PromptError::Unusable(error))
}

/// The hint of a prompt file's error: `fix` the file, or give the loop or
/// the workflow step another prompt.
fn remedy(step: Option<&str>, fix: &str) -> String {
    match step {
        None => format!("{fix}, or edit the loop to use --prompt"),
        Some(step) => format!(
            "{fix}, or create the workflow again with another prompt or promptFile for \
             step {step}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;

    /// A reader that blocks until the returned sender sends or is dropped,
    /// and says on `entered` that it has started.
    fn blocking_reader() -> (Reader, mpsc::Sender<()>, mpsc::Receiver<()>) {
        let (release, gate) = mpsc::channel::<()>();
        let (entered_tx, entered) = mpsc::channel();
        let gate = Mutex::new(gate);
        let entered_tx = Mutex::new(entered_tx);
        let reader: Reader = Arc::new(move |_path| {
            let _ = entered_tx.lock().expect("lock").send(());
            let _ = gate.lock().expect("lock").recv();
            Ok("released".to_owned())
        });
        (reader, release, entered)
    }

    #[test]
    fn a_read_is_waited_for_only_within_the_timeout() {
        let (reader, release, _entered) = blocking_reader();
        let how = PromptRead {
            cancel: None,
            step: None,
            reader: &reader,
        };
        let read = read_prompt_file("/mnt/hung/p.md", Duration::from_millis(20), &how);
        assert_eq!(
            read,
            Err(PromptError::Interrupted(Interrupted::TimedOut(
                "reading prompt file /mnt/hung/p.md did not finish within 20ms, the run's \
                 timeout; check the file system the file is on (a network mount that stopped \
                 answering?)"
                    .to_owned()
            )))
        );
        drop(release);
    }

    #[test]
    fn a_cancel_ends_the_wait_with_its_reason() {
        let (reader, release, entered) = blocking_reader();
        let token = CancelToken::new();
        let canceller = token.clone();
        std::thread::spawn(move || {
            if entered.recv_timeout(Duration::from_secs(20)).is_ok() {
                canceller.cancel("daemon stopping");
            }
        });
        let how = PromptRead {
            cancel: Some(&token),
            step: None,
            reader: &reader,
        };
        // An hour: only the cancel can end this wait.
        let read = read_prompt_file("/mnt/hung/p.md", Duration::from_secs(3600), &how);
        assert_eq!(
            read,
            Err(PromptError::Interrupted(Interrupted::Cancelled(
                "daemon stopping".to_owned()
            )))
        );
        drop(release);
        // A token cancelled before the read starts no thread at all.
        let (reader, _release, entered) = blocking_reader();
        let how = PromptRead {
            reader: &reader,
            ..how
        };
        let read = read_prompt_file("/mnt/hung/p.md", Duration::from_secs(3600), &how);
        assert!(
            matches!(
                read,
                Err(PromptError::Interrupted(Interrupted::Cancelled(_)))
            ),
            "{read:?}"
        );
        assert!(entered.try_recv().is_err());
    }

    #[test]
    fn a_released_read_gives_its_text() {
        let (reader, release, _entered) = blocking_reader();
        release.send(()).unwrap();
        let how = PromptRead {
            cancel: None,
            step: None,
            reader: &reader,
        };
        let read = read_prompt_file("/p.md", Duration::from_secs(3600), &how);
        assert_eq!(read, Ok("released".to_owned()));
    }

    #[test]
    fn the_hint_fits_a_loop_and_a_workflow_step() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.md");
        let path = path.to_str().unwrap();
        let reader = file_reader();
        let read = |step| {
            let how = PromptRead {
                cancel: None,
                step,
                reader: &reader,
            };
            match read_prompt_file(path, Duration::from_secs(20), &how) {
                Err(PromptError::Unusable(error)) => error,
                other => panic!("{other:?}"),
            }
        };
        let loop_error = read(None);
        assert!(
            loop_error.ends_with("; restore the file, or edit the loop to use --prompt"),
            "{loop_error}"
        );
        std::fs::write(path, " \n").unwrap();
        assert_eq!(
            read(Some("review")),
            format!(
                "prompt file {path} is empty; write the prompt into it, or create the workflow \
                 again with another prompt or promptFile for step review"
            )
        );
    }
}
