//! Dynamic shell completion (issue 28): the shell asks `loops` itself.
//!
//! `COMPLETE=bash loops` prints the registration script (so does `loops
//! completions bash`); the script then runs `COMPLETE=bash loops -- <the
//! words>` on each Tab, and [`serve`] answers with the candidates, before
//! anything else in the process runs. Subcommands and flags come from the
//! clap definitions; values come from the completers here, which the
//! arguments carry (`add = crate::complete::loops()`):
//!
//! - enumerated values from loops-core's own lists ([`one_of`]), so they are
//!   the ones the resolver accepts;
//! - loops, runs, workflows, labels and pools from the SQLite database, read-only
//!   and bounded ([`loops_store::complete_sqlite`]): a missing database
//!   offers nothing and nothing is created. On PostgreSQL
//!   (`--database-url` or `$LOOPS_DATABASE_URL`) no stored value is
//!   offered: a Tab would wait on the network.

use clap_complete::engine::{
    ArgValueCandidates, ArgValueCompleter, CompletionCandidate, PathCompleter, ValueCompleter,
};
use clap_complete::env::{CompleteEnv, EnvCompleter};
use loops_store::{COMPLETION_BUDGET, COMPLETION_LIMIT, CompletionKind};
use std::ffi::OsStr;
use std::fmt::Display;

/// The variable that asks for completions, as clap_complete names it.
pub(crate) const VAR: &str = "COMPLETE";

/// Answers a completion request (`COMPLETE=<shell>` in the environment)
/// for the command line `cli` builds, and exits; returns at once, touching
/// nothing, otherwise.
pub(crate) fn serve(cli: fn() -> clap::Command) {
    if std::env::var_os(VAR).is_none_or(|v| v.is_empty() || v == "0") {
        return;
    }
    CompleteEnv::with_factory(cli)
        .var(VAR)
        .bin("loops")
        .complete();
}

/// The registration script of `shell`, as `COMPLETE=<shell> loops` prints
/// it, calling `loops` from the PATH (for `loops completions <shell>`).
pub(crate) fn registration(shell: clap_complete::Shell) -> std::io::Result<Vec<u8>> {
    let completer: &dyn EnvCompleter = match shell {
        clap_complete::Shell::Bash => &clap_complete::env::Bash,
        clap_complete::Shell::Elvish => &clap_complete::env::Elvish,
        clap_complete::Shell::Fish => &clap_complete::env::Fish,
        clap_complete::Shell::PowerShell => &clap_complete::env::Powershell,
        clap_complete::Shell::Zsh => &clap_complete::env::Zsh,
        _ => return Err(std::io::Error::other(format!("no completion for {shell}"))),
    };
    let mut buf = Vec::new();
    completer.write_registration(VAR, "loops", "loops", "loops", &mut buf)?;
    if shell == clap_complete::Shell::Zsh {
        // Autoloaded from a file `_loops` in $fpath, the script is the body
        // of `_loops`: it defines the completer, then completes this Tab
        // too (sourced, `compdef` has registered it for the next ones).
        buf.extend_from_slice(
            b"if [[ \"${funcstack[1]}\" == _loops ]]; then _clap_dynamic_completer_loops \"$@\"; fi\n",
        );
    }
    Ok(buf)
}

/// Every value of a loops-core enumeration (its `ALL`), or of any fixed
/// list: the engine keeps those that start with the word typed.
pub(crate) fn one_of<T: Display + Sync + Send + 'static>(all: &'static [T]) -> ArgValueCandidates {
    ArgValueCandidates::new(move || {
        all.iter()
            .map(|v| CompletionCandidate::new(v.to_string()))
            .collect::<Vec<_>>()
    })
}

/// IANA time zones, for `--tz`.
pub(crate) fn zones() -> ArgValueCandidates {
    ArgValueCandidates::new(|| {
        loops_core::Zone::names()
            .map(CompletionCandidate::new)
            .collect::<Vec<_>>()
    })
}

/// The sandboxes of every provider, each with the providers that take it.
pub(crate) fn sandboxes() -> ArgValueCandidates {
    ArgValueCandidates::new(|| {
        let mut found: Vec<(&str, Vec<&str>)> = Vec::new();
        for provider in loops_core::AgentProvider::ALL {
            for sandbox in loops_core::sandboxes(*provider) {
                match found.iter_mut().find(|(s, _)| s == sandbox) {
                    Some((_, providers)) => providers.push(provider.as_str()),
                    None => found.push((sandbox, vec![provider.as_str()])),
                }
            }
        }
        found
            .into_iter()
            .map(|(sandbox, providers)| {
                CompletionCandidate::new(sandbox).help(Some(providers.join(", ").into()))
            })
            .collect::<Vec<_>>()
    })
}

