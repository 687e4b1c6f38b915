//! Triggered runs (issue 30, `docs/triggers.md` T5–T7): planning the
//! pending triggers of the loops this runner matches, and what a triggered
//! run's process is told about its trigger.

use std::collections::HashSet;

use loops_core::{
    CatchUp, Loop, LoopId, LoopStatus, MAX_TRIGGER_PAYLOAD_ENV, Target, TriggerKind,
    placement_matches,
};
use loops_store::{Claim, LoopTrigger, StoreError};

use super::{Dispatcher, LoopWork};

impl Dispatcher<'_, '_> {
    /// Queues one pending trigger of each active loop this runner matches
    /// that has no work queued or in flight here: the oldest under
    /// catch-up `all` (each runs, in order), else the newest (the claim
    /// marks the older ones coalesced).
    pub(super) fn plan_triggers(
        &mut self,
        active: &HashSet<LoopId>,
        labels: &[String],
    ) -> Result<(), StoreError> {
        let pending = self.store.pending_triggers()?;
        let queued: HashSet<LoopId> = self.queue.iter().map(|w| w.lp.id).collect();
        let mut i = 0;
        while i < pending.len() {
            let loop_id = pending[i].loop_id;
            let end = pending[i..]
                .iter()
                .position(|t| t.loop_id != loop_id)
                .map_or(pending.len(), |n| i + n);
            let group = &pending[i..end];
            i = end;
            if active.contains(&loop_id) || queued.contains(&loop_id) {
                continue;
            }
            let Some(lp) = self.store.get_loop(&loop_id)? else {
                continue;
            };
            if lp.status != LoopStatus::Active || !placement_matches(&lp.policy.runs_on, labels) {
                continue;
            }
            let trigger = if lp.catch_up == CatchUp::All {
                group.first()
            } else {
                group.last()
            };
            if let Some(trigger) = trigger {
                let mut work = LoopWork::new(lp, [trigger.created_at].into());
                work.trigger = Some(trigger.clone());
                self.queue.push_back(work);
            }
        }
        Ok(())
    }

    /// Claims the trigger of `work` and starts its run; a trigger that
    /// cannot start now (its loop runs, its pool is full) stays pending,
    /// and the loop is looked at again at the next plan.
    pub(super) fn start_triggered(&mut self, mut work: LoopWork) -> Result<(), StoreError> {
        let Some(trigger) = &work.trigger else {
            return Ok(());
        };
        let now = self.opts.clock.now();
        match self
            .store
            .claim_trigger(&work.lp, &trigger.id, self.opts.runner_id, now)?
        {
            Claim::Claimed { run, loop_ } => {
                work.lp = loop_;
                work.progressed = true;
                self.report_run(&run);
                self.start(work, run);
            }
            _ => {
                self.parked.insert(work.lp.id);
            }
        }
        Ok(())
    }
}

/// `lp` as its triggered run executes it: the target's environment gains
/// `LOOPS_TRIGGER_KIND`, for `after` `LOOPS_TRIGGER_LOOP` and
/// `LOOPS_TRIGGER_RUN_ID`, and `LOOPS_TRIGGER_PAYLOAD` when the payload is
/// at most [`MAX_TRIGGER_PAYLOAD_ENV`] bytes (T6); a command also reads
/// the payload on stdin. A workflow's steps keep their own environments.
pub(super) fn with_trigger_env(mut lp: Loop, trigger: &LoopTrigger) -> Loop {
    let mut vars = vec![("LOOPS_TRIGGER_KIND", trigger.kind.as_str().to_owned())];
    if trigger.kind == TriggerKind::After {
        if let Some(source) = &trigger.source_loop_id {
            vars.push(("LOOPS_TRIGGER_LOOP", source.to_string()));
        }
        if let Some(run) = &trigger.source_run_id {
            vars.push(("LOOPS_TRIGGER_RUN_ID", run.to_string()));
        }
    }
    if let Some(payload) = trigger
        .payload
        .as_ref()
        .filter(|p| p.len() <= MAX_TRIGGER_PAYLOAD_ENV && !p.contains('\0'))
    {
        vars.push(("LOOPS_TRIGGER_PAYLOAD", payload.clone()));
    }
    let env = match &mut lp.target {
        Target::Command(c) => {
            // A command reads the payload on stdin too; an agent's stdin is
            // its prompt.
            c.stdin.clone_from(&trigger.payload);
            &mut c.env
        }
        Target::Agent(a) => &mut a.env,
        _ => return lp,
    };
    let env = env.get_or_insert_with(Default::default);
    for (k, v) in vars {
        env.insert(k.to_owned(), v);
    }
    lp
}
