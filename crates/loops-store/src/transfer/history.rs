//! The run history an import brings (issue 25 item 3): an import never
//! moves a run backwards, and never makes a run look held.
//!
//! **Nobody's runs.** A run, workflow run or step run that was running when
//! it was exported was held by a runner of the other database, which no
//! runner here knows of. Written as it is, it looked held: its lease ran
//! on, and once it expired this database's recovery abandoned it and ran
//! the slot again, though the other database may have finished it. So
//! [`Arrival::of`] records it as this store's own recovery records a run
//! whose runner is gone, with the error [`EXPORTED_WHILE_RUNNING`]: a run
//! `abandoned` (its lease cleared, its pid and claimant kept for the
//! record), a workflow run `failed`, and a running step, or a pending
//! step of a workflow run failed so, `skipped` (its pid cleared), each
//! finished at the document's `exportedAt`, the last instant it was known
//! to be running (or at its own `updatedAt`, when that is later or the
//! document has none). The instant comes from the document, not from the
//! clock, so importing the same document twice writes the same rows.
//! What the store's recovery also does and an import does not: it appends
//! no `failed` event (the document's own events of the run follow, and
//! their sequence numbers must stay free), and it does not advance the
//! loop. The loop needs no advance: a run's claim does not move its loop,
//! so the loop is still due on the run's slot, and its next claim there
//! retries the abandoned run (as after a recovery, while attempts remain)
//! or, with none left, settles the slot as a failure (counted toward
//! `pauseAfterFailures`, as recovery's advance counts it) and plans the
//! next one. What differs from a recovery is the retry delay alone: the
//! retry starts at once. Advancing here would buy little and cost much:
//! an import has no clock, so the delay would run from `exportedAt` and
//! mostly be over by the time the import is; the loop would no longer
//! match its document, so importing the same document again would report
//! it changed and `--replace` would undo the advance; and on PostgreSQL
//! the loop's row would be locked after the run's, against the order
//! every other writer takes them in. Either way the run may execute twice
//! (once there after the export, once here): an import cannot know how
//! it ended, and a delay would only put off the second run.
//!
//! **Never backwards.** A record whose stored row is further along is kept
//! as stored, also with `replace` ([`stored_is_newer`]): a loop run of a
//! later attempt; one of the same attempt when the record was running
//! (the stored row, whatever it is, is at least as far along); otherwise
//! a stored row changed later (`updatedAt`), except that a placeholder
//! (a row stored with [`EXPORTED_WHILE_RUNNING`]) is never further along
//! than a finished record of its attempt: its `updatedAt` is the other
//! database's `exportedAt`, and a source clock behind this one's would
//! otherwise keep the real result out for good. Without this, an export
//! taken while a run was in flight and imported with `--replace` after
//! the run succeeded put the run back to `running`, and recovery ran the
//! slot a second time.

use std::collections::HashSet;

use loops_core::{RunStatus, StepRunStatus, Timestamp, WorkflowRunId, WorkflowRunStatus};

use super::Record;

/// The error of a run, workflow run or step run that was running when it
/// was exported, as an import records it.
pub const EXPORTED_WHILE_RUNNING: &str =
    "running when exported from another database; no runner here holds it";

/// What an import writes for the records that were running (see the
/// module documentation).
#[derive(Debug, Default)]
pub(super) struct Arrival {
    /// The document's `exportedAt`.
    exported_at: Option<Timestamp>,
    /// The workflow runs of the document recorded failed, whose pending
    /// steps are skipped with them.
    failed: HashSet<WorkflowRunId>,
}

impl Arrival {
    /// An arrival for a document exported at `exported_at`, when it says.
    pub(super) fn new(exported_at: Option<Timestamp>) -> Arrival {
        Arrival {
            exported_at,
            failed: HashSet::new(),
        }
    }

