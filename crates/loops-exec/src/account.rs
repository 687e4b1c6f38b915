//! Account resolution through `accounts env <profile> --tool <tool>`
//! (SPEC §5.4; §9 items 13 and 30).
//!
//! Every failure here is an [`ExecError`] raised before the target is
//! spawned, so a provider never starts with a half-resolved account.
//!
//! No value `accounts env` printed reaches an error message (issue 12 §2):
//! only the tool's own profile variable may name the profile directory,
//! which a missing-directory error shows as the SPEC says; a failing call's
//! stderr is scrubbed of the values it exported and of anything shaped like
//! a token before it becomes part of the error.
//!
//! Fixed on purpose (SPEC §9 item 30):
//! - `accounts` runs with the normalized PATH (§5.5), so a service manager's
//!   minimal PATH still finds it in `~/.local/bin` and friends; the original
//!   used the un-normalized one;
//! - a value that is a JSON string literal (`"a\"b"`) is unquoted, and any
//!   other value is kept as the text it is (the original coerced JSON
//!   literals such as `1e3` or `true` to strings, rewriting `1e3` as `1000`);
//! - the call has its own timeout and runs under the same supervisor as a
//!   target (own process group, killed on timeout or cancel), so a hung
//!   `accounts` can only stall its own run (§9 item 13).
//!
//! Departure (issue 12 §2): the original fell back to the first export's
//! value when the tool's profile variable was missing (SPEC §5.4 step 4,
//! §10 item 64), so `--account-tool gh` with `export GH_TOKEN=…` first took
//! the token for a directory and printed it in the error. Here only the
//! tool's variable counts, and a tool loops has no entry for uses
//! `<TOOL>_CONFIG_DIR` (`gh` → `GH_CONFIG_DIR`, the GitHub CLI's own).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use loops_core::Account;

use crate::cancel::CancelToken;
use crate::error::ExecError;
use crate::options::ExecOptions;
use crate::path::{find_executable, normalize_path};
use crate::scrub::{Secrets, Shapes};
use crate::supervise::{self, Cause, Launch, Limits};

/// The environment variable a tool keeps its profile directory in: the
/// provider CLIs' documented ones, else `<TOOL>_CONFIG_DIR` (the tool name
/// upper-cased, anything but letters and digits turned into `_`).
fn profile_dir_var(tool: &str) -> Cow<'static, str> {
    Cow::Borrowed(match tool {
        "claude" => "CLAUDE_CONFIG_DIR",
        "codex" | "codex-app" => "CODEX_HOME",
        "cursor" => "CURSOR_CONFIG_DIR",
        "opencode" => "OPENCODE_CONFIG_DIR",
        "codewith" => "CODEWITH_HOME",
        "aicopilot" => "AICOPILOT_CONFIG_DIR",
        _ => {
            let name: String = tool
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_uppercase()
                    } else {
                        '_'
                    }
                })
                .collect();
            return Cow::Owned(format!("{name}_CONFIG_DIR"));
        }
    })
}

/// What an account resolves to.
pub(crate) struct AccountEnv {
    /// The variables its runs get: the parsed exports plus
    /// `LOOPS_ACCOUNT_PROFILE` and `LOOPS_ACCOUNT_TOOL`.
    pub(crate) vars: BTreeMap<String, String>,
    /// Every value `accounts env` exported, repeated names included: masked
    /// in what the run stores.
    pub(crate) secrets: Secrets,
}

/// Resolves `account` to the variables its runs get (see [`AccountEnv`]).
///
/// `tool_hint` is the provider's tool for agents; `base` is the base
/// environment (with the run's spawn id), before anything is removed from
/// it; `cancel` aborts the call.
pub(crate) fn resolve_account_env(
    account: &Account,
    tool_hint: Option<&str>,
    base: &BTreeMap<String, String>,
    opts: &ExecOptions,
    cancel: Option<&CancelToken>,
) -> Result<AccountEnv, ExecError> {
    let tool = account
        .tool
        .as_deref()
        .or(tool_hint)
        .ok_or(ExecError::AccountToolRequired)?;
    let profile = account.profile.as_str();
    let not_run = |message: String| ExecError::AccountsNotRun {
        profile: profile.to_owned(),
        tool: tool.to_owned(),
        message,
    };

    let mut env = base.clone();
    let path = normalize_path(base);
    env.insert("PATH".to_owned(), path.clone());
    // The normalized PATH holds only absolute entries (issue 25 §9), so
    // this directory never decides which `accounts` runs.
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let program = find_executable("accounts", &path, &cwd).map_err(|e| not_run(e.to_string()))?;
    let stdout = run_accounts(&program, &env, [profile, tool], opts, cancel, not_run)?;

    let exports = parse_exports(&stdout);
    let mut secrets = Secrets::default();
    secrets.extend(exports.iter().map(|(_, value)| value.as_str()));
    let vars: BTreeMap<String, String> = exports.into_iter().collect();
    // Issue 12 §2: only the tool's own variable names the directory; any
    // other export may be a credential, and is never echoed.
    let variable = profile_dir_var(tool);
    let dir = vars
        .get(variable.as_ref())
        .filter(|dir| !dir.is_empty())
        .cloned()
        .ok_or_else(|| ExecError::NoProfileDirectory {
            profile: profile.to_owned(),
            tool: tool.to_owned(),
            variable: variable.into_owned(),
        })?;
    if !Path::new(&dir).is_dir() {
        return Err(ExecError::ProfileDirectoryMissing {
            profile: profile.to_owned(),
            tool: tool.to_owned(),
            dir,
        });
    }
    let mut resolved = vars;
    resolved.insert("LOOPS_ACCOUNT_PROFILE".to_owned(), profile.to_owned());
    resolved.insert("LOOPS_ACCOUNT_TOOL".to_owned(), tool.to_owned());
    Ok(AccountEnv {
        vars: resolved,
        secrets,
    })
}

