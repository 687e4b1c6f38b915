//! Validation of user input: names, accounts, targets and loop options
//! (SPEC §1.3, §7.3), workflow files (SPEC §6.1), and the workflow execution
//! order (SPEC §6.2).
//!
//! Every check returns a [`ValidationError`] whose `Display` is the message
//! shown to the user. Where the SPEC fixes a message it is used verbatim;
//! checks that are new in this port say what was wrong and how to fix it.
//!
//! Invariants:
//! - Nothing here panics, whatever the input. Graph walks (cycle detection,
//!   execution order) are iterative, so a 10,000-step chain cannot overflow
//!   the stack; the only recursion is serde_json's own `Value::clone` of
//!   unknown step keys, which is bounded by the depth of the caller's value.
//! - [`workflow_from_json`] runs the sixteen SPEC §6.1 checks first, in SPEC
//!   order, so every file the original rejects is rejected here with the same
//!   first message. The stricter checks of this port (types of optional
//!   fields, NUL bytes, environment names, accounts, name length, `version`)
//!   run only after all sixteen have passed.
//!
//! Departures from 0.3.1, on purpose:
//! - SPEC §9 item 27: the "executable without spaces" check applies to every
//!   command target whose `shell` is not true, not only to workflow steps.
//! - SPEC §9 item 28: a target `timeoutMs` of 0 is rejected, because it would
//!   time out immediately. A workflow target's `timeoutMs` of 0 still means
//!   "no timeout" (SPEC §1.3).
//! - An agent prompt that begins with `-` is rejected: the prompt is the
//!   agent's last argument, and the agent would read it as an option. So is
//!   an agent's `model`, `agent` or `cwd` that begins with `-` (issue 25):
//!   each is the value of a flag in the agent's argv.
//! - Every `timeoutMs` is capped at 100 years, as the CLI's durations are.
//!
//! `agent` with provider codex or codewith is refused at create, as 0.5.11
//! refuses it (agents note §12.1 rule 7); a stored one still runs, without
//! `--agent`.

use crate::duration::MAX_DURATION_MS;
use crate::model::{Account, CommandTarget, NewLoop, ProcessTarget, Target};
use crate::schedule::validate_schedule;

/// Longest accepted loop or workflow name, in characters (after trimming).
const MAX_NAME_CHARS: usize = 200;

/// Longest accepted environment variable name, in bytes. Far above any
/// real name; without it an import or MCP call could store a name of
/// megabytes (issue 25 item 6).
const MAX_ENV_NAME_BYTES: usize = 256;

/// The most characters of a refused environment name a message quotes:
/// enough to find the name, and short enough that the whole message, rule
/// included, fits the 300 characters of an import report's line.
const QUOTED_CHARS: usize = 64;

/// The largest integer a JSON number from the original (a JavaScript double)
/// holds exactly: 2^53 - 1.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Input that does not validate.
///
/// `Display` is the user-facing message: it says what was wrong and, for the
/// checks that are new in this port, how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ValidationError {
    /// Where the problem is: a path into the input such as
    /// `workflow.steps[2].dependsOn` or `target.command`, or a CLI option such
    /// as `--attempts`.
    pub field: String,
    /// The user-facing message.
    pub message: String,
}

impl ValidationError {
    /// An error about `field` with the user-facing `message`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> ValidationError {
        ValidationError {
            field: field.into(),
            message: message.into(),
        }
    }
}

type Result<T, E = ValidationError> = std::result::Result<T, E>;

/// Whitespace as JavaScript's `\s` and `String.prototype.trim` see it: the
/// Unicode `White_Space` set plus the byte-order mark.
fn is_space(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}

fn trim(s: &str) -> &str {
    s.trim_matches(is_space)
}

fn is_blank(s: &str) -> bool {
    trim(s).is_empty()
}

/// `<field> must be a non-empty string` (blank counts as empty).
fn require_non_empty(value: &str, field: &str) -> Result<()> {
    if is_blank(value) {
        return Err(ValidationError::new(
            field,
            format!("{field} must be a non-empty string"),
        ));
    }
    Ok(())
}

/// A NUL byte cannot be passed to a process as an argument, an environment
/// value or a path, so it is rejected up front rather than at spawn time.
fn require_no_nul(value: &str, field: &str) -> Result<()> {
    if value.contains('\0') {
        return Err(ValidationError::new(
            field,
            format!(
                "{field} must not contain a NUL character; processes cannot receive NUL in \
                 arguments, paths or environment values"
            ),
        ));
    }
    Ok(())
}

