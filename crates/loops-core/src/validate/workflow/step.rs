//! A workflow step: the SPEC §6.1 shape checks on its raw JSON (checks 5 to
//! 13, step and target), and its reading into a [`Step`] once every SPEC
//! check has passed.

use serde_json::{Map, Value};

use super::fields::{
    opt_account, opt_allowlist, opt_bool, opt_env, opt_idle_ms, opt_isolation, opt_ms,
    opt_permission_mode, opt_string, opt_strings, opt_wall_clock, opt_worktree_mode,
};
use super::order::read_depends_on;
use super::{step_label, target_label};
use crate::model::{AgentTarget, CommandTarget, ProcessTarget, Step};
use crate::status::AgentProvider;
use crate::validate::{
    Result, ValidationError, is_space, require_non_empty, trim, validate_account,
    validate_pool_name, validate_process_target, validate_timeout,
};

/// Checks 5 and 6: the step is an object with a non-empty string id.
pub(super) fn check_step_shape(step: &Value, i: usize) -> Result<(&Map<String, Value>, &str)> {
    let Some(map) = step.as_object() else {
        let label = step_label(i);
        return Err(ValidationError::new(
            &label,
            format!("{label} must be an object"),
        ));
    };
    let field = format!("{}.id", step_label(i));
    let id = map.get("id").and_then(Value::as_str).unwrap_or("");
    require_non_empty(id, &field)?;
    // Issue 30 (`docs/triggers.md` P8): a step runs on the daemon that runs
    // its workflow, so it cannot be placed on its own yet; a file that asks
    // is refused rather than run elsewhere. A step may be pooled (Q2).
    if map.contains_key("runsOn") {
        let field = format!("{}.runsOn", step_label(i));
        return Err(ValidationError::new(
            &field,
            format!(
                "{field}: a step runs where its workflow's loop runs, and cannot have its \
                 own runsOn yet; give the loop --runs-on instead"
            ),
        ));
    }
    Ok((map, id))
}

/// Checks 8 to 13 on the raw JSON of a step's target.
pub(super) fn check_target_shape(target: Option<&Value>, i: usize) -> Result<()> {
    let label = target_label(i);
    let Some(map) = target.and_then(Value::as_object) else {
        return Err(ValidationError::new(
            &label,
            format!("{label} must be an object"),
        ));
    };
    let string = |key: &str| map.get(key).and_then(Value::as_str).unwrap_or("");
    match map.get("type").and_then(Value::as_str) {
        Some("command") => {
            let field = format!("{label}.command");
            let command = string("command");
            require_non_empty(command, &field)?;
            if map.get("shell") != Some(&Value::Bool(true)) && trim(command).contains(is_space) {
                return Err(ValidationError::new(
                    &field,
                    format!(
                        "{field} must be an executable without spaces when shell is false; put \
                         flags in args or set shell true"
                    ),
                ));
            }
            Ok(())
        }
        Some("agent") => {
            let provider = string("provider");
            require_non_empty(provider, &format!("{label}.provider"))?;
            require_non_empty(string("prompt"), &format!("{label}.prompt"))?;
            if provider.parse::<AgentProvider>().is_err() {
                return Err(ValidationError::new(
                    format!("{label}.provider"),
                    format!(
                        "{label}.provider must be one of claude, cursor, codewith, aicopilot, \
                         opencode, codex"
                    ),
                ));
            }
            Ok(())
        }
        _ => Err(ValidationError::new(
            format!("{label}.type"),
            format!("{label}.type must be command or agent"),
        )),
    }
}

/// The known keys of a step; the rest go to [`Step::extra`].
pub(in crate::validate) const STEP_KEYS: [&str; 9] = [
    "id",
    "name",
    "description",
    "target",
    "dependsOn",
    "continueOnFailure",
    "timeoutMs",
    "account",
    "pool",
];