/// Runs `accounts env <profile> --tool <tool>` and returns its stdout.
fn run_accounts(
    program: &Path,
    env: &BTreeMap<String, String>,
    [profile, tool]: [&str; 2],
    opts: &ExecOptions,
    cancel: Option<&CancelToken>,
    not_run: impl Fn(String) -> ExecError,
) -> Result<String, ExecError> {
    let args = ["env", profile, "--tool", tool].map(str::to_owned);
    let launch = Launch {
        program,
        arg0: "accounts",
        args: &args,
        cwd: None,
        env,
        stdin: None,
    };
    let running = supervise::spawn(&launch).map_err(|e| not_run(e.to_string()))?;
    let finished = running.supervise(&Limits {
        timeout: Some(opts.accounts_timeout),
        idle: None,
        cancel,
        kill_grace: opts.kill_grace,
        leak_timeout: opts.leak_timeout,
        max_output_bytes: opts.max_output_bytes,
        log: None,
        seen: None,
    });
    match finished.cause {
        // No idle watchdog here: `Idle` cannot happen.
        Some(Cause::TimedOut | Cause::Idle) => {
            let ms = opts.accounts_timeout.as_millis();
            return Err(not_run(format!("timed out after {ms}ms")));
        }
        Some(Cause::Cancelled(reason)) => return Err(ExecError::Cancelled { reason }),
        None => {}
    }
    if !finished.status.is_some_and(|s| s.success()) {
        // Issue 12 §2: what it exported before failing, and anything shaped
        // like a token, never reach the error (which is stored and logged).
        let mut exported = Secrets::default();
        let exports = parse_exports(&finished.stdout);
        exported.extend(exports.iter().map(|(_, value)| value.as_str()));
        return Err(ExecError::AccountsFailed {
            profile: profile.to_owned(),
            tool: tool.to_owned(),
            stderr: exported
                .scrub(finished.stderr.trim(), Shapes::PrefixedAndBlobs)
                .into_owned(),
        });
    }
    Ok(finished.stdout)
}

/// The `export NAME=VALUE` lines of `accounts env` output, in order.
///
/// Lines are trimmed; anything else (comments, `unset`, blank lines) is
/// ignored. Repeated names are all returned; the caller's map keeps the last.
pub(crate) fn parse_exports(output: &str) -> Vec<(String, String)> {
    output.lines().filter_map(parse_export_line).collect()
}

fn parse_export_line(line: &str) -> Option<(String, String)> {
    let rest = line.trim().strip_prefix("export")?;
    // `export` must be followed by whitespace: `exported=1` is not an export.
    let rest = rest.strip_prefix(|c: char| c.is_whitespace())?.trim_start();
    let (name, value) = rest.split_once('=')?;
    if !is_name(name) {
        return None;
    }
    Some((name.to_owned(), decode_value(value)))
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A JSON string literal is unquoted; anything else loses one surrounding
/// quote at each end (shell-style `'value'`) and is otherwise kept verbatim.
fn decode_value(value: &str) -> String {
    if let Ok(s) = serde_json::from_str::<String>(value) {
        return s;
    }
    let value = value.strip_prefix(['"', '\'']).unwrap_or(value);
    let value = value.strip_suffix(['"', '\'']).unwrap_or(value);
    value.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_export_lines_with_valid_names_count() {
        let out = "# comment\n  export A=1  \nexport  B_2=two\nexported=no\nexport 9X=no\n\
                   export C-D=no\nunset E\nexport F=\nexportG=no\n";
        assert_eq!(
            parse_exports(out),
            vec![
                ("A".to_owned(), "1".to_owned()),
                ("B_2".to_owned(), "two".to_owned()),
                ("F".to_owned(), String::new()),
            ]
        );
    }

    #[test]
    fn json_strings_are_unquoted_and_other_values_kept_as_text() {
        // SPEC §9 item 30: the original turned 1e3 into "1000".
        let cases = [
            (r#""/p/a b""#, "/p/a b"),
            (r#""say \"hi\"\n""#, "say \"hi\"\n"),
            ("'/single'", "/single"),
            ("1e3", "1e3"),
            ("true", "true"),
            ("null", "null"),
            ("{\"a\":1}", "{\"a\":1}"),
            ("plain=with=equals", "plain=with=equals"),
            ("\"unterminated", "unterminated"),
        ];
        for (raw, expected) in cases {
            assert_eq!(decode_value(raw), expected, "{raw}");
        }
    }

    #[test]
    fn profile_dir_vars_cover_every_provider_tool() {
        for p in loops_core::AgentProvider::ALL {
            let var = profile_dir_var(p.tool());
            assert!(
                matches!(var, Cow::Borrowed(_)),
                "{p} has no documented profile variable"
            );
        }
        assert_eq!(profile_dir_var("codex-app"), "CODEX_HOME");
        assert_eq!(profile_dir_var("gh"), "GH_CONFIG_DIR");
        assert_eq!(profile_dir_var("my-tool.v2"), "MY_TOOL_V2_CONFIG_DIR");
    }
}