/// Whether `name` matches `[A-Za-z_][A-Za-z0-9_]*`.
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Checks one environment variable name of `<label>.env`: the pattern
/// `[A-Za-z_][A-Za-z0-9_]*` and at most 256 bytes; a refused name is
/// quoted short.
pub fn validate_env_name(name: &str, label: &str) -> Result<()> {
    let field = format!("{label}.env");
    if !is_env_name(name) {
        return Err(ValidationError::new(
            &field,
            format!(
                "{field} has an invalid variable name {}; names must match \
                 [A-Za-z_][A-Za-z0-9_]*",
                quoted(name)
            ),
        ));
    }
    if name.len() > MAX_ENV_NAME_BYTES {
        return Err(ValidationError::new(
            &field,
            format!(
                "{field} has a variable name of {} bytes, {}; names must be at most \
                 {MAX_ENV_NAME_BYTES} bytes",
                name.len(),
                quoted(name)
            ),
        ));
    }
    Ok(())
}

/// `value` quoted as `{:?}` quotes it, cut to its first [`QUOTED_CHARS`]
/// characters and `…` when longer: a message never echoes megabytes.
fn quoted(value: &str) -> String {
    match value.char_indices().nth(QUOTED_CHARS) {
        Some((at, _)) => format!("{:?}", format!("{}…", &value[..at])),
        None => format!("{value:?}"),
    }
}

/// Validates a loop or workflow name: non-empty after trimming, at most 200
/// characters, and free of control characters such as newlines and tabs.
///
/// `label` names the input in the message, for example `name` or
/// `workflow.name`.
pub fn validate_name(name: &str, label: &str) -> Result<()> {
    require_non_empty(name, label)?;
    if name.chars().any(char::is_control) {
        return Err(ValidationError::new(
            label,
            format!(
                "{label} must not contain control characters such as newlines or tabs; use a \
                 single line of text"
            ),
        ));
    }
    let chars = trim(name).chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(ValidationError::new(
            label,
            format!(
                "{label} must be at most {MAX_NAME_CHARS} characters, got {chars}; use a shorter \
                 name and put details in the description"
            ),
        ));
    }
    Ok(())
}

/// Validates an account reference (SPEC §5.4).
///
/// The profile and the tool are passed as separate argv elements to
/// `accounts env <profile> --tool <tool>`, so each must be a single word that
/// cannot be mistaken for a flag. `label` names the account, for example
/// `target.account`.
pub fn validate_account(account: &Account, label: &str) -> Result<()> {
    validate_account_word(&account.profile, &format!("{label}.profile"))?;
    if let Some(tool) = &account.tool {
        validate_account_word(tool, &format!("{label}.tool"))?;
    }
    Ok(())
}

fn validate_account_word(value: &str, field: &str) -> Result<()> {
    require_non_empty(value, field)?;
    if value.chars().any(|c| is_space(c) || c.is_control()) {
        return Err(ValidationError::new(
            field,
            format!(
                "{field} must not contain whitespace or control characters, got {value:?}; use \
                 the bare name that `accounts env` expects"
            ),
        ));
    }
    if value.starts_with('-') {
        return Err(ValidationError::new(
            field,
            format!(
                "{field} must not start with \"-\", got {value:?}: it is passed as an argument to \
                 `accounts env <profile> --tool <tool>`, which would read it as a flag"
            ),
        ));
    }
    Ok(())
}

/// Validates a command or agent target, as run by a loop or a workflow step.
///
/// `label` is the path of the target in the input, for example `target` or
/// `workflow.steps[2].target`; every message starts with it.
///
/// A command target needs a non-empty `command`. Unless `shell` is true, the
/// trimmed command must not contain whitespace, for loops as well as for
/// workflow steps (SPEC §9 item 27). `timeoutMs`, when set, must be greater
/// than zero (SPEC §9 item 28). Environment names must match
/// `[A-Za-z_][A-Za-z0-9_]*` and be at most 256 bytes, and no argument, path
/// or value may contain NUL.
///
/// An agent target needs a non-empty `prompt` that does not begin with `-`
/// (see [`prompt_reads_as_option`]), and follows 0.5.11's provider rules
/// in their order (agents note §12.1; see `validate/agent.rs`); no value
/// that sits on the agent's argv may begin with `-` (see
/// [`agent_value_reads_as_option`]).
pub fn validate_process_target(target: &ProcessTarget, label: &str) -> Result<()> {
    match target {
        ProcessTarget::Command(command) => validate_command_target(command, label),
        ProcessTarget::Agent(agent) => validate_agent_target(agent, label),
    }
}

