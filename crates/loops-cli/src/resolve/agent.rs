//! The agent options of `create agent` and `edit`, stage two (issue 27):
//! raw flags become an [`AgentChange`] to a stored or new agent target.
//!
//! Values are read here only as far as their flag goes (a mode, a
//! duration, a list); which provider takes which option is 0.5.11's rules
//! (agents note §12.1), checked by core on the target as a whole, whose
//! messages [`flag_message`] says in flags, with the CLI wording of §12.3
//! where 0.5.11 has one.
//!
//! Two timeouts:
//! - `--timeout none` (or `unlimited`, `null`, `never`, `off`, `false`) is
//!   an agent's `timeoutMs: null`: no wall clock, and no default watchdog
//!   (§6, §12.3). Command loops keep a wall clock and refuse it.
//! - `--idle-timeout none` stores no `idleTimeoutMs`, and `timeoutMs: null`
//!   when no wall clock is set: in 0.5.11's model (§6) a target without a
//!   watchdog is one whose `timeoutMs` is given, as a number or `null`.

use std::str::FromStr;

use anyhow::{Result, anyhow, bail};
use loops_core::{AgentTarget, PermissionMode, ValidationError, WallClock, WorktreeMode};

use crate::args::agent::AgentFlags;

/// The words that mean "no limit" (agents note §12.3).
const UNLIMITED: [&str; 6] = ["none", "unlimited", "null", "never", "off", "false"];

/// 0.5.11's message for a bad `--timeout` of an agent loop (§12.3).
pub(crate) const TIMEOUT_MESSAGE: &str =
    "--timeout must be a duration greater than zero, or none/unlimited";

/// The message for a bad `--idle-timeout`.
const IDLE_MESSAGE: &str = "--idle-timeout must be a duration greater than zero, or none";

/// Whether `value` is one of the words for "no limit".
pub(crate) fn is_unlimited(value: &str) -> bool {
    let value = value.trim();
    UNLIMITED.iter().any(|w| value.eq_ignore_ascii_case(w))
}

/// An agent's `--timeout` at create: a positive duration, or a word for
/// none (`timeoutMs: null`).
pub(crate) fn wall_clock(value: &str) -> Result<WallClock> {
    if is_unlimited(value) {
        return Ok(WallClock::Unlimited);
    }
    super::refuse_bare_milliseconds(value, "--timeout")?;
    super::positive_duration(value, "--timeout")
        .map(WallClock::Ms)
        .map_err(|_| anyhow!(TIMEOUT_MESSAGE))
}

/// `--idle-timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Idle {
    /// A watchdog of this many milliseconds.
    Ms(u64),
    /// No watchdog (`none`).
    Off,
    /// `''` (edit): the stored value is removed, so the default applies
    /// when no wall clock is stored either.
    Default,
}

/// The agent options given, resolved: each field is `None` when its flag
/// is not given, and the stored value then stays.
#[derive(Debug, Default)]
pub(crate) struct AgentChange {
    /// `Some(None)` (edit's `''`) removes it.
    permission_mode: Option<Option<PermissionMode>>,
    sandbox: Option<Option<String>>,
    /// Absolute; empty removes them.
    add_dirs: Option<Vec<String>>,
    variant: Option<Option<String>>,
    idle: Option<Idle>,
    /// Empty removes them.
    tools: Option<Vec<String>>,
    commands: Option<Vec<String>>,
    safety_reason: Option<Option<String>>,
    manual_break_glass: Option<bool>,
    /// `Some(None)`: off (edit's `''` too), stored as unset.
    worktree: Option<Option<WorktreeMode>>,
    keep_worktree: Option<bool>,
}

impl AgentChange {
    /// Resolves `flags`. With `edit`, `''` removes a value (`create`
    /// keeps it for core to refuse, as `--model ''`); `dir` makes an
    /// `--add-dir` absolute.
    pub(crate) fn of(
        flags: &AgentFlags<'_>,
        edit: bool,
        dir: impl Fn(&str) -> Result<String>,
    ) -> Result<AgentChange> {
        let text =
            |value: Option<&str>| value.map(|v| (!(edit && v.is_empty())).then(|| v.to_owned()));
        let permission_mode = match flags.permission_mode {
            None => None,
            Some("") if edit => Some(None),
            Some(mode) => Some(Some(PermissionMode::from_str(mode.trim()).map_err(
                |_| anyhow!("--permission-mode must be default, plan, auto, or bypass"),
            )?)),
        };
        let idle = match flags.idle_timeout {
            None => None,
            Some("") if edit => Some(Idle::Default),
            Some(value) if is_unlimited(value) => Some(Idle::Off),
            Some(value) => {
                super::refuse_bare_milliseconds(value, "--idle-timeout")?;
                Some(Idle::Ms(
                    super::positive_duration(value, "--idle-timeout")
                        .map_err(|_| anyhow!(IDLE_MESSAGE))?,
                ))
            }
        };
        let worktree = match flags.worktree {
            None => None,
            Some("") if edit => Some(None),
            Some(mode) => match WorktreeMode::from_str(mode.trim()) {
                Ok(WorktreeMode::Off) => Some(None),
                Ok(mode) => Some(Some(mode)),
                Err(_) => bail!("--worktree must be off, auto, or required"),
            },
        };
        let add_dirs = match list(flags.add_dirs) {
            Some(dirs) => Some(dirs.iter().map(|d| dir(d)).collect::<Result<_>>()?),
            None => None,
        };
        Ok(AgentChange {
            permission_mode,
            sandbox: text(flags.sandbox),
            add_dirs,
            variant: text(flags.effort),
            idle,
            tools: list(flags.allow_tools),
            commands: list(flags.allow_commands),
            safety_reason: text(flags.safety_reason),
            manual_break_glass: flags.manual_break_glass,
            worktree,
            keep_worktree: flags.keep_worktree,
        })
    }

