//! Exit codes: the one place where an outcome or an error becomes a code.
//!
//! | Code | When |
//! |---|---|
//! | 0 | success, including `--help`, `--version` and a closed stdout pipe |
//! | 1 | any error (printed as `error: <msg>` on stderr), and a `run-now` whose run did not succeed or a runner interrupted by a signal |
//! | 2 | a usage error found by clap (unknown flag, missing argument) |
//!
//! Departures from 0.3.1: the original exits 1 on usage errors too (SPEC
//! §7.1) and 0 after a failed `run-now`.

use std::io::Write;
use std::process::ExitCode;

use loops_store::{OpenError, StoreError};

/// How a command that did not fail ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Exit 0.
    Success,
    /// Exit 1 without an error message: the command did its job and already
    /// said why it is not a success (a failed run, an interrupted tick).
    Failure,
    /// Exit 2: a dry run found changes to make (`apply --dry-run`, for CI).
    Changes,
}

/// Maps the result of a command to the process exit code, printing the
/// error if there is one.
pub(crate) fn code(result: anyhow::Result<Outcome>, verbose: bool) -> ExitCode {
    let err = match result {
        Ok(Outcome::Success) => return ExitCode::SUCCESS,
        Ok(Outcome::Failure) => return ExitCode::FAILURE,
        Ok(Outcome::Changes) => return ExitCode::from(2),
        Err(err) => err,
    };
    if let Some(usage) = err.downcast_ref::<clap::Error>() {
        if usage.kind() == clap::error::ErrorKind::DisplayVersion {
            // SPEC §7.1, §10 item 88: the bare version, as the original
            // prints it; clap would print `<name> <version>`.
            let _ = writeln!(std::io::stdout().lock(), "{}", crate::args::VERSION);
            return ExitCode::SUCCESS;
        }
        if usage.kind() == clap::error::ErrorKind::InvalidSubcommand {
            // clap's tip names the subcommands nearest by edit distance;
            // its last line then points to the right `--help` (issue 28).
            let _ = write!(anstream::stderr().lock(), "{}", point_to_help(usage));
            return ExitCode::from(u8::try_from(usage.exit_code()).unwrap_or(2));
        }
        // clap prints help to stdout (code 0) and usage errors to stderr
        // (code 2). A closed pipe while printing help is not worth
        // reporting.
        let _ = usage.print();
        return ExitCode::from(u8::try_from(usage.exit_code()).unwrap_or(2));
    }
    if is_broken_pipe(&err) {
        // `loops runs | head -1`: the reader left, which is not an error.
        return ExitCode::SUCCESS;
    }
    // Nothing useful is left to do if stderr is gone too.
    let _ = writeln!(
        std::io::stderr().lock(),
        "error: {}",
        message(&err, verbose)
    );
    ExitCode::FAILURE
}

/// A mistyped subcommand's error as clap renders it (styled; anstream
/// strips the styles where colour is off), its closing "For more
/// information, try '--help'." naming the command whose help lists the
/// real subcommands: `try 'loops --help'`, `try 'loops daemon --help'`.
fn point_to_help(usage: &clap::Error) -> String {
    let rendered = usage.render().ansi().to_string();
    let path = match usage.get(clap::error::ContextKind::Usage) {
        Some(clap::error::ContextValue::StyledStr(text)) => {
            let text = text.to_string();
            let words: Vec<&str> = text
                .trim_start()
                .trim_start_matches("Usage:")
                .split_whitespace()
                .take_while(|w| !w.starts_with(['[', '<']))
                .collect();
            words.join(" ")
        }
        _ => String::new(),
    };
    let path = if path.is_empty() { "loops" } else { &path };
    match rendered.rfind("--help") {
        Some(at) => format!("{}{path} {}", &rendered[..at], &rendered[at..]),
        None => rendered,
    }
}

/// What the command line prints of an error after `error: `: the message,
/// then a `hint:` line when the message alone does not say what to do.
/// `loops mcp` returns the same text as a tool's error. With `verbose`
/// (`--verbose`) a missing executable's error keeps the whole PATH.
pub(crate) fn message(err: &anyhow::Error, verbose: bool) -> String {
    if let Some(usage) = err.downcast_ref::<clap::Error>() {
        // What clap says before its usage block, without its `error: `:
        // "the following required arguments were not provided:" is followed
        // by the arguments' names.
        let rendered = usage.render().to_string();
        let said: Vec<&str> = rendered
            .lines()
            .take_while(|line| !line.trim().is_empty())
            .collect();
        let said = said.join("\n");
        return said.strip_prefix("error: ").unwrap_or(&said).to_owned();
    }
    // An error may quote stored data (a loop's name, a cwd): its control
    // characters are shown escaped, never sent to the terminal raw.
    let text = format!("{err:#}");
    let shown = crate::render::escape_controls(&crate::brief::error(&text, verbose), &['\n', '\t'])
        .into_owned();
    if let Some(db) = damaged_database(err) {
        // SQLite checks pages as it reads them, so damage can surface in
        // any command, long after the file was opened: name the file.
        // The same steps as `doctor`'s, naming the newest backup if any;
        // the data directory's path is shown escaped, like the error.
        let recovery = crate::service::doctor::recovery(&db);
        let db = db.display().to_string();
        let db = crate::render::escape_controls(&db, &[]);
        let recovery = crate::render::escape_controls(&recovery, &[]);
        return format!(
            "{shown} (the database file {db} is damaged)\nhint: stop every loops process (loops \
             daemon stop), {recovery}; or move it (with its -wal and -shm files) aside to start \
             afresh"
        );
    }
    match hint(err) {
        Some(hint) => format!("{shown}\nhint: {hint}"),
        None => shown,
    }
}

