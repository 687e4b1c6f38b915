//! The dispatcher's state as enums: whether it still starts slots
//! ([`Mode`]), where each run in flight stands ([`Phase`]), and how an
//! ended run is recorded ([`Recording`], SPEC §3.3 and §9 item 17).
//!
//! The transitions are pure (the monotonic instant is passed in), so they
//! are unit-tested here without a store or a worker.

use std::time::{Duration, Instant};

use loops_core::{ExecutorResult, ExecutorStatus};

/// The first wait before a failed finalize is tried again; it doubles up
/// to [`FINALIZE_RETRY_MAX`], so a run ends within seconds of the disk
/// having room again.
const FINALIZE_RETRY_FIRST: Duration = Duration::from_millis(100);
/// The longest wait between two attempts of a finalize.
const FINALIZE_RETRY_MAX: Duration = Duration::from_secs(5);

/// Whether the dispatcher still starts slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Queued slots start as there is room.
    Serving,
    /// Nothing starts any more (a daemon shutdown, or a fired stop token);
    /// the runs in flight are waited for and recorded as they end.
    Draining {
        /// The runs in flight were cancelled with the stop token's reason
        /// (tick and run-now): that happens once.
        stop_sent: bool,
    },
}

impl Mode {
    /// True once the dispatcher drains.
    pub(super) fn is_draining(self) -> bool {
        matches!(self, Mode::Draining { .. })
    }

    /// Stops starting slots; a stop already sent stays sent.
    pub(super) fn drain(self) -> Mode {
        match self {
            Mode::Serving => Mode::Draining { stop_sent: false },
            draining @ Mode::Draining { .. } => draining,
        }
    }

    /// Drains with the stop sent. `None` when it was sent already: the runs
    /// in flight are cancelled only once.
    pub(super) fn send_stop(self) -> Option<Mode> {
        match self {
            Mode::Draining { stop_sent: true } => None,
            Mode::Serving | Mode::Draining { stop_sent: false } => {
                Some(Mode::Draining { stop_sent: true })
            }
        }
    }
}

/// How an ended run is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Recording {
    /// Finalized (and its loop advanced, unless it is an ad-hoc manual run).
    Finalize,
    /// Released: a run a daemon shutdown cut short does not count as an
    /// attempt (SPEC §9 item 17).
    Release,
}

/// Where a run in flight stands.
#[derive(Debug)]
pub(super) enum Phase {
    /// Its worker runs it; its lease is renewed.
    Running,
    /// Cancelled by a daemon shutdown: released, not finalized, unless it
    /// succeeded anyway.
    Interrupted,
    /// It has ended, but recording its result failed on a transient store
    /// error (a full disk): it is tried again, its lease still renewed,
    /// until it lands.
    Unrecorded(Box<Unrecorded>),
}

/// The result of a run whose record has not landed yet.
#[derive(Debug)]
pub(super) struct Unrecorded {
    pub(super) result: ExecutorResult,
    /// How it is recorded, decided when the run ended.
    pub(super) recording: Recording,
    /// Failed attempts so far.
    pub(super) failures: u32,
    /// The wait before the next attempt: 100 ms, doubling up to 5 s.
    pub(super) delay: Duration,
    pub(super) retry_at: Instant,
}

impl Phase {
    /// How the run is recorded now that it ended with `status`.
    pub(super) fn recording(&self, status: ExecutorStatus) -> Recording {
        match self {
            Phase::Running => Recording::Finalize,
            Phase::Interrupted if status == ExecutorStatus::Succeeded => Recording::Finalize,
            Phase::Interrupted => Recording::Release,
            Phase::Unrecorded(u) => u.recording,
        }
    }

    /// A daemon shutdown cuts the run short. False when it has already
    /// ended and waits for its record, which is made as it ended: it is
    /// not cancelled.
    pub(super) fn interrupt(&mut self) -> bool {
        match self {
            Phase::Running | Phase::Interrupted => {
                *self = Phase::Interrupted;
                true
            }
            Phase::Unrecorded(_) => false,
        }
    }

    /// Recording `result` failed (again) at `now`: the next attempt is due
    /// after a backoff of 100 ms doubling to 5 s.
    pub(super) fn defer(&mut self, result: ExecutorResult, now: Instant) {
        let (recording, failures, delay) = match self {
            Phase::Unrecorded(u) => (
                u.recording,
                u.failures + 1,
                (u.delay * 2).min(FINALIZE_RETRY_MAX),
            ),
            Phase::Running | Phase::Interrupted => {
                (self.recording(result.status), 1, FINALIZE_RETRY_FIRST)
            }
        };
        *self = Phase::Unrecorded(Box::new(Unrecorded {
            result,
            recording,
            failures,
            delay,
            retry_at: now + delay,
        }));
    }

