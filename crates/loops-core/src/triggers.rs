//! Triggers other than the clock (issue 30, `docs/triggers.md` T1–T10): a
//! loop that runs after another loop's runs, by hand or by webhook, or
//! when files under a watched path change.
//!
//! Pure rules only; the store keeps the trigger rows and the dispatcher
//! claims them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::status::RunStatus;
use crate::time::Timestamp;

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

/// The quiet time a change waits for before it triggers a run, when
/// `--debounce` is not given (T8).
pub const DEFAULT_WATCH_DEBOUNCE_MS: u64 = 2_000;

/// The most paths one loop watches.
pub const MAX_WATCH_PATHS: usize = 32;

/// The longest watched path, in bytes (Linux's `PATH_MAX`).
pub const MAX_WATCH_PATH_LEN: usize = 4_096;

/// The longest debounce: an hour.
pub const MAX_WATCH_DEBOUNCE_MS: u64 = 60 * 60 * 1_000;

/// The paths a loop watches (T8): a change of a file under one of them,
/// followed by `debounce_ms` of quiet, triggers a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Watch {
    /// Absolute paths, in the order given, without duplicates.
    pub paths: Vec<String>,
    /// How long the files must stay unchanged before the run.
    pub debounce_ms: u64,
}

impl Watch {
    /// Checks the paths and the debounce: at most [`MAX_WATCH_PATHS`]
    /// absolute paths of at most [`MAX_WATCH_PATH_LEN`] bytes with no NUL
    /// or line break, and a debounce of 1 ms to [`MAX_WATCH_DEBOUNCE_MS`];
    /// and that the loop is `placed` (T8: only the daemon of the host with
    /// the files watches them). The message says what is wrong and what
    /// to do.
    pub fn check(&self, placed: bool) -> Result<(), String> {
        if self.paths.is_empty() {
            return Err("--watch needs a path".to_owned());
        }
        if !placed {
            return Err(
                "--watch needs placement: give --host or --runs-on, so one host's daemon watches"
                    .to_owned(),
            );
        }
        if self.paths.len() > MAX_WATCH_PATHS {
            return Err(format!(
                "--watch is given {} paths; a loop watches at most {MAX_WATCH_PATHS}: \
                 watch a directory above them instead",
                self.paths.len()
            ));
        }
        for path in &self.paths {
            if !path.starts_with('/') {
                return Err(format!(
                    "--watch path {path:?} is not absolute; give the full path"
                ));
            }
            if path.len() > MAX_WATCH_PATH_LEN || path.contains(['\0', '\n', '\r']) {
                return Err(format!(
                    "--watch path {:?} is too long or holds a NUL or line break",
                    path.chars().take(80).collect::<String>()
                ));
            }
        }
        if !(1..=MAX_WATCH_DEBOUNCE_MS).contains(&self.debounce_ms) {
            return Err(format!(
                "--debounce must be from 1ms to 1h, not {}ms",
                self.debounce_ms
            ));
        }
        Ok(())
    }

    /// Whether a change of `path` (absolute) is under one of the watched
    /// paths, compared by whole components.
    pub fn covers(&self, path: &std::path::Path) -> bool {
        self.paths.iter().any(|p| path.starts_with(p))
    }

    /// Whether the last change of a burst, at `changed_at`, is the loop's
    /// own (T9): one of its runs is `running`, or the last one ended at
    /// `last_end`, at most the debounce before the change. Such a change
    /// triggers nothing.
    pub fn is_own_change(
        &self,
        running: bool,
        last_end: Option<Timestamp>,
        changed_at: Timestamp,
    ) -> bool {
        let debounce = i64::try_from(self.debounce_ms).unwrap_or(i64::MAX);
        running || last_end.is_some_and(|end| changed_at.millis_since(end) <= debounce)
    }
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