    /// The record an import writes in place of `record`, or `None` when
    /// it writes `record` as it is. Records come in document order, so a
    /// workflow run is seen before its steps.
    pub(super) fn of(&mut self, record: &Record) -> Option<Record> {
        match record {
            Record::Run(r) if r.run.status == RunStatus::Running => {
                let mut r = r.clone();
                let at = self.at(r.run.updated_at);
                let run = &mut r.run;
                run.status = RunStatus::Abandoned;
                run.finished_at = Some(at);
                run.lease_expires_at = None;
                run.error = Some(EXPORTED_WHILE_RUNNING.to_owned());
                run.updated_at = at;
                Some(Record::Run(r))
            }
            Record::WorkflowRun(r) if r.status == WorkflowRunStatus::Running => {
                self.failed.insert(r.id);
                let mut r = r.clone();
                let at = self.at(r.updated_at);
                r.status = WorkflowRunStatus::Failed;
                r.finished_at = Some(at);
                r.error = Some(EXPORTED_WHILE_RUNNING.to_owned());
                r.updated_at = at;
                Some(Record::WorkflowRun(r))
            }
            Record::StepRun(s)
                if s.step.status == StepRunStatus::Running
                    || (s.step.status == StepRunStatus::Pending
                        && self.failed.contains(&s.step.workflow_run_id)) =>
            {
                let mut s = s.clone();
                let at = self.at(s.step.updated_at);
                s.pid_start_ms = None;
                let step = &mut s.step;
                step.status = StepRunStatus::Skipped;
                step.finished_at = Some(at);
                step.pid = None;
                step.error = Some(EXPORTED_WHILE_RUNNING.to_owned());
                step.updated_at = at;
                Some(Record::StepRun(s))
            }
            _ => None,
        }
    }

    /// When a record last changed at `updated_at` ended: the document's
    /// `exportedAt`, unless the record is later.
    fn at(&self, updated_at: Timestamp) -> Timestamp {
        self.exported_at.map_or(updated_at, |e| e.max(updated_at))
    }
}

/// Whether `stored` is further along than `record`, the document's row of
/// the same id as the document holds it (before [`Arrival::of`]): see the
/// module documentation. A trigger that started a run or was folded into
/// another is newer than the same trigger pending. Definitions and events
/// are never newer: they are replaced as `replace` says.
pub(super) fn stored_is_newer(stored: &Record, record: &Record) -> bool {
    let (stored_attempt, attempt, in_flight, unstarted, stored_at, at) = match (stored, record) {
        (Record::Trigger(s), Record::Trigger(d)) => {
            return super::pools_triggers::settled_over_pending(s, d);
        }
        (Record::Run(s), Record::Run(d)) => (
            s.run.attempt,
            d.run.attempt,
            d.run.status == RunStatus::Running,
            false,
            s.run.updated_at,
            d.run.updated_at,
        ),
        (Record::WorkflowRun(s), Record::WorkflowRun(d)) => (
            1,
            1,
            d.status == WorkflowRunStatus::Running,
            false,
            s.updated_at,
            d.updated_at,
        ),
        (Record::StepRun(s), Record::StepRun(d)) => (
            1,
            1,
            d.step.status == StepRunStatus::Running,
            s.step.status == StepRunStatus::Pending,
            s.step.updated_at,
            d.step.updated_at,
        ),
        _ => return false,
    };
    if stored_attempt != attempt {
        return stored_attempt > attempt;
    }
    if in_flight {
        return !unstarted;
    }
    if is_placeholder(stored) && is_finished(record) && !is_placeholder(record) {
        return false;
    }
    stored_at > at
}

/// Whether `record` is a placeholder an import wrote ([`Arrival::of`]):
/// it says only that the run was running at the export, so the finished
/// record of the same attempt is further along, whatever the two
/// databases' clocks made of their instants.
fn is_placeholder(record: &Record) -> bool {
    let (placeholder, error) = match record {
        Record::Run(r) => (r.run.status == RunStatus::Abandoned, &r.run.error),
        Record::WorkflowRun(r) => (r.status == WorkflowRunStatus::Failed, &r.error),
        Record::StepRun(s) => (s.step.status == StepRunStatus::Skipped, &s.step.error),
        _ => return false,
    };
    placeholder && error.as_deref() == Some(EXPORTED_WHILE_RUNNING)
}