    /// The failed records so far.
    pub(super) fn failures(&self) -> u32 {
        match self {
            Phase::Unrecorded(u) => u.failures,
            Phase::Running | Phase::Interrupted => 0,
        }
    }

    /// When its record is tried again, if it waits for one.
    pub(super) fn retry_at(&self) -> Option<Instant> {
        match self {
            Phase::Unrecorded(u) => Some(u.retry_at),
            Phase::Running | Phase::Interrupted => None,
        }
    }

    /// True when the run has ended and waits for its record.
    pub(super) fn is_unrecorded(&self) -> bool {
        matches!(self, Phase::Unrecorded(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loops_core::Timestamp;

    fn result(status: ExecutorStatus) -> ExecutorResult {
        let t: Timestamp = "2026-01-01T00:00:00Z".parse().expect("a valid timestamp");
        let mut r = ExecutorResult::failed("boom".to_owned(), t, t);
        r.status = status;
        r
    }

    #[test]
    fn drain_keeps_a_sent_stop() {
        assert_eq!(Mode::Serving.drain(), Mode::Draining { stop_sent: false });
        let sent = Mode::Draining { stop_sent: true };
        assert_eq!(sent.drain(), sent);
        assert!(!Mode::Serving.is_draining());
        assert!(sent.is_draining());
    }

    #[test]
    fn the_stop_is_sent_once() {
        let sent = Mode::Serving.send_stop().expect("not sent yet");
        assert_eq!(sent, Mode::Draining { stop_sent: true });
        assert_eq!(sent.send_stop(), None);
        let drained = Mode::Serving.drain().send_stop();
        assert_eq!(drained, Some(Mode::Draining { stop_sent: true }));
    }

    #[test]
    fn an_interrupted_run_is_released_unless_it_succeeded() {
        let mut phase = Phase::Running;
        assert_eq!(phase.recording(ExecutorStatus::Failed), Recording::Finalize);
        assert!(phase.interrupt());
        assert!(matches!(phase, Phase::Interrupted));
        assert_eq!(phase.recording(ExecutorStatus::Failed), Recording::Release);
        assert_eq!(
            phase.recording(ExecutorStatus::TimedOut),
            Recording::Release
        );
        assert_eq!(
            phase.recording(ExecutorStatus::Succeeded),
            Recording::Finalize
        );
        // Interrupting twice cancels again and changes nothing else.
        assert!(phase.interrupt());
        assert!(matches!(phase, Phase::Interrupted));
    }

    #[test]
    fn a_deferred_record_backs_off_and_keeps_its_recording() {
        let t0 = Instant::now();
        let mut phase = Phase::Interrupted;
        phase.defer(result(ExecutorStatus::TimedOut), t0);
        assert!(phase.is_unrecorded());
        assert_eq!(phase.failures(), 1);
        assert_eq!(phase.retry_at(), Some(t0 + FINALIZE_RETRY_FIRST));
        // Whatever the result says, the record decided at the end stands.
        assert_eq!(
            phase.recording(ExecutorStatus::Succeeded),
            Recording::Release
        );
        let mut delays = Vec::new();
        for _ in 0..8 {
            phase.defer(result(ExecutorStatus::TimedOut), t0);
            let Phase::Unrecorded(u) = &phase else {
                panic!("still unrecorded");
            };
            delays.push(u.delay.as_millis());
        }
        assert_eq!(delays, [200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
        assert_eq!(phase.failures(), 9);
        assert_eq!(phase.recording(ExecutorStatus::Failed), Recording::Release);
    }

    #[test]
    fn an_unrecorded_run_is_not_interrupted() {
        let t0 = Instant::now();
        let mut phase = Phase::Running;
        phase.defer(result(ExecutorStatus::Failed), t0);
        assert!(!phase.interrupt());
        assert!(phase.is_unrecorded());
        assert_eq!(phase.recording(ExecutorStatus::Failed), Recording::Finalize);
        assert_eq!(Phase::Running.retry_at(), None);
        assert_eq!(Phase::Running.failures(), 0);
    }
}
