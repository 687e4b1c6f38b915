//! Workflow files (SPEC §6.1) and the workflow execution order (SPEC §6.2):
//! reading a file body into a [`NewWorkflow`], with the sixteen SPEC checks
//! first and this port's stricter checks after them (see the parent
//! module's docs for the invariants).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Number, Value};

use super::{
    MAX_SAFE_INTEGER, Result, ValidationError, is_space, require_non_empty, trim, validate_account,
    validate_name, validate_process_target, validate_timeout,
};
use crate::model::{Account, AgentTarget, CommandTarget, NewWorkflow, ProcessTarget, Step};
use crate::status::{AgentProvider, ConfigIsolation};
use crate::workflow_file::MAX_WORKFLOW_PARALLEL;

/// `workflow.steps[i]`, the SPEC's `Li`.
fn step_label(i: usize) -> String {
    format!("workflow.steps[{i}]")
}

/// `workflow.steps[i].target`, the SPEC's `Ti`.
fn target_label(i: usize) -> String {
    format!("workflow.steps[{i}].target")
}

/// Reads a workflow file body and validates it (SPEC §6.1).
///
/// `name_override` is `--name`; it replaces the file's `name`. The stored name
/// is trimmed. `description` is used only if it is a string, and `version`
/// only if it is a number (default 1); a numeric `version` must be a whole
/// number from 1 to 4294967295.
///
/// The sixteen SPEC §6.1 checks run first, in SPEC order and with the SPEC
/// messages. Checks 5 to 13 run step by step (step 0 entirely, then step 1,
/// …), as the original does. Checks 14 and 15 then run step by step and,
/// within a step, dependency by dependency: a missing dependency is reported
/// before a self-dependency only when it comes first in `dependsOn`. A cycle
/// (check 16) is reported as
/// `workflow dependency cycle includes step <id>: <id> -> … -> <id>`, where
/// each arrow points from a step to one of its dependencies.
///
/// Only then do the stricter checks of this port run: the name's length and
/// characters (as [`validate_name`]), the numeric `version`, `maxParallel`
/// (new in loops: a whole number from 1 to 64, absent meaning 1), and then, step by
/// step, the reading of each step into a [`Step`], which checks the types of
/// the optional fields (naming the offending path), rejects control
/// characters in ids, and runs [`validate_process_target`] on the target and
/// [`validate_account`] on the step account. Unknown step keys are kept in
/// [`Step::extra`]; unknown target keys are ignored, as [`ProcessTarget`] has
/// nowhere to keep them. [`workflow_warnings`](crate::workflow_warnings)
/// names both, and the text of a file is best read with
/// [`read_workflow_text`](crate::read_workflow_text), which refuses
/// duplicate keys and skips a byte-order mark.
pub fn workflow_from_json(value: &Value, name_override: Option<&str>) -> Result<NewWorkflow> {
    // Check 1.
    let Some(root) = value.as_object() else {
        return Err(ValidationError::new(
            "workflow",
            "workflow file must be an object",
        ));
    };
    // Check 2.
    let name = match name_override {
        Some(name) => name,
        None => root.get("name").and_then(Value::as_str).unwrap_or(""),
    };
    require_non_empty(name, "workflow.name")?;
    // Checks 3 and 4.
    let Some(steps) = root.get("steps").and_then(Value::as_array) else {
        return Err(ValidationError::new(
            "workflow.steps",
            "workflow.steps must be an array",
        ));
    };
    if steps.is_empty() {
        return Err(ValidationError::new(
            "workflow.steps",
            "workflow.steps must contain at least one step",
        ));
    }
    // Checks 5 to 13.
    let mut step_maps = Vec::with_capacity(steps.len());
    let mut ids: HashMap<&str, usize> = HashMap::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        let (map, id) = check_step_shape(step, i)?;
        if ids.insert(id, i).is_some() {
            return Err(ValidationError::new(
                format!("{}.id", step_label(i)),
                format!("duplicate workflow step id: {id}"),
            ));
        }
        check_target_shape(map.get("target"), i)?;
        step_maps.push((map, id));
    }
    // Checks 14 and 15.
    let mut edges: Vec<Vec<usize>> = Vec::with_capacity(step_maps.len());
    for (i, (map, id)) in step_maps.iter().enumerate() {
        let deps = read_depends_on(map, i)?;
        let mut step_edges = Vec::with_capacity(deps.len());
        for dep in deps {
            let Some(&j) = ids.get(dep) else {
                return Err(ValidationError::new(
                    format!("{}.dependsOn", step_label(i)),
                    format!("step {id} depends on missing step {dep}"),
                ));
            };
            if j == i {
                return Err(ValidationError::new(
                    format!("{}.dependsOn", step_label(i)),
                    format!("step {id} cannot depend on itself"),
                ));
            }
            step_edges.push(j);
        }
        edges.push(step_edges);
    }
    // Check 16.
    if let Some(cycle) = find_cycle(&edges) {
        let ids_on_cycle: Vec<&str> = cycle.iter().map(|&k| step_maps[k].1).collect();
        let first = cycle.first().copied().unwrap_or_default();
        return Err(ValidationError::new(
            format!("{}.dependsOn", step_label(first)),
            format!(
                "workflow dependency cycle includes step {}: {}",
                step_maps[first].1,
                ids_on_cycle.join(" -> ")
            ),
        ));
    }

    // The SPEC checks have passed; now the stricter checks of this port, top
    // of the file first.
    validate_name(name, "workflow.name")?;
    let version = match root.get("version") {
        Some(Value::Number(n)) => read_version(n)?,
        _ => 1,
    };
    let max_parallel = read_max_parallel(root.get("maxParallel"))?;
    let steps = step_maps
        .iter()
        .enumerate()
        .map(|(i, (map, id))| read_step(map, id, i))
        .collect::<Result<Vec<Step>>>()?;
    Ok(NewWorkflow {
        name: trim(name).to_owned(),
        description: root
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned),
        version,
        steps,
        max_parallel,
    })
}

