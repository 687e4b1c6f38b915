//! Typed readers of a step's and a target's optional fields: absent and
//! `null` mean unset, and a value of the wrong type is refused with a message
//! naming its path.

use serde_json::{Map, Value};

use super::whole_number;
use crate::model::{Account, AgentAllowlist, WallClock};
use crate::status::{ConfigIsolation, PermissionMode, WorktreeMode};
use crate::validate::timers::{idle_message, wall_clock_message};
use crate::validate::{Result, ValidationError, require_non_empty};

/// An optional field: absent and `null` both mean unset.
fn opt_field<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).filter(|v| !v.is_null())
}

pub(super) fn opt_string(
    map: &Map<String, Value>,
    key: &str,
    label: &str,
) -> Result<Option<String>> {
    match opt_field(map, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => {
            let field = format!("{label}.{key}");
            Err(ValidationError::new(
                &field,
                format!("{field} must be a string"),
            ))
        }
    }
}

pub(super) fn opt_bool(map: &Map<String, Value>, key: &str, label: &str) -> Result<Option<bool>> {
    match opt_field(map, key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => {
            let field = format!("{label}.{key}");
            Err(ValidationError::new(
                &field,
                format!("{field} must be true or false"),
            ))
        }
    }
}

pub(super) fn opt_strings(
    map: &Map<String, Value>,
    key: &str,
    label: &str,
) -> Result<Option<Vec<String>>> {
    let field = format!("{label}.{key}");
    match opt_field(map, key) {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(j, item)| match item {
                Value::String(s) => Ok(s.clone()),
                _ => {
                    let field = format!("{field}[{j}]");
                    Err(ValidationError::new(
                        &field,
                        format!("{field} must be a string"),
                    ))
                }
            })
            .collect::<Result<Vec<String>>>()
            .map(Some),
        Some(_) => Err(ValidationError::new(
            &field,
            format!("{field} must be an array of strings, for example [\"--verbose\"]"),
        )),
    }
}

pub(super) fn opt_env(
    map: &Map<String, Value>,
    label: &str,
) -> Result<Option<std::collections::BTreeMap<String, String>>> {
    let field = format!("{label}.env");
    match opt_field(map, "env") {
        None => Ok(None),
        Some(Value::Object(vars)) => vars
            .iter()
            .map(|(name, value)| match value {
                Value::String(s) => Ok((name.clone(), s.clone())),
                _ => Err(ValidationError::new(
                    &field,
                    format!(
                        "{field} value of {name:?} must be a string; quote numbers and booleans"
                    ),
                )),
            })
            .collect::<Result<_>>()
            .map(Some),
        Some(_) => Err(ValidationError::new(
            &field,
            format!("{field} must be an object of string values, for example {{\"DEBUG\": \"1\"}}"),
        )),
    }
}

/// An optional duration in milliseconds: a non-negative whole number. Zero is
/// accepted here and rejected by the target and step checks, with the SPEC §9
/// item 28 message.
pub(super) fn opt_ms(map: &Map<String, Value>, key: &str, label: &str) -> Result<Option<u64>> {
    match opt_field(map, key) {
        None => Ok(None),
        Some(Value::Number(n)) if whole_number(n).is_some() => Ok(whole_number(n)),
        Some(_) => {
            let field = format!("{label}.{key}");
            Err(ValidationError::new(
                &field,
                format!(
                    "{field} must be a positive whole number of milliseconds, for example 60000"
                ),
            ))
        }
    }
}

/// An agent's `timeoutMs`: absent is unset, `null` unlimited (issue 27).
pub(super) fn opt_wall_clock(map: &Map<String, Value>, label: &str) -> Result<WallClock> {
    match map.get("timeoutMs") {
        None => Ok(WallClock::Unset),
        Some(Value::Null) => Ok(WallClock::Unlimited),
        Some(Value::Number(n)) if whole_number(n).is_some() => Ok(whole_number(n).into()),
        Some(_) => {
            let field = format!("{label}.timeoutMs");
            Err(ValidationError::new(&field, wall_clock_message(&field)))
        }
    }
}

/// An agent's `idleTimeoutMs`: absent and `null` are unset (issue 27).
pub(super) fn opt_idle_ms(map: &Map<String, Value>, label: &str) -> Result<Option<u64>> {
    match opt_field(map, "idleTimeoutMs") {
        None => Ok(None),
        Some(Value::Number(n)) if whole_number(n).is_some() => Ok(whole_number(n)),
        Some(_) => {
            let field = format!("{label}.idleTimeoutMs");
            Err(ValidationError::new(&field, idle_message(&field)))
        }
    }
}

pub(super) fn opt_isolation(
    map: &Map<String, Value>,
    label: &str,
) -> Result<Option<ConfigIsolation>> {
    opt_choice(map, "configIsolation", label, "safe or none")
}

/// An optional field that must be one of an enum's names, `expected`
/// saying which in the message.
fn opt_choice<T: std::str::FromStr>(
    map: &Map<String, Value>,
    key: &str,
    label: &str,
    expected: &str,
) -> Result<Option<T>> {
    match opt_field(map, key) {
        None => Ok(None),
        Some(v) => v
            .as_str()
            .and_then(|s| s.parse().ok())
            .map(Some)
            .ok_or_else(|| {
                let field = format!("{label}.{key}");
                ValidationError::new(&field, format!("{field} must be {expected}"))
            }),
    }
}

pub(super) fn opt_account(map: &Map<String, Value>, label: &str) -> Result<Option<Account>> {
    let field = format!("{label}.account");
    let Some(value) = opt_field(map, "account") else {
        return Ok(None);
    };
    let Some(account) = value.as_object() else {
        return Err(ValidationError::new(
            &field,
            format!(
                "{field} must be an object with a profile and an optional tool, for example \
                 {{\"profile\": \"work\", \"tool\": \"claude\"}}"
            ),
        ));
    };
    let profile = opt_string(account, "profile", &field)?.unwrap_or_default();
    require_non_empty(&profile, &format!("{field}.profile"))?;
    let tool = opt_string(account, "tool", &field)?;
    Ok(Some(Account { profile, tool }))
}

/// `permissionMode`: one of default, plan, auto, bypass (agents note
/// §12.1 rule 10).
pub(super) fn opt_permission_mode(
    map: &Map<String, Value>,
    label: &str,
) -> Result<Option<PermissionMode>> {
    opt_choice(
        map,
        "permissionMode",
        label,
        "one of default, plan, auto, bypass",
    )
}

/// `worktree`: one of off, auto, required (agents note §8; 0.5.11's
/// `worktree.mode`, §12.2, without its `main`).
pub(super) fn opt_worktree_mode(
    map: &Map<String, Value>,
    label: &str,
) -> Result<Option<WorktreeMode>> {
    opt_choice(map, "worktree", label, "one of off, auto, required")
}

/// `allowlist`: `{tools?, commands?, enforcement?, safetyReason?}`.
pub(super) fn opt_allowlist(
    map: &Map<String, Value>,
    label: &str,
) -> Result<Option<AgentAllowlist>> {
    let field = format!("{label}.allowlist");
    match opt_field(map, "allowlist") {
        None => Ok(None),
        Some(Value::Object(list)) => Ok(Some(AgentAllowlist {
            tools: opt_strings(list, "tools", &field)?,
            commands: opt_strings(list, "commands", &field)?,
            enforcement: opt_string(list, "enforcement", &field)?,
            safety_reason: opt_string(list, "safetyReason", &field)?,
        })),
        Some(_) => Err(ValidationError::new(
            &field,
            format!("{field} must be an object"),
        )),
    }
}
