//! A workflow loop run whose lease is lost mid-step (SPEC §10 item 98).

use std::sync::Arc;

use loops_core::{
    Anchor, ManualClock, NewLoop, ProcessRef, Schedule, StepRunStatus, Target, WorkflowRunStatus,
    WorkflowTarget,
};
use loops_store::{Store, WorkflowRunFilter};

use crate::common::*;
use crate::{create_slow, process_tick};

#[test]
fn a_lost_lease_fails_the_workflow_run_and_kills_its_step() {
    // SPEC §10 item 98: the run is stopped mid-step, before the step's side
    // effect, and the workflow run ends failed (not cancelled: nobody asked
    // for it). Runner B reads a clock 61 ms ahead of A's, so A's 60 ms lease
    // has expired for B, and B takes the run over.
    let fx = Fixture::new();
    let store = fx.store();
    let wf = create_slow(&store, "leased");
    let target = Target::Workflow(WorkflowTarget {
        workflow_id: wf.id,
        input: None,
        timeout_ms: None,
    });
    let schedule = Schedule::Interval {
        every_ms: 60_000,
        anchor: Some(Anchor::FixedRate),
    };
    let mut new = NewLoop::new("leased-loop", schedule, target);
    new.lease_ms = 60;
    let lp = store.create_loop(&new, t0()).unwrap();
    let slot = t0().add_ms(60_000);
    let clock = ManualClock::new(slot);

    let result = std::thread::scope(|s| {
        let ticker = s.spawn(|| process_tick(&fx, &fx.store(), &clock, "runner-a", 1, None));
        wait_for("the step to start", || {
            fx.marker("started").exists().then_some(())
        });
        // B believes A's processes dead, as after a crash of A's host.
        let b = Store::open(&fx.db(), Arc::new(|_: ProcessRef| false)).unwrap();
        let taken = b.claim_run(&lp, slot, "runner-b", slot.add_ms(61)).unwrap();
        assert!(taken.run().is_some(), "{taken:?}");
        ticker.join().unwrap()
    });
    assert!(result.completed.is_empty(), "{result:#?}");

    let runs = store
        .list_workflow_runs(&WorkflowRunFilter::default())
        .unwrap();
    assert_eq!(runs.len(), 1);
    let wr = &runs[0];
    assert_eq!(wr.status, WorkflowRunStatus::Failed);
    assert_eq!(wr.error.as_deref(), Some("run lease lost"));
    let steps = store.list_step_runs(&wr.id).unwrap();
    assert_eq!(steps[0].status, StepRunStatus::Cancelled);
    let kinds: Vec<String> = events(&store, &wr.id)
        .into_iter()
        .map(|(kind, _)| kind)
        .collect();
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("failed"),
        "{kinds:?}"
    );
    assert!(!kinds.iter().any(|k| k == "cancelled"), "{kinds:?}");
    assert!(!fx.marker("late").exists(), "the step was killed");
}
