//! Which step comes next (SPEC §6.2, §6.3 steps 2.3 and 2.4): the pure part
//! of the workflow runner, with no store and no processes.
//!
//! The plan holds the steps in execution order (SPEC §6.2) and what is
//! known about each. [`Plan::next`] scans them in that order and returns
//! the first step it can decide about: a step whose dependencies are all
//! finished is either blocked (some dependency did not succeed and lacks
//! `continueOnFailure`) or ready to start. A step whose dependencies are
//! still running is passed over, so with room for several steps the scan
//! finds independent ready steps further down. The runner calls `next`
//! only while it has room to start a step, so with room for one (serial
//! mode) nothing is decided while a step runs, and the decisions come in
//! exactly the SPEC's serial order.
//!
//! A dependency that names no step of the workflow (impossible for a
//! validated workflow) counts as finished without success, so it blocks:
//! as in the original, whose lookup of it finds nothing. A dependency
//! cycle (equally impossible) leaves its steps undecided forever; the
//! runner then fails the run rather than wait.

use std::collections::HashMap;

use loops_core::{Step, StepRun, StepRunStatus, workflow_execution_order};

/// What is known about one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not decided yet: pending, or failed or timed out in an earlier
    /// session of a resumed run.
    Waiting,
    /// Ready, but its pool was full when the runner tried to start it
    /// (issue 30, Q2): passed over until [`Plan::unpark`] makes it waiting
    /// again, so the steps behind it are decided meanwhile.
    Parked,
    /// Started by this runner.
    Running,
    /// Finished with this stored status.
    Done(StepRunStatus),
}

/// A decision [`Plan::next`] made, by position in execution order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Next {
    /// Skip the step: `dep` did not succeed and lacks `continueOnFailure`.
    Blocked {
        /// The step's position.
        pos: usize,
        /// The first such dependency, in `dependsOn` order.
        dep: String,
    },
    /// Start the step.
    Ready(usize),
    /// Nothing can be decided until a running step finishes.
    Wait,
    /// Every step is decided.
    Finished,
}

/// The steps of one run, in execution order, and their states.
pub(crate) struct Plan<'w> {
    order: Vec<&'w Step>,
    index: HashMap<&'w str, usize>,
    states: Vec<State>,
}

/// The states of a [`Plan`]'s steps at one moment ([`Plan::snapshot`]).
#[derive(Debug, Clone)]
pub(crate) struct PlanSnapshot(Vec<State>);

impl<'w> Plan<'w> {
    /// The steps' states now, to go back to with [`Plan::restore`] when a
    /// turn's transaction did not commit.
    pub(crate) fn snapshot(&self) -> PlanSnapshot {
        PlanSnapshot(self.states.clone())
    }

    /// Goes back to `snapshot`.
    pub(crate) fn restore(&mut self, snapshot: PlanSnapshot) {
        self.states = snapshot.0;
    }

    /// The plan of `steps` given their stored rows. Succeeded, skipped and
    /// cancelled steps are done already (SPEC §6.3 step 2.3: what makes
    /// resumes work); every other step, including one stored as running,
    /// waits to be started.
    pub(crate) fn new(steps: &'w [Step], rows: &[StepRun]) -> Plan<'w> {
        let order = workflow_execution_order(steps);
        let stored: HashMap<&str, StepRunStatus> = rows
            .iter()
            .map(|r| (r.step_id.as_str(), r.status))
            .collect();
        let states = order
            .iter()
            .map(|step| match stored.get(step.id.as_str()) {
                Some(&status) if status.is_settled() => State::Done(status),
                _ => State::Waiting,
            })
            .collect();
        let mut index = HashMap::with_capacity(order.len());
        for (pos, step) in order.iter().enumerate() {
            index.entry(step.id.as_str()).or_insert(pos);
        }
        Plan {
            order,
            index,
            states,
        }
    }

    /// The step at `pos`.
    pub(crate) fn step(&self, pos: usize) -> &'w Step {
        self.order[pos]
    }

