//! Validation of agent targets: 0.5.11's provider rules (agents note
//! §12.1), in its order and with its messages, around this port's own
//! checks (NUL bytes, values that read as options, environment names,
//! timeouts, accounts).
//!
//! The order, first failure wins: the prompt (rule 1) and its file; `model`,
//! `variant` and `agent` non-empty (rule 2); opencode's model (rule 5);
//! `variant` for cursor (rule 6); `agent` for codex and codewith (rule 7);
//! `extraArgs` (rule 8); `addDirs` (rule 9); `permissionMode` (rule 10);
//! `sandbox` (rule 11); the allowlist (rules 13–15); break-glass (rule 16);
//! `keepWorktree` without a worktree (§8, this port's); then the cwd, values that read as options, `env`, the timeout and the
//! account. Rules 3, 4 and 12 are types here (`configIsolation` and
//! `permissionMode` are enums, `manualBreakGlass` a bool); `authProfile`
//! is not modeled.
//!
//! Departure from 0.5.11, on purpose: `extraArgs` stay the owner's own
//! flags, appended after the modeled ones, as 0.3.1 appended them; 0.5.11
//! refuses any (rule 8, fail-closed). Only NUL is refused here.
//!
//! A stored target (a row the original 0.3.1 wrote, or one loops stored
//! before these rules) is checked at each run with [`validate_agent_options`],
//! which leaves out rules 5 and 7: 0.3.1 accepted an opencode target
//! without a model and a codex `agent`, and such loops must keep running.

use std::path::{Component, Path};

use super::{
    Result, ValidationError, agent_value_reads_as_option, is_blank, prompt_option_message,
    prompt_reads_as_option, require_no_nul, require_non_empty, validate_account, validate_cwd,
    validate_env_name, validate_optional_word,
};
use crate::model::AgentTarget;
use crate::status::{AgentProvider, PermissionMode, WorktreeMode};

/// The sandboxes of codewith and codex (agents note §12.1 rule 11).
const CODEWITH_SANDBOXES: [&str; 3] = ["read-only", "workspace-write", "danger-full-access"];

/// The sandboxes of cursor.
const CURSOR_SANDBOXES: [&str; 2] = ["enabled", "disabled"];

/// The sandboxes `provider` accepts (agents note §12.1 rule 11); none for
/// a provider without one.
///
/// ```
/// use loops_core::{AgentProvider, sandboxes};
/// assert_eq!(sandboxes(AgentProvider::Cursor), ["enabled", "disabled"]);
/// assert!(sandboxes(AgentProvider::Claude).is_empty());
/// ```
pub fn sandboxes(provider: AgentProvider) -> &'static [&'static str] {
    match provider {
        AgentProvider::Codewith | AgentProvider::Codex => &CODEWITH_SANDBOXES,
        AgentProvider::Cursor => &CURSOR_SANDBOXES,
        AgentProvider::Claude | AgentProvider::Opencode | AgentProvider::Aicopilot => &[],
    }
}

/// Checks an agent target as it is created, edited or imported.
pub(super) fn validate_agent_target(target: &AgentTarget, label: &str) -> Result<()> {
    let field = format!("{label}.prompt");
    require_non_empty(&target.prompt, &field)?;
    require_no_nul(&target.prompt, &field)?;
    if prompt_reads_as_option(&target.prompt) {
        let message = prompt_option_message(&field);
        return Err(ValidationError::new(field, message));
    }
    if let Some(path) = &target.prompt_file {
        // Issue 17: read at each run, from wherever the run starts, so
        // only an absolute path means the same file every time.
        let field = format!("{label}.promptFile");
        require_no_nul(path, &field)?;
        if !path.starts_with('/') {
            return Err(ValidationError::new(
                &field,
                format!("{field} must be an absolute path"),
            ));
        }
    }
    rules(target, label, Rules::All)?;
    if target.keeps_worktree() && target.worktree_mode() == WorktreeMode::Off {
        let field = format!("{label}.keepWorktree");
        return Err(ValidationError::new(
            &field,
            format!(
                "{field} needs worktree auto or required: without a worktree there is nothing \
                 to keep"
            ),
        ));
    }
    validate_cwd(target.cwd.as_deref(), label)?;
    if let Some(option) = agent_value_reads_as_option(target) {
        let field = format!("{label}.{}", option.key);
        let message = option.message(&field);
        return Err(ValidationError::new(field, message));
    }
    if let Some(env) = &target.env {
        for (name, value) in env {
            validate_env_name(name, label)?;
            require_no_nul(value, &format!("{label}.env.{name}"))?;
        }
    }
    super::timers::validate_agent_timers(target, label)?;
    if let Some(account) = &target.account {
        validate_account(account, &format!("{label}.account"))?;
    }
    Ok(())
}

