//! What a loop or a workflow step runs (SPEC §1.3): command, agent and
//! workflow targets, the account they run under, and the [`Target`] and
//! [`ProcessTarget`] enums over them.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use super::DEFAULT_TIMEOUT_MS;
use super::timers::WallClock;
use crate::id::WorkflowId;
use crate::status::{AgentProvider, ConfigIsolation, PermissionMode, WorktreeMode};
use crate::tagged::{self, Tagged};

/// An account profile to run under, resolved through `accounts env`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    /// The profile name.
    pub profile: String,
    /// The tool; inferred from an agent's provider when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

/// A command to run (SPEC §1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandTarget {
    /// The program, or the shell text when `shell` is true.
    #[schemars(length(min = 1))]
    pub command: String,
    /// Arguments; empty when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Run through `/bin/sh -c`; false when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<bool>,
    /// Extra environment variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// Timeout; 30 minutes when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_ms: Option<u64>,
    /// Account to run under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<Account>,
    /// What one run reads on stdin: its trigger's payload (issue 30,
    /// `docs/triggers.md` T6), set on the copy a runner executes. Never
    /// stored, read or shown: `/dev/null` for every stored target.
    #[serde(skip)]
    #[schemars(skip)]
    pub stdin: Option<String>,
}

impl CommandTarget {
    /// A target for `command` with every option unset.
    pub fn new(command: impl Into<String>) -> CommandTarget {
        CommandTarget {
            command: command.into(),
            args: None,
            cwd: None,
            shell: None,
            env: None,
            timeout_ms: None,
            account: None,
            stdin: None,
        }
    }

    /// The arguments, empty when unset.
    pub fn args(&self) -> &[String] {
        self.args.as_deref().unwrap_or(&[])
    }

    /// Whether the command runs through a shell (false when unset).
    pub fn is_shell(&self) -> bool {
        self.shell.unwrap_or(false)
    }

    /// The program a shell command starts with, when its first word is
    /// plain (no quotes, expansions or operators) and a path (`./build.sh`,
    /// `/opt/bin/tool`): what a preflight can check, and what a workflow
    /// file's directory resolves (issue 28). `None` otherwise.
    ///
    /// ```
    /// use loops_core::CommandTarget;
    /// assert_eq!(CommandTarget::shell_program("./go.sh --fast && ok"), Some("./go.sh"));
    /// assert_eq!(CommandTarget::shell_program("make all"), None);
    /// assert_eq!(CommandTarget::shell_program("\"./a b\""), None);
    /// ```
    pub fn shell_program(script: &str) -> Option<&str> {
        let script = script.trim_start();
        let first = &script[..script.find(char::is_whitespace).unwrap_or(script.len())];
        let plain = first
            .chars()
            .all(|c| c.is_alphanumeric() || "/._-+@%,:".contains(c));
        (plain && first.contains('/')).then_some(first)
    }

    /// The effective timeout.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)
    }
}