/// Reads a step that passed the SPEC checks into a [`Step`], checking the
/// types of its optional fields and then its target and account.
pub(super) fn read_step(map: &Map<String, Value>, id: &str, i: usize) -> Result<Step> {
    let label = step_label(i);
    if id.chars().any(char::is_control) {
        let field = format!("{label}.id");
        return Err(ValidationError::new(
            &field,
            format!("{field} must not contain control characters such as newlines or tabs"),
        ));
    }
    let name = opt_string(map, "name", &label)?;
    let description = opt_string(map, "description", &label)?;
    let target_label = target_label(i);
    let target = read_process_target(map.get("target").and_then(Value::as_object), &target_label)?;
    validate_process_target(&target, &target_label)?;
    let depends_on = read_depends_on(map, i)?
        .into_iter()
        .map(str::to_owned)
        .collect();
    let continue_on_failure = opt_bool(map, "continueOnFailure", &label)?.unwrap_or(false);
    let timeout_ms = opt_ms(map, "timeoutMs", &label)?;
    validate_timeout(timeout_ms, &label)?;
    let account = opt_account(map, &label)?;
    if let Some(account) = &account {
        validate_account(account, &format!("{label}.account"))?;
    }
    let pool = opt_string(map, "pool", &label)?;
    if let Some(pool) = &pool {
        let field = format!("{label}.pool");
        validate_pool_name(pool)
            .map_err(|e| ValidationError::new(&field, format!("{field}: {}", e.message)))?;
    }
    // Unknown keys are copied last, once the step is known to be valid.
    let extra = map
        .iter()
        .filter(|(key, _)| !STEP_KEYS.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    Ok(Step {
        id: id.to_owned(),
        name,
        description,
        target,
        depends_on,
        continue_on_failure,
        timeout_ms,
        account,
        pool,
        extra,
    })
}

/// Reads a target that passed checks 8 to 13.
fn read_process_target(map: Option<&Map<String, Value>>, label: &str) -> Result<ProcessTarget> {
    let Some(map) = map else {
        return Err(ValidationError::new(
            label,
            format!("{label} must be an object"),
        ));
    };
    let string =
        |key: &str| -> Result<String> { Ok(opt_string(map, key, label)?.unwrap_or_default()) };
    match map.get("type").and_then(Value::as_str) {
        Some("command") => Ok(ProcessTarget::Command(CommandTarget {
            command: string("command")?,
            args: opt_strings(map, "args", label)?,
            cwd: opt_string(map, "cwd", label)?,
            shell: opt_bool(map, "shell", label)?,
            env: opt_env(map, label)?,
            timeout_ms: opt_ms(map, "timeoutMs", label)?,
            account: opt_account(map, label)?,
            stdin: None,
        })),
        Some("agent") => {
            let provider = string("provider")?;
            let provider = provider.parse::<AgentProvider>().map_err(|_| {
                ValidationError::new(
                    format!("{label}.provider"),
                    format!(
                        "{label}.provider must be one of claude, cursor, codewith, aicopilot, \
                         opencode, codex"
                    ),
                )
            })?;
            Ok(ProcessTarget::Agent(AgentTarget {
                provider,
                prompt: string("prompt")?,
                prompt_file: opt_string(map, "promptFile", label)?,
                cwd: opt_string(map, "cwd", label)?,
                model: opt_string(map, "model", label)?,
                agent: opt_string(map, "agent", label)?,
                extra_args: opt_strings(map, "extraArgs", label)?,
                timeout_ms: opt_wall_clock(map, label)?,
                idle_timeout_ms: opt_idle_ms(map, label)?,
                config_isolation: opt_isolation(map, label)?,
                account: opt_account(map, label)?,
                variant: opt_string(map, "variant", label)?,
                env: opt_env(map, label)?,
                add_dirs: opt_strings(map, "addDirs", label)?,
                permission_mode: opt_permission_mode(map, label)?,
                sandbox: opt_string(map, "sandbox", label)?,
                manual_break_glass: opt_bool(map, "manualBreakGlass", label)?,
                allowlist: opt_allowlist(map, label)?,
                worktree: opt_worktree_mode(map, label)?,
                keep_worktree: opt_bool(map, "keepWorktree", label)?,
            }))
        }
        _ => Err(ValidationError::new(
            format!("{label}.type"),
            format!("{label}.type must be command or agent"),
        )),
    }
}

#[cfg(test)]
mod placement_tests {
    use super::*;

    #[test]
    fn a_step_with_its_own_placement_is_refused_and_a_pool_is_read() {
        let step = serde_json::json!({"id": "a", "runsOn": ["x"]});
        let err = check_step_shape(&step, 2).unwrap_err();
        assert_eq!(err.field, "workflow.steps[2].runsOn");
        assert!(err.message.contains("--runs-on"), "{}", err.message);
        let pooled = serde_json::json!({"id": "a", "pool": "gpu",
            "target": {"type": "command", "command": "true"}});
        let (map, id) = check_step_shape(&pooled, 0).unwrap();
        let step = read_step(map, id, 0).unwrap();
        assert_eq!(step.pool.as_deref(), Some("gpu"));
        assert!(step.extra.is_empty());
        let serialized = serde_json::to_value(&step).unwrap();
        assert_eq!(serialized["pool"], "gpu");
    }

    #[test]
    fn a_step_pool_with_a_bad_name_or_type_is_refused() {
        for bad in [
            serde_json::json!("-x"),
            serde_json::json!("a b"),
            serde_json::json!(3),
        ] {
            let pooled = serde_json::json!({"id": "a", "pool": bad,
                "target": {"type": "command", "command": "true"}});
            let (map, id) = check_step_shape(&pooled, 1).unwrap();
            let err = read_step(map, id, 1).unwrap_err();
            assert_eq!(err.field, "workflow.steps[1].pool", "{bad}");
        }
    }
}
