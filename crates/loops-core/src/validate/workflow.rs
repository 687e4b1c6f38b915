//! Workflow files (SPEC §6.1) and the workflow execution order (SPEC §6.2):
//! reading a file body into a [`NewWorkflow`], with the sixteen SPEC checks
//! first and this port's stricter checks after them (see the parent
//! module's docs for the invariants).
//!
//! This module holds the file as a whole: its top-level checks and fields.
//! A step's shape checks and its reading into a [`Step`] are in `step`, the
//! typed readers of optional fields in `fields`, and the dependency graph
//! (`dependsOn`, cycles, execution order) in `order`.

use std::collections::HashMap;

use serde_json::{Number, Value};

use self::order::{find_cycle, read_depends_on};
use self::step::{check_step_shape, check_target_shape, read_step};
use super::{MAX_SAFE_INTEGER, Result, ValidationError, require_non_empty, trim, validate_name};
use crate::model::{NewWorkflow, Step};
use crate::workflow_file::MAX_WORKFLOW_PARALLEL;

mod fields;
mod order;
mod step;

pub use self::order::workflow_execution_order;
pub(super) use self::step::STEP_KEYS;

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
/// the optional fields (naming the offending path), rejects control characters
/// in ids, and runs [`validate_process_target`](crate::validate_process_target)
/// on the target and [`validate_account`](crate::validate_account) on the step
/// account. Unknown step keys are kept in [`Step::extra`]; unknown target keys
/// are ignored, as [`ProcessTarget`](crate::ProcessTarget) has nowhere to keep
/// them. [`workflow_warnings`](crate::workflow_warnings) names both, and the
/// text of a file is best read with
/// [`read_workflow_text`](crate::read_workflow_text), which refuses duplicate
/// keys and skips a byte-order mark.
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

#[cfg(test)]
mod tests;
