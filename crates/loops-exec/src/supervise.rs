//! Spawning a child in its own process group and supervising it until its
//! whole group is gone (SPEC §5.7; §9 items 15, 22–24).
//!
//! **Spawn.** `env_clear()` and then exactly the built environment plus the
//! spawn cookie `LOOPS_SPAWN_ID` (see `cookie.rs`), stdin from `/dev/null`,
//! stdout and stderr piped, and `process_group(0)`. There is no `pre_exec`,
//! and the program arrives already resolved to an absolute path, so std
//! keeps its `posix_spawn` fast path (std falls back to fork/exec to search
//! a bare name in a child PATH that differs from ours).
//!
//! **One wait loop.** The calling thread polls the child's stdout, its
//! stderr, a wake-up pipe and, on Linux, a pidfd of the group leader, which
//! becomes readable when the leader exits (it stays a zombie until the
//! reap). The wake-up pipe gets a byte when the run's [`CancelToken`] is
//! cancelled. So a run costs only the caller's thread, a cancel is seen at
//! once, and output is drained concurrently with the wait, to EOF. Where
//! `pidfd_open` is missing (Linux before 5.3), a small thread blocked in
//! `waitid(WEXITED | WNOWAIT)`, which sees the exit without reaping, rings
//! the wake-up pipe instead; elsewhere the loop polls `try_wait`.
//!
//! **Teardown.** Timeout, idle watchdog, cancel and the end of a normal run
//! share one path: SIGTERM to the whole group, a grace period, then SIGKILL
//! to whatever is left, and finally the leader is reaped. Nothing is signalled after the
//! leader has been reaped, unless a probe has just seen the group non-empty
//! (SPEC §9 item 15: the original sent SIGKILL unconditionally, 2 s later).
//!
//! **A run's process group never outlives its run.** When the leader exits
//! on its own, the supervisor waits for both pipes to reach EOF, or for the
//! short leak timeout (default 500 ms) when a background grandchild still
//! holds them open, and then tears down whatever is left in the group with
//! the same SIGTERM, grace, SIGKILL sequence.
//!
//! **Processes that left the group are followed on Linux.** A process that
//! moved itself to another group or session (`setsid`, a daemonizing double
//! fork) no longer gets the group's signals. Every teardown (timeout, cancel,
//! or members left in the group after the leader exited) therefore also
//! scans `/proc` for the processes of this uid that carry the spawn's cookie
//! in their environment, and gives them the group's treatment: SIGTERM with
//! the group, SIGKILL with the group, and the teardown is over only once the
//! group is empty *and* a fresh scan finds no carrier (or a grace period
//! after the SIGKILL, as for the group). While carriers remain after the
//! SIGKILL, every rescan sends SIGKILL again, which also catches processes
//! forked in between.
//!
//! The common path pays nothing for this: a run whose group is empty once
//! its leader has exited is not torn down, so `/proc` is not scanned. A
//! process that detached itself from such a run (a daemon started on
//! purpose) is left alone; if it keeps the pipes open, the run ends after
//! the leak timeout and the rest of its output is not read.
//!
//! What cannot be followed, and is left running (the run still ends on
//! time): a process that left the group *and* cleared or rewrote its
//! environment before an exec (`setsid env -i ...`), since nothing then ties
//! it to the run; a process of another uid, or one that made itself
//! non-dumpable (`ssh-agent`), whose environment cannot be read; and on
//! platforms other than Linux every process that left the group.
//!
//! **Where it lives.** This file spawns and holds the types a run is
//! described by; `poll.rs` holds the wait loop and the poll of the pipes,
//! `watch.rs` how the leader's exit is watched, and `teardown.rs` the
//! run's phase (running, draining, terminating, killing), the group's
//! SIGTERM, grace and SIGKILL and the following of escapees.

use std::collections::BTreeMap;
use std::io::{self, PipeReader, PipeWriter, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;

use crate::cancel::CancelToken;
use crate::cookie;
use crate::output_seen::OutputSeen;
use crate::runlog::RunLog;
use crate::scrub::Secrets;

use self::watch::Watch;

mod poll;
mod teardown;
#[cfg(test)]
mod tests;
mod watch;

/// How often a teardown re-checks whether the group is empty, and how often
/// the leader is polled where no waiter thread could be started.
const RECHECK: Duration = Duration::from_millis(10);

/// What to start.
pub(crate) struct Launch<'a> {
    /// The resolved program, absolute when possible.
    pub(crate) program: &'a Path,
    /// `argv[0]`: the name the target used.
    pub(crate) arg0: &'a str,
    /// The arguments after `argv[0]`.
    pub(crate) args: &'a [String],
    /// The working directory; the loops process's own when `None`.
    pub(crate) cwd: Option<&'a Path>,
    /// The complete environment.
    pub(crate) env: &'a BTreeMap<String, String>,
    /// What the child reads on stdin (a hook's run JSON); `/dev/null` when
    /// `None`.
    pub(crate) stdin: Option<&'a [u8]>,
}