/// A headless coding-agent run (SPEC §1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = prompt_or_prompt_file)]
pub struct AgentTarget {
    /// The agent CLI.
    pub provider: AgentProvider,
    /// The prompt, written to the agent's stdin, which is then closed
    /// (agents note §2.3; 0.3.1 put it last on argv). With `promptFile`,
    /// the file's text when the loop or workflow was created.
    #[schemars(length(min = 1))]
    pub prompt: String,
    /// An absolute path whose text is the prompt, read again at each run
    /// (issue 17). In a workflow file, relative to the file's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_file: Option<String>,
    /// Working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `--model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `--agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Extra arguments, placed after every modeled flag. 0.5.11 refuses
    /// any (agents note §12.1 rule 8); loops keeps them, as 0.3.1 did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_args: Option<Vec<String>>,
    /// Wall clock in milliseconds; none when unset (0.3.1 had 30 minutes),
    /// and `null` for none and no default idle watchdog either.
    #[serde(default, skip_serializing_if = "WallClock::is_unset")]
    pub timeout_ms: WallClock,
    /// Idle watchdog in milliseconds: the run is killed after this long
    /// without a byte on stdout or stderr. When both timeouts are unset, 4
    /// hours (30 minutes for cursor and codex) or `LOOPS_AGENT_IDLE_TIMEOUT_MS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub idle_timeout_ms: Option<u64>,
    /// safe when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_isolation: Option<ConfigIsolation>,
    /// Account to run under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<Account>,
    /// The effort: claude `--effort`, codewith and codex
    /// `-c model_reasoning_effort="V"`, opencode and aicopilot `--variant`
    /// (agents note §2.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// Extra environment variables of the run (agents note §10.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// `--add-dir` each, for codewith and codex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_dirs: Option<Vec<String>>,
    /// `default` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<PermissionMode>,
    /// `read-only`, `workspace-write` or `danger-full-access` for codewith
    /// and codex; `enabled` or `disabled` for cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// The owner's consent to relaxed access (agents note §12.1 rule 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manual_break_glass: Option<bool>,
    /// Tools and commands the agent is meant to keep to, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowlist: Option<AgentAllowlist>,
    /// Whether each run works in a git worktree of its own, named after
    /// the run (agents note §8); `off` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeMode>,
    /// Keep a run's worktree after it succeeded; false when unset, and a
    /// succeeded run's clean worktree is removed (beyond 0.5.11, which
    /// never removes one). A failed run's is always kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_worktree: Option<bool>,
}

/// What an agent is meant to keep to (agents note §12.1 rules 13–16):
/// metadata only, nothing enforces it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentAllowlist {
    /// Tools the agent may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Commands the agent may run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<String>>,
    /// Always `metadata_only`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforcement: Option<String>,
    /// Why the restrictions or the relaxed access are safe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety_reason: Option<String>,
}

/// A workflow file's agent step gives `prompt` or `promptFile`, exactly
/// one of them (issue 17): the schema requires one or the other.
fn prompt_or_prompt_file(schema: &mut schemars::Schema) {
    if let Some(serde_json::Value::Array(required)) = schema.get_mut("required") {
        required.retain(|key| key != "prompt");
    }
    schema.insert(
        "oneOf".to_owned(),
        serde_json::json!([{"required": ["prompt"]}, {"required": ["promptFile"]}]),
    );
}

impl AgentTarget {
    /// A target for `provider` with every option unset.
    pub fn new(provider: AgentProvider, prompt: impl Into<String>) -> AgentTarget {
        AgentTarget {
            provider,
            prompt: prompt.into(),
            prompt_file: None,
            cwd: None,
            model: None,
            agent: None,
            extra_args: None,
            timeout_ms: WallClock::Unset,
            idle_timeout_ms: None,
            config_isolation: None,
            account: None,
            variant: None,
            env: None,
            add_dirs: None,
            permission_mode: None,
            sandbox: None,
            manual_break_glass: None,
            allowlist: None,
            worktree: None,
            keep_worktree: None,
        }
    }

    /// The wall clock in milliseconds, when one is set: agents have none
    /// by default (`timers.rs`).
    pub fn timeout_ms(&self) -> Option<u64> {
        self.timeout_ms.ms()
    }

    /// The effective isolation mode.
    pub fn config_isolation(&self) -> ConfigIsolation {
        self.config_isolation.unwrap_or(ConfigIsolation::Safe)
    }

    /// The effective permission mode.
    pub fn permission_mode(&self) -> PermissionMode {
        self.permission_mode.unwrap_or(PermissionMode::Default)
    }

    /// The effective worktree mode.
    pub fn worktree_mode(&self) -> WorktreeMode {
        self.worktree.unwrap_or(WorktreeMode::Off)
    }

    /// Whether a succeeded run's worktree is kept.
    pub fn keeps_worktree(&self) -> bool {
        self.keep_worktree.unwrap_or(false)
    }