/// Checks the agent options of a stored target before it runs (agents note
/// §1 step 2), as [`validate_process_target`](crate::validate_process_target)
/// would, but without rules 5 and 7, which 0.3.1's rows may break (see the
/// module doc). A target without the options 0.5.11 added always passes.
///
/// ```
/// use loops_core::{AgentProvider, AgentTarget, PermissionMode, validate_agent_options};
/// let mut target = AgentTarget::new(AgentProvider::Opencode, "fix it");
/// target.agent = Some("build".into());
/// assert!(validate_agent_options(&target, "opencode").is_ok());
/// target.permission_mode = Some(PermissionMode::Bypass);
/// assert_eq!(
///     validate_agent_options(&target, "opencode").unwrap_err().to_string(),
///     "opencode.manualBreakGlass=true is required when permissionMode=bypass"
/// );
/// ```
pub fn validate_agent_options(target: &AgentTarget, label: &str) -> Result<()> {
    rules(target, label, Rules::Stored)
}

/// Which of the §12.1 rules apply.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rules {
    /// All of them: a target being created or edited.
    All,
    /// All but 5 and 7: a stored target about to run.
    Stored,
}

/// §12.1 rules 2 and 5 to 16, in order.
fn rules(target: &AgentTarget, label: &str, which: Rules) -> Result<()> {
    use AgentProvider::{Claude, Codewith, Codex, Cursor, Opencode};
    let provider = target.provider;
    let error = |key: &str, rule: &str| {
        let field = format!("{label}.{key}");
        Err(ValidationError::new(&field, format!("{field} {rule}")))
    };
    // Rule 2.
    for (key, value, hint) in [
        (
            "model",
            &target.model,
            "omit it to use the provider's default model",
        ),
        (
            "variant",
            &target.variant,
            "omit it to use the provider's default effort",
        ),
        (
            "agent",
            &target.agent,
            "omit it to use the provider's default agent",
        ),
    ] {
        if let Some(value) = value {
            validate_optional_word(value, &format!("{label}.{key}"), hint)?;
        }
    }
    if which == Rules::All && provider == Opencode && target.model.is_none() {
        return error(
            "model",
            "is required for provider opencode; pass a provider/model id such as \
             openrouter/google/gemini-2.5-flash",
        );
    }
    if provider == Cursor && target.variant.is_some() {
        return error("variant", "is not supported for provider cursor");
    }
    if which == Rules::All && matches!(provider, Codex | Codewith) && target.agent.is_some() {
        return error(
            "agent",
            &format!("is not supported for provider {provider}"),
        );
    }
    // Rule 8, as 0.3.1 had it: the owner's own flags, only NUL refused.
    for (i, arg) in target.extra_args.iter().flatten().enumerate() {
        require_no_nul(arg, &format!("{label}.extraArgs[{i}]"))?;
    }
    // Rule 9.
    let add_dirs = target.add_dirs.as_deref().unwrap_or_default();
    for (i, dir) in add_dirs.iter().enumerate() {
        let key = format!("addDirs[{i}]");
        if is_blank(dir) {
            return error(&key, "must be a non-empty string");
        }
        require_no_nul(dir, &format!("{label}.{key}"))?;
        if is_filesystem_root(dir.trim()) {
            return error(&key, "must not resolve to a filesystem root");
        }
    }
    if !add_dirs.is_empty() && !matches!(provider, Codewith | Codex) {
        return error(
            "addDirs",
            "is currently supported only for provider codewith or codex",
        );
    }
    // Rule 10.
    match target.permission_mode() {
        PermissionMode::Plan if !matches!(provider, Claude | Cursor) => {
            return error(
                "permissionMode",
                "plan is currently supported only for provider claude or cursor",
            );
        }
        PermissionMode::Auto if provider != Claude => {
            return error(
                "permissionMode",
                "auto is currently supported only for provider claude",
            );
        }
        _ => {}
    }
    // Rule 11.
    if let Some(sandbox) = &target.sandbox {
        let allowed = sandboxes(provider);
        if allowed.is_empty() {
            return error(
                "sandbox",
                "is currently supported only for provider codewith, codex, or cursor",
            );
        }
        if !allowed.contains(&sandbox.as_str()) {
            return error("sandbox", &format!("must be one of {}", allowed.join(", ")));
        }
    }
    // Rules 13 to 15.
    let allowlist = target.allowlist.clone().unwrap_or_default();
    if allowlist
        .enforcement
        .as_deref()
        .is_some_and(|e| e != "metadata_only")
    {
        return error("allowlist.enforcement", "must be metadata_only");
    }
    for (key, entries) in [
        ("tools", &allowlist.tools),
        ("commands", &allowlist.commands),
    ] {
        for (i, entry) in entries.iter().flatten().enumerate() {
            let key = format!("allowlist.{key}[{i}]");
            if is_blank(entry) {
                return error(&key, "must be a non-empty string");
            }
            require_no_nul(entry, &format!("{label}.{key}"))?;
        }
    }
    let reason = allowlist.safety_reason.as_deref();
    if reason.is_some_and(is_blank) {
        return error("allowlist.safetyReason", "must be a non-empty string");
    }
    let restricted = [&allowlist.tools, &allowlist.commands]
        .iter()
        .any(|list| list.as_ref().is_some_and(|l| !l.is_empty()));
    if restricted && reason.is_none() {
        return error(
            "allowlist.safetyReason",
            "is required when tool or command restrictions are declared",
        );
    }
    // Rule 16.
    if let Some(when) = relaxed_access(target) {
        if target.manual_break_glass != Some(true) {
            let field = format!("{label}.manualBreakGlass");
            return Err(ValidationError::new(
                &field,
                format!("{field}=true is required when {when}"),
            ));
        }
        if reason.is_none() {
            return error(
                "allowlist.safetyReason",
                &format!("is required when {when}"),
            );
        }
    }
    Ok(())
}

