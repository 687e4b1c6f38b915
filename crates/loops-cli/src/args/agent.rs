//! The agent options 0.5.11 added (issue 27; agents note §2.2, §6, §12):
//! permission mode, sandbox, extra directories, effort, the idle watchdog,
//! the allow-lists with their break-glass consent, and git worktrees
//! (§8). `create agent`
//! flattens [`AgentOptions`], `edit` [`EditAgentOptions`]; both resolve
//! through `resolve::agent`, and core checks the result with 0.5.11's
//! rules, in its order (§12.1).

use clap::Args;

// The agent options of `create agent`. (Plain comments: a doc comment
// would become the help's summary of the command.)
#[derive(Debug, Default, Args)]
pub(crate) struct AgentOptions {
    /// default, plan (claude, cursor), auto (claude) or bypass, which
    /// skips the agent's permission prompts and needs --manual-break-glass
    /// and --safety-reason [default: default].
    #[arg(
        long,
        value_name = "MODE",
        help_heading = "Agent options",
        add = crate::complete::one_of(loops_core::PermissionMode::ALL)
    )]
    pub(crate) permission_mode: Option<String>,

    /// codewith and codex: read-only, workspace-write or danger-full-access
    /// [default: workspace-write; danger-full-access with --permission-mode
    /// bypass]. cursor: enabled or disabled [default: enabled with
    /// --config-isolation safe].
    #[arg(
        long,
        value_name = "SANDBOX",
        help_heading = "Agent options",
        add = crate::complete::sandboxes()
    )]
    pub(crate) sandbox: Option<String>,

    /// codewith and codex: another directory the agent may write, passed as
    /// --add-dir (repeatable, or comma-separated); ~ and relative paths are
    /// made absolute.
    #[arg(
        long = "add-dir",
        value_name = "DIR",
        help_heading = "Agent options",
        value_hint = clap::ValueHint::DirPath
    )]
    pub(crate) add_dirs: Vec<String>,

    /// The reasoning effort, e.g. high: claude --effort, codewith and codex
    /// -c model_reasoning_effort, opencode and aicopilot --variant; not for
    /// cursor [default: the provider's].
    #[arg(long, value_name = "LEVEL", help_heading = "Agent options")]
    pub(crate) effort: Option<String>,

    /// Kill the run after DURATION without a byte on stdout or stderr; none
    /// turns the watchdog off [default: 4h, 30m for cursor and codex, or
    /// $LOOPS_AGENT_IDLE_TIMEOUT_MS; none once --timeout is given].
    #[arg(long, value_name = "DURATION|none", help_heading = "Agent options")]
    pub(crate) idle_timeout: Option<String>,

    /// A tool the agent is meant to keep to (repeatable, or
    /// comma-separated). Recorded with the loop; nothing enforces it. Needs
    /// --safety-reason.
    #[arg(
        long = "allow-tool",
        value_name = "TOOL",
        help_heading = "Agent options"
    )]
    pub(crate) allow_tools: Vec<String>,

    /// A command the agent is meant to keep to (repeatable, or
    /// comma-separated), as --allow-tool.
    #[arg(
        long = "allow-command",
        value_name = "COMMAND",
        help_heading = "Agent options"
    )]
    pub(crate) allow_commands: Vec<String>,

    /// Why the allow-lists or the relaxed access are safe; required with
    /// --allow-tool, --allow-command, and relaxed access (as
    /// --manual-break-glass is).
    #[arg(long, value_name = "TEXT", help_heading = "Agent options")]
    pub(crate) safety_reason: Option<String>,

    /// Consent to relaxed access, required (with --safety-reason) by
    /// --permission-mode bypass, a danger-full-access sandbox, and cursor's
    /// --sandbox disabled.
    #[arg(long, help_heading = "Agent options")]
    pub(crate) manual_break_glass: bool,

    /// Give each run a git worktree of its own, on a branch of its own,
    /// under ~/.hasna/repos/worktrees: auto runs in --cwd instead when one
    /// cannot be made, and says so in the run's stderr; required fails the
    /// run [default: off].
    #[arg(
        long,
        value_name = "off|auto|required",
        help_heading = "Agent options",
        add = crate::complete::one_of(loops_core::WorktreeMode::ALL)
    )]
    pub(crate) worktree: Option<String>,

    /// Keep a succeeded run's worktree. Without it, a succeeded run's clean
    /// worktree is removed (its branch stays); a failed run's, or one with
    /// uncommitted changes, is kept until `loops gc --apply` removes it.
    #[arg(long, help_heading = "Agent options")]
    pub(crate) keep_worktree: bool,
}

