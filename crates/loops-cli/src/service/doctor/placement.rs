//! Doctor's placement checks (issue 30, P2, P7): the labels each live
//! daemon carries, and a warning for each placed active loop that no live
//! daemon can run. With no daemon live nothing is warned: the `daemon`
//! check says that already.

use loops_core::{LoopStatus, Timestamp};
use loops_store::{LoopFilter, Store};

use super::{Check, CheckStatus};
use crate::placement::LiveDaemons;

/// The `daemon-labels` check and the `loop:<id>:placement` warnings.
pub(super) fn check_placement(store: &Store, now: Timestamp) -> Vec<Check> {
    let Ok(daemons) = store.list_daemons(now) else {
        return Vec::new();
    };
    let live: Vec<String> = daemons
        .iter()
        .filter(|d| d.live)
        .map(|d| format!("{} pid={}: {}", d.hostname, d.pid, d.labels.join(", ")))
        .collect();
    if live.is_empty() {
        return Vec::new();
    }
    let mut checks = vec![Check::new(
        "daemon-labels",
        CheckStatus::Ok,
        format!("live daemon labels: {}", live.join("; ")),
    )];
    let Ok(loops) = store.list_loops(&LoopFilter {
        status: Some(LoopStatus::Active),
        limit: None,
        offset: None,
    }) else {
        return checks;
    };
    let daemons = LiveDaemons::read(store, now);
    for lp in loops.iter().filter(|lp| daemons.flags(lp)) {
        let runs_on = lp.policy.runs_on.join(", ");
        checks.push(
            Check::new(
                format!("loop:{}:placement", lp.id),
                CheckStatus::Warn,
                format!(
                    "active loop runs on {runs_on}, which no live daemon carries: {}",
                    lp.name
                ),
            )
            .detail(format!(
                "start a daemon with those labels (`loops daemon start --label …` on the \
                 host), or change its placement with `loops edit {} --runs-on …`",
                lp.id
            )),
        );
    }
    checks
}