/// Checks 5 and 6: the step is an object with a non-empty string id.
fn check_step_shape(step: &Value, i: usize) -> Result<(&Map<String, Value>, &str)> {
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
    Ok((map, id))
}

/// Checks 8 to 13 on the raw JSON of a step's target.
fn check_target_shape(target: Option<&Value>, i: usize) -> Result<()> {
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

/// A step's `dependsOn`: absent or null is empty; otherwise an array of
/// strings.
fn read_depends_on(map: &Map<String, Value>, i: usize) -> Result<Vec<&str>> {
    let field = format!("{}.dependsOn", step_label(i));
    match map.get("dependsOn") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(deps)) => deps
            .iter()
            .map(|dep| {
                dep.as_str().ok_or_else(|| {
                    ValidationError::new(
                        &field,
                        format!(
                            "{field} must be an array of step ids; every entry must be a string"
                        ),
                    )
                })
            })
            .collect(),
        Some(_) => Err(ValidationError::new(
            &field,
            format!("{field} must be an array of step ids, for example [\"build\"]"),
        )),
    }
}

/// Finds a dependency cycle by an iterative depth-first search that visits
/// steps in declaration order and dependencies in listed order, as the
/// original's recursive search does. Returns the cycle as step indices, from
/// the step found twice on the current path back to itself.
fn find_cycle(edges: &[Vec<usize>]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut marks = vec![Mark::New; edges.len()];
    let mut path: Vec<(usize, usize)> = Vec::new();
    for root in 0..edges.len() {
        if marks[root] != Mark::New {
            continue;
        }
        marks[root] = Mark::OnPath;
        path.push((root, 0));
        while let Some((node, cursor)) = path.last_mut() {
            let node = *node;
            let Some(&dep) = edges.get(node).and_then(|deps| deps.get(*cursor)) else {
                marks[node] = Mark::Done;
                path.pop();
                continue;
            };
            *cursor += 1;
            match marks.get(dep).copied() {
                Some(Mark::New) => {
                    marks[dep] = Mark::OnPath;
                    path.push((dep, 0));
                }
                Some(Mark::OnPath) => {
                    let start = path.iter().position(|&(n, _)| n == dep).unwrap_or_default();
                    let mut cycle: Vec<usize> = path[start..].iter().map(|&(n, _)| n).collect();
                    cycle.push(dep);
                    return Some(cycle);
                }
                Some(Mark::Done) | None => {}
            }
        }
    }
    None
}