/// Why `target` has relaxed access (agents note §12.1 rule 16), as the
/// messages say it, or `None` when it has not.
fn relaxed_access(target: &AgentTarget) -> Option<String> {
    use AgentProvider::{Aicopilot, Claude, Cursor, Opencode};
    let bypass = target.permission_mode() == PermissionMode::Bypass;
    if bypass && matches!(target.provider, Claude | Cursor | Aicopilot | Opencode) {
        return Some("permissionMode=bypass".to_owned());
    }
    match target.effective_sandbox() {
        Some(sandbox @ "danger-full-access") => Some(format!("sandbox={sandbox}")),
        Some(sandbox @ "disabled") if target.provider == Cursor => {
            Some(format!("sandbox={sandbox}"))
        }
        _ => None,
    }
}

/// Whether `dir` names a filesystem root once `.` and `..` are resolved
/// lexically: `/`, `/..`, `//./`, or a Windows drive root such as `C:\`.
fn is_filesystem_root(dir: &str) -> bool {
    let bytes = dir.as_bytes();
    if bytes.len() >= 2
        && bytes[0].is_ascii_alphabetic()
        && bytes[1] == b':'
        && bytes[2..].iter().all(|b| matches!(b, b'\\' | b'/'))
    {
        return bytes.len() > 2;
    }
    if !dir.starts_with('/') {
        return false;
    }
    let mut depth = 0usize;
    for component in Path::new(dir).components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::ParentDir => depth = depth.saturating_sub(1),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    depth == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots() {
        for root in [
            "/",
            "//",
            "/.",
            "/..",
            "/tmp/..",
            "/a/b/../..",
            "C:\\",
            "c:/",
        ] {
            assert!(is_filesystem_root(root), "{root}");
        }
        for dir in ["/tmp", "/a/b/..", "C:", "C:\\x", "rel", ".", ".."] {
            assert!(!is_filesystem_root(dir), "{dir}");
        }
    }
}
