//! Watching for the leader's exit without reaping it: a pidfd polled with
//! the pipes, else a waiter thread blocked in `waitid(WNOWAIT)` that rings
//! the wake-up pipe, else polling `try_wait`.

use std::io::PipeWriter;
#[cfg(any(target_os = "linux", target_os = "android"))]
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use nix::unistd::Pid;

/// How the loop learns that the leader exited.
pub(super) enum ExitWatch {
    /// A pidfd of the leader, polled with the pipes until it is readable:
    /// the leader exited. It stays a zombie, so its pid (and group id)
    /// cannot be reused until
    /// [`Supervisor::reap`](super::teardown::Supervisor::reap).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    Pidfd { fd: OwnedFd, exited: bool },
    /// A thread blocked in `waitid(WEXITED | WNOWAIT)` sets the flag and
    /// rings the wake-up pipe. The leader stays a zombie, so its pid (and
    /// group id) cannot be reused until
    /// [`Supervisor::reap`](super::teardown::Supervisor::reap).
    Waiter {
        exited: Arc<std::sync::atomic::AtomicBool>,
        thread: std::thread::JoinHandle<()>,
    },
    /// No waiter: the loop polls `try_wait` every [`RECHECK`](super::RECHECK).
    Polling,
}

/// Which [`ExitWatch`] a supervisor may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Watch {
    /// The first that works: a pidfd, a waiter thread, polling.
    Best,
    /// A waiter thread, else polling (the fallback without `pidfd_open`).
    #[cfg_attr(not(test), allow(dead_code))]
    Thread,
    /// Polling only (the fallback where no thread can be started).
    #[cfg_attr(not(test), allow(dead_code))]
    Poll,
}

impl ExitWatch {
    pub(super) fn start(pid: Pid, writer: &Arc<PipeWriter>, mode: Watch) -> ExitWatch {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if mode == Watch::Best
            && let Some(fd) = rustix::process::Pid::from_raw(pid.as_raw()).and_then(|p| {
                rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()
            })
        {
            return ExitWatch::Pidfd { fd, exited: false };
        }
        if mode == Watch::Poll {
            return ExitWatch::Polling;
        }
        waiter::start(pid, writer).unwrap_or(ExitWatch::Polling)
    }

    /// The descriptor to poll for the leader's exit, until the exit is seen
    /// (a pidfd stays readable after it).
    pub(super) fn poll_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        match self {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            ExitWatch::Pidfd { fd, exited: false } => Some(fd.as_fd()),
            _ => None,
        }
    }

    /// The descriptor of [`ExitWatch::poll_fd`] became readable.
    pub(super) fn saw_exit(&mut self) {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let ExitWatch::Pidfd { exited, .. } = self {
            *exited = true;
        }
    }

    pub(super) fn is_polling(&self) -> bool {
        matches!(self, ExitWatch::Polling)
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod waiter {
    use std::io::PipeWriter;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use nix::errno::Errno;
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    use nix::unistd::Pid;

    use super::ExitWatch;
    use crate::supervise::ring;

    /// Starts the waiter thread, or `None` when no thread can be started
    /// (the loop then polls).
    pub(super) fn start(pid: Pid, writer: &Arc<PipeWriter>) -> Option<ExitWatch> {
        let exited = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&exited);
        let writer = Arc::clone(writer);
        let thread = std::thread::Builder::new()
            .name("loops-exit-wait".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                // Returns once the leader is a zombie (or ECHILD: it was
                // already reaped); either way it has exited.
                let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
                while let Err(Errno::EINTR) = waitid(Id::Pid(pid), flags) {}
                flag.store(true, Ordering::Release);
                ring(&writer);
            })
            .ok()?;
        Some(ExitWatch::Waiter { exited, thread })
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod waiter {
    use std::io::PipeWriter;
    use std::sync::Arc;

    use nix::unistd::Pid;

    use super::ExitWatch;

    /// Without `waitid`, an exit cannot be observed without reaping, which
    /// only the loop itself may do; it polls instead.
    pub(super) fn start(_pid: Pid, _writer: &Arc<PipeWriter>) -> Option<ExitWatch> {
        None
    }
}