/// The database file, when the error is a query finding it damaged.
fn damaged_database(err: &anyhow::Error) -> Option<std::path::PathBuf> {
    let corrupt = err.chain().any(|cause| {
        store_error(cause).is_some_and(StoreError::is_corrupt)
            || open_error(cause).is_some_and(OpenError::is_corrupt)
    });
    let dir = crate::paths::data_dir().ok()?;
    corrupt.then(|| dir.join(loops_store::DB_FILE))
}

/// Whether a closed stdout pipe caused the error, anywhere in its chain.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The store error a cause is or wraps. The runners' errors wrap it
/// transparently, which hides it from a plain walk of the chain.
pub(crate) fn store_error<'a>(
    cause: &'a (dyn std::error::Error + 'static),
) -> Option<&'a StoreError> {
    use loops_scheduler::{DaemonError, SchedulerError};
    use loops_workflow::WorkflowError;
    if let Some(e) = cause.downcast_ref::<StoreError>() {
        return Some(e);
    }
    match (
        cause.downcast_ref::<WorkflowError>(),
        cause.downcast_ref::<SchedulerError>(),
        cause.downcast_ref::<DaemonError>(),
    ) {
        (Some(WorkflowError::Store(e)), _, _)
        | (_, Some(SchedulerError::Store(e)), _)
        | (_, _, Some(DaemonError::Store(e))) => Some(e),
        _ => None,
    }
}

/// The error opening the database a cause is or wraps: opening a store
/// fails with an [`OpenError`], and an operation that had to open one (a
/// backup, a reconnect) wraps it in a [`StoreError`].
pub(crate) fn open_error<'a>(
    cause: &'a (dyn std::error::Error + 'static),
) -> Option<&'a OpenError> {
    match store_error(cause) {
        Some(StoreError::Open(e)) => Some(e),
        _ => cause.downcast_ref::<OpenError>(),
    }
}

/// What to do next, for errors where the message alone does not say.
fn hint(err: &anyhow::Error) -> Option<&'static str> {
    err.chain().find_map(|cause| match store_error(cause) {
        Some(StoreError::NotFound { kind: "loop", .. }) => {
            Some("run `loops list` to see the ids and names of existing loops")
        }
        Some(StoreError::NotFound {
            kind: "workflow", ..
        }) => Some("run `loops workflows list` to see the ids and names of active workflows"),
        Some(StoreError::NotFound {
            kind: "workflow run",
            ..
        }) => Some("run `loops workflows runs` to see the ids of recent workflow runs"),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_message_keeps_what_clap_says_is_missing() {
        use clap::Parser;
        let err = crate::args::Cli::try_parse_from(["loops", "labels", "set", "--", "x"])
            .map(|_| ())
            .unwrap_err();
        let text = message(&err.into(), false);
        assert!(
            text.starts_with("the following required arguments"),
            "{text}"
        );
        assert!(text.contains("<LABEL>"), "{text}");
        assert!(!text.contains("Usage"), "{text}");
    }

    #[test]
    fn store_errors_are_found_inside_the_runners_errors() {
        let not_found = || StoreError::NotFound {
            kind: "loop",
            key: "x".to_owned(),
        };
        for err in [
            anyhow::Error::from(not_found()),
            anyhow::Error::from(loops_workflow::WorkflowError::Store(not_found())),
            anyhow::Error::from(loops_scheduler::SchedulerError::Store(not_found())),
            anyhow::Error::from(loops_scheduler::DaemonError::Store(not_found()))
                .context("running the daemon"),
        ] {
            assert!(
                hint(&err).is_some_and(|h| h.contains("loops list")),
                "{err:#}"
            );
        }
    }
    #[test]
    fn an_opening_error_is_found_alone_and_inside_an_operations_error() {
        let refused = || OpenError::Unsafe {
            what: "data directory",
            path: "/data".into(),
            problem: "it is writable by group or others".to_owned(),
            fix: "chmod 700 /data".to_owned(),
        };
        for err in [
            anyhow::Error::from(refused()).context("opening the loops database in /data"),
            anyhow::Error::from(StoreError::from(refused())),
            anyhow::Error::from(loops_scheduler::DaemonError::Store(refused().into())),
        ] {
            assert!(
                err.chain()
                    .any(|cause| matches!(open_error(cause), Some(OpenError::Unsafe { .. }))),
                "{err:#}"
            );
            assert!(message(&err, false).ends_with("chmod 700 /data"), "{err:#}");
        }
    }
}
