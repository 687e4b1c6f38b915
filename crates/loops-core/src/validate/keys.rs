//! Warnings about a workflow file's keys: an unknown key is named with the
//! nearest known one (`depends_on` → `dependsOn`). (A codex `agent`, once
//! pointed out here, is refused by validation since 0.5.11's rules, agents
//! note §12.1 rule 7.)
//!
//! Warnings are data: the file stays valid (unknown step keys are even kept,
//! as the original keeps them), and the CLI prints them on stderr.

use serde_json::{Map, Value};

/// The keys of a workflow file.
const FILE_KEYS: &[&str] = &["name", "description", "version", "maxParallel", "steps"];

/// The keys of a step, the ones [`Step`](crate::Step) reads.
const STEP_KEYS: &[&str] = &super::workflow::STEP_KEYS;

/// The keys of a command target.
const COMMAND_KEYS: &[&str] = &[
    "type",
    "command",
    "args",
    "cwd",
    "shell",
    "env",
    "timeoutMs",
    "account",
];

/// The keys of an agent target.
const AGENT_KEYS: &[&str] = &[
    "type",
    "provider",
    "prompt",
    "promptFile",
    "cwd",
    "model",
    "agent",
    "extraArgs",
    "timeoutMs",
    "idleTimeoutMs",
    "configIsolation",
    "account",
    "variant",
    "env",
    "addDirs",
    "permissionMode",
    "sandbox",
    "manualBreakGlass",
    "allowlist",
    "worktree",
    "keepWorktree",
];

/// The keys of an account.
const ACCOUNT_KEYS: &[&str] = &["profile", "tool"];

/// The warnings about a workflow file body, in file order: each unknown key
/// (of the file, a step, a target or an account) with the nearest known key
/// when one is close.
///
/// Parts that are not objects are skipped: validation reports them.
///
/// ```
/// let file = serde_json::json!({"name": "w", "steps": [
///     {"id": "a", "depends_on": [], "target": {"type": "command", "command": "true"}},
/// ]});
/// assert_eq!(
///     loops_core::workflow_warnings(&file),
///     ["workflow.steps[0] has an unknown key \"depends_on\"; did you mean \"dependsOn\"?"]
/// );
/// ```
pub fn workflow_warnings(value: &Value) -> Vec<String> {
    let mut warnings = Vec::new();
    let Some(root) = value.as_object() else {
        return warnings;
    };
    unknown_keys(root, FILE_KEYS, "workflow", &mut warnings);
    let steps = root.get("steps").and_then(Value::as_array);
    for (i, step) in steps.into_iter().flatten().enumerate() {
        let Some(step) = step.as_object() else {
            continue;
        };
        let label = format!("workflow.steps[{i}]");
        unknown_keys(step, STEP_KEYS, &label, &mut warnings);
        account_keys(step, &label, &mut warnings);
        let Some(target) = step.get("target").and_then(Value::as_object) else {
            continue;
        };
        let label = format!("{label}.target");
        let known = match target.get("type").and_then(Value::as_str) {
            Some("command") => COMMAND_KEYS,
            Some("agent") => AGENT_KEYS,
            _ => continue,
        };
        unknown_keys(target, known, &label, &mut warnings);
        account_keys(target, &label, &mut warnings);
    }
    warnings
}

/// Warns about the unknown keys of an `account` object under `label`.
fn account_keys(parent: &Map<String, Value>, label: &str, warnings: &mut Vec<String>) {
    if let Some(account) = parent.get("account").and_then(Value::as_object) {
        unknown_keys(account, ACCOUNT_KEYS, &format!("{label}.account"), warnings);
    }
}

fn unknown_keys(
    object: &Map<String, Value>,
    known: &[&str],
    label: &str,
    warnings: &mut Vec<String>,
) {
    for key in object.keys() {
        if known.contains(&key.as_str()) {
            continue;
        }
        let mut warning = format!("{label} has an unknown key {key:?}");
        match nearest(key, known) {
            Some(near) => warning.push_str(&format!("; did you mean {near:?}?")),
            None => warning.push_str(&format!("; known keys are {}", known.join(", "))),
        }
        warnings.push(warning);
    }
}

/// The known key nearest to `key`: one that differs only in case and `_` or
/// `-` (`depends_on`, `DependsOn`), else the closest by edit distance when
/// at most a third of the key's characters (and at least one) differ.
fn nearest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    let folded = fold(key);
    if let Some(&near) = known.iter().find(|k| fold(k) == folded) {
        return Some(near);
    }
    let budget = (folded.chars().count() / 3).max(1);
    known
        .iter()
        .map(|&k| (edit_distance(&folded, &fold(k)), k))
        .filter(|&(distance, _)| distance <= budget)
        .min_by_key(|&(distance, _)| distance)
        .map(|(_, k)| k)
}

/// Lowercase, without `_` and `-`.
fn fold(key: &str) -> String {
    key.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// The edit distance between `a` and `b`, in characters: insertions,
/// deletions, substitutions and swaps of two neighbours (`modle` → `model`)
/// each count one (the optimal string alignment distance).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d: Vec<usize> = vec![0; (a.len() + 1) * width];
    for i in 0..=a.len() {
        d[i * width] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("steps", "step"), 1);
        assert_eq!(edit_distance("modle", "model"), 1);
        assert_eq!(edit_distance("", "ab"), 2);
    }

    #[test]
    fn the_nearest_known_key_is_suggested() {
        assert_eq!(nearest("depends_on", STEP_KEYS), Some("dependsOn"));
        assert_eq!(nearest("DEPENDSON", STEP_KEYS), Some("dependsOn"));
        assert_eq!(nearest("step", FILE_KEYS), Some("steps"));
        assert_eq!(nearest("timeout", STEP_KEYS), Some("timeoutMs"));
        assert_eq!(nearest("promt", AGENT_KEYS), Some("prompt"));
        assert_eq!(nearest("modle", AGENT_KEYS), Some("model"));
        assert_eq!(nearest("owner", FILE_KEYS), None);
    }

    #[test]
    fn every_level_is_checked() {
        let file = json!({
            "name": "w",
            "step": [],
            "steps": [
                {"id": "a", "target": {"type": "command", "command": "true", "shel": true,
                    "account": {"profile": "p", "tol": "x"}}},
                {"id": "b", "x-note": 1,
                    "target": {"type": "agent", "provider": "codex", "prompt": "p", "agent": "r"}},
                "not an object",
            ],
        });
        assert_eq!(
            workflow_warnings(&file),
            [
                "workflow has an unknown key \"step\"; did you mean \"steps\"?",
                "workflow.steps[0].target has an unknown key \"shel\"; did you mean \"shell\"?",
                "workflow.steps[0].target.account has an unknown key \"tol\"; did you mean \
                 \"tool\"?",
                "workflow.steps[1] has an unknown key \"x-note\"; known keys are id, name, \
                 description, target, dependsOn, continueOnFailure, timeoutMs, account, pool",
            ]
        );
        assert!(workflow_warnings(&json!([1])).is_empty());
    }
}