/// A numeric `version`: a whole number from 1 to `u32::MAX`.
fn read_version(n: &Number) -> Result<u32> {
    whole_number(n)
        .and_then(|v| u32::try_from(v).ok())
        .filter(|&v| v >= 1)
        .ok_or_else(|| {
            ValidationError::new(
                "workflow.version",
                format!(
                    "workflow.version must be a whole number from 1 to {}, got {n}; omit it to \
                     use 1",
                    u32::MAX
                ),
            )
        })
}

/// `maxParallel`, new in loops: absent or null means unset (1, serial);
/// otherwise a whole number from 1 to [`MAX_WORKFLOW_PARALLEL`].
fn read_max_parallel(value: Option<&Value>) -> Result<Option<u32>> {
    let field = "workflow.maxParallel";
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => whole_number(n)
            .and_then(|v| u32::try_from(v).ok())
            .filter(|v| (1..=MAX_WORKFLOW_PARALLEL).contains(v))
            .map(Some)
            .ok_or_else(|| {
                ValidationError::new(
                    field,
                    format!(
                        "{field} must be a whole number from 1 to {MAX_WORKFLOW_PARALLEL}, got \
                         {n}; omit it to run steps one at a time"
                    ),
                )
            }),
        Some(other) => Err(ValidationError::new(
            field,
            format!(
                "{field} must be a whole number from 1 to {MAX_WORKFLOW_PARALLEL}, got {other}; \
                 omit it to run steps one at a time"
            ),
        )),
    }
}

/// A non-negative whole JSON number, including floats such as `2.0` that a
/// JavaScript writer produces, up to 2^53 - 1 for floats.
fn whole_number(n: &Number) -> Option<u64> {
    if let Some(v) = n.as_u64() {
        return Some(v);
    }
    let f = n.as_f64()?;
    // The range check makes the cast exact.
    (f.fract() == 0.0 && (0.0..=MAX_SAFE_INTEGER).contains(&f)).then_some(f as u64)
}

/// The known keys of a step; the rest go to [`Step::extra`].
pub(super) const STEP_KEYS: [&str; 8] = [
    "id",
    "name",
    "description",
    "target",
    "dependsOn",
    "continueOnFailure",
    "timeoutMs",
    "account",
];

/// Reads a step that passed the SPEC checks into a [`Step`], checking the
/// types of its optional fields and then its target and account.
fn read_step(map: &Map<String, Value>, id: &str, i: usize) -> Result<Step> {
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
                cwd: opt_string(map, "cwd", label)?,
                model: opt_string(map, "model", label)?,
                agent: opt_string(map, "agent", label)?,
                extra_args: opt_strings(map, "extraArgs", label)?,
                timeout_ms: opt_ms(map, "timeoutMs", label)?,
                config_isolation: opt_isolation(map, label)?,
                account: opt_account(map, label)?,
            }))
        }
        _ => Err(ValidationError::new(
            format!("{label}.type"),
            format!("{label}.type must be command or agent"),
        )),
    }
}

/// An optional field: absent and `null` both mean unset.
fn opt_field<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).filter(|v| !v.is_null())
}

