//! Unit tests of the model: the JSON of schedules, targets and steps.

use super::*;
use crate::status::Anchor;
use serde_json::json;

#[test]
fn schedule_json_matches_the_original() {
    let s: Schedule =
        serde_json::from_value(json!({"type":"interval","everyMs":60000,"anchor":"fixed_rate"}))
            .unwrap();
    assert_eq!(
        s,
        Schedule::Interval {
            every_ms: 60000,
            anchor: Some(Anchor::FixedRate)
        }
    );
    let s = Schedule::Dynamic {
        min_interval_ms: None,
    };
    assert_eq!(serde_json::to_value(&s).unwrap(), json!({"type":"dynamic"}));
    let s = Schedule::Cron {
        expression: "0 9 * * 1".into(),
        timezone: None,
    };
    assert_eq!(
        serde_json::to_value(&s).unwrap(),
        json!({"type":"cron","expression":"0 9 * * 1"})
    );
}

#[test]
fn targets_omit_unset_fields() {
    let mut c = CommandTarget::new("printf");
    c.args = Some(vec!["hello".into()]);
    c.shell = Some(true);
    let t = Target::Command(c);
    assert_eq!(
        serde_json::to_value(&t).unwrap(),
        json!({"type":"command","command":"printf","args":["hello"],"shell":true})
    );
    let t: Target = serde_json::from_value(
        json!({"type":"workflow","workflowId":"0123456789ab","timeoutMs":50}),
    )
    .unwrap();
    assert_eq!(t.kind(), "workflow");
}

#[test]
fn step_keeps_unknown_keys_and_normalizes() {
    let v = json!({"id":"a","target":{"type":"command","command":"true"},"x-note":"kept"});
    let step: Step = serde_json::from_value(v).unwrap();
    assert_eq!(step.extra.get("x-note"), Some(&json!("kept")));
    let out = serde_json::to_value(&step).unwrap();
    assert_eq!(out["dependsOn"], json!([]));
    assert_eq!(out["continueOnFailure"], json!(false));
    assert_eq!(out["x-note"], json!("kept"));
}

#[test]
fn a_failed_result_carries_only_its_error_and_instants() {
    let started = crate::time::Timestamp::from_millis(1_000).unwrap();
    let finished = crate::time::Timestamp::from_millis(1_250).unwrap();
    let r = ExecutorResult::failed("no account", started, finished);
    assert_eq!(r.status, crate::status::ExecutorStatus::Failed);
    assert_eq!(r.error.as_deref(), Some("no account"));
    assert_eq!((r.exit_code, r.pid), (None, None));
    assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("", ""));
    assert_eq!(
        (r.started_at, r.finished_at, r.duration_ms),
        (started, finished, 250)
    );
    // A clock that stepped back never makes a negative duration.
    assert_eq!(
        ExecutorResult::failed("x", finished, started).duration_ms,
        0
    );
}
