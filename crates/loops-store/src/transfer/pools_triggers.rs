//! The rows issue 30 added to a store, as an export document carries them
//! and an import checks them: a pool ([`ExportedPool`], a definition, so
//! `--no-runs` keeps it) and a trigger ([`ExportedTrigger`], history, like
//! the runs it starts).
//!
//! A pool's key is its name. A trigger's are its id, its loop with the
//! upstream run that fired it, and its loop with its idempotency key. A
//! trigger moves one way only: pending, then started (its `runId`) or
//! folded into a newer one (its `coalescedAt`); an import never puts a
//! stored trigger back to pending ([`settled_over_pending`]), so a trigger
//! a runner here has claimed does not start a second run. Its payload is
//! in the document as stored, as a run's output is.

use loops_core::{LoopId, MAX_TRIGGER_PAYLOAD, RunId, Timestamp, TriggerKind, validate_pool_name};
use serde::{Deserialize, Serialize};

use super::import::refused_as;
use crate::triggers::LoopTrigger;

/// The longest idempotency key `loops trigger` takes, in bytes.
const MAX_KEY_BYTES: usize = 200;

/// A `pools` row as an export document holds it: the stored columns,
/// without the members and running runs [`crate::PoolInfo`] counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportedPool {
    /// Its name, the row's key.
    pub name: String,
    /// The most runs of its members running at once.
    pub max_running: u32,
    /// When it was created.
    pub created_at: Timestamp,
    /// When its limit last changed.
    pub updated_at: Timestamp,
}

/// A `loop_triggers` row as an export document holds it: every column,
/// the payload included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportedTrigger {
    /// Its id (12 hex characters).
    pub id: String,
    /// The loop it starts.
    pub loop_id: LoopId,
    /// What made it.
    pub kind: TriggerKind,
    /// The upstream run, for `after`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_run_id: Option<RunId>,
    /// The upstream loop, for `after`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_loop_id: Option<LoopId>,
    /// The key that makes a repeated delivery run once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The payload handed to the run, as stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// When it arrived.
    pub created_at: Timestamp,
    /// The run it started, once claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// When catch-up `latest` folded it into a newer trigger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coalesced_at: Option<Timestamp>,
}

impl From<LoopTrigger> for ExportedTrigger {
    fn from(t: LoopTrigger) -> ExportedTrigger {
        ExportedTrigger {
            id: t.id,
            loop_id: t.loop_id,
            kind: t.kind,
            source_run_id: t.source_run_id,
            source_loop_id: t.source_loop_id,
            idempotency_key: t.idempotency_key,
            payload: t.payload,
            created_at: t.created_at,
            run_id: t.run_id,
            coalesced_at: t.coalesced_at,
        }
    }
}

impl ExportedTrigger {
    /// Neither started nor folded into another: a runner may claim it.
    pub fn is_pending(&self) -> bool {
        self.run_id.is_none() && self.coalesced_at.is_none()
    }

    /// Where the trigger is, for a finding: `pending`, `started run …` or
    /// `coalesced`.
    pub(super) fn state(&self) -> String {
        match (&self.run_id, self.coalesced_at) {
            (Some(run), _) => format!("started run {run}"),
            (None, Some(_)) => "coalesced".to_owned(),
            (None, None) => "pending".to_owned(),
        }
    }
}

/// Why an import refuses `pool`: as `loops pools set` would refuse it.
pub(super) fn pool_refused(pool: &ExportedPool) -> Option<String> {
    let command = "loops pools set";
    if let Err(e) = validate_pool_name(&pool.name) {
        return Some(refused_as(command, e));
    }
    (pool.max_running == 0).then(|| refused_as(command, "--max must be at least 1"))
}

/// Why an import refuses `trigger`: its id is not one loops makes, or
/// `loops trigger` would refuse its payload or key.
pub(super) fn trigger_refused(trigger: &ExportedTrigger) -> Option<String> {
    let id_ok = trigger.id.len() == 12
        && trigger
            .id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !id_ok {
        return Some(format!(
            "refused: its id {:?} is not 12 lowercase hex characters, as loops makes them",
            trigger.id
        ));
    }
    let command = "loops trigger";
    if let Some(p) = &trigger.payload
        && p.len() > MAX_TRIGGER_PAYLOAD
    {
        return Some(refused_as(
            command,
            format_args!(
                "the payload is {} bytes; a payload is at most {MAX_TRIGGER_PAYLOAD} bytes",
                p.len()
            ),
        ));
    }
    if let Some(k) = &trigger.idempotency_key
        && (k.is_empty() || k.len() > MAX_KEY_BYTES || k.chars().any(char::is_control))
    {
        return Some(refused_as(
            command,
            format_args!("the idempotency key must be 1 to {MAX_KEY_BYTES} printable characters"),
        ));
    }
    None
}

/// Whether `stored` is further along than the document's `record`: it
/// started a run or was folded into another, and the record is pending.
/// Writing the record would make it pending again, and a runner would
/// start it a second time.
pub(super) fn settled_over_pending(stored: &ExportedTrigger, record: &ExportedTrigger) -> bool {
    !stored.is_pending() && record.is_pending()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger() -> ExportedTrigger {
        serde_json::from_value(serde_json::json!({
            "id": "0123456789ab", "loopId": "a00000000001", "kind": "manual",
            "payload": "{\"a\":1}",
            "createdAt": "2026-01-01T00:00:00Z"
        }))
        .unwrap()
    }

    #[test]
    fn a_trigger_is_refused_as_loops_trigger_refuses_it() {
        assert_eq!(trigger_refused(&trigger()), None);
        let mut t = trigger();
        t.id = "../x".into();
        assert!(trigger_refused(&t).unwrap().contains("12 lowercase hex"));
        let mut t = trigger();
        t.payload = Some("x".repeat(MAX_TRIGGER_PAYLOAD + 1));
        assert!(trigger_refused(&t).unwrap().contains("at most"));
        let mut t = trigger();
        t.idempotency_key = Some("a\nb".into());
        assert!(trigger_refused(&t).unwrap().contains("printable"));
    }

    #[test]
    fn a_pool_is_refused_as_pools_set_refuses_it() {
        let pool = |name: &str, max_running| ExportedPool {
            name: name.into(),
            max_running,
            created_at: "2026-01-01T00:00:00Z".parse().unwrap(),
            updated_at: "2026-01-01T00:00:00Z".parse().unwrap(),
        };
        assert_eq!(pool_refused(&pool("gpu", 2)), None);
        assert!(pool_refused(&pool("-x", 2)).is_some());
        let zero = pool_refused(&pool("gpu", 0)).unwrap();
        assert!(zero.starts_with("refused as `loops pools set`"), "{zero}");
    }

    #[test]
    fn a_started_or_folded_trigger_never_goes_back_to_pending() {
        let pending = trigger();
        let mut started = trigger();
        started.run_id = Some("b00000000001".parse().unwrap());
        let mut folded = trigger();
        folded.coalesced_at = Some("2026-01-01T00:01:00Z".parse().unwrap());
        assert!(settled_over_pending(&started, &pending));
        assert!(settled_over_pending(&folded, &pending));
        assert!(!settled_over_pending(&pending, &started));
        assert!(!settled_over_pending(&pending, &pending));
        assert_eq!(started.state(), "started run b00000000001");
        assert_eq!(folded.state(), "coalesced");
        assert_eq!(pending.state(), "pending");
    }
}