/// Loop names and ids.
pub(crate) fn loops() -> ArgValueCompleter {
    stored(&[CompletionKind::Loop])
}

/// Loop names and ids, then run ids (`logs`, `runs`, `cancel`).
pub(crate) fn loops_and_runs() -> ArgValueCompleter {
    stored(&[CompletionKind::Loop, CompletionKind::LoopRun])
}

/// Names of active workflows, and workflow ids.
pub(crate) fn workflows() -> ArgValueCompleter {
    stored(&[CompletionKind::Workflow])
}

/// Pool names, with their limits.
pub(crate) fn pools() -> ArgValueCompleter {
    stored(&[CompletionKind::Pool])
}

/// Workflow run ids.
pub(crate) fn workflow_runs() -> ArgValueCompleter {
    stored(&[CompletionKind::WorkflowRun])
}

/// The labels loops have. `--label` takes a comma-separated list too: the
/// label after the last comma is completed.
pub(crate) fn labels() -> ArgValueCompleter {
    ArgValueCompleter::new(|current: &OsStr| {
        let Some(current) = current.to_str() else {
            return Vec::new();
        };
        let (head, last) = match current.rsplit_once(',') {
            Some((head, last)) => (format!("{head},"), last),
            None => (String::new(), current),
        };
        lookup(&[CompletionKind::Label], last)
            .into_iter()
            .map(|c| c.add_prefix(&head))
            .collect()
    })
}

/// `restore`'s backups: the names in the data directory's `backups/`,
/// newest first, then the files under the word typed.
pub(crate) fn backups() -> ArgValueCompleter {
    ArgValueCompleter::new(|current: &OsStr| {
        let mut out: Vec<CompletionCandidate> = Vec::new();
        if let (Ok(dir), Some(prefix)) = (crate::paths::data_dir(), current.to_str()) {
            let listed = loops_store::list_backups(&loops_store::backup_dir(&dir));
            for backup in listed.unwrap_or_default() {
                let Some(name) = backup.path.file_name().and_then(OsStr::to_str) else {
                    continue;
                };
                if name.starts_with(prefix) && out.len() < COMPLETION_LIMIT {
                    let taken = backup.taken_at.to_string();
                    out.push(CompletionCandidate::new(name).help(Some(taken.into())));
                }
            }
        }
        out.extend(PathCompleter::file().complete(current));
        out
    })
}

/// A completer of the stored values of `kinds`, in that order.
fn stored(kinds: &'static [CompletionKind]) -> ArgValueCompleter {
    ArgValueCompleter::new(move |current: &OsStr| match current.to_str() {
        Some(current) => lookup(kinds, current),
        None => Vec::new(),
    })
}

/// The stored values of `kinds` that start with `prefix`, at most
/// [`COMPLETION_LIMIT`] in all.
fn lookup(kinds: &[CompletionKind], prefix: &str) -> Vec<CompletionCandidate> {
    // The words being completed are this process's arguments: one that
    // chooses PostgreSQL (`--database-url`) or the variable means no
    // stored values here.
    let flag = std::env::args_os().any(|a| {
        a.to_str()
            .is_some_and(|a| a == "--database-url" || a.starts_with("--database-url="))
    });
    let postgres = flag
        || std::env::var_os(crate::paths::DATABASE_URL_VAR)
            .is_some_and(|v| !v.to_string_lossy().trim().is_empty());
    let Ok(dir) = crate::paths::data_dir() else {
        return Vec::new();
    };
    if postgres {
        return Vec::new();
    }
    let db = dir.join(loops_store::DB_FILE);
    let mut out: Vec<CompletionCandidate> = Vec::new();
    for kind in kinds {
        let room = COMPLETION_LIMIT.saturating_sub(out.len());
        if room == 0 {
            break;
        }
        let found = loops_store::complete_sqlite(&db, *kind, prefix, room, COMPLETION_BUDGET);
        out.extend(
            found
                .into_iter()
                .map(|c| CompletionCandidate::new(c.value).help(c.help.map(Into::into))),
        );
    }
    out
}
