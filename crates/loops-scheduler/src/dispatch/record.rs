//! Recording what runs did: finalize-and-advance or, for a run a daemon
//! shutdown cut short, a release that does not count the attempt (SPEC
//! §3.3; §9 item 17); renewing run leases; and stopping runs in flight.

use std::time::{Duration, Instant};

use loops_core::{ExecutorResult, LoopRun};
use loops_exec::CancelToken;
use loops_store::{Advance, Fence, StoreError};

use super::state::{Phase, Recording};
use super::{Dispatcher, FinalizeMode, HeldStop, InFlight, Report};
use crate::executor::RunError;

/// Most reports applied in one store batch, so a steady stream of them
/// never holds the write lock for long.
const BATCH_REPORTS: usize = 64;

/// The heartbeat period of a run lease: `max(10, min(60000, ⌊leaseMs/3⌋))`
/// milliseconds (SPEC §3.3).
pub fn heartbeat_period(lease_ms: u64) -> Duration {
    Duration::from_millis((lease_ms / 3).clamp(10, 60_000))
}

/// The monotonic instant by which a lease of `lease_ms` taken or renewed
/// at `from` must be renewed again: the lease less a tenth of it (at most
/// five seconds), so the run stops before the lease is over, not after.
pub(super) fn lease_deadline(from: Instant, lease_ms: u64) -> Instant {
    let margin = (lease_ms / 10).min(5_000);
    from + Duration::from_millis(lease_ms.saturating_sub(margin))
}

impl Dispatcher<'_, '_> {
    /// The result to record for a finished run: the executor's, or a failed
    /// result carrying its error (reported through `on_error`, once).
    pub(super) fn result_of(
        &self,
        done: &InFlight,
        outcome: Result<ExecutorResult, RunError>,
    ) -> ExecutorResult {
        match outcome {
            Ok(r) => r,
            Err(error) => {
                let message = error.to_string();
                self.report_error(&done.work.lp, &message);
                let started = done.run.started_at.unwrap_or(done.run.created_at);
                ExecutorResult::failed(message, started, self.opts.clock.now())
            }
        }
    }

