//! Agent option values that would read as options (issue 25 item 8).
//!
//! An agent target's `model`, `agent`, `cwd`, `variant`, `sandbox` and
//! `addDirs` entries each reach the agent's argv as the word after one of
//! its flags (`--model`, `--agent`, `--cd` or `--dir` for the providers
//! that take the working directory as a flag, `--effort` or `--variant`,
//! `--sandbox`, `--add-dir`; agents note §2.1). A value that begins with `-` would be read by the
//! agent as an option of its own: `--model=--dangerously-bypass-approvals-and-sandbox`
//! must not turn the sandbox off. Such values are refused wherever a target
//! is validated (create, edit, import, workflow files, MCP), as a prompt
//! beginning with `-` is, and a stored one is never spawned.
//!
//! The rule covers these values for every provider, even one that
//! leaves a value out of its argv (codex has no `--agent`, claude and
//! cursor take no `--cd`): a loop's provider can change with `edit`, and
//! no model, agent or directory name needs a leading `-`. `extraArgs` are
//! left alone: they are meant to be options.

use crate::model::AgentTarget;

/// An agent option whose value would reach the agent as a word of its
/// argv, found by [`agent_value_reads_as_option`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentOption {
    /// The target's key, e.g. `model`.
    pub key: &'static str,
    /// The flag the value follows in the agent's argv, e.g. `--model`.
    pub flag: &'static str,
    /// What to give instead, for the message.
    hint: &'static str,
}

const MODEL: AgentOption = AgentOption {
    key: "model",
    flag: "--model",
    hint: "give the model's name, for example \"sonnet\"",
};

const AGENT: AgentOption = AgentOption {
    key: "agent",
    flag: "--agent",
    hint: "give the agent's name",
};

const CWD: AgentOption = AgentOption {
    key: "cwd",
    flag: "--cd or --dir",
    hint: "give an absolute path",
};

const VARIANT: AgentOption = AgentOption {
    key: "variant",
    flag: "--effort or --variant",
    hint: "give the effort's name, for example \"high\"",
};

const SANDBOX: AgentOption = AgentOption {
    key: "sandbox",
    flag: "--sandbox",
    hint: "give one of the provider's sandboxes",
};

const ADD_DIRS: AgentOption = AgentOption {
    key: "addDirs",
    flag: "--add-dir",
    hint: "give an absolute path",
};

impl AgentOption {
    /// The message for a value of this option that begins with `-`;
    /// `field` names it (`target.model`, `--model`).
    pub fn message(&self, field: &str) -> String {
        format!(
            "{field} must not begin with \"-\": the agent would read it as an option, not as the \
             value of {}; {}",
            self.flag, self.hint
        )
    }
}

/// The first of `target`'s `model`, `agent`, `cwd`, `variant`, `sandbox`
/// and `addDirs` entries (in that order) whose value begins with `-`, which the agent would read as an option
/// rather than as the value of its flag.
///
/// ```
/// use loops_core::{AgentProvider, AgentTarget, agent_value_reads_as_option};
/// let mut target = AgentTarget::new(AgentProvider::Codex, "fix it");
/// target.model = Some("--dangerously-bypass-approvals-and-sandbox".into());
/// assert_eq!(agent_value_reads_as_option(&target).map(|o| o.flag), Some("--model"));
/// target.model = Some("o4-mini".into());
/// assert_eq!(agent_value_reads_as_option(&target), None);
/// ```
pub fn agent_value_reads_as_option(target: &AgentTarget) -> Option<AgentOption> {
    let dashed = |value: &str| value.starts_with('-');
    [
        (MODEL, &target.model),
        (AGENT, &target.agent),
        (CWD, &target.cwd),
        (VARIANT, &target.variant),
        (SANDBOX, &target.sandbox),
    ]
    .into_iter()
    .find(|(_, value)| value.as_deref().is_some_and(dashed))
    .map(|(option, _)| option)
    .or_else(|| {
        let dirs = target.add_dirs.as_deref().unwrap_or_default();
        dirs.iter().any(|d| dashed(d)).then_some(ADD_DIRS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AgentProvider;

    fn check(model: Option<&str>, agent: Option<&str>, cwd: Option<&str>, expected: Option<&str>) {
        let mut target = AgentTarget::new(AgentProvider::Claude, "p");
        target.model = model.map(str::to_owned);
        target.agent = agent.map(str::to_owned);
        target.cwd = cwd.map(str::to_owned);
        assert_eq!(
            agent_value_reads_as_option(&target).map(|o| o.key),
            expected,
            "{model:?} {agent:?} {cwd:?}"
        );
    }

    #[test]
    fn values_that_begin_with_a_dash_read_as_options() {
        check(None, None, None, None);
        check(Some("sonnet"), Some("reviewer"), Some("/w"), None);
        // A dash elsewhere is part of the value.
        check(Some("gpt-5"), Some("code-review"), Some("/w/-x"), None);
        check(Some(" -x"), None, None, None);
        check(
            Some("--dangerously-bypass-approvals-and-sandbox"),
            None,
            None,
            Some("model"),
        );
        check(Some("-"), None, None, Some("model"));
        check(None, Some("-p"), None, Some("agent"));
        check(None, None, Some("--help"), Some("cwd"));
        // The first in argv order.
        check(Some("-m"), Some("-a"), Some("-c"), Some("model"));
    }

    #[test]
    fn variant_sandbox_and_add_dirs_are_values_too() {
        let mut target = AgentTarget::new(AgentProvider::Codex, "p");
        target.add_dirs = Some(vec!["/a".into(), "--x".into()]);
        assert_eq!(
            agent_value_reads_as_option(&target).map(|o| o.key),
            Some("addDirs")
        );
        target.sandbox = Some("-s".into());
        assert_eq!(
            agent_value_reads_as_option(&target).map(|o| o.key),
            Some("sandbox")
        );
        target.variant = Some("--high".into());
        assert_eq!(
            agent_value_reads_as_option(&target).map(|o| o.key),
            Some("variant")
        );
        target.add_dirs = Some(vec!["/a/-x".into()]);
        target.sandbox = None;
        target.variant = Some("x-high".into());
        assert_eq!(agent_value_reads_as_option(&target), None);
    }

    #[test]
    fn the_message_names_the_field_and_the_flag() {
        assert_eq!(
            MODEL.message("--model"),
            "--model must not begin with \"-\": the agent would read it as an option, not as the \
             value of --model; give the model's name, for example \"sonnet\""
        );
        assert!(CWD.message("target.cwd").starts_with("target.cwd must not"));
    }
}