    /// Records that the step at `pos` was started.
    pub(crate) fn start(&mut self, pos: usize) {
        self.states[pos] = State::Running;
    }

    /// Records that the step at `pos` finished, was skipped or was
    /// cancelled, with its stored status.
    pub(crate) fn finish(&mut self, pos: usize, status: StepRunStatus) {
        self.states[pos] = State::Done(status);
    }

    /// Records that the step at `pos` waits for room in its pool.
    pub(crate) fn park(&mut self, pos: usize) {
        self.states[pos] = State::Parked;
    }

    /// Whether some step waits for room in its pool.
    pub(crate) fn has_parked(&self) -> bool {
        self.states.contains(&State::Parked)
    }

    /// Makes every step that waits for its pool waiting again, to be tried
    /// by the next [`Plan::next`] scans.
    pub(crate) fn unpark(&mut self) {
        for state in &mut self.states {
            if *state == State::Parked {
                *state = State::Waiting;
            }
        }
    }

    /// Whether some step was never decided.
    pub(crate) fn has_undecided(&self) -> bool {
        self.states
            .iter()
            .any(|s| matches!(s, State::Waiting | State::Parked))
    }

    /// The first decidable waiting step in execution order (see the module
    /// docs).
    pub(crate) fn next(&self) -> Next {
        let mut waiting = false;
        for (pos, step) in self.order.iter().enumerate() {
            match self.states[pos] {
                State::Waiting => {}
                State::Parked => {
                    waiting = true;
                    continue;
                }
                State::Running | State::Done(_) => continue,
            }
            waiting = true;
            match self.blocker(step) {
                Some(Blocker::Unfinished) => continue,
                Some(Blocker::Failed(dep)) => return Next::Blocked { pos, dep },
                None => return Next::Ready(pos),
            }
        }
        if waiting { Next::Wait } else { Next::Finished }
    }

    /// Why `step` cannot start yet, or `None` when it can.
    fn blocker(&self, step: &Step) -> Option<Blocker> {
        let mut first_failed = None;
        for dep in &step.depends_on {
            match self.index.get(dep.as_str()) {
                Some(&d) => match self.states[d] {
                    State::Waiting | State::Parked | State::Running => {
                        return Some(Blocker::Unfinished);
                    }
                    State::Done(StepRunStatus::Succeeded) => {}
                    State::Done(_) if self.order[d].continue_on_failure => {}
                    State::Done(_) => {
                        first_failed.get_or_insert_with(|| dep.clone());
                    }
                },
                None => {
                    first_failed.get_or_insert_with(|| dep.clone());
                }
            }
        }
        first_failed.map(Blocker::Failed)
    }
}