    /// Applies the change to `target`, whose `timeoutMs` is already the
    /// new one: `--idle-timeout none` depends on it.
    pub(crate) fn apply(self, target: &mut AgentTarget) {
        if let Some(mode) = self.permission_mode {
            target.permission_mode = mode;
        }
        if let Some(sandbox) = self.sandbox {
            target.sandbox = sandbox;
        }
        if let Some(dirs) = self.add_dirs {
            target.add_dirs = (!dirs.is_empty()).then_some(dirs);
        }
        if let Some(variant) = self.variant {
            target.variant = variant;
        }
        match self.idle {
            None => {}
            Some(Idle::Ms(ms)) => target.idle_timeout_ms = Some(ms),
            Some(Idle::Default) => target.idle_timeout_ms = None,
            Some(Idle::Off) => {
                target.idle_timeout_ms = None;
                if target.timeout_ms == WallClock::Unset {
                    target.timeout_ms = WallClock::Unlimited;
                }
            }
        }
        if self.tools.is_some() || self.commands.is_some() || self.safety_reason.is_some() {
            let mut allowlist = target.allowlist.take().unwrap_or_default();
            if let Some(tools) = self.tools {
                allowlist.tools = (!tools.is_empty()).then_some(tools);
            }
            if let Some(commands) = self.commands {
                allowlist.commands = (!commands.is_empty()).then_some(commands);
            }
            if let Some(reason) = self.safety_reason {
                allowlist.safety_reason = reason;
            }
            // 0.5.11 stores the allow-list with its enforcement, or not at
            // all when it is empty (agents note §12.2).
            let empty = allowlist.tools.is_none()
                && allowlist.commands.is_none()
                && allowlist.safety_reason.is_none();
            if allowlist.enforcement.is_none() {
                allowlist.enforcement = Some("metadata_only".to_owned());
            }
            target.allowlist = (!empty).then_some(allowlist);
        }
        match self.manual_break_glass {
            Some(true) => target.manual_break_glass = Some(true),
            Some(false) => target.manual_break_glass = None,
            None => {}
        }
        if let Some(mode) = self.worktree {
            target.worktree = mode;
            // Nothing is left to keep once the worktree is off.
            if mode.is_none() && self.keep_worktree.is_none() {
                target.keep_worktree = None;
            }
        }
        match self.keep_worktree {
            Some(true) => target.keep_worktree = Some(true),
            Some(false) => target.keep_worktree = None,
            None => {}
        }
    }
}

/// A repeatable, comma-separated flag: its entries trimmed, empty ones
/// dropped (so `''` gives none); `None` when the flag is not given.
fn list(values: &[String]) -> Option<Vec<String>> {
    if values.is_empty() {
        return None;
    }
    Some(
        values
            .iter()
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect(),
    )
}

/// The flag of each agent field whose message core gives by its stored
/// name.
const FLAGS: [(&str, &str); 12] = [
    ("variant", "--effort"),
    ("addDirs", "--add-dir"),
    ("permissionMode", "--permission-mode"),
    ("sandbox", "--sandbox"),
    ("manualBreakGlass", "--manual-break-glass"),
    ("allowlist.safetyReason", "--safety-reason"),
    ("allowlist.tools", "--allow-tool"),
    ("allowlist.commands", "--allow-command"),
    ("idleTimeoutMs", "--idle-timeout"),
    ("timeoutMs", "--timeout"),
    ("worktree", "--worktree"),
    ("keepWorktree", "--keep-worktree"),
];

