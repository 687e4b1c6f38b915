//! The dependency graph of a workflow's steps: reading `dependsOn`, finding
//! a cycle (SPEC §6.1 check 16), and the execution order (SPEC §6.2).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::step_label;
use crate::model::Step;
use crate::validate::{Result, ValidationError};

/// A step's `dependsOn`: absent or null is empty; otherwise an array of
/// strings.
pub(super) fn read_depends_on(map: &Map<String, Value>, i: usize) -> Result<Vec<&str>> {
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
pub(super) fn find_cycle(edges: &[Vec<usize>]) -> Option<Vec<usize>> {
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

/// The order in which a workflow's steps run (SPEC §6.2).
///
/// Depth-first post-order: steps are visited in declaration order, and each
/// step's `dependsOn` in its listed order, so `[c→b, a, b→a]` runs a, b, c.
///
/// The input is expected to have passed
/// [`workflow_from_json`](super::workflow_from_json), but any input is safe:
/// the walk is iterative, unknown dependencies are skipped, a cycle is broken
/// where it closes, a duplicated id resolves to its first step, and every step
/// appears in the result exactly once.
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
