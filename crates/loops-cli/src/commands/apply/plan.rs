//! The plan of an apply (issue 31): for each loop of the file, whether it
//! is created, updated (with each changed field, old → new), replaced (its
//! kind changed) or unchanged; with `--prune`, the loops of the scope the
//! file no longer has; and the conflicts that stop it.
//!
//! Fields compare as the loop's JSON shows them, without what a run
//! changes (status, next run, streaks) and what the store assigns (id,
//! times). Secrets are compared whole and shown redacted.

use std::collections::BTreeMap;

use loops_core::{Loop, LoopId, NewLoop, Target};
use serde_json::Value;

/// Loop fields that are not settings.
const NOT_SETTINGS: [&str; 9] = [
    "id",
    "status",
    "createdAt",
    "updatedAt",
    "nextRunAt",
    "retryScheduledFor",
    "pausedReason",
    "consecutiveSuccesses",
    "consecutiveFailures",
];

/// One change of a loop's field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldChange {
    /// Dotted: `schedule.everyMs`, `target.command`.
    pub(crate) field: String,
    /// As shown: compact JSON, secrets redacted; `(none)` when unset.
    pub(crate) old: String,
    pub(crate) new: String,
}

/// What the apply does with one loop.
#[derive(Debug)]
pub(crate) enum Step {
    /// A new loop.
    Create { new: NewLoop },
    /// An edit in place: id and history stay.
    Update {
        id: LoopId,
        new: NewLoop,
        changes: Vec<FieldChange>,
    },
    /// The kind changed: removed and created anew (needs `--yes`).
    Replace { id: LoopId, new: NewLoop },
    /// Nothing to do.
    Unchanged { id: LoopId },
    /// `--prune`: a loop of the scope the file no longer has.
    Remove { id: LoopId },
}

impl Step {
    /// Whether the step writes.
    pub(crate) fn changes(&self) -> bool {
        !matches!(self, Step::Unchanged { .. })
    }
}

/// The kind of `target`, as `create` names it.
pub(crate) fn kind(target: &Target) -> &'static str {
    match target {
        Target::Command(_) => "command",
        Target::Agent(_) => "agent",
        Target::Workflow(_) => "workflow",
    }
}

/// The settings of `lp` as dotted fields: compact JSON values, top-level
/// fields and one level into `target` and `schedule`.
fn fields(lp: &Loop) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let Ok(Value::Object(top)) = serde_json::to_value(lp) else {
        return out;
    };
    let trigger_only = lp.policy.trigger_only;
    for (key, value) in top {
        if NOT_SETTINGS.contains(&key.as_str()) {
            continue;
        }
        // A loop on triggers only keeps a placeholder schedule.
        if trigger_only && key == "schedule" {
            continue;
        }
        match value {
            Value::Object(inner) if key == "target" || key == "schedule" => {
                for (k, v) in inner {
                    out.insert(format!("{key}.{k}"), v);
                }
            }
            v => {
                out.insert(key, v);
            }
        }
    }
    out
}

/// The fields that differ between `stored` and `wanted`, in field order.
pub(crate) fn diff(stored: &Loop, wanted: &Loop) -> Vec<FieldChange> {
    let (old, new) = (fields(stored), fields(wanted));
    let (old_shown, new_shown) = (
        fields(&crate::redact::into_loop_json(stored.clone())),
        fields(&crate::redact::into_loop_json(wanted.clone())),
    );
    let shown = |map: &BTreeMap<String, Value>, key: &str| {
        map.get(key)
            .map_or_else(|| "(none)".to_owned(), Value::to_string)
    };
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| old.get(*k) != new.get(*k))
        .map(|k| {
            let (mut o, mut n) = (shown(&old_shown, k), shown(&new_shown, k));
            if o == n {
                // Only a secret changed: say so without showing it.
                o = "[redacted]".to_owned();
                n = "[redacted, changed]".to_owned();
            }
            FieldChange {
                field: k.clone(),
                old: o,
                new: n,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use loops_core::{CommandTarget, Schedule, Timestamp};

    fn stored(every_ms: u64, env: &str) -> Loop {
        let mut target = CommandTarget::new("make");
        target.env = Some([("TOKEN".to_owned(), env.to_owned())].into());
        let new = NewLoop::new(
            "build",
            Schedule::Interval {
                every_ms,
                anchor: None,
            },
            Target::Command(target),
        );
        let at = Timestamp::from_millis(1_000_000).unwrap();
        loops_store::loop_to_create(&new, at).unwrap()
    }

    #[test]
    fn a_changed_schedule_is_one_field_and_times_are_not_fields() {
        let (a, mut b) = (stored(60_000, "s1"), stored(120_000, "s1"));
        b.created_at = Timestamp::from_millis(2_000_000).unwrap();
        b.next_run_at = None;
        let changes = diff(&a, &b);
        assert_eq!(
            changes,
            vec![FieldChange {
                field: "schedule.everyMs".into(),
                old: "60000".into(),
                new: "120000".into(),
            }]
        );
        assert!(diff(&a, &a.clone()).is_empty());
    }

    #[test]
    fn a_changed_secret_is_said_but_never_shown() {
        let changes = diff(&stored(60_000, "old-secret"), &stored(60_000, "new-secret"));
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].field, "target.env");
        let shown = format!("{:?}", changes);
        assert!(!shown.contains("secret"), "{shown}");
        assert_eq!(changes[0].new, "[redacted, changed]");
    }
}
