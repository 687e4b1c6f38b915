//! [`SignalCancel`]: SIGINT and SIGTERM become a [`CancelToken`] cancel
//! (SPEC §9 item 19).
//!
//! The original never forwarded Ctrl-C to a `run-now` child: the child leads
//! its own process group, so the terminal's SIGINT reaches only loops, which
//! died and left the child running and the run row `running`. Here a
//! background thread reads the signals through `signal-hook`'s iterator (a
//! self-pipe, so no code runs in signal context and no `unsafe` is needed)
//! and cancels a token. Runners pass that token as their stop token, and
//! each executing run's own token is [watched](SignalCancel::watch), so a
//! signal tears the child's process group down at once instead of waiting
//! for the runner's next wake-up. The run is then finalized as failed with
//! the token's reason, `cancelled by SIGINT` (or `SIGTERM`).
//!
//! Invariants: the first signal wins and cancels every token exactly once;
//! a token watched after the signal arrived is cancelled on the spot.
//!
//! Once installed, the handler replaces the default action of both signals
//! for the rest of the process, also after [`SignalCancel`] is dropped
//! (signal-hook never restores a default action). It is meant for commands
//! that exit soon after their run, such as `loops run-now` and `loops tick`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

use crate::cancel::CancelToken;

/// Cancels a token when the process receives SIGINT or SIGTERM.
///
/// Dropping it stops the listener thread.
///
/// ```no_run
/// use loops_exec::SignalCancel;
/// let signals = SignalCancel::install()?;
/// // Pass `signals.token()` as the runner's stop token, and watch the token
/// // of every run while it executes:
/// let run_token = loops_exec::CancelToken::new();
/// let _watch = signals.watch(&run_token);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct SignalCancel {
    shared: Arc<Shared>,
    handle: Handle,
    listener: Option<JoinHandle<()>>,
}

/// State shared with the listener thread.
struct Shared {
    /// Cancelled on the first signal.
    token: CancelToken,
    registry: Mutex<Registry>,
}

#[derive(Default)]
struct Registry {
    /// The reason of the first signal, once one arrived.
    fired: Option<String>,
    next_id: u64,
    watched: BTreeMap<u64, CancelToken>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Registry> {
        // Every update is a single assignment or map operation, so the state
        // is consistent even after a panic elsewhere.
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Cancels the token and every watched token, once.
    fn fire(&self, reason: String) {
        let mut registry = self.lock();
        if registry.fired.is_some() {
            return;
        }
        registry.fired = Some(reason.clone());
        self.token.cancel(reason.clone());
        for token in std::mem::take(&mut registry.watched).into_values() {
            token.cancel(reason.clone());
        }
    }
}

impl SignalCancel {
    /// Installs the SIGINT and SIGTERM handlers and starts the listener
    /// thread. Fails only when the OS refuses the handler or the thread.
    pub fn install() -> std::io::Result<SignalCancel> {
        let mut signals = Signals::new([SIGINT, SIGTERM])?;
        let handle = signals.handle();
        let shared = Arc::new(Shared {
            token: CancelToken::new(),
            registry: Mutex::new(Registry::default()),
        });
        let listener_shared = Arc::clone(&shared);
        let listener = std::thread::Builder::new()
            .name("loops-signals".to_owned())
            .spawn(move || {
                // `forever` ends when the handle is closed on drop.
                for signal in signals.forever() {
                    let name = if signal == SIGINT {
                        "SIGINT"
                    } else {
                        "SIGTERM"
                    };
                    listener_shared.fire(format!("cancelled by {name}"));
                }
            })?;
        Ok(SignalCancel {
            shared,
            handle,
            listener: Some(listener),
        })
    }

    /// The token the first signal cancels; a runner's stop token.
    pub fn token(&self) -> &CancelToken {
        &self.shared.token
    }

    /// Cancels `token` too when a signal arrives, for as long as the
    /// returned watch lives. If a signal already arrived, `token` is
    /// cancelled now.
    pub fn watch(&self, token: &CancelToken) -> SignalWatch {
        let mut registry = self.shared.lock();
        if let Some(reason) = &registry.fired {
            token.cancel(reason.clone());
            return SignalWatch {
                shared: None,
                id: 0,
            };
        }
        let id = registry.next_id;
        registry.next_id += 1;
        registry.watched.insert(id, token.clone());
        SignalWatch {
            shared: Some(Arc::clone(&self.shared)),
            id,
        }
    }
}

impl fmt::Debug for SignalCancel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignalCancel")
            .field("token", &self.shared.token)
            .finish_non_exhaustive()
    }
}

impl Drop for SignalCancel {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(listener) = self.listener.take() {
            // The thread only forwards signals; a panic there has nothing
            // left to report.
            let _ = listener.join();
        }
    }
}

/// Keeps a token watched by a [`SignalCancel`]; dropping it stops watching.
pub struct SignalWatch {
    shared: Option<Arc<Shared>>,
    id: u64,
}

impl fmt::Debug for SignalWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignalWatch").field("id", &self.id).finish()
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared.lock().watched.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_signal_cancels_the_token_and_watched_tokens_once() {
        let signals = SignalCancel::install().unwrap();
        let run = CancelToken::new();
        let watch = signals.watch(&run);
        let unwatched = CancelToken::new();
        drop(signals.watch(&unwatched));
        // Delivered to this process; the handler is installed, so the test
        // process is not terminated.
        signal_hook::low_level::raise(SIGTERM).unwrap();
        assert!(signals.token().wait_timeout(Duration::from_secs(10)));
        assert_eq!(
            signals.token().reason().as_deref(),
            Some("cancelled by SIGTERM")
        );
        assert_eq!(run.reason().as_deref(), Some("cancelled by SIGTERM"));
        assert!(
            !unwatched.is_cancelled(),
            "a dropped watch is not cancelled"
        );
        drop(watch);

        let late = CancelToken::new();
        let _late_watch = signals.watch(&late);
        assert_eq!(late.reason().as_deref(), Some("cancelled by SIGTERM"));
    }
}