enum Blocker {
    /// A dependency has not finished.
    Unfinished,
    /// This dependency did not succeed and lacks `continueOnFailure`.
    Failed(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use loops_core::workflow_from_json;
    use serde_json::json;

    fn steps(spec: serde_json::Value) -> Vec<Step> {
        workflow_from_json(&json!({"name": "w", "steps": spec}), None)
            .unwrap()
            .steps
    }

    fn step(id: &str, deps: &[&str], cof: bool) -> serde_json::Value {
        json!({"id": id, "dependsOn": deps, "continueOnFailure": cof,
               "target": {"type": "command", "command": "true"}})
    }

    #[test]
    fn a_diamond_is_decided_in_dependency_order() {
        let s = steps(json!([
            step("d", &["b", "c"], false),
            step("b", &["a"], false),
            step("c", &["a"], false),
            step("a", &[], false),
        ]));
        let mut plan = Plan::new(&s, &[]);
        let id = |plan: &Plan<'_>, n: Next| match n {
            Next::Ready(p) => plan.step(p).id.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(id(&plan, plan.next()), "a");
        plan.start(0);
        assert_eq!(plan.next(), Next::Wait);
        plan.finish(0, StepRunStatus::Succeeded);
        assert_eq!(id(&plan, plan.next()), "b");
        plan.start(1);
        // With room for more, the independent sibling is ready too.
        assert_eq!(id(&plan, plan.next()), "c");
        plan.start(2);
        plan.finish(2, StepRunStatus::Failed);
        assert_eq!(plan.next(), Next::Wait);
        plan.finish(1, StepRunStatus::Succeeded);
        assert_eq!(
            plan.next(),
            Next::Blocked {
                pos: 3,
                dep: "c".into()
            }
        );
        plan.finish(3, StepRunStatus::Skipped);
        assert_eq!(plan.next(), Next::Finished);
        assert!(!plan.has_undecided());
    }

    #[test]
    fn continue_on_failure_unblocks_and_settled_rows_are_kept() {
        let s = steps(json!([step("a", &[], true), step("b", &["a"], false)]));
        let mut plan = Plan::new(&s, &[]);
        plan.start(0);
        plan.finish(0, StepRunStatus::TimedOut);
        assert_eq!(plan.next(), Next::Ready(1));

        // A resumed run keeps a skipped step, whose dependents are blocked.
        let s = steps(json!([step("a", &[], false), step("b", &["a"], false)]));
        let row = |id: &str, status| StepRun {
            id: "0123456789ab".parse().unwrap(),
            workflow_run_id: "0123456789ab".parse().unwrap(),
            step_id: id.into(),
            sequence: 0,
            status,
            started_at: None,
            finished_at: None,
            exit_code: None,
            pid: None,
            duration_ms: None,
            stdout: None,
            stderr: None,
            error: None,
            account_profile: None,
            account_tool: None,
            created_at: loops_core::Timestamp::EPOCH,
            updated_at: loops_core::Timestamp::EPOCH,
        };
        let plan = Plan::new(&s, &[row("a", StepRunStatus::Skipped)]);
        assert_eq!(
            plan.next(),
            Next::Blocked {
                pos: 1,
                dep: "a".into()
            }
        );
        // A failed step of an earlier session runs again.
        let plan = Plan::new(&s, &[row("a", StepRunStatus::Failed)]);
        assert_eq!(plan.next(), Next::Ready(0));
    }

    #[test]
    fn a_parked_step_is_passed_over_until_unparked() {
        let s = steps(json!([
            step("a", &[], false),
            step("b", &[], false),
            step("c", &["a"], false),
        ]));
        let mut plan = Plan::new(&s, &[]);
        assert_eq!(plan.next(), Next::Ready(0));
        plan.park(0);
        // The step behind it is decided; its dependent waits.
        assert_eq!(plan.next(), Next::Ready(1));
        plan.start(1);
        assert_eq!(plan.next(), Next::Wait);
        assert!(plan.has_parked() && plan.has_undecided());
        plan.finish(1, StepRunStatus::Succeeded);
        assert_eq!(plan.next(), Next::Wait);
        plan.unpark();
        assert!(!plan.has_parked());
        assert_eq!(plan.next(), Next::Ready(0));
    }

    #[test]
    fn unknown_dependencies_block_and_cycles_stay_undecided() {
        let mut s = steps(json!([step("a", &[], false), step("b", &[], false)]));
        s[1].depends_on = vec!["ghost".into()];
        let plan = Plan::new(&s, &[]);
        assert_eq!(plan.next(), Next::Ready(0));
        let mut plan = plan;
        plan.start(0);
        assert_eq!(
            plan.next(),
            Next::Blocked {
                pos: 1,
                dep: "ghost".into()
            }
        );

        let mut s = steps(json!([step("a", &[], false), step("b", &["a"], false)]));
        s[0].depends_on = vec!["b".into()];
        let plan = Plan::new(&s, &[]);
        assert_eq!(plan.next(), Next::Wait);
        assert!(plan.has_undecided());
    }
}