/// Validates a loop target: a command or agent target as
/// [`validate_process_target`] checks it, or a workflow target.
///
/// A workflow target has little to check: its id is already typed, its
/// `input` is unused (SPEC §9 item 34), and a `timeoutMs` of 0 means no
/// timeout (SPEC §1.3); a larger one is capped at 100 years, as every
/// duration is.
pub fn validate_target(target: &Target, label: &str) -> Result<()> {
    match target {
        Target::Command(command) => validate_command_target(command, label),
        Target::Agent(agent) => validate_agent_target(agent, label),
        Target::Workflow(workflow) => validate_timeout_cap(workflow.timeout_ms, label),
    }
}

/// Whether `prompt` begins with `-`, which an agent would have read as an
/// option when the prompt was its last argument (0.3.1, SPEC §5.2).
///
/// Such a prompt is still refused when a loop or workflow is created. Since
/// the prompt goes on stdin (agents note §2.3), a stored one runs.
///
/// ```
/// assert!(loops_core::prompt_reads_as_option("--dangerously-skip-permissions"));
/// assert!(!loops_core::prompt_reads_as_option(" --help is what I need"));
/// ```
pub fn prompt_reads_as_option(prompt: &str) -> bool {
    prompt.starts_with('-')
}

/// The message for a prompt that [`prompt_reads_as_option`]; `field` names
/// it (`target.prompt`, `--prompt`).
pub fn prompt_option_message(field: &str) -> String {
    format!(
        "{field} must not begin with \"-\": the agent would read it as an option, not as its \
         prompt; start it with another character, for example \"Task: --fix\" or \" --fix\" \
         with a leading space"
    )
}

fn validate_command_target(target: &CommandTarget, label: &str) -> Result<()> {
    let field = format!("{label}.command");
    require_non_empty(&target.command, &field)?;
    // SPEC §9 item 27: the original checks only workflow steps; we check every
    // command target that does not run through a shell.
    if !target.is_shell() && trim(&target.command).contains(is_space) {
        return Err(ValidationError::new(
            &field,
            format!(
                "{field} must be an executable without spaces when shell is false; put flags in \
                 args or set shell true"
            ),
        ));
    }
    require_no_nul(&target.command, &field)?;
    for (i, arg) in target.args().iter().enumerate() {
        require_no_nul(arg, &format!("{label}.args[{i}]"))?;
    }
    validate_cwd(target.cwd.as_deref(), label)?;
    if let Some(env) = &target.env {
        for (name, value) in env {
            validate_env_name(name, label)?;
            require_no_nul(value, &format!("{label}.env.{name}"))?;
        }
    }
    validate_timeout(target.timeout_ms, label)?;
    if let Some(account) = &target.account {
        validate_account(account, &format!("{label}.account"))?;
    }
    Ok(())
}

/// An optional string that, when present, must be non-empty and NUL-free.
fn validate_optional_word(value: &str, field: &str, hint: &str) -> Result<()> {
    if is_blank(value) {
        return Err(ValidationError::new(
            field,
            format!("{field} must be a non-empty string when set; {hint}"),
        ));
    }
    require_no_nul(value, field)
}

fn validate_cwd(cwd: Option<&str>, label: &str) -> Result<()> {
    if let Some(cwd) = cwd {
        let field = format!("{label}.cwd");
        validate_optional_word(cwd, &field, "omit it to run in the current directory")?;
    }
    Ok(())
}

/// SPEC §9 item 28: a zero timeout would time out immediately. A timeout
/// is also capped as every duration is ([`validate_timeout_cap`]).
fn validate_timeout(timeout_ms: Option<u64>, label: &str) -> Result<()> {
    if timeout_ms == Some(0) {
        let field = format!("{label}.timeoutMs");
        return Err(ValidationError::new(
            &field,
            format!("{field} must be greater than zero"),
        ));
    }
    validate_timeout_cap(timeout_ms, label)
}

