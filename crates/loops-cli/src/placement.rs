//! Placement on the command line (issue 30, `docs/triggers.md` P6, P7):
//! the labels `tick` and `run-now` claim with, their refusal, and the flag
//! on loops no live daemon can run. It reads the store only, so `service`
//! (doctor) and `commands` both use it.
//!
//! A manual runner carries `host:<host>` plus the labels of the live
//! daemons registered from this host (a loop placed on `gpu` runs here
//! with `run-now` when this host's daemon carries `gpu`), or every label
//! with `--anywhere`. A placed loop is flagged when daemons are live and
//! none carries all its labels; with no daemon live nothing is flagged,
//! the "no daemon is running" hint says what there is to say.

use loops_core::{Loop, LoopStatus, Timestamp, placement_matches};
use loops_store::{DaemonMember, Store};

/// The marker `list` and `status` put after a flagged loop's status.
pub(crate) const UNPLACEABLE: &str = "no daemon can run it";

/// The labels of the live daemons registered from `host`, in order
/// (their `host:<host>` included).
pub(crate) fn local_daemon_labels(daemons: &[DaemonMember], host: &str) -> Vec<String> {
    let mut labels = Vec::new();
    for d in daemons.iter().filter(|d| d.live && d.hostname == host) {
        for label in &d.labels {
            if !labels.contains(label) {
                labels.push(label.clone());
            }
        }
    }
    labels
}

/// `run-now`'s refusal of a loop placed elsewhere (P6), in one line.
pub(crate) fn refusal(lp: &Loop, store: &Store) -> String {
    format!(
        "loop {} runs on {}; this host has {}; run it there, or pass --anywhere",
        lp.name,
        lp.policy.runs_on.join(", "),
        store.labels().join(", ")
    )
}

/// The labels of each live daemon, read once for a listing (P7).
pub(crate) struct LiveDaemons(Vec<Vec<String>>);

impl LiveDaemons {
    /// Reads the live daemons; none when they cannot be read, so nothing
    /// is flagged on a failure to look.
    pub(crate) fn read(store: &Store, now: Timestamp) -> LiveDaemons {
        let daemons = store.list_daemons(now).unwrap_or_default();
        LiveDaemons(
            daemons
                .into_iter()
                .filter(|d| d.live)
                .map(|d| d.labels)
                .collect(),
        )
    }

    /// Whether `lp` is placed, may still run (active or paused), and no
    /// live daemon matches it, while some daemon is live.
    pub(crate) fn flags(&self, lp: &Loop) -> bool {
        !lp.policy.runs_on.is_empty()
            && matches!(lp.status, LoopStatus::Active | LoopStatus::Paused)
            && !self.0.is_empty()
            && !self
                .0
                .iter()
                .any(|labels| placement_matches(&lp.policy.runs_on, labels))
    }
}

/// `status`'s `Runs on` value (P7): the labels, and the marker when no
/// live daemon can run the loop.
pub(crate) fn runs_on_line(store: &Store, lp: &Loop) -> String {
    let labels = lp.policy.runs_on.join(", ");
    if LiveDaemons::read(store, loops_core::Clock::now(&loops_exec::SystemClock)).flags(lp) {
        format!("{labels} ({UNPLACEABLE})")
    } else {
        labels
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(host: &str, live: bool, labels: &[&str]) -> DaemonMember {
        DaemonMember {
            id: loops_core::LeaseId::parse("aaaaaaaaaaaa").unwrap(),
            hostname: host.to_owned(),
            pid: 1,
            version: None,
            started_at: Timestamp::from_millis(0).unwrap(),
            heartbeat_at: Timestamp::from_millis(0).unwrap(),
            expires_at: Timestamp::from_millis(0).unwrap(),
            live,
            running_runs: 0,
            clock_skew_ms: None,
            labels: labels.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn a_manual_runner_takes_the_labels_of_this_hosts_live_daemons() {
        let daemons = [
            member("a", true, &["host:a", "gpu"]),
            member("a", false, &["host:a", "old"]),
            member("b", true, &["host:b", "arm"]),
        ];
        assert_eq!(local_daemon_labels(&daemons, "a"), ["host:a", "gpu"]);
        assert!(local_daemon_labels(&daemons, "c").is_empty());
    }
}
