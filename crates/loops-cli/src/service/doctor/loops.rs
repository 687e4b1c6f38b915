//! Doctor's checks of the stored loops: a preflight of each active loop's
//! target, the warning about loops that keep failing (`failing`), and the
//! zone that cron loops without one run on.

use loops_core::{Loop, LoopStatus, RunStatus, Schedule, Target};
use loops_exec::{ExecOptions, RunMetadata, preflight_target};
use loops_store::{LoopFilter, Store};
use loops_workflow::preflight_workflow;

use super::*;

/// `tz` is the `TZ` the daemon would start with.
pub(super) fn check_loops(store: &Store, exec: &ExecOptions, tz: Option<&str>) -> Vec<Check> {
    let mut checks = Vec::new();
    // The counts below (and `daemon status`'s) are kept by triggers; one
    // that drifted, which only a write bypassing them can cause, is
    // rewritten here and said. In order, nothing is added to the report.
    match store.recount_statuses() {
        Ok(false) => {}
        Ok(true) => checks.push(Check::new(
            "status-counts",
            CheckStatus::Warn,
            "the kept counts of loops and runs had drifted from the rows; recounted",
        )),
        Err(e) => checks.push(
            Check::new(
                "status-counts",
                CheckStatus::Warn,
                "the kept counts of loops and runs cannot be checked",
            )
            .detail(e.to_string()),
        ),
    }
    checks.push(match store.count_runs(Some(RunStatus::Failed)) {
        Ok(0) => Check::new("loop-runs", CheckStatus::Ok, "no failed loop runs recorded"),
        Ok(n) => Check::new(
            "loop-runs",
            CheckStatus::Warn,
            format!("{n} failed loop run(s) recorded"),
        ),
        Err(e) => Check::new(
            "loop-runs",
            CheckStatus::Warn,
            "loop runs cannot be counted",
        )
        .detail(e.to_string()),
    });
    let active = store.list_loops(&LoopFilter {
        status: Some(LoopStatus::Active),
        limit: Some(200),
        offset: None,
    });
    match active {
        Ok(loops) => {
            checks.extend(loops.iter().map(|lp| preflight_loop(store, lp, exec)));
            checks.extend(
                loops
                    .iter()
                    .filter_map(|lp| failing::failing_loop(store, lp)),
            );
            checks.extend(zoneless_cron(&loops, tz));
        }
        Err(e) => checks.push(
            Check::new("loops", CheckStatus::Warn, "active loops cannot be listed")
                .detail(e.to_string()),
        ),
    }
    checks
}

pub(super) fn preflight_loop(store: &Store, lp: &Loop, exec: &ExecOptions) -> Check {
    let id = format!("loop:{}:preflight", lp.id);
    let ready = || {
        Check::new(
            id.clone(),
            CheckStatus::Ok,
            format!("active loop target is ready: {}", lp.name),
        )
    };
    let failed = |detail: String| {
        Check::new(
            id.clone(),
            CheckStatus::Warn,
            format!("active loop target preflight failed: {}", lp.name),
        )
        .detail(detail)
    };
    let Some(target) = lp.target.to_process() else {
        let Target::Workflow(w) = &lp.target else {
            return ready();
        };
        // SPEC §7.5: a workflow loop is checked step by step.
        return match store.get_workflow(&w.workflow_id) {
            Ok(Some(spec)) => match preflight_workflow(&spec, exec) {
                Ok(_) => ready(),
                Err(e) => failed(e.to_string()),
            },
            Ok(None) => failed(format!("workflow not found: {}", w.workflow_id)),
            Err(e) => failed(e.to_string()),
        };
    };
    let meta = RunMetadata {
        loop_id: Some(lp.id.to_string()),
        loop_name: Some(lp.name.clone()),
        ..RunMetadata::default()
    };
    match preflight_target(&target, &meta, exec) {
        Ok(_) => ready(),
        Err(e) => failed(e.to_string()),
    }
}

/// Issue 28: the original's cron rows have no zone and run on the daemon's
/// local time; say which zone that is. Loops made here record one.
fn zoneless_cron(loops: &[Loop], tz: Option<&str>) -> Option<Check> {
    let names: Vec<&str> = loops
        .iter()
        .filter(|lp| matches!(&lp.schedule, Schedule::Cron { timezone: None, .. }))
        .map(|lp| lp.name.as_str())
        .collect();
    let first = names.first()?;
    let more = match names.len() {
        1 => String::new(),
        n => format!(" and {} more", n - 1),
    };
    Some(Check::new(
        "cron-zone",
        CheckStatus::Ok,
        format!(
            "cron loop {first}{more} has no zone: it runs on the daemon's local time, {}; `loops edit <loop> --tz <zone>` fixes one",
            crate::zone::local_time_in_words(tz)
        ),
    ))
}