    /// The sandbox the agent runs in (agents note §2.1): codewith and codex
    /// always have one (`danger-full-access` under bypass, else
    /// `workspace-write`); cursor has `enabled` under safe isolation; the
    /// others none.
    pub fn effective_sandbox(&self) -> Option<&str> {
        let bypass = self.permission_mode() == PermissionMode::Bypass;
        match self.provider {
            AgentProvider::Codewith | AgentProvider::Codex => {
                Some(self.sandbox.as_deref().unwrap_or(if bypass {
                    "danger-full-access"
                } else {
                    "workspace-write"
                }))
            }
            AgentProvider::Cursor => self
                .sandbox
                .as_deref()
                .or((self.config_isolation() == ConfigIsolation::Safe).then_some("enabled")),
            _ => self.sandbox.as_deref(),
        }
    }
}

/// A loop that runs a stored workflow (SPEC §1.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowTarget {
    /// Always stored as an id.
    pub workflow_id: WorkflowId,
    /// Stored, never used (SPEC §9.34).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<serde_json::Value>,
    /// A timeout for the whole workflow; absent or 0 means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// What a loop runs.
///
/// Deserialized by hand (`tagged.rs`): when `type` comes first, the rest of
/// the object goes straight to the variant, without serde's buffering.
#[expect(
    clippy::large_enum_variant,
    reason = "an agent's options (0.5.11's) outweigh a command's; targets are few and moved \
              rarely, and boxing would change every match on them"
)]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Target {
    /// A command.
    Command(CommandTarget),
    /// A coding agent.
    Agent(AgentTarget),
    /// A stored workflow.
    Workflow(WorkflowTarget),
}

/// What one process runs: a command or an agent. Workflow steps and the
/// executor accept only these.
#[expect(
    clippy::large_enum_variant,
    reason = "an agent's options (0.5.11's) outweigh a command's; targets are few and moved \
              rarely, and boxing would change every match on them"
)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ProcessTarget {
    /// A command.
    Command(CommandTarget),
    /// A coding agent.
    Agent(AgentTarget),
}

impl ProcessTarget {
    /// The target's own account.
    pub fn account(&self) -> Option<&Account> {
        match self {
            ProcessTarget::Command(c) => c.account.as_ref(),
            ProcessTarget::Agent(a) => a.account.as_ref(),
        }
    }

    /// The target's own timeout, if set.
    pub fn timeout_ms(&self) -> Option<u64> {
        match self {
            ProcessTarget::Command(c) => c.timeout_ms,
            ProcessTarget::Agent(a) => a.timeout_ms.ms(),
        }
    }
}

impl Target {
    /// The process target, unless this is a workflow.
    pub fn to_process(&self) -> Option<ProcessTarget> {
        match self {
            Target::Command(c) => Some(ProcessTarget::Command(c.clone())),
            Target::Agent(a) => Some(ProcessTarget::Agent(a.clone())),
            Target::Workflow(_) => None,
        }
    }

    /// The SPEC name of the target kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Target::Command(_) => "command",
            Target::Agent(_) => "agent",
            Target::Workflow(_) => "workflow",
        }
    }
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        tagged::deserialize(d)
    }
}

impl Tagged for Target {
    const EXPECTING: &'static str = "a target object with a type";
    const VARIANTS: &'static [&'static str] = &["command", "agent", "workflow"];

    fn from_rest<'de, D: Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error> {
        match tag {
            "command" => CommandTarget::deserialize(rest).map(Target::Command),
            "agent" => AgentTarget::deserialize(rest).map(Target::Agent),
            "workflow" => WorkflowTarget::deserialize(rest).map(Target::Workflow),
            other => Err(tagged::unknown::<Self, _>(other)),
        }
    }
}

impl From<ProcessTarget> for Target {
    fn from(t: ProcessTarget) -> Target {
        match t {
            ProcessTarget::Command(c) => Target::Command(c),
            ProcessTarget::Agent(a) => Target::Agent(a),
        }
    }
}