fn opt_string(map: &Map<String, Value>, key: &str, label: &str) -> Result<Option<String>> {
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

fn opt_bool(map: &Map<String, Value>, key: &str, label: &str) -> Result<Option<bool>> {
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

fn opt_strings(map: &Map<String, Value>, key: &str, label: &str) -> Result<Option<Vec<String>>> {
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

fn opt_env(
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
fn opt_ms(map: &Map<String, Value>, key: &str, label: &str) -> Result<Option<u64>> {
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

fn opt_isolation(map: &Map<String, Value>, label: &str) -> Result<Option<ConfigIsolation>> {
    match opt_field(map, "configIsolation") {
        None => Ok(None),
        Some(v) => v
            .as_str()
            .and_then(|s| s.parse().ok())
            .map(Some)
            .ok_or_else(|| {
                let field = format!("{label}.configIsolation");
                ValidationError::new(&field, format!("{field} must be safe or none"))
            }),
    }
}

fn opt_account(map: &Map<String, Value>, label: &str) -> Result<Option<Account>> {
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

/// The order in which a workflow's steps run (SPEC §6.2).
///
/// Depth-first post-order: steps are visited in declaration order, and each
/// step's `dependsOn` in its listed order, so `[c→b, a, b→a]` runs a, b, c.
///
/// The input is expected to have passed [`workflow_from_json`], but any input
/// is safe: the walk is iterative, unknown dependencies are skipped, a cycle
/// is broken where it closes, a duplicated id resolves to its first step, and
/// every step appears in the result exactly once.
///
/// ```
/// use loops_core::{workflow_execution_order, workflow_from_json};
/// let file = serde_json::json!({"name": "w", "steps": [
///     {"id": "c", "dependsOn": ["b"], "target": {"type": "command", "command": "true"}},
///     {"id": "a", "target": {"type": "command", "command": "true"}},
///     {"id": "b", "dependsOn": ["a"], "target": {"type": "command", "command": "true"}},
/// ]});
/// let workflow = workflow_from_json(&file, None).unwrap();
/// let order: Vec<&str> =
///     workflow_execution_order(&workflow.steps).iter().map(|s| s.id.as_str()).collect();
/// assert_eq!(order, ["a", "b", "c"]);
/// ```
pub fn workflow_execution_order(steps: &[Step]) -> Vec<&Step> {
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        index.entry(step.id.as_str()).or_insert(i);
    }
    let mut seen: HashSet<usize> = HashSet::with_capacity(steps.len());
    let mut order = Vec::with_capacity(steps.len());
    let mut path: Vec<(usize, usize)> = Vec::new();
    for root in 0..steps.len() {
        if !seen.insert(root) {
            continue;
        }
        path.push((root, 0));
        while let Some((node, cursor)) = path.last_mut() {
            let node = *node;
            match steps[node].depends_on.get(*cursor) {
                Some(dep) => {
                    *cursor += 1;
                    if let Some(&j) = index.get(dep.as_str())
                        && seen.insert(j)
                    {
                        path.push((j, 0));
                    }
                }
                None => {
                    order.push(&steps[node]);
                    path.pop();
                }
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers() {
        let n = |v: Value| match v {
            Value::Number(n) => whole_number(&n),
            _ => None,
        };
        assert_eq!(n(serde_json::json!(0)), Some(0));
        assert_eq!(n(serde_json::json!(u64::MAX)), Some(u64::MAX));
        assert_eq!(n(serde_json::json!(2.0)), Some(2));
        assert_eq!(
            n(serde_json::json!(9_007_199_254_740_991.0)),
            Some(9_007_199_254_740_991)
        );
        assert_eq!(n(serde_json::json!(1e300)), None);
        assert_eq!(n(serde_json::json!(-1)), None);
        assert_eq!(n(serde_json::json!(-0.5)), None);
        assert_eq!(n(serde_json::json!(0.5)), None);
    }

    #[test]
    fn cycles_are_found_from_the_first_step_seen_twice() {
        assert_eq!(find_cycle(&[]), None);
        assert_eq!(find_cycle(&[vec![1], vec![2], vec![]]), None);
        assert_eq!(
            find_cycle(&[vec![1], vec![2], vec![1]]),
            Some(vec![1, 2, 1])
        );
        assert_eq!(
            find_cycle(&[vec![], vec![0, 2], vec![3], vec![1]]),
            Some(vec![1, 2, 3, 1])
        );
        // Out-of-range edges cannot come from validated input; they are ignored.
        assert_eq!(find_cycle(&[vec![7]]), None);
    }
}