// The agent options of `edit`: `create agent`'s, where '' removes a value
// or a list.
#[derive(Debug, Default, Args)]
pub(crate) struct EditAgentOptions {
    /// Agent loops: default, plan, auto or bypass [default: as stored].
    #[arg(
        long,
        value_name = "MODE",
        help_heading = "Agent options",
        add = crate::complete::one_of(loops_core::PermissionMode::ALL)
    )]
    pub(crate) permission_mode: Option<String>,

    /// Agent loops: the sandbox (as in create agent); '' returns to the
    /// provider's.
    #[arg(
        long,
        value_name = "SANDBOX",
        help_heading = "Agent options",
        add = crate::complete::sandboxes()
    )]
    pub(crate) sandbox: Option<String>,

    /// Agent loops: the extra directories, replacing the stored ones
    /// (repeatable, or comma-separated); '' removes them.
    #[arg(
        long = "add-dir",
        value_name = "DIR",
        help_heading = "Agent options",
        value_hint = clap::ValueHint::DirPath
    )]
    pub(crate) add_dirs: Vec<String>,

    /// Agent loops: the reasoning effort; '' returns to the provider's.
    #[arg(long, value_name = "LEVEL", help_heading = "Agent options")]
    pub(crate) effort: Option<String>,

    /// Agent loops: the idle watchdog; none turns it off, '' returns to the
    /// default.
    #[arg(long, value_name = "DURATION|none", help_heading = "Agent options")]
    pub(crate) idle_timeout: Option<String>,

    /// Agent loops: the tools, replacing the stored ones (repeatable, or
    /// comma-separated); '' removes them.
    #[arg(
        long = "allow-tool",
        value_name = "TOOL",
        help_heading = "Agent options"
    )]
    pub(crate) allow_tools: Vec<String>,

    /// Agent loops: the commands, as --allow-tool.
    #[arg(
        long = "allow-command",
        value_name = "COMMAND",
        help_heading = "Agent options"
    )]
    pub(crate) allow_commands: Vec<String>,

    /// Agent loops: why the allow-lists or relaxed access are safe; ''
    /// removes it.
    #[arg(long, value_name = "TEXT", help_heading = "Agent options")]
    pub(crate) safety_reason: Option<String>,

    /// Agent loops: consent to relaxed access.
    #[arg(long, help_heading = "Agent options")]
    pub(crate) manual_break_glass: bool,

    /// Agent loops: withdraw the consent to relaxed access.
    #[arg(
        long,
        conflicts_with = "manual_break_glass",
        help_heading = "Agent options"
    )]
    pub(crate) no_manual_break_glass: bool,

    /// Agent loops: off, auto or required (as in create agent); off, or
    /// '', also drops --keep-worktree.
    #[arg(
        long,
        value_name = "off|auto|required",
        help_heading = "Agent options",
        add = crate::complete::one_of(loops_core::WorktreeMode::ALL)
    )]
    pub(crate) worktree: Option<String>,

    /// Agent loops: keep a succeeded run's worktree.
    #[arg(long, help_heading = "Agent options")]
    pub(crate) keep_worktree: bool,

    /// Agent loops: remove a succeeded run's clean worktree again.
    #[arg(long, conflicts_with = "keep_worktree", help_heading = "Agent options")]
    pub(crate) no_keep_worktree: bool,
}

/// The agent options as given, whichever command took them.
pub(crate) struct AgentFlags<'a> {
    pub(crate) permission_mode: Option<&'a str>,
    pub(crate) sandbox: Option<&'a str>,
    pub(crate) add_dirs: &'a [String],
    pub(crate) effort: Option<&'a str>,
    pub(crate) idle_timeout: Option<&'a str>,
    pub(crate) allow_tools: &'a [String],
    pub(crate) allow_commands: &'a [String],
    pub(crate) safety_reason: Option<&'a str>,
    /// `--manual-break-glass` (`Some(true)`) or `--no-manual-break-glass`.
    pub(crate) manual_break_glass: Option<bool>,
    pub(crate) worktree: Option<&'a str>,
    /// `--keep-worktree` (`Some(true)`) or `--no-keep-worktree`.
    pub(crate) keep_worktree: Option<bool>,
}

impl AgentOptions {
    /// The flags as given.
    pub(crate) fn flags(&self) -> AgentFlags<'_> {
        AgentFlags {
            permission_mode: self.permission_mode.as_deref(),
            sandbox: self.sandbox.as_deref(),
            add_dirs: &self.add_dirs,
            effort: self.effort.as_deref(),
            idle_timeout: self.idle_timeout.as_deref(),
            allow_tools: &self.allow_tools,
            allow_commands: &self.allow_commands,
            safety_reason: self.safety_reason.as_deref(),
            manual_break_glass: self.manual_break_glass.then_some(true),
            worktree: self.worktree.as_deref(),
            keep_worktree: self.keep_worktree.then_some(true),
        }
    }
}

impl EditAgentOptions {
    /// The flags as given.
    pub(crate) fn flags(&self) -> AgentFlags<'_> {
        AgentFlags {
            permission_mode: self.permission_mode.as_deref(),
            sandbox: self.sandbox.as_deref(),
            add_dirs: &self.add_dirs,
            effort: self.effort.as_deref(),
            idle_timeout: self.idle_timeout.as_deref(),
            allow_tools: &self.allow_tools,
            allow_commands: &self.allow_commands,
            safety_reason: self.safety_reason.as_deref(),
            manual_break_glass: (self.manual_break_glass || self.no_manual_break_glass)
                .then_some(self.manual_break_glass),
            worktree: self.worktree.as_deref(),
            keep_worktree: (self.keep_worktree || self.no_keep_worktree)
                .then_some(self.keep_worktree),
        }
    }
}

impl AgentFlags<'_> {
    /// The flags given, by name.
    pub(crate) fn given(&self) -> Vec<&'static str> {
        [
            ("--permission-mode", self.permission_mode.is_some()),
            ("--sandbox", self.sandbox.is_some()),
            ("--add-dir", !self.add_dirs.is_empty()),
            ("--effort", self.effort.is_some()),
            ("--idle-timeout", self.idle_timeout.is_some()),
            ("--allow-tool", !self.allow_tools.is_empty()),
            ("--allow-command", !self.allow_commands.is_empty()),
            ("--safety-reason", self.safety_reason.is_some()),
            (
                match self.manual_break_glass {
                    Some(false) => "--no-manual-break-glass",
                    _ => "--manual-break-glass",
                },
                self.manual_break_glass.is_some(),
            ),
            ("--worktree", self.worktree.is_some()),
            (
                match self.keep_worktree {
                    Some(false) => "--no-keep-worktree",
                    _ => "--keep-worktree",
                },
                self.keep_worktree.is_some(),
            ),
        ]
        .into_iter()
        .filter(|(_, on)| *on)
        .map(|(flag, _)| flag)
        .collect()
    }
}