/// The bounds a supervised run lives within.
pub(crate) struct Limits<'a> {
    /// Kill the group this long after the spawn; never when `None`.
    pub(crate) timeout: Option<Duration>,
    /// Kill the group after this long without a byte on stdout or stderr
    /// (the idle watchdog, issue 27); never when `None`.
    pub(crate) idle: Option<Duration>,
    /// Kill the group when this fires.
    pub(crate) cancel: Option<&'a CancelToken>,
    /// Between SIGTERM and SIGKILL.
    pub(crate) kill_grace: Duration,
    /// How long to wait for EOF after the leader exited.
    pub(crate) leak_timeout: Duration,
    /// Per-stream capture cap; also each stream's cap in the run's log.
    pub(crate) max_output_bytes: usize,
    /// The run's log file, and what to scrub from it (`runlog.rs`).
    pub(crate) log: Option<(&'a RunLog, &'a Secrets)>,
    /// Marked at every read of output (issue 27); `None` keeps no mark.
    pub(crate) seen: Option<&'a OutputSeen>,
}

/// Why the supervisor killed the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cause {
    /// The timeout passed.
    TimedOut,
    /// The idle watchdog fired: nothing on stdout or stderr for its period.
    Idle,
    /// The cancel token fired, with its reason.
    Cancelled(String),
}

/// How a supervised run ended.
#[derive(Debug)]
pub(crate) struct Finished {
    /// The leader's exit status; `None` only if reaping it failed.
    pub(crate) status: Option<ExitStatus>,
    /// Set when the supervisor killed the group, whatever the exit status.
    pub(crate) cause: Option<Cause>,
    /// Captured stdout.
    pub(crate) stdout: String,
    /// Captured stderr.
    pub(crate) stderr: String,
}

/// A spawned child, not yet supervised.
pub(crate) struct Running {
    child: Child,
    wake: Wake,
    /// The spawn cookie in the child's `LOOPS_SPAWN_ID`.
    cookie: String,
}

/// The wake-up pipe of one run.
struct Wake {
    reader: PipeReader,
    writer: Arc<PipeWriter>,
}

/// Writes the wake-up byte. It cannot block: at most two bytes (exit and
/// cancel) are ever written to a pipe that holds kilobytes.
fn ring(writer: &PipeWriter) {
    let mut w = writer;
    let _ = w.write(&[1]);
}

/// Starts `launch` in its own process group.
pub(crate) fn spawn(launch: &Launch<'_>) -> io::Result<Running> {
    // The pipe comes first, so that a spawned child always has one.
    let (reader, writer) = io::pipe()?;
    let cookie = cookie::next();
    let inherited = launch.env.get(cookie::VAR).map(String::as_str);
    let mut cmd = Command::new(launch.program);
    cmd.arg0(launch.arg0)
        .args(launch.args)
        .env_clear()
        .envs(launch.env)
        .env(cookie::VAR, cookie::chain(inherited, &cookie))
        .stdin(if launch.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(cwd) = launch.cwd {
        cmd.current_dir(cwd);
    }
    let mut child = spawn_retrying(&mut cmd)?;
    if let (Some(data), Some(mut pipe)) = (launch.stdin, child.stdin.take()) {
        // Written on a thread of its own, so a child that never reads its
        // stdin cannot block the supervision; the write ends with an error
        // once the child's group is gone.
        let data = data.to_vec();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&data);
        });
    }
    Ok(Running {
        child,
        wake: Wake {
            reader,
            writer: Arc::new(writer),
        },
        cookie,
    })
}

/// Spawns, retrying briefly on `ETXTBSY`: a script that was just written
/// can still be open for writing in a child another thread is forking at
/// that moment, until that child's exec closes it.
fn spawn_retrying(cmd: &mut Command) -> io::Result<Child> {
    let mut delay = Duration::from_millis(5);
    for _ in 0..4 {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(Errno::ETXTBSY as i32) => {
                std::thread::sleep(delay);
                delay *= 2;
            }
            other => return other,
        }
    }
    cmd.spawn()
}

impl Running {
    /// The child's pid, which is also its process group id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the run to end (exit, timeout or cancel), tears down its
    /// process group, reaps the leader and returns the captured output.
    pub(crate) fn supervise(self, limits: &Limits<'_>) -> Finished {
        self.supervise_with(limits, Watch::Best)
    }
}