/// Core's message about an agent loop's option, said in flags: 0.5.11's
/// CLI wording for the sandbox and the permission mode (agents note §12.3),
/// else core's with the flag for the field (`target.variant is not
/// supported for provider cursor` is `--effort is not supported …`).
/// `None` for a field no flag of this module sets.
pub(crate) fn flag_message(e: &ValidationError) -> Option<String> {
    let key = e.field.strip_prefix("target.")?;
    let base = key.split('[').next().unwrap_or(key);
    let (_, flag) = FLAGS.iter().find(|(field, _)| *field == base)?;
    let rest = e.message.strip_prefix(e.field.as_str())?;
    // `target.manualBreakGlass=true is required when …`.
    let rest = rest.strip_prefix("=true").unwrap_or(rest);
    let cli = match (base, rest) {
        ("sandbox", " is currently supported only for provider codewith, codex, or cursor") => {
            "--sandbox is currently supported only for --provider codewith, codex, or cursor"
        }
        ("sandbox", " must be one of read-only, workspace-write, danger-full-access") => {
            "--sandbox must be read-only, workspace-write, or danger-full-access for codewith/codex"
        }
        ("sandbox", " must be one of enabled, disabled") => {
            "--sandbox must be enabled or disabled for cursor"
        }
        ("keepWorktree", _) => {
            "--keep-worktree needs --worktree auto or required: without a worktree there is \
             nothing to keep"
        }
        ("permissionMode", rest) => {
            return Some(format!("{flag}{}", rest.replace("for provider ", "for ")));
        }
        _ => return Some(format!("{flag}{rest}")),
    };
    Some(cli.to_owned())
}

/// Refuses `--timeout none` for a loop that is not an agent's.
pub(crate) fn refuse_unlimited(kind: &str) -> Result<()> {
    match kind {
        "workflow" => bail!(
            "--timeout none is only for agent loops; a workflow loop takes --timeout 0 for no \
             limit"
        ),
        _ => bail!(
            "--timeout none is only for agent loops; a command loop always has a wall clock \
             (give a duration such as 2h; the default is 30m)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loops_core::{AgentProvider, validate_process_target};

    /// A change to a claude target.
    type Change<'a> = &'a dyn Fn(&mut AgentTarget);

    fn message(change: impl FnOnce(&mut AgentTarget)) -> String {
        let mut target = AgentTarget::new(AgentProvider::Claude, "p");
        change(&mut target);
        let e = validate_process_target(&loops_core::ProcessTarget::Agent(target), "target")
            .unwrap_err();
        flag_message(&e).unwrap_or(e.message)
    }

    #[test]
    fn core_messages_are_said_in_flags() {
        use AgentProvider::*;
        let cases: [(Change<'_>, &str); 8] = [
            (
                &|t| t.sandbox = Some("x".into()),
                "--sandbox is currently supported only for --provider codewith, codex, or cursor",
            ),
            (
                &|t| {
                    t.provider = Codex;
                    t.sandbox = Some("enabled".into());
                },
                "--sandbox must be read-only, workspace-write, or danger-full-access for \
                 codewith/codex",
            ),
            (
                &|t| {
                    t.provider = Cursor;
                    t.sandbox = Some("read-only".into());
                },
                "--sandbox must be enabled or disabled for cursor",
            ),
            (
                &|t| {
                    t.provider = Codex;
                    t.permission_mode = Some(PermissionMode::Plan);
                },
                "--permission-mode plan is currently supported only for claude or cursor",
            ),
            (
                &|t| {
                    t.provider = Cursor;
                    t.permission_mode = Some(PermissionMode::Auto);
                },
                "--permission-mode auto is currently supported only for claude",
            ),
            (
                &|t| {
                    t.provider = Cursor;
                    t.variant = Some("high".into());
                },
                "--effort is not supported for provider cursor",
            ),
            (
                &|t| t.add_dirs = Some(vec!["/w".into()]),
                "--add-dir is currently supported only for provider codewith or codex",
            ),
            (
                &|t| t.permission_mode = Some(PermissionMode::Bypass),
                "--manual-break-glass is required when permissionMode=bypass",
            ),
        ];
        for (change, want) in cases {
            assert_eq!(message(change), want);
        }
    }

    #[test]
    fn lists_split_on_commas_and_drop_empty_entries() {
        assert_eq!(list(&[]), None);
        assert_eq!(list(&[String::new()]), Some(vec![]));
        assert_eq!(
            list(&["a, b".into(), "c".into(), ",".into()]),
            Some(vec!["a".into(), "b".into(), "c".into()])
        );
    }

    #[test]
    fn idle_none_means_no_watchdog_whatever_the_wall_clock() {
        for (stored, want) in [
            (WallClock::Unset, WallClock::Unlimited),
            (WallClock::Unlimited, WallClock::Unlimited),
            (WallClock::Ms(5), WallClock::Ms(5)),
        ] {
            let mut target = AgentTarget::new(AgentProvider::Codex, "p");
            target.timeout_ms = stored;
            target.idle_timeout_ms = Some(9);
            AgentChange {
                idle: Some(Idle::Off),
                ..AgentChange::default()
            }
            .apply(&mut target);
            assert_eq!((target.timeout_ms, target.idle_timeout_ms), (want, None));
            let timers = loops_core::agent_timers(target.provider, target.timeout_ms, None, None);
            assert_eq!(timers.idle_ms, None, "{stored:?}");
        }
    }

    #[test]
    fn none_words() {
        for word in ["none", " Unlimited ", "NULL", "never", "off", "false"] {
            assert!(is_unlimited(word), "{word}");
        }
        for word in ["", "0", "no", "30m"] {
            assert!(!is_unlimited(word), "{word}");
        }
    }
}