    /// Records a finished run under its fence (SPEC §3.3): released when a
    /// shutdown interrupted it, else finalized, together with its loop's
    /// advance unless this is an ad-hoc manual run.
    ///
    /// `None` when the run's row no longer exists (its loop was deleted with
    /// its history while it ran): that is reported through `on_error` and
    /// the other runs go on.
    fn finish(
        &mut self,
        done: &InFlight,
        result: &ExecutorResult,
    ) -> Result<Option<LoopRun>, StoreError> {
        let now = self.opts.clock.now();
        if done.phase.recording(result.status) == Recording::Release {
            // SPEC §9 item 17: a run the shutdown cut short does not count.
            return match self
                .store
                .release_run(&done.run.id, result, self.opts.runner_id, now)?
            {
                Some(released) => Ok(Some(released.run)),
                None => Ok(self.store.get_run(&done.run.id)?),
            };
        }
        let fence = Fence::of_claim(self.opts.runner_id, &done.run);
        let stored = match self.opts.mode {
            FinalizeMode::Advance => self
                .store
                .finalize_and_advance(&done.run.id, result, &fence, now)
                .map(|f| {
                    // The circuit breaker tripped (issue 17): one line.
                    if let Advance::Advanced(plan) = &f.advance
                        && let Some(reason) = &plan.paused_reason
                    {
                        self.report_error(&done.work.lp, reason);
                    }
                    f.run
                }),
            FinalizeMode::FinalizeOnly => {
                self.store
                    .finalize_run(&done.run.id, result, Some(&fence), now)
            }
        };
        match stored {
            Ok(run) => Ok(Some(run)),
            Err(e @ StoreError::Vanished { .. }) => {
                self.report_error(&done.work.lp, &e.to_string());
                self.vanished.get_or_insert(e);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Records `done` with `result` inside the store batch under way. The
    /// run is settled once the batch commits ([`Dispatcher::settle_landed`]);
    /// a transient store error (a full disk, an I/O error) keeps the result
    /// to be tried again instead of losing it until the lease expires.
    pub(super) fn record(
        &mut self,
        done: InFlight,
        result: ExecutorResult,
    ) -> Result<(), StoreError> {
        match self.finish(&done, &result) {
            Ok(stored) => {
                self.landed.push((done, result, stored));
                Ok(())
            }
            Err(e) if e.is_transient() && !self.gives_up_on(&done) => {
                self.defer(done, result, &e);
                Ok(())
            }
            Err(e) => {
                self.settle(done, None);
                Err(e)
            }
        }
    }

    /// A tick or run-now that was told to stop stops retrying finalizes
    /// (the daemon retries until they land, also while it stops).
    fn giving_up(&self) -> bool {
        self.opts.stop.is_some_and(CancelToken::is_cancelled)
    }

    /// Whether the record of `done`, which just failed on a transient
    /// error, is given up rather than tried again: when told to stop, or
    /// once a tick's or run-now's attempts are spent. The run stays
    /// `running` under its lease, and lease recovery ends it.
    fn gives_up_on(&self, done: &InFlight) -> bool {
        self.giving_up()
            || self
                .opts
                .finalize_attempts
                .is_some_and(|n| done.phase.failures() + 1 >= n)
    }

    /// Keeps the result of `done`, whose finalize failed with `error`, to
    /// try it again after a backoff (100 ms doubling to 5 s). Only the first
    /// failure is reported, so a long outage costs one log line.
    fn defer(&mut self, mut done: InFlight, result: ExecutorResult, error: &StoreError) {
        done.phase.defer(result, Instant::now());
        if done.phase.failures() == 1 {
            self.report_error(
                &done.work.lp,
                &format!(
                    "recording run {} failed, retrying until it succeeds: {error}",
                    done.run.id
                ),
            );
        }
        self.inflight.insert(done.run.id, done);
    }

    /// Settles the runs recorded in the batch that just committed, and
    /// starts the hooks of those that are final.
    fn settle_landed(&mut self) {
        for (done, result, stored) in std::mem::take(&mut self.landed) {
            let released = done.phase.recording(result.status) == Recording::Release;
            if let Some(run) = stored.as_ref().filter(|_| !released) {
                let retry_pending = run.status.is_retryable()
                    && run.attempt < done.work.attempts_at_plan
                    && self.opts.mode == FinalizeMode::Advance;
                if !retry_pending {
                    let wake = self.tx.clone();
                    let exec = self.opts.executor.exec_options();
                    self.hooks
                        .start(self.opts.hooks, exec, &done.work.lp, run, wake);
                }
            }
            self.settle(done, stored);
        }
        self.hooks.report(self.opts.on_hook_error);
    }

    /// Waits for the hooks started so far and reports their failures
    /// (`tick`, `run-now`, and a daemon that stops).
    pub(crate) fn wait_for_hooks(&mut self) {
        self.hooks.wait(self.opts.on_hook_error);
    }

    /// Tries again the finalizes that are due (see [`Dispatcher::record`]),
    /// each in its own transaction.
    fn retry_unrecorded(&mut self) -> Result<(), StoreError> {
        let now = Instant::now();
        let due: Vec<_> = self
            .inflight
            .iter()
            .filter(|(_, f)| f.phase.retry_at().is_some_and(|at| at <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            let Some(done) = self.inflight.remove(&id) else {
                continue;
            };
            let Phase::Unrecorded(unrecorded) = &done.phase else {
                continue;
            };
            let result = unrecorded.result.clone();
            let recorded = self.record(done, result);
            self.settle_landed();
            recorded?;
        }
        Ok(())
    }

    /// Renews the leases whose heartbeat is due. A run whose lease was lost
    /// (recovered or taken over by another runner) is cancelled: its result
    /// could no longer be recorded, and its slot may already run elsewhere.
    ///
    /// Finalizes that failed on a transient store error are tried again
    /// here first, when due, and the cancel requests on the runs in flight
    /// are applied (issue 28).
    pub(crate) fn heartbeat(&mut self) -> Result<(), StoreError> {
        self.retry_unrecorded()?;
        self.apply_cancel_requests()?;
        let now_instant = Instant::now();
        let mut failed = None;
        for f in self.inflight.values_mut() {
            if f.next_heartbeat > now_instant {
                continue;
            }
            f.next_heartbeat = now_instant + f.period;
            let now = self.opts.clock.now();
            match self.store.heartbeat_run_lease_with_output(
                &f.run.id,
                &Fence::of_claim(self.opts.runner_id, &f.run),
                f.work.lp.lease_ms,
                now,
                f.output_seen.last(),
            ) {
                Ok(Some(_)) => f.lease_deadline = lease_deadline(now_instant, f.work.lp.lease_ms),
                Ok(None) => f.cancel.cancel(loops_workflow::RUN_LEASE_LOST),
                Err(e) => {
                    // Not renewed, maybe not lost: the run goes on until
                    // its lease may be over by this host's own clock, then
                    // stops, since another host may take its slot over.
                    if Instant::now() >= f.lease_deadline && !f.phase.is_unrecorded() {
                        f.cancel.cancel(loops_workflow::RUN_LEASE_LOST);
                    }
                    failed.get_or_insert(e);
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Applies `first` and the reports already waiting behind it (at most
    /// [`BATCH_REPORTS`]) in one store batch: one commit for many finished
    /// runs. `on_result` sees each report's outcome and decides whether an
    /// error stops the batch (tick) or is only logged (daemon); the
    /// operations that succeeded are committed either way. A wake-up, a
    /// stop or a retry note writes nothing, so it takes no write lock. A stop request
    /// waiting behind `first` ends the batch and is held for the next
    /// [`Dispatcher::poll`]: the daemon handles those itself.
    pub(crate) fn handle_waiting(
        &mut self,
        first: Report,
        mut on_result: impl FnMut(Result<(), StoreError>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        // A hook that failed since rings a wake-up: report it now.
        self.hooks.report(self.opts.on_hook_error);
        if matches!(
            first,
            Report::Wake | Report::Stop { .. } | Report::Retrying(..)
        ) {
            return on_result(self.handle(first));
        }
        // Taken off the channel before the batch begins: a batch that
        // cannot begin (a busy database) must not lose them.
        let mut reports = vec![first];
        while reports.len() < BATCH_REPORTS {
            match self.poll() {
                Some(Report::Stop { grace }) => {
                    self.held_stop = Some(HeldStop { grace });
                    break;
                }
                Some(report) => reports.push(report),
                None => break,
            }
        }
        let store = self.store;
        let mut left = reports.into_iter();
        let applied: Result<(), StoreError> = store.batch(|| {
            for report in left.by_ref() {
                on_result(self.handle(report))?;
            }
            Ok(())
        });
        match applied {
            Err(e) if e.is_transient() && !self.giving_up() => {
                // Nothing of the batch committed (a full disk fails the
                // commit): every run it recorded is tried again, and so is
                // every run whose report it did not reach, unless its
                // attempts are spent.
                let mut spent = false;
                let mut unrecorded = std::mem::take(&mut self.landed)
                    .into_iter()
                    .map(|(done, result, _)| (done, result))
                    .collect::<Vec<_>>();
                for report in left {
                    if let Report::Done(id, outcome) = report
                        && let Some(done) = self.inflight.remove(&id)
                    {
                        let result = self.result_of(&done, *outcome);
                        unrecorded.push((done, result));
                    }
                }
                for (done, result) in unrecorded {
                    if self.gives_up_on(&done) {
                        spent = true;
                        self.settle(done, None);
                    } else {
                        self.defer(done, result, &e);
                    }
                }
                // Reported once per run by `defer`; the runner goes on,
                // unless a run's attempts are spent.
                if spent { Err(e) } else { Ok(()) }
            }
            other => {
                self.settle_landed();
                other
            }
        }
    }

    /// Cancels the runs in flight once the stop token fired (tick, run-now).
    fn cancel_if_stopped(&mut self) {
        let Some(sent) = self.mode.send_stop() else {
            return;
        };
        let Some(reason) = self.opts.stop.and_then(CancelToken::reason) else {
            return;
        };
        self.mode = sent;
        self.cancel_all(&reason);
    }

    /// Cancels every run in flight with `reason`; each is recorded as it
    /// ends.
    pub(crate) fn cancel_all(&self, reason: &str) {
        for f in self.inflight.values() {
            f.cancel.cancel(reason);
        }
    }

    /// Stops starting slots and forgets the queued ones: they were never
    /// claimed, so they stay due for the next runner (SPEC §9 item 17).
    pub(crate) fn drain_queue(&mut self) {
        self.mode = self.mode.drain();
        self.queue.clear();
        for b in self.busy.values_mut() {
            b.next_overlap = None;
        }
    }

    /// Cancels every run in flight for a shutdown: each is released rather
    /// than finalized when it ends without succeeding (SPEC §9 item 17).
    pub(crate) fn interrupt_all(&mut self, reason: &str) {
        // A run that already ended and waits for its finalize is recorded as
        // it ended.
        for f in self.inflight.values_mut() {
            if f.phase.interrupt() {
                f.cancel.cancel(reason);
            }
        }
    }

    /// Runs queued slots and waits for every run to be recorded (what a
    /// tick does after planning).
    pub(crate) fn run_to_idle(&mut self) -> Result<(), StoreError> {
        let outcome = self.drive_to_idle();
        if let Err(e) = &outcome {
            // Nobody is left to heartbeat or finalize these runs: stop them
            // now rather than let them run unobserved until their leases
            // expire. The scope joins their threads.
            self.cancel_all(&format!("runner failed: {e}"));
        }
        outcome
    }

    fn drive_to_idle(&mut self) -> Result<(), StoreError> {
        loop {
            self.start_ready()?;
            if self.inflight.is_empty() {
                return Ok(());
            }
            self.cancel_if_stopped();
            // Cancel requests (issue 28) are looked for at least this
            // often: nothing wakes a tick or a run-now for them.
            let wait = self
                .next_heartbeat()
                .map_or(Duration::from_millis(10), |t| {
                    t.saturating_duration_since(Instant::now())
                })
                .min(super::cancel::CANCEL_POLL);
            let report = self.wait(wait);
            // Renew due leases whatever woke us: a steady stream of reports
            // must not starve the heartbeats.
            self.heartbeat()?;
            if let Some(report) = report {
                self.handle_waiting(report, |result| result)?;
            }
        }
    }
}

/// The spawn id of `run`'s processes when its claim has a token: the token
/// is stored with the claim, so a daemon that dies between the spawn and
/// recording it still leaves the restarted daemon a way to find them
/// (`daemon/recover.rs`).
pub(crate) fn claim_spawn_id(run: &LoopRun) -> Option<&str> {
    run.claim_token
        .as_deref()
        .filter(|t| !t.is_empty() && !t.contains(char::is_whitespace))
}