/// Whether `record` is over: neither running nor, for a step, pending.
fn is_finished(record: &Record) -> bool {
    match record {
        Record::Run(r) => r.run.status != RunStatus::Running,
        Record::WorkflowRun(r) => r.status != WorkflowRunStatus::Running,
        Record::StepRun(s) => !matches!(
            s.step.status,
            StepRunStatus::Running | StepRunStatus::Pending
        ),
        _ => false,
    }
}

/// What a finding says of a record kept because `stored` is newer.
pub(super) fn kept_message(stored: &Record, record: &Record) -> String {
    format!(
        "newer in the store ({}) than in the file ({}); kept as stored",
        state(stored),
        state(record)
    )
}

/// What a finding says of a record kept because its stored row changed
/// between the import's read and its write, and is `now`.
pub(super) fn changed_message(now: &Record) -> String {
    format!(
        "changed in the store during the import (now {}); kept as stored",
        state(now)
    )
}

/// Where a run, workflow run or step run is, for a finding.
fn state(record: &Record) -> String {
    match record {
        Record::Run(r) => format!("{}, attempt {}", r.run.status, r.run.attempt),
        Record::WorkflowRun(r) => r.status.to_string(),
        Record::StepRun(s) => s.step.status.to_string(),
        Record::Trigger(t) => t.state(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use loops_core::{LoopRun, StepRun, WorkflowRun};

    use super::*;
    use crate::transfer::{ExportedRun, ExportedStepRun};

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const T0: &str = "2026-01-01T00:00:00Z";
    const EXPORTED: &str = "2026-01-01T00:05:00Z";

    fn run(status: RunStatus, attempt: u32, updated: &str) -> Record {
        let mut run: LoopRun = serde_json::from_value(serde_json::json!({
            "id": "b00000000001", "loopId": "a00000000001", "loopName": "n",
            "scheduledFor": T0, "attempt": attempt, "status": "running",
            "startedAt": T0, "claimedBy": "host:1:x", "leaseExpiresAt": "2026-01-01T00:30:00Z",
            "pid": 42, "createdAt": T0, "updatedAt": updated
        }))
        .unwrap();
        run.status = status;
        Record::Run(Box::new(ExportedRun {
            run,
            pid_start_ms: Some(1),
            spawn_id: Some("1-a-1".into()),
            pool: None,
            trigger_id: None,
        }))
    }

    fn workflow_run(status: WorkflowRunStatus, updated: &str) -> Record {
        let mut r: WorkflowRun = serde_json::from_value(serde_json::json!({
            "id": "c00000000001", "workflowId": "f00000000001", "workflowName": "w",
            "status": "running", "startedAt": T0, "createdAt": T0, "updatedAt": updated
        }))
        .unwrap();
        r.status = status;
        Record::WorkflowRun(Box::new(r))
    }

    fn step(run: &str, status: StepRunStatus, updated: &str) -> Record {
        let mut step: StepRun = serde_json::from_value(serde_json::json!({
            "id": "d00000000001", "workflowRunId": run, "stepId": "a", "sequence": 0,
            "status": "running", "pid": 7, "createdAt": T0, "updatedAt": updated
        }))
        .unwrap();
        step.status = status;
        Record::StepRun(Box::new(ExportedStepRun {
            step,
            pid_start_ms: Some(1),
        }))
    }

    #[test]
    fn a_running_run_arrives_abandoned_at_the_export() {
        let mut arrival = Arrival::new(Some(at(EXPORTED)));
        let Some(Record::Run(r)) = arrival.of(&run(RunStatus::Running, 2, T0)) else {
            panic!("a running run is rewritten");
        };
        assert_eq!(r.run.status, RunStatus::Abandoned);
        assert_eq!(r.run.attempt, 2);
        assert_eq!(r.run.finished_at, Some(at(EXPORTED)));
        assert_eq!(r.run.updated_at, at(EXPORTED));
        assert_eq!(r.run.lease_expires_at, None);
        assert_eq!(r.run.error.as_deref(), Some(EXPORTED_WHILE_RUNNING));
        // Kept for the record, as recovery keeps them.
        assert_eq!(
            (r.run.pid, r.run.claimed_by.as_deref()),
            (Some(42), Some("host:1:x"))
        );
        assert_eq!(arrival.of(&run(RunStatus::Succeeded, 1, T0)), None);
        // Without an `exportedAt`, or with an earlier one, its own change.
        let later = "2026-01-01T00:09:00Z";
        for exported in [None, Some(at(EXPORTED))] {
            let Some(Record::Run(r)) =
                Arrival::new(exported).of(&run(RunStatus::Running, 1, later))
            else {
                panic!("rewritten");
            };
            assert_eq!(r.run.finished_at, Some(at(later)));
        }
    }

    #[test]
    fn a_running_workflow_run_fails_and_its_open_steps_are_skipped() {
        let mut arrival = Arrival::new(Some(at(EXPORTED)));
        let Some(Record::WorkflowRun(r)) =
            arrival.of(&workflow_run(WorkflowRunStatus::Running, T0))
        else {
            panic!("rewritten");
        };
        assert_eq!(r.status, WorkflowRunStatus::Failed);
        assert_eq!(r.finished_at, Some(at(EXPORTED)));
        assert_eq!(r.error.as_deref(), Some(EXPORTED_WHILE_RUNNING));
        for status in [StepRunStatus::Running, StepRunStatus::Pending] {
            let Some(Record::StepRun(s)) = arrival.of(&step("c00000000001", status, T0)) else {
                panic!("{status} is rewritten");
            };
            assert_eq!(s.step.status, StepRunStatus::Skipped);
            assert_eq!((s.step.pid, s.pid_start_ms), (None, None));
            assert_eq!(s.step.finished_at, Some(at(EXPORTED)));
        }
        let done = step("c00000000001", StepRunStatus::Succeeded, T0);
        assert_eq!(arrival.of(&done), None);
        // A pending step of a run that was not running stays pending; a
        // running step is nobody's wherever it is.
        let other = "c00000000002";
        assert_eq!(arrival.of(&step(other, StepRunStatus::Pending, T0)), None);
        assert!(
            arrival
                .of(&step(other, StepRunStatus::Running, T0))
                .is_some()
        );
    }

    #[test]
    fn the_stored_row_is_newer_when_it_is_further_along() {
        use RunStatus::*;
        let (early, late) = (T0, "2026-01-01T00:10:00Z");
        let cases = [
            // The story of issue 25 item 3: exported running, succeeded since.
            (run(Succeeded, 1, late), run(Running, 1, early), true),
            (run(Running, 1, late), run(Running, 1, early), true),
            // An imported abandoned copy of the same run in flight.
            (run(Abandoned, 1, early), run(Running, 1, late), true),
            // A later attempt.
            (run(Failed, 2, early), run(Failed, 1, late), true),
            (run(Running, 2, early), run(Succeeded, 1, late), true),
            // The document is further along.
            (run(Running, 1, early), run(Succeeded, 1, late), false),
            (run(Abandoned, 1, early), run(Succeeded, 1, late), false),
            (run(Failed, 1, late), run(Running, 2, early), false),
            // Same attempt, both finished: the later change.
            (run(Succeeded, 1, late), run(Abandoned, 1, early), true),
            (run(Abandoned, 1, early), run(Abandoned, 1, early), false),
        ];
        for (i, (stored, record, newer)) in cases.iter().enumerate() {
            assert_eq!(stored_is_newer(stored, record), *newer, "case {i}");
        }
        use WorkflowRunStatus as W;
        assert!(stored_is_newer(
            &workflow_run(W::Succeeded, late),
            &workflow_run(W::Running, early)
        ));
        assert!(stored_is_newer(
            &workflow_run(W::Failed, early),
            &workflow_run(W::Running, late)
        ));
        assert!(!stored_is_newer(
            &workflow_run(W::Failed, early),
            &workflow_run(W::Succeeded, late)
        ));
        use StepRunStatus as S;
        let s = |status, updated| step("c00000000001", status, updated);
        assert!(stored_is_newer(
            &s(S::Succeeded, late),
            &s(S::Running, early)
        ));
        assert!(!stored_is_newer(
            &s(S::Pending, early),
            &s(S::Running, late)
        ));
        // A failed step started again is further along than its failure.
        assert!(stored_is_newer(&s(S::Running, late), &s(S::Failed, early)));
        // Definitions and events are never kept as newer.
        let lp: loops_core::Loop = serde_json::from_value(serde_json::json!({
            "id": "a00000000001", "name": "n", "status": "active",
            "schedule": {"type": "dynamic"}, "target": {"type": "command", "command": "true"},
            "catchUp": "latest", "catchUpLimit": 1, "overlap": "skip", "maxAttempts": 1,
            "retryDelayMs": 1, "leaseMs": 1, "createdAt": T0, "updatedAt": late
        }))
        .unwrap();
        let lp = Record::Loop(Box::new(lp));
        assert!(!stored_is_newer(&lp, &lp));
    }

    /// Issue 25 item 3 (review): a placeholder is last changed at the
    /// export's `exportedAt`, by the source's clock; when that clock is
    /// behind this one's, a later export's finished row of the same attempt
    /// looks older than the placeholder, and was kept out for good.
    #[test]
    fn a_placeholder_never_hides_the_finished_record_of_its_attempt() {
        let (early, late) = (T0, "2026-01-01T00:10:00Z");
        let mut arrival = Arrival::new(Some(at(late)));
        let placeholder = |record: Record, arrival: &mut Arrival| {
            arrival
                .of(&record)
                .expect("a running record has a placeholder")
        };
        use RunStatus::*;
        let stored = placeholder(run(Running, 1, early), &mut arrival);
        for status in [Succeeded, Failed, TimedOut, Skipped] {
            assert!(
                !stored_is_newer(&stored, &run(status, 1, early)),
                "{status}"
            );
        }
        // Recovery's own abandoned row is not a placeholder.
        let Record::Run(mut recovered) = stored.clone() else {
            unreachable!()
        };
        recovered.run.error = Some("run lease expired before completion".into());
        let recovered = Record::Run(recovered);
        assert!(stored_is_newer(&recovered, &run(Succeeded, 1, early)));
        // Still kept: over a later attempt's placeholder, over the record
        // still running, and over another placeholder of it changed earlier.
        let second = placeholder(run(Running, 2, early), &mut arrival);
        assert!(stored_is_newer(&second, &run(Succeeded, 1, early)));
        assert!(stored_is_newer(&stored, &run(Running, 1, early)));
        let older = Arrival::new(Some(at(early))).of(&run(Running, 1, early));
        assert!(stored_is_newer(&stored, &older.unwrap()));
        // The same for a workflow run and its steps.
        use WorkflowRunStatus as W;
        let stored = placeholder(workflow_run(W::Running, early), &mut arrival);
        assert!(!stored_is_newer(
            &stored,
            &workflow_run(W::Succeeded, early)
        ));
        assert!(stored_is_newer(&stored, &workflow_run(W::Running, early)));
        use StepRunStatus as S;
        let s = |status| step("c00000000001", status, early);
        for open in [S::Running, S::Pending] {
            let stored = placeholder(s(open), &mut arrival);
            assert!(!stored_is_newer(&stored, &s(S::Succeeded)), "{open}");
            assert!(!stored_is_newer(&stored, &s(S::Failed)), "{open}");
            assert!(stored_is_newer(&stored, &s(S::Running)), "{open}");
            // A pending step is not finished: the instants decide, and
            // the placeholder was written later.
            assert!(stored_is_newer(&stored, &s(S::Pending)), "{open}");
        }
    }

    #[test]
    fn a_kept_record_says_where_each_side_is() {
        assert_eq!(
            kept_message(
                &run(RunStatus::Succeeded, 1, T0),
                &run(RunStatus::Running, 1, T0)
            ),
            "newer in the store (succeeded, attempt 1) than in the file (running, attempt 1); \
             kept as stored"
        );
        assert_eq!(
            kept_message(
                &workflow_run(WorkflowRunStatus::Succeeded, T0),
                &workflow_run(WorkflowRunStatus::Running, T0)
            ),
            "newer in the store (succeeded) than in the file (running); kept as stored"
        );
        assert_eq!(
            changed_message(&step("c00000000001", StepRunStatus::Failed, T0)),
            "changed in the store during the import (now failed); kept as stored"
        );
    }
}
