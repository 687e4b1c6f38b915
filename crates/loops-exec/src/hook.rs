//! Failure and success hooks (issue 17): a shell command a runner starts
//! after a run is finally recorded, given the run's JSON on stdin.
//!
//! A hook is supervised as a run is: `/bin/sh -c` in its own process group,
//! in the loop's working directory, under the normalized PATH, killed with
//! its whole group at its timeout, its output bounded. What it does never
//! changes the run; [`run_hook`] only says whether it failed.
//!
//! Its environment is the runner's base environment without the inherited
//! credentials an account run loses and without loops' own database
//! credentials (both lists in `credentials.rs`), whether or not the loop
//! runs under an account: `accounts env` is not called and a target's own
//! `env` is not given, so no credential is routed to a hook. Over it come
//! the normalized PATH and the hook's `LOOPS_*` variables. The line of its
//! stderr a failure reports is masked as a run's output is, of the
//! runner's secret values (the database's password) and token shapes.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::credentials::ACCOUNT_STRIPPED;
use crate::env::{base_without_database_credentials, process_env, runner_secrets};
use crate::options::ExecOptions;
use crate::path::{check_cwd, normalize_path};
use crate::supervise::{self, Cause, Launch, Limits};

/// How long a hook may run before its group is killed: 60 s.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// The most a hook's output is kept, per stream: only the end of stderr
/// is reported, so more would only cost memory.
const HOOK_OUTPUT_BYTES: usize = 16 * 1024;

/// The most characters of a failing hook's stderr its report quotes.
const REPORTED_STDERR_CHARS: usize = 200;

/// One hook to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// The shell command, run through `/bin/sh -c`.
    pub command: String,
    /// The working directory; the runner's own when `None`.
    pub cwd: Option<String>,
    /// What the hook reads on stdin.
    pub stdin: Vec<u8>,
    /// Variables set over the environment (`LOOPS_RUN_STATUS`, …).
    pub vars: Vec<(String, String)>,
    /// Kill the hook's group this long after the spawn.
    pub timeout: Duration,
}

/// Runs `hook` to its end with the runner's `opts` (base environment, kill
/// grace). `Err` says why the hook failed: a spawn error, a bad working
/// directory, its timeout, or a non-zero exit with the end of its stderr.
pub fn run_hook(hook: &Hook, opts: &ExecOptions) -> Result<(), String> {
    let base = opts.base_env.as_ref().unwrap_or_else(|| process_env());
    let mut env: BTreeMap<String, String> = base_without_database_credentials(base);
    env.retain(|name, _| !ACCOUNT_STRIPPED.contains(&name.as_str()));
    let path = normalize_path(&env);
    env.insert("PATH".to_owned(), path);
    env.extend(hook.vars.iter().cloned());
    let cwd: Option<PathBuf> = match hook.cwd.as_deref().map(check_cwd).transpose() {
        Ok(cwd) => cwd,
        Err(e) => return Err(e.to_string()),
    };
    let args = ["-c".to_owned(), hook.command.clone()];
    let launch = Launch {
        program: std::path::Path::new("/bin/sh"),
        arg0: "/bin/sh",
        args: &args,
        cwd: cwd.as_deref(),
        env: &env,
        stdin: Some(&hook.stdin),
    };
    let running = supervise::spawn(&launch).map_err(|e| format!("failed to spawn /bin/sh: {e}"))?;
    let finished = running.supervise(&Limits {
        timeout: Some(hook.timeout),
        idle: None,
        cancel: None,
        kill_grace: opts.kill_grace,
        leak_timeout: opts.leak_timeout,
        max_output_bytes: HOOK_OUTPUT_BYTES.min(opts.max_output_bytes.max(1)),
        log: None,
        seen: None,
    });
    if let Some(Cause::TimedOut) = finished.cause {
        return Err(format!("timed out after {}ms", hook.timeout.as_millis()));
    }
    match finished.status {
        Some(status) if status.success() => Ok(()),
        status => {
            let how = match status.and_then(|s| s.code()) {
                Some(code) => format!("exited with code {code}"),
                None => "was killed by a signal".to_owned(),
            };
            // Masked whole before the line is cut, so no end of a secret
            // is left.
            let stderr = runner_secrets(base, opts).scrub_output(finished.stderr);
            match last_line(&stderr) {
                Some(line) => Err(format!("{how}: {line}")),
                None => Err(how),
            }
        }
    }
}

/// The last non-blank line of `text`, cut to [`REPORTED_STDERR_CHARS`].
fn last_line(text: &str) -> Option<String> {
    let line = text.lines().rev().find(|l| !l.trim().is_empty())?.trim();
    Some(line.chars().take(REPORTED_STDERR_CHARS).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(command: &str) -> Hook {
        Hook {
            command: command.to_owned(),
            cwd: None,
            stdin: b"{\"id\":\"r\"}".to_vec(),
            vars: vec![("LOOPS_RUN_STATUS".to_owned(), "failed".to_owned())],
            timeout: Duration::from_secs(10),
        }
    }

    fn opts() -> ExecOptions {
        ExecOptions {
            base_env: Some(BTreeMap::from([
                ("HOME".to_owned(), "/nonexistent".to_owned()),
                ("ANTHROPIC_API_KEY".to_owned(), "secret".to_owned()),
            ])),
            ..ExecOptions::default()
        }
    }

    #[test]
    fn a_hook_reads_its_stdin_and_variables_without_credentials() {
        let script = r#"read -r line; [ "$line" = '{"id":"r"}' ] && [ "$LOOPS_RUN_STATUS" = failed ] && [ -z "${ANTHROPIC_API_KEY+x}" ]"#;
        assert_eq!(run_hook(&hook(script), &opts()), Ok(()));
    }

    #[test]
    fn failures_say_why() {
        assert_eq!(
            run_hook(
                &hook("echo first >&2; echo 'no route' >&2; exit 3"),
                &opts()
            ),
            Err("exited with code 3: no route".to_owned())
        );
        let mut slow = hook("sleep 30");
        slow.timeout = Duration::from_millis(100);
        assert_eq!(
            run_hook(&slow, &opts()),
            Err("timed out after 100ms".to_owned())
        );
        let mut lost = hook("true");
        lost.cwd = Some("/nonexistent/dir".to_owned());
        assert!(run_hook(&lost, &opts()).is_err());
    }
}
