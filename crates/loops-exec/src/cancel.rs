//! [`CancelToken`]: how a cancel reaches a running executor (SPEC §5.7
//! "Abort", §9 item 21).
//!
//! The original polled the database every 500 ms to notice a cancel. Here
//! whoever decides to cancel (a workflow cancel, daemon shutdown, Ctrl-C on
//! `run-now`) calls [`CancelToken::cancel`], and every executor waiting on a
//! clone of the token is woken at once: each run registers a waker that
//! writes one byte to the pipe its wait loop polls, so the reaction time is
//! the scheduler's, not a poll interval.
//!
//! Invariant: a token is cancelled at most once; the first reason wins and
//! wakers run exactly once, on that first cancel.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// A cloneable, thread-safe cancellation flag with a reason.
///
/// ```
/// use loops_exec::CancelToken;
/// let token = CancelToken::new();
/// let seen_by_executor = token.clone();
/// token.cancel("cancelled by user");
/// assert!(seen_by_executor.is_cancelled());
/// assert_eq!(seen_by_executor.reason().as_deref(), Some("cancelled by user"));
/// ```
#[derive(Clone, Default)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    cancelled: Condvar,
}

/// A waker: something to call once, when the token is cancelled.
type Waker = Box<dyn Fn() + Send>;

#[derive(Default)]
struct State {
    reason: Option<String>,
    /// The grace between SIGTERM and SIGKILL the cancel asks for, when it
    /// names one (`loops cancel --grace`).
    grace: Option<Duration>,
    next_id: u64,
    wakers: BTreeMap<u64, Waker>,
}

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Cancels the token. The first reason wins; later calls do nothing.
    /// An empty reason is recorded as `cancelled`.
    pub fn cancel(&self, reason: impl Into<String>) {
        self.cancel_inner(reason.into(), None);
    }

    /// [`CancelToken::cancel`] that also asks for `grace` between SIGTERM
    /// and SIGKILL in place of the runner's own (`loops cancel --grace`).
    pub fn cancel_with_grace(&self, reason: impl Into<String>, grace: Duration) {
        self.cancel_inner(reason.into(), Some(grace));
    }

    /// The grace the first cancel asked for, if it named one.
    pub fn grace(&self) -> Option<Duration> {
        self.lock().grace
    }

    fn cancel_inner(&self, reason: String, grace: Option<Duration>) {
        let mut state = self.lock();
        if state.reason.is_some() {
            return;
        }
        state.grace = grace;
        state.reason = Some(if reason.is_empty() {
            "cancelled".to_owned()
        } else {
            reason
        });
        // Wakers run under the lock on purpose: a subscription that has been
        // dropped is then guaranteed never to run again, so a run may close
        // its wake-up pipe right after unsubscribing. The crate's wakers only
        // write one byte to a pipe, which cannot block.
        for waker in std::mem::take(&mut state.wakers).into_values() {
            waker();
        }
        drop(state);
        self.inner.cancelled.notify_all();
    }

    /// Whether [`CancelToken::cancel`] has been called.
    pub fn is_cancelled(&self) -> bool {
        self.lock().reason.is_some()
    }

    /// The reason given to the first cancel.
    pub fn reason(&self) -> Option<String> {
        self.lock().reason.clone()
    }

    /// Blocks until the token is cancelled or `timeout` has passed, and
    /// returns whether it is cancelled. A cancel-aware sleep.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        let mut state = self.lock();
        while state.reason.is_none() {
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                return false;
            }
            state = match self.inner.cancelled.wait_timeout(state, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        true
    }

    /// Registers `waker` to run once when the token is cancelled, for as
    /// long as the returned subscription lives. Nothing runs if the token
    /// is already cancelled; callers check [`CancelToken::reason`] after
    /// subscribing.
    ///
    /// The waker runs under the token's lock and must not call the token.
    pub fn subscribe(&self, waker: impl Fn() + Send + 'static) -> Subscription {
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        if state.reason.is_none() {
            state.wakers.insert(id, Box::new(waker));
        }
        Subscription {
            token: self.clone(),
            id,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent under panics (every update is a single
        // assignment), so a poisoned lock is still usable.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("reason", &self.reason())
            .finish()
    }
}

/// Keeps a waker registered; dropping it unregisters the waker.
#[must_use = "dropping a subscription unregisters its waker"]
pub struct Subscription {
    token: CancelToken,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.token.lock().wakers.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_cancel_may_name_its_grace_and_the_first_cancel_decides_it() {
        let token = CancelToken::new();
        assert_eq!(token.grace(), None);
        token.cancel_with_grace("cancelled by ann@box", Duration::from_secs(7));
        token.cancel_with_grace("later", Duration::from_secs(1));
        assert_eq!(token.grace(), Some(Duration::from_secs(7)));
        let plain = CancelToken::new();
        plain.cancel("shutdown");
        plain.cancel_with_grace("later", Duration::from_secs(1));
        assert_eq!(plain.grace(), None);
    }

    #[test]
    fn first_reason_wins_and_wakers_run_once() {
        let token = CancelToken::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let sub = token.subscribe(move || {
            c.fetch_add(1, Ordering::SeqCst);
        });
        token.cancel("first");
        token.cancel("second");
        assert_eq!(token.reason().as_deref(), Some("first"));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        drop(sub);
    }

    #[test]
    fn dropped_subscriptions_never_run() {
        let token = CancelToken::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        drop(token.subscribe(move || {
            c.fetch_add(1, Ordering::SeqCst);
        }));
        token.cancel("");
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert_eq!(token.reason().as_deref(), Some("cancelled"));
    }

    #[test]
    fn wait_timeout_wakes_on_cancel() {
        let token = CancelToken::new();
        assert!(!token.wait_timeout(Duration::from_millis(5)));
        let other = token.clone();
        let t = std::thread::spawn(move || other.wait_timeout(Duration::from_secs(30)));
        token.cancel("stop");
        assert!(t.join().unwrap());
    }
}
