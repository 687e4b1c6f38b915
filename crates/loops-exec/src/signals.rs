//! [`SignalCancel`]: SIGINT and SIGTERM become a [`CancelToken`] cancel
//! (SPEC §9 item 19).
//!
//! The original never forwarded Ctrl-C to a `run-now` child: the child leads
//! its own process group, so the terminal's SIGINT reaches only loops, which
//! died and left the child running and the run row `running`. Here a
//! background thread reads the signals through `signal-hook`'s iterator (a
//! self-pipe, so no code runs in signal context and no `unsafe` is needed)
//! and cancels a token. Runners pass that token as their stop token; the
//! scheduler subscribes to it and cancels every run in flight at once, so
//! each child's process group is torn down and the run is finalized as
//! failed with the token's reason, `cancelled by SIGINT` (or `SIGTERM`).
//!
//! Once installed, the handler replaces the default action of both signals
//! for the rest of the process, also after [`SignalCancel`] is dropped
//! (signal-hook never restores a default action). It is meant for commands
//! that exit soon after their run, such as `loops run-now` and `loops tick`.

use std::fmt;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

use crate::cancel::CancelToken;

/// Cancels a token when the process receives SIGINT or SIGTERM.
///
/// Dropping it stops the listener thread, without waiting for it to end:
/// commands drop it just before they exit, and would otherwise wait for
/// the thread to wake up (`docs/perf.md#process-start`).
///
/// ```no_run
/// use loops_exec::SignalCancel;
/// let signals = SignalCancel::install()?;
/// // Pass `signals.token()` as the runner's stop token.
/// let stop: &loops_exec::CancelToken = signals.token();
/// # let _ = stop;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct SignalCancel {
    token: CancelToken,
    handle: Handle,
}

impl SignalCancel {
    /// Installs the SIGINT and SIGTERM handlers and starts the listener
    /// thread. Fails only when the OS refuses the handler or the thread.
    pub fn install() -> std::io::Result<SignalCancel> {
        SignalCancel::listen(false)
    }

    /// [`SignalCancel::install`] for a long-lived daemon: SIGHUP is also
    /// caught, and ignored, so that closing the terminal a daemon was
    /// started from does not kill it (a daemon started by `loops daemon
    /// start` is in its own process group, but `daemon run` may be started
    /// under `nohup`-less shells too).
    pub fn install_daemon() -> std::io::Result<SignalCancel> {
        SignalCancel::listen(true)
    }

    fn listen(catch_hup: bool) -> std::io::Result<SignalCancel> {
        let mut signals = if catch_hup {
            Signals::new([SIGINT, SIGTERM, SIGHUP])?
        } else {
            Signals::new([SIGINT, SIGTERM])?
        };
        let handle = signals.handle();
        let token = CancelToken::new();
        let listener_token = token.clone();
        std::thread::Builder::new()
            .name("loops-signals".to_owned())
            .spawn(move || {
                // `forever` ends when the handle is closed on drop. The
                // first signal's reason wins (CancelToken keeps the first).
                for signal in signals.forever() {
                    let name = match signal {
                        SIGINT => "SIGINT",
                        SIGTERM => "SIGTERM",
                        _ => continue,
                    };
                    listener_token.cancel(format!("cancelled by {name}"));
                }
            })?;
        Ok(SignalCancel { token, handle })
    }

    /// The token the first signal cancels; a runner's stop token.
    pub fn token(&self) -> &CancelToken {
        &self.token
    }
}

impl fmt::Debug for SignalCancel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignalCancel")
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl Drop for SignalCancel {
    fn drop(&mut self) {
        // `forever` returns once the handle is closed, and the thread ends.
        self.handle.close();
    }
}

/// Makes a file-size limit (`ulimit -f`, systemd's `LimitFSIZE`) an error
/// instead of a silent death: SIGXFSZ's default action kills the process,
/// so a write past the limit would end `loops` (or the daemon) with
/// nothing printed. With a handler installed, the write fails with EFBIG,
/// which SQLite reports as an I/O error that is printed like any other.
///
/// A handler, not `SIG_IGN`: an ignored signal would be inherited by the
/// runs' children, while a handler is reset by `exec`.
pub fn survive_file_size_limit() {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Registering only fails for signals that cannot be caught; SIGXFSZ
    // can, so the default action stays only if the OS refuses.
    let _ = signal_hook::flag::register(signal_hook::consts::SIGXFSZ, flag);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_signal_cancels_the_token_with_its_name() {
        let signals = SignalCancel::install().unwrap();
        assert!(!signals.token().is_cancelled());
        // Delivered to this process; the handler is installed, so the test
        // process is not terminated.
        signal_hook::low_level::raise(SIGTERM).unwrap();
        assert!(signals.token().wait_timeout(Duration::from_secs(10)));
        assert_eq!(
            signals.token().reason().as_deref(),
            Some("cancelled by SIGTERM")
        );
    }
}