    fn watch(paths: &[&str], debounce_ms: u64) -> Watch {
        Watch {
            paths: paths.iter().map(|p| (*p).to_owned()).collect(),
            debounce_ms,
        }
    }

    #[test]
    fn a_watch_takes_absolute_paths_and_a_bounded_debounce() {
        assert_eq!(watch(&["/srv/repo"], 2_000).check(true), Ok(()));
        assert_eq!(watch(&["/a"], 1).check(true), Ok(()));
        // An hour at most.
        assert_eq!(watch(&["/a"], 3_600_000).check(true), Ok(()));
        assert!(watch(&["/a"], 3_600_001).check(true).is_err());
        assert_eq!(watch(&["/a"], MAX_WATCH_DEBOUNCE_MS).check(true), Ok(()));
        assert!(
            watch(&[], 2_000)
                .check(true)
                .unwrap_err()
                .contains("needs a path")
        );
        let relative = watch(&["repo"], 2_000).check(true).unwrap_err();
        assert!(relative.contains("not absolute"), "{relative}");
        assert!(watch(&["/a\nb"], 2_000).check(true).is_err());
        assert!(watch(&["/a\0b"], 2_000).check(true).is_err());
        assert!(watch(&["/a\rb"], 2_000).check(true).is_err());
        let long = format!("/{}", "a".repeat(MAX_WATCH_PATH_LEN));
        assert!(watch(&[&long], 2_000).check(true).is_err());
        let longest = format!("/{}", "a".repeat(MAX_WATCH_PATH_LEN - 1));
        assert_eq!(watch(&[&longest], 2_000).check(true), Ok(()));
        assert!(
            watch(&["/a"], 0)
                .check(true)
                .unwrap_err()
                .contains("--debounce")
        );
        assert!(
            watch(&["/a"], MAX_WATCH_DEBOUNCE_MS + 1)
                .check(true)
                .is_err()
        );
        let many: Vec<String> = (0..=MAX_WATCH_PATHS).map(|i| format!("/p{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(
            watch(&many, 2_000)
                .check(true)
                .unwrap_err()
                .contains("at most")
        );
        assert_eq!(watch(&many[..MAX_WATCH_PATHS], 2_000).check(true), Ok(()));
        let unplaced = watch(&["/a"], 2_000).check(false).unwrap_err();
        assert!(unplaced.contains("--host or --runs-on"), "{unplaced}");
    }

    #[test]
    fn a_change_while_the_run_runs_or_just_after_it_is_the_loops_own() {
        let w = watch(&["/a"], 2_000);
        let at = |ms: i64| Timestamp::from_millis(1_000_000 + ms).unwrap();
        assert!(w.is_own_change(true, None, at(0)), "its run is running");
        assert!(w.is_own_change(true, Some(at(-60_000)), at(0)));
        assert!(!w.is_own_change(false, None, at(0)), "it never ran");
        assert!(w.is_own_change(false, Some(at(0)), at(0)));
        assert!(
            w.is_own_change(false, Some(at(0)), at(2_000)),
            "within the debounce"
        );
        assert!(
            !w.is_own_change(false, Some(at(0)), at(2_001)),
            "after the debounce"
        );
        // A change before the run ended was made while it ran.
        assert!(w.is_own_change(false, Some(at(5_000)), at(0)));
    }

    #[test]
    fn a_watch_covers_paths_under_its_own_by_whole_components() {
        let w = watch(&["/srv/repo", "/etc/app.conf"], 2_000);
        assert!(w.covers(std::path::Path::new("/srv/repo")));
        assert!(w.covers(std::path::Path::new("/srv/repo/src/main.rs")));
        assert!(w.covers(std::path::Path::new("/etc/app.conf")));
        assert!(!w.covers(std::path::Path::new("/srv/repository/x")));
        assert!(!w.covers(std::path::Path::new("/srv")));
        assert!(!w.covers(std::path::Path::new("/etc/app.conf.swp")));
    }

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