/// A `timeoutMs` above 100 years is refused, as `--timeout` refuses it:
/// it is certainly a typo, and it would overflow the instants it is added
/// to.
fn validate_timeout_cap(timeout_ms: Option<u64>, label: &str) -> Result<()> {
    match timeout_ms {
        Some(ms) if ms > MAX_DURATION_MS => {
            let field = format!("{label}.timeoutMs");
            Err(ValidationError::new(
                &field,
                format!(
                    "{field} must be at most {MAX_DURATION_MS} (100 years), got {ms}; use a \
                     shorter timeout"
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// Validates loop creation input (SPEC §7.3).
///
/// Checks run in this order, stopping at the first failure: the name (label
/// `name`), the schedule (through [`validate_schedule`], reported with its
/// own message), the numeric options in the SPEC §7.3 table order
/// (`--catch-up-limit`, `--attempts`, `--retry-delay`, `--lease`, with their
/// SPEC messages), the policies and the hooks, and last the target (label
/// `target`).
pub fn validate_new_loop(new: &NewLoop) -> Result<()> {
    validate_name(&new.name, "name")?;
    validate_schedule(&new.schedule)
        .map_err(|e| ValidationError::new("schedule", e.to_string()))?;
    let option =
        |option: &str, rule: &str| Err(ValidationError::new(option, format!("{option} {rule}")));
    if new.catch_up_limit == 0 {
        return option("--catch-up-limit", "must be a positive integer");
    }
    if new.catch_up_limit > crate::MAX_CATCH_UP_LIMIT {
        return option(
            "--catch-up-limit",
            &format!(
                "must be at most {} (the most missed slots one tick runs)",
                crate::MAX_CATCH_UP_LIMIT
            ),
        );
    }
    if new.max_attempts == 0 {
        return option("--attempts", "must be a positive integer");
    }
    if new.retry_delay_ms == 0 {
        return option("--retry-delay", "must be greater than zero");
    }
    if new.lease_ms == 0 {
        return option("--lease", "must be greater than zero");
    }
    validate_policy(&new.policy)?;
    validate_hooks(&new.hooks)?;
    validate_target(&new.target, "target")
}

/// Checks a loop's hooks (issue 17): each set hook is a shell command, not
/// blank and without a NUL byte. The CLI says so first in its flags' words.
fn validate_hooks(hooks: &crate::Hooks) -> Result<()> {
    for (hook, field) in [
        (&hooks.on_failure, "onFailure"),
        (&hooks.on_success, "onSuccess"),
    ] {
        if let Some(command) = hook {
            if is_blank(command) {
                return Err(ValidationError::new(
                    field,
                    format!("{field} must be a shell command; leave it out for no hook"),
                ));
            }
            require_no_nul(command, field)?;
        }
    }
    Ok(())
}

/// Checks a loop's operating policies (issue 17).
fn validate_policy(policy: &crate::LoopPolicy) -> Result<()> {
    let option =
        |option: &str, rule: &str| Err(ValidationError::new(option, format!("{option} {rule}")));
    for label in &policy.labels {
        validate_label(label)?;
    }
    for label in &policy.runs_on {
        validate_label(label).map_err(|e| ValidationError::new("--runs-on", e.message))?;
    }
    if let Some(pool) = &policy.pool {
        validate_pool_name(pool)?;
    }
    if let Some(watch) = &policy.watch {
        let placed = !policy.runs_on.is_empty();
        watch
            .check(placed)
            .map_err(|message| ValidationError::new("--watch", message))?;
    }
    if policy.expires_after_runs == Some(0) {
        return option("--expires-after-runs", "must be a positive integer");
    }
    if policy.pause_after_failures == Some(0) {
        return option("--pause-after-failures", "must be a positive integer");
    }
    if policy.max_retry_delay_ms == Some(0) {
        return option("--max-retry-delay", "must be greater than zero");
    }
    if let Some(code) = policy
        .skip_exit_codes
        .iter()
        .find(|c| !(1..=255).contains(*c))
    {
        return option(
            "--skip-exit-code",
            &format!("must be an exit code from 1 to 255, not {code}"),
        );
    }
    Ok(())
}

/// Checks one label: 1 to 64 characters of `A-Z a-z 0-9 . _ : = / -`.
///
/// ```
/// use loops_core::validate_label;
/// assert!(validate_label("team=infra/nightly").is_ok());
/// assert!(validate_label("has space").is_err());
/// ```
pub fn validate_label(label: &str) -> Result<()> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._:=/-".contains(c);
    if label.is_empty()
        || label.chars().count() > crate::MAX_LABEL_LEN
        || !label.chars().all(allowed)
    {
        return Err(ValidationError::new(
            "--label",
            format!(
                "invalid label {label:?}: a label is 1 to {} characters of A-Z a-z 0-9 . _ : = / -",
                crate::MAX_LABEL_LEN
            ),
        ));
    }
    Ok(())
}

/// Checks a pool's name (issue 30, Q1): 1 to 64 characters of
/// `A-Z a-z 0-9 . _ -`, starting with a letter or digit.
///
/// ```
/// use loops_core::validate_pool_name;
/// assert!(validate_pool_name("agents").is_ok());
/// assert!(validate_pool_name("-x").is_err());
/// ```
pub fn validate_pool_name(name: &str) -> Result<()> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric())
        || name.chars().count() > crate::MAX_LABEL_LEN
        || !name.chars().all(allowed)
    {
        return Err(ValidationError::new(
            "--pool",
            format!(
                "invalid pool name {name:?}: a pool name is 1 to {} characters of A-Z a-z 0-9 . _ -, \
                 starting with a letter or digit",
                crate::MAX_LABEL_LEN
            ),
        ));
    }
    Ok(())
}

mod agent;
mod keys;
mod options;
mod timers;
mod workflow;

use self::agent::validate_agent_target;
pub use self::agent::{sandboxes, validate_agent_options};
pub use self::keys::workflow_warnings;
pub use self::options::{AgentOption, agent_value_reads_as_option};
pub use self::workflow::{workflow_execution_order, workflow_from_json};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_names_are_short_words_that_start_with_a_letter_or_digit() {
        for name in ["a", "agents", "gpu-2", "A.b_c", "9", &"p".repeat(64)] {
            assert_eq!(validate_pool_name(name), Ok(()), "{name}");
        }
        for name in ["", "-a", ".a", "_a", "a b", "a/b", "é", &"p".repeat(65)] {
            let err = validate_pool_name(name).unwrap_err();
            assert_eq!(err.field, "--pool", "{name}");
        }
    }

    #[test]
    fn a_policy_with_a_bad_placement_label_or_pool_is_refused() {
        let placed = |runs_on: &str| crate::LoopPolicy {
            runs_on: vec![runs_on.to_owned()],
            ..crate::LoopPolicy::default()
        };
        assert!(validate_policy(&placed("host:box-1")).is_ok());
        assert_eq!(
            validate_policy(&placed("has space")).unwrap_err().field,
            "--runs-on"
        );
        let pooled = crate::LoopPolicy {
            pool: Some("-x".to_owned()),
            ..crate::LoopPolicy::default()
        };
        assert_eq!(validate_policy(&pooled).unwrap_err().field, "--pool");
        let watch = Some(crate::Watch {
            paths: vec!["/srv/repo".to_owned()],
            debounce_ms: 2_000,
        });
        let watching = crate::LoopPolicy {
            watch,
            ..placed("host:a")
        };
        assert!(validate_policy(&watching).is_ok());
        let unplaced = crate::LoopPolicy {
            runs_on: Vec::new(),
            ..watching
        };
        assert_eq!(validate_policy(&unplaced).unwrap_err().field, "--watch");
    }

    #[test]
    fn env_names() {
        for name in ["A", "_", "a_1", "PATH", "_X9"] {
            assert!(is_env_name(name), "{name}");
        }
        for name in ["", "1A", "A-B", "A B", "É", "A="] {
            assert!(!is_env_name(name), "{name}");
        }
    }

    #[test]
    fn env_names_are_capped_and_quoted_at_most_64_characters() {
        let check = |name: &str| validate_env_name(name, "target").map_err(|e| e.to_string());
        assert_eq!(check(&"N".repeat(MAX_ENV_NAME_BYTES)), Ok(()));
        let cut = format!("\"{}…\"", "N".repeat(64));
        assert_eq!(
            check(&"N".repeat(MAX_ENV_NAME_BYTES + 1)),
            Err(format!(
                "target.env has a variable name of 257 bytes, {cut}; names must be at most \
                 256 bytes"
            ))
        );
        // Issue 25 item 6: an import stored names of 5 MB.
        let huge = check(&"N".repeat(5 << 20)).unwrap_err();
        assert_eq!(
            huge,
            format!(
                "target.env has a variable name of 5242880 bytes, {cut}; names must be at most \
                 256 bytes"
            )
        );
        let huge = check(&format!("{}-", "N".repeat(5 << 20))).unwrap_err();
        assert_eq!(
            huge,
            format!(
                "target.env has an invalid variable name {cut}; names must match \
                 [A-Za-z_][A-Za-z0-9_]*"
            )
        );
        // Short names are quoted whole, escaped as `{:?}` escapes them.
        assert_eq!(
            check("A\u{1b}B"),
            Err(
                "target.env has an invalid variable name \"A\\u{1b}B\"; names must match \
                 [A-Za-z_][A-Za-z0-9_]*"
                    .to_owned()
            )
        );
        assert_eq!(quoted(&"é".repeat(64)), format!("{:?}", "é".repeat(64)));
        assert_eq!(quoted(&"é".repeat(65)), format!("\"{}…\"", "é".repeat(64)));
    }

    #[test]
    fn javascript_whitespace() {
        assert_eq!(trim("\u{feff}\u{a0} x \u{3000}"), "x");
        assert!(is_blank("\u{2028}\t"));
        assert!(!is_blank("\u{200b}"));
    }
}
