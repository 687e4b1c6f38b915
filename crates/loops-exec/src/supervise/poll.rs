//! The wait loop of a supervised run: one `poll` over the child's stdout
//! and stderr, the wake-up pipe and the leader's pidfd, which drains the
//! output while it waits for the exit, the timeout, the idle watchdog (the
//! time since the last byte on stdout or stderr), the cancel or the
//! teardown's next step.

use std::cell::Cell;
use std::io::{PipeReader, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Instant;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::unistd::Pid;

use crate::cancel::CancelToken;
use crate::output::Capture;
use crate::runlog::{LogTee, Stream};

use super::teardown::{Escapees, Phase, Supervisor, Teardown};
use super::watch::{ExitWatch, Watch};
use super::{Cause, Finished, Limits, RECHECK, Running, ring};

/// The bytes read from a pipe at once.
const READ_CHUNK: usize = 64 * 1024;

thread_local! {
    /// The thread's read buffer, kept from one run to the next: a pool
    /// worker supervises run after run, and allocating and zeroing 64 KiB
    /// for each was a fifth of the worker's instructions in a chain of
    /// `true` steps (callgrind). Taken out for a run and put back after
    /// it, so a run supervised inside another (none is) would only
    /// allocate its own.
    static READ_BUF: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

impl Running {
    /// [`Running::supervise`], watching the leader's exit as `mode` says:
    /// tests force the fallbacks.
    pub(super) fn supervise_with(self, limits: &Limits<'_>, mode: Watch) -> Finished {
        let Running {
            mut child,
            wake,
            cookie,
        } = self;
        // The pid of a child std spawned always fits in a pid_t.
        let pgid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        let mut out = Capture::new(
            child.stdout.take().map(OwnedFd::from),
            limits.max_output_bytes,
        );
        let mut err = Capture::new(
            child.stderr.take().map(OwnedFd::from),
            limits.max_output_bytes,
        );
        let watch = ExitWatch::start(pgid, &wake.writer, mode);
        let subscription = limits.cancel.map(|token| {
            let writer = Arc::clone(&wake.writer);
            token.subscribe(move || ring(&writer))
        });

        let mut sup = Supervisor {
            child,
            pgid,
            watch,
            status: None,
            phase: Phase::Running,
            escapees: Escapees::new(cookie),
        };
        let started = Instant::now();
        let deadline = limits.timeout.and_then(|t| started.checked_add(t));
        // The idle watchdog is armed at the spawn; every byte read on
        // stdout or stderr re-arms it (issue 27).
        let mut last_output = started;
        let mut buf = READ_BUF.take();
        if buf.is_empty() {
            buf = vec![0u8; READ_CHUNK];
        }
        let mut tee = limits
            .log
            .map(|(log, secrets)| LogTee::new(log, secrets, limits.max_output_bytes));
        loop {
            let now = Instant::now();
            if !sup.phase.leader_exited() && sup.poll_exit() {
                sup.phase.exit(now);
            }
            // Timeout and cancel only matter while the leader runs: once it
            // has exited on its own, its exit status is the result.
            // When both timers are due, the idle watchdog is the cause.
            let idle_due = limits.idle.and_then(|t| last_output.checked_add(t));
            if matches!(sup.phase, Phase::Running) {
                let cause = match limits.cancel.and_then(CancelToken::reason) {
                    Some(reason) => Some(Cause::Cancelled(reason)),
                    None if reached(now, idle_due) => Some(Cause::Idle),
                    None if reached(now, deadline) => Some(Cause::TimedOut),
                    None => None,
                };
                if cause.is_some() {
                    sup.terminate(now, cause);
                }
            }

            let mut wake_at = Earliest::default();
            let killing = matches!(sup.phase, Phase::Killing(_));
            match sup.phase {
                Phase::Running => {
                    wake_at.maybe(deadline);
                    wake_at.maybe(idle_due);
                    if sup.watch.is_polling() {
                        wake_at.maybe(now.checked_add(RECHECK));
                    }
                }
                Phase::Draining { exited_at } => {
                    let leak_deadline = exited_at.checked_add(limits.leak_timeout);
                    let drained = out.is_closed() && err.is_closed();
                    if drained || reached(now, leak_deadline) {
                        // Escapees are looked for only once a teardown
                        // began: until then the group alone decides.
                        if !sup.group_alive() {
                            break;
                        }
                        sup.terminate(now, None);
                        wake_at.maybe(now.checked_add(RECHECK));
                    } else {
                        wake_at.maybe(leak_deadline);
                    }
                }
                Phase::Terminating(Teardown {
                    leader_exited: true,
                    ..
                })
                | Phase::Killing(Teardown {
                    leader_exited: true,
                    ..
                }) => {
                    if !sup.group_alive() && !sup.escapees.alive(now, killing) {
                        break;
                    }
                    wake_at.maybe(now.checked_add(RECHECK));
                }
                // A teardown whose leader still runs waits for its exit.
                Phase::Terminating(_) | Phase::Killing(_) => {
                    if sup.watch.is_polling() {
                        wake_at.maybe(now.checked_add(RECHECK));
                    }
                }
            }
            if let Phase::Terminating(Teardown { since, .. }) = sup.phase {
                // A cancel may name its own grace (`loops cancel --grace`).
                let grace = limits.cancel.and_then(CancelToken::grace);
                let kill_due = since.checked_add(grace.unwrap_or(limits.kill_grace));
                if reached(now, kill_due) {
                    sup.kill(now);
                } else {
                    wake_at.maybe(kill_due);
                }
            }
            if let Phase::Killing(Teardown {
                since,
                leader_exited: true,
                ..
            }) = sup.phase
            {
                // Everything left has been sent SIGKILL, which cannot be
                // caught. A member still listed a grace period later is stuck
                // in the kernel; waiting longer would only hang the run.
                let give_up = since.checked_add(limits.kill_grace);
                if reached(now, give_up) {
                    break;
                }
                wake_at.maybe(give_up);
            }

            let exit_fd = sup.watch.poll_fd();
            let (leader_ready, got_output) = wait_and_read(
                &mut out,
                &mut err,
                &wake.reader,
                exit_fd,
                wake_at.0,
                &mut buf,
                &mut tee,
            );
            if leader_ready {
                sup.watch.saw_exit();
            }
            if got_output {
                last_output = Instant::now();
                if let Some(seen) = limits.seen {
                    seen.saw();
                }
            }
        }

        // Whatever the group wrote before it died is still in the pipes.
        out.drain_available(&mut buf, &mut |b| tee_chunk(&mut tee, Stream::Stdout, b));
        err.drain_available(&mut buf, &mut |b| tee_chunk(&mut tee, Stream::Stderr, b));
        if let Some(tee) = &mut tee {
            tee.finish();
        }
        // Unsubscribe before the pipe closes; see `CancelToken::cancel`.
        drop(subscription);
        READ_BUF.set(buf);
        let status = sup.reap();
        Finished {
            status,
            cause: sup.phase.into_cause(),
            stdout: out.buf.finish(),
            stderr: err.buf.finish(),
        }
    }
}

/// Hands a chunk just read to the run's log, when it has one.
fn tee_chunk(tee: &mut Option<LogTee<'_>>, stream: Stream, bytes: &[u8]) {
    if let Some(tee) = tee
        && !bytes.is_empty()
    {
        tee.chunk(stream, bytes);
    }
}

/// Whether `deadline` has passed; `None` (a duration too long to add to an
/// instant) never passes.
fn reached(now: Instant, deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| now >= d)
}

/// The earliest of some instants, if any.
#[derive(Default)]
struct Earliest(Option<Instant>);

impl Earliest {
    fn maybe(&mut self, t: Option<Instant>) {
        if let Some(t) = t {
            self.0 = Some(self.0.map_or(t, |e| e.min(t)));
        }
    }
}

/// Blocks until a pipe is readable, the wake-up pipe rings, `exit` (the
/// leader's pidfd) is readable, or `until`; then reads what is ready.
/// Returns whether `exit` was readable, and whether any byte was read from
/// stdout or stderr.
fn wait_and_read(
    out: &mut Capture,
    err: &mut Capture,
    wake: &PipeReader,
    exit: Option<std::os::fd::BorrowedFd<'_>>,
    until: Option<Instant>,
    buf: &mut [u8],
    tee: &mut Option<LogTee<'_>>,
) -> (bool, bool) {
    let timeout = match until {
        None => PollTimeout::NONE,
        Some(t) => {
            // Rounded up, so the loop never spins on a sub-millisecond rest.
            let micros = t.saturating_duration_since(Instant::now()).as_micros();
            let millis = micros.div_ceil(1000).min(i32::MAX as u128);
            PollTimeout::try_from(millis).unwrap_or(PollTimeout::MAX)
        }
    };
    let interest = PollFlags::POLLIN;
    let mut fds = vec![PollFd::new(wake.as_fd(), interest)];
    let out_slot = out.pipe.as_ref().map(|p| {
        fds.push(PollFd::new(p.as_fd(), interest));
        fds.len() - 1
    });
    let err_slot = err.pipe.as_ref().map(|p| {
        fds.push(PollFd::new(p.as_fd(), interest));
        fds.len() - 1
    });
    let exit_slot = exit.map(|fd| {
        fds.push(PollFd::new(fd, interest));
        fds.len() - 1
    });
    match poll(&mut fds, timeout) {
        Ok(n) if n > 0 => {}
        Ok(_) | Err(Errno::EINTR) => return (false, false),
        Err(_) => {
            // Not expected with valid descriptors; avoid a hot loop.
            std::thread::sleep(RECHECK);
            return (false, false);
        }
    }
    let ready: Vec<bool> = fds
        .iter()
        .map(|fd| fd.revents().is_some_and(|r| !r.is_empty()))
        .collect();
    drop(fds);
    if ready[0] {
        let mut sink = [0u8; 16];
        let mut reader = wake;
        let _ = reader.read(&mut sink);
    }
    // The chunk just read goes to the run's log at once: one write of its
    // whole lines, while it is still in the cache.
    let mut got_output = false;
    if out_slot.is_some_and(|i| ready[i]) {
        let n = out.read_once(buf);
        tee_chunk(tee, Stream::Stdout, &buf[..n]);
        got_output |= n > 0;
    }
    if err_slot.is_some_and(|i| ready[i]) {
        let n = err.read_once(buf);
        tee_chunk(tee, Stream::Stderr, &buf[..n]);
        got_output |= n > 0;
    }
    (exit_slot.is_some_and(|i| ready[i]), got_output)
}
