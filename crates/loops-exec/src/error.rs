//! [`ExecError`]: the failures the executor raises instead of reporting as
//! data (SPEC §5.4, §5.6).
//!
//! Job failures are data: a missing executable, a bad working directory, a
//! spawn error, a non-zero exit, a timeout or a cancel all come back from
//! [`crate::execute_target`] as an [`loops_core::ExecutorResult`] with status
//! failed or timed_out. `Err` is reserved for what SPEC §5.4 says is raised
//! before anything is spawned (the account errors), and for the checks that
//! [`crate::preflight_target`] raises.
//!
//! The messages are the SPEC's wording, including the capital `E` of
//! `Executable not found in PATH`.

use std::fmt;

/// Why a target cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// A command target has an account without a tool.
    #[error("account.tool is required when no provider tool can be inferred")]
    AccountToolRequired,
    /// `accounts env` could not be run at all, or did not finish in time.
    #[error("failed to run accounts env for {profile}/{tool}: {message}")]
    AccountsNotRun {
        /// The account profile.
        profile: String,
        /// The account tool.
        tool: String,
        /// What went wrong.
        message: String,
    },
    /// `accounts env` ran and did not succeed. Its stderr is scrubbed of
    /// the values it exported and of token shapes (issue 12 §2).
    #[error("accounts env failed for {profile}/{tool}{}", StderrSuffix(stderr))]
    AccountsFailed {
        /// The account profile.
        profile: String,
        /// The account tool.
        tool: String,
        /// Its stderr, trimmed and scrubbed; may be empty.
        stderr: String,
    },
    /// `accounts env` did not export the tool's profile variable, or
    /// exported it empty. The message names the variable and never a value
    /// (issue 12 §2).
    #[error(
        "accounts env returned no profile directory for {profile}/{tool}: expected {variable} in its exports"
    )]
    NoProfileDirectory {
        /// The account profile.
        profile: String,
        /// The account tool.
        tool: String,
        /// The variable that names the tool's profile directory.
        variable: String,
    },
    /// The profile directory `accounts env` named in the tool's profile
    /// variable is not there. Only that variable's value is ever shown.
    #[error("account profile directory does not exist for {profile}/{tool}: {dir}")]
    ProfileDirectoryMissing {
        /// The account profile.
        profile: String,
        /// The account tool.
        tool: String,
        /// The directory.
        dir: String,
    },
    /// The program is not executable where the target's PATH and cwd say
    /// (raised by preflight; [`crate::execute_target`] reports it as data).
    #[error(
        "Executable not found in PATH: {program}. Effective PATH={}",
        EmptyAs(path)
    )]
    ExecutableNotFound {
        /// The program as the target names it.
        program: String,
        /// The PATH the target runs with.
        path: String,
    },
    /// The target's working directory cannot be used (raised by preflight;
    /// [`crate::execute_target`] reports it as data).
    #[error(transparent)]
    WorkingDirectory(#[from] CwdError),
    /// The cancel token fired while `accounts env` was running (raised by
    /// preflight; [`crate::execute_target`] reports it as data).
    #[error("{reason}")]
    Cancelled {
        /// The reason given to the token, or `cancelled`.
        reason: String,
    },
    /// The target is one loops never runs, such as an agent prompt that
    /// begins with `-` (raised by preflight; [`crate::execute_target`]
    /// reports it as data).
    #[error("{reason}")]
    Refused {
        /// Why, and how to write the target instead.
        reason: String,
    },
}

/// Why a target's working directory cannot be used (SPEC §9 item 29: the
/// original surfaced this as an opaque spawn error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CwdError {
    /// Nothing is at that path.
    #[error("working directory does not exist: {cwd}")]
    Missing {
        /// The directory as the target names it.
        cwd: String,
    },
    /// Something other than a directory is at that path.
    #[error("working directory is not a directory: {cwd}")]
    NotADirectory {
        /// The directory as the target names it.
        cwd: String,
    },
    /// The directory exists but loops may not enter it.
    #[error("working directory is not accessible: {cwd}: {reason}")]
    NotAccessible {
        /// The directory as the target names it.
        cwd: String,
        /// The operating system's reason.
        reason: String,
    },
}

/// `: <stderr>` when there is any stderr, else nothing.
struct StderrSuffix<'a>(&'a str);

impl fmt::Display for StderrSuffix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            Ok(())
        } else {
            write!(f, ": {}", self.0)
        }
    }
}

/// The text, or `(empty)` for an empty string.
struct EmptyAs<'a>(&'a str);

impl fmt::Display for EmptyAs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() { "(empty)" } else { self.0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_use_the_spec_wording() {
        let failed = |stderr: &str| ExecError::AccountsFailed {
            profile: "work".into(),
            tool: "claude".into(),
            stderr: stderr.into(),
        };
        assert_eq!(
            failed("").to_string(),
            "accounts env failed for work/claude"
        );
        assert_eq!(
            failed("nope").to_string(),
            "accounts env failed for work/claude: nope"
        );
        let missing = ExecError::ExecutableNotFound {
            program: "claude".into(),
            path: String::new(),
        };
        assert_eq!(
            missing.to_string(),
            "Executable not found in PATH: claude. Effective PATH=(empty)"
        );
    }
}
