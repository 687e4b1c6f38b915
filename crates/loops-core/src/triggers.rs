//! Triggers other than the clock (issue 30, `docs/triggers.md` T1–T7): a
//! loop that runs after another loop's runs, by hand or by webhook.
//!
//! Pure rules only; the store keeps the trigger rows and the dispatcher
//! claims them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::status::RunStatus;

/// The most bytes a trigger's payload holds (T6).
pub const MAX_TRIGGER_PAYLOAD: usize = 64 * 1024;

/// The most bytes of a payload also given as `LOOPS_TRIGGER_PAYLOAD` (T6).
pub const MAX_TRIGGER_PAYLOAD_ENV: usize = 4 * 1024;

/// Which finished runs of the upstream loop an `--after` edge fires on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AfterOn {
    /// A run that succeeded (the default).
    #[default]
    Succeeded,
    /// A run that finally failed: failed, timed out or abandoned with no
    /// attempt left.
    Failed,
    /// Any run that finally ended, skipped included.
    Finished,
}

impl AfterOn {
    /// Every value, for help and completion.
    pub const ALL: &'static [&'static str] = &["succeeded", "failed", "finished"];

    /// The value as written.
    pub fn as_str(self) -> &'static str {
        match self {
            AfterOn::Succeeded => "succeeded",
            AfterOn::Failed => "failed",
            AfterOn::Finished => "finished",
        }
    }

    /// Whether a run that ended with `status`, with no retry to come
    /// (`last`), fires this edge (T3). A run whose retry is pending fires
    /// nothing yet: its final outcome decides.
    pub fn fires(self, status: RunStatus, last: bool) -> bool {
        match status {
            RunStatus::Running => false,
            RunStatus::Succeeded => self != AfterOn::Failed,
            RunStatus::Skipped => self == AfterOn::Finished,
            // Cancelled by a person: nothing follows but `finished`.
            RunStatus::Cancelled => self == AfterOn::Finished,
            _ if !last => false,
            _ => self != AfterOn::Succeeded,
        }
    }
}

impl fmt::Display for AfterOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AfterOn {
    type Err = String;

    fn from_str(s: &str) -> Result<AfterOn, String> {
        match s {
            "succeeded" => Ok(AfterOn::Succeeded),
            "failed" => Ok(AfterOn::Failed),
            "finished" => Ok(AfterOn::Finished),
            other => Err(format!(
                "{other:?} is not an outcome; use succeeded, failed or finished"
            )),
        }
    }
}

/// One upstream edge of a loop (T1): it runs once for each run of loop
/// `loop_id` that ended as `on` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AfterEdge {
    /// The upstream loop's id.
    #[serde(rename = "loop")]
    pub loop_id: String,
    /// Which of its runs fire the edge.
    #[serde(default)]
    pub on: AfterOn,
}

/// What started a triggered run (T6, T10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TriggerKind {
    /// A run of an upstream loop ended (`--after`).
    After,
    /// `loops trigger` or the dashboard's webhook.
    Manual,
    /// Files under a watched path changed (`--watch`).
    Watch,
}

impl TriggerKind {
    /// The kind as stored and as `LOOPS_TRIGGER_KIND` carries it.
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerKind::After => "after",
            TriggerKind::Manual => "manual",
            TriggerKind::Watch => "watch",
        }
    }
}

impl FromStr for TriggerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<TriggerKind, String> {
        match s {
            "after" => Ok(TriggerKind::After),
            "manual" => Ok(TriggerKind::Manual),
            "watch" => Ok(TriggerKind::Watch),
            other => Err(format!("unknown trigger kind {other:?}")),
        }
    }
}

impl fmt::Display for TriggerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_edge_fires_on_its_final_outcomes_only() {
        use RunStatus::*;
        let s = AfterOn::Succeeded;
        let f = AfterOn::Failed;
        let any = AfterOn::Finished;
        assert!(s.fires(Succeeded, true) && s.fires(Succeeded, false));
        assert!(!s.fires(Failed, true) && !s.fires(Skipped, true) && !s.fires(Cancelled, true));
        assert!(f.fires(Failed, true) && f.fires(TimedOut, true) && f.fires(Abandoned, true));
        assert!(!f.fires(Failed, false), "a retry is still to come");
        assert!(!f.fires(Succeeded, true) && !f.fires(Skipped, true));
        // A run a person cancelled did not fail.
        assert!(!f.fires(Cancelled, true));
        assert!(any.fires(Skipped, true) && any.fires(Cancelled, true) && any.fires(Failed, true));
        assert!(any.fires(Succeeded, false) && !any.fires(Failed, false));
        for on in [s, f, any] {
            assert!(!on.fires(Running, true));
        }
    }

    #[test]
    fn a_payload_is_at_most_64_kib_and_4_kib_of_it_in_the_environment() {
        assert_eq!(MAX_TRIGGER_PAYLOAD, 65_536);
        assert_eq!(MAX_TRIGGER_PAYLOAD_ENV, 4_096);
    }

    #[test]
    fn outcomes_and_kinds_display_as_written() {
        assert_eq!(AfterOn::Failed.to_string(), "failed");
        assert_eq!(TriggerKind::Watch.to_string(), "watch");
    }

    #[test]
    fn outcomes_and_kinds_read_back_what_they_write() {
        for on in AfterOn::ALL {
            assert_eq!(on.parse::<AfterOn>().unwrap().as_str(), *on);
        }
        assert!("done".parse::<AfterOn>().is_err());
        for kind in [TriggerKind::After, TriggerKind::Manual, TriggerKind::Watch] {
            assert_eq!(kind.as_str().parse::<TriggerKind>(), Ok(kind));
        }
        assert!("cron".parse::<TriggerKind>().is_err());
        let edge: AfterEdge = serde_json::from_str(r#"{"loop":"abc"}"#).unwrap();
        assert_eq!(edge.on, AfterOn::Succeeded);
        assert_eq!(
            serde_json::to_string(&edge).unwrap(),
            r#"{"loop":"abc","on":"succeeded"}"#
        );
    }
}
