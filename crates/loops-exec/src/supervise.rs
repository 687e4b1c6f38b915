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
//! **Teardown.** Timeout, cancel and the end of a normal run share one path:
//! SIGTERM to the whole group, a grace period, then SIGKILL to whatever is
//! left, and finally the leader is reaped. Nothing is signalled after the
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

use std::collections::BTreeMap;
use std::io::{self, PipeReader, PipeWriter, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::cancel::CancelToken;
use crate::cookie;
use crate::group;
use crate::output::Capture;

/// How often a teardown re-checks whether the group is empty, and how often
/// the leader is polled where no waiter thread could be started.
const RECHECK: Duration = Duration::from_millis(10);

/// The bytes read from a pipe at once.
const READ_CHUNK: usize = 64 * 1024;

/// How often a teardown rescans `/proc` for processes that carry the spawn
/// cookie while it last found some: a scan costs milliseconds.
const ESCAPEE_RECHECK: Duration = Duration::from_millis(50);

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
}

/// The bounds a supervised run lives within.
pub(crate) struct Limits<'a> {
    /// Kill the group this long after the spawn; never when `None`.
    pub(crate) timeout: Option<Duration>,
    /// Kill the group when this fires.
    pub(crate) cancel: Option<&'a CancelToken>,
    /// Between SIGTERM and SIGKILL.
    pub(crate) kill_grace: Duration,
    /// How long to wait for EOF after the leader exited.
    pub(crate) leak_timeout: Duration,
    /// Per-stream capture cap.
    pub(crate) max_output_bytes: usize,
}

/// Why the supervisor killed the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cause {
    /// The timeout passed.
    TimedOut,
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
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(cwd) = launch.cwd {
        cmd.current_dir(cwd);
    }
    let child = spawn_retrying(&mut cmd)?;
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

    /// [`Running::supervise`], watching the leader's exit as `mode` says:
    /// tests force the fallbacks.
    fn supervise_with(self, limits: &Limits<'_>, mode: Watch) -> Finished {
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
            exited_at: None,
            cause: None,
            term_at: None,
            kill_at: None,
            escapees: Escapees::new(cookie),
        };
        let deadline = limits.timeout.and_then(|t| Instant::now().checked_add(t));
        let mut buf = read_buffer::take();
        loop {
            let now = Instant::now();
            if sup.exited_at.is_none() && sup.leader_exited() {
                sup.exited_at = Some(now);
            }
            // Timeout and cancel only matter while the leader runs: once it
            // has exited on its own, its exit status is the result.
            if sup.exited_at.is_none() && sup.cause.is_none() {
                let cause = match limits.cancel.and_then(CancelToken::reason) {
                    Some(reason) => Some(Cause::Cancelled(reason)),
                    None if reached(now, deadline) => Some(Cause::TimedOut),
                    None => None,
                };
                if cause.is_some() {
                    sup.cause = cause;
                    sup.terminate(now);
                }
            }

            let mut wake_at = Earliest::default();
            if let Some(exited) = sup.exited_at {
                let leak_deadline = exited.checked_add(limits.leak_timeout);
                let drained = out.is_closed() && err.is_closed();
                if drained || reached(now, leak_deadline) || sup.term_at.is_some() {
                    // Escapees are looked for only once a teardown began.
                    if !sup.group_alive() && !sup.escapees.alive(now, sup.kill_at.is_some()) {
                        break;
                    }
                    if sup.term_at.is_none() {
                        sup.terminate(now);
                    }
                    wake_at.maybe(now.checked_add(RECHECK));
                } else {
                    wake_at.maybe(leak_deadline);
                }
            } else {
                if sup.cause.is_none() {
                    wake_at.maybe(deadline);
                }
                if sup.watch.is_polling() {
                    wake_at.maybe(now.checked_add(RECHECK));
                }
            }
            if let (Some(term_at), None) = (sup.term_at, sup.kill_at) {
                let kill_due = term_at.checked_add(limits.kill_grace);
                if reached(now, kill_due) {
                    sup.kill(now);
                } else {
                    wake_at.maybe(kill_due);
                }
            }
            if let (Some(kill_at), Some(_)) = (sup.kill_at, sup.exited_at) {
                // Everything left has been sent SIGKILL, which cannot be
                // caught. A member still listed a grace period later is stuck
                // in the kernel; waiting longer would only hang the run.
                let give_up = kill_at.checked_add(limits.kill_grace);
                if reached(now, give_up) {
                    break;
                }
                wake_at.maybe(give_up);
            }

            let exit_fd = sup.watch.poll_fd();
            let leader_ready = wait_and_read(
                &mut out,
                &mut err,
                &wake.reader,
                exit_fd,
                wake_at.0,
                &mut buf,
            );
            if leader_ready {
                sup.watch.saw_exit();
            }
        }

        // Whatever the group wrote before it died is still in the pipes.
        out.drain_available(&mut buf);
        err.drain_available(&mut buf);
        read_buffer::give_back(buf);
        // Unsubscribe before the pipe closes; see `CancelToken::cancel`.
        drop(subscription);
        let status = sup.reap();
        Finished {
            status,
            cause: sup.cause,
            stdout: out.buf.finish(),
            stderr: err.buf.finish(),
        }
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

/// The state of one run's leader and group.
struct Supervisor {
    child: Child,
    pgid: Pid,
    watch: ExitWatch,
    /// Set once the leader has been reaped.
    status: Option<ExitStatus>,
    /// When the loop learned that the leader exited.
    exited_at: Option<Instant>,
    cause: Option<Cause>,
    /// When SIGTERM went to the group.
    term_at: Option<Instant>,
    /// When SIGKILL went to the group.
    kill_at: Option<Instant>,
    /// The processes that left the group but carry the spawn cookie.
    escapees: Escapees,
}

impl Supervisor {
    fn leader_exited(&mut self) -> bool {
        match &self.watch {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            ExitWatch::Pidfd { exited, .. } => *exited,
            ExitWatch::Waiter { exited, .. } => exited.load(std::sync::atomic::Ordering::Acquire),
            ExitWatch::Polling => match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.status = Some(status);
                    true
                }
                Ok(None) => false,
                // ECHILD: someone else reaped it. Either way it is gone.
                Err(_) => true,
            },
        }
    }

    /// Whether anything in the group can still run. Only asked once the
    /// leader has exited.
    fn group_alive(&mut self) -> bool {
        // The leader has exited: reap it, so that a probe of the group no
        // longer counts it, then probe. An empty group (the common case)
        // costs one system call.
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        if self.status.is_some() && !group::exists(self.pgid) {
            return false;
        }
        // Members remain, and zombies among them must not count: they
        // cannot run, and only their parent can remove them.
        if let Some(alive) = group::has_live_members(self.pgid) {
            return alive;
        }
        self.status.is_none() || group::exists(self.pgid)
    }

    fn terminate(&mut self, now: Instant) {
        self.signal(Signal::SIGTERM);
        self.escapees.signal(Signal::SIGTERM, now);
        self.term_at = Some(now);
    }

    fn kill(&mut self, now: Instant) {
        self.signal(Signal::SIGKILL);
        self.escapees.signal(Signal::SIGKILL, now);
        self.kill_at = Some(now);
    }

    fn signal(&mut self, signal: Signal) {
        // An unreaped leader (running or zombie) still owns the group id.
        // After the reap the id is only safe while members remain in it.
        if self.status.is_some() && !group::exists(self.pgid) {
            return;
        }
        group::signal(self.pgid, signal);
    }

    /// Reaps the leader (it has exited by now) and stops the waiter thread.
    fn reap(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.wait().ok();
        }
        if let ExitWatch::Waiter { thread, .. } =
            std::mem::replace(&mut self.watch, ExitWatch::Polling)
        {
            // The waiter returned as soon as the leader became a zombie.
            let _ = thread.join();
        }
        self.status
    }
}

/// The processes of a run that left its process group, found by the spawn
/// cookie in their environment (`cookie.rs`). Nothing is scanned until a
/// teardown begins.
struct Escapees {
    cookie: String,
    /// Set by the first signal: from then on the teardown follows them.
    following: bool,
    /// The last scan, if it found carriers.
    seen_at: Option<Instant>,
}

impl Escapees {
    fn new(cookie: String) -> Escapees {
        Escapees {
            cookie,
            following: false,
            seen_at: None,
        }
    }

    /// Sends `signal` to every carrier of the cookie, and follows them from
    /// now on.
    fn signal(&mut self, signal: Signal, now: Instant) {
        self.following = true;
        self.record(cookie::signal_carriers(&self.cookie, Some(signal)), now);
    }

    /// Whether carriers may still be alive; always `false` before the
    /// teardown began. Once SIGKILL has gone out (`killing`), every scan
    /// sends it again. A positive answer may be up to [`ESCAPEE_RECHECK`]
    /// old; a negative one is always fresh, since it ends the teardown.
    fn alive(&mut self, now: Instant, killing: bool) -> bool {
        if !self.following {
            return false;
        }
        if let Some(seen) = self.seen_at
            && now < seen + ESCAPEE_RECHECK
        {
            return true;
        }
        let signal = killing.then_some(Signal::SIGKILL);
        self.record(cookie::signal_carriers(&self.cookie, signal), now);
        self.seen_at.is_some()
    }

    fn record(&mut self, found: usize, now: Instant) {
        self.seen_at = (found > 0).then_some(now);
    }
}

/// How the loop learns that the leader exited.
enum ExitWatch {
    /// A pidfd of the leader, polled with the pipes until it is readable:
    /// the leader exited. It stays a zombie, so its pid (and group id)
    /// cannot be reused until [`Supervisor::reap`].
    #[cfg(any(target_os = "linux", target_os = "android"))]
    Pidfd { fd: OwnedFd, exited: bool },
    /// A thread blocked in `waitid(WEXITED | WNOWAIT)` sets the flag and
    /// rings the wake-up pipe. The leader stays a zombie, so its pid (and
    /// group id) cannot be reused until [`Supervisor::reap`].
    Waiter {
        exited: Arc<std::sync::atomic::AtomicBool>,
        thread: std::thread::JoinHandle<()>,
    },
    /// No waiter: the loop polls `try_wait` every [`RECHECK`].
    Polling,
}

/// Which [`ExitWatch`] a supervisor may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watch {
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
    fn start(pid: Pid, writer: &Arc<PipeWriter>, mode: Watch) -> ExitWatch {
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
    fn poll_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        match self {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            ExitWatch::Pidfd { fd, exited: false } => Some(fd.as_fd()),
            _ => None,
        }
    }

    /// The descriptor of [`ExitWatch::poll_fd`] became readable.
    fn saw_exit(&mut self) {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let ExitWatch::Pidfd { exited, .. } = self {
            *exited = true;
        }
    }

    fn is_polling(&self) -> bool {
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

    use super::{ExitWatch, ring};

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

/// Blocks until a pipe is readable, the wake-up pipe rings, `exit` (the
/// leader's pidfd) is readable, or `until`; then reads what is ready.
/// Returns whether `exit` was readable.
fn wait_and_read(
    out: &mut Capture,
    err: &mut Capture,
    wake: &PipeReader,
    exit: Option<std::os::fd::BorrowedFd<'_>>,
    until: Option<Instant>,
    buf: &mut [u8],
) -> bool {
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
        Ok(_) | Err(Errno::EINTR) => return false,
        Err(_) => {
            // Not expected with valid descriptors; avoid a hot loop.
            std::thread::sleep(RECHECK);
            return false;
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
    if out_slot.is_some_and(|i| ready[i]) {
        out.read_once(buf);
    }
    if err_slot.is_some_and(|i| ready[i]) {
        err.read_once(buf);
    }
    exit_slot.is_some_and(|i| ready[i])
}

/// The read buffer of a supervisor, kept per thread: a worker thread that
/// supervises one run after another reuses one buffer instead of zeroing
/// [`READ_CHUNK`] fresh bytes per run.
mod read_buffer {
    use std::cell::RefCell;

    use super::READ_CHUNK;

    thread_local! {
        static SPARE: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) };
    }

    /// This thread's buffer, or a new one.
    pub(super) fn take() -> Vec<u8> {
        SPARE
            .with(|s| s.borrow_mut().take())
            .unwrap_or_else(|| vec![0u8; READ_CHUNK])
    }

    /// Keeps `buf` for this thread's next run.
    pub(super) fn give_back(buf: Vec<u8>) {
        SPARE.with(|s| *s.borrow_mut() = Some(buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, dir: &Path) -> Running {
        let env = BTreeMap::from([
            ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
            ("DIR".to_owned(), dir.display().to_string()),
        ]);
        let args = ["-c".to_owned(), script.to_owned()];
        spawn(&Launch {
            program: Path::new("/bin/sh"),
            arg0: "sh",
            args: &args,
            cwd: None,
            env: &env,
        })
        .unwrap()
    }

    fn limits(timeout_ms: u64) -> Limits<'static> {
        Limits {
            timeout: Some(Duration::from_millis(timeout_ms)),
            cancel: None,
            kill_grace: Duration::from_millis(200),
            leak_timeout: Duration::from_millis(200),
            max_output_bytes: 1024,
        }
    }

    /// Waits past the moment a surviving grandchild would have written
    /// `late`, and checks it never did.
    fn assert_no_late_write(dir: &Path, start: Instant) {
        let until = start + Duration::from_millis(1_000);
        while Instant::now() < until {
            assert!(!dir.join("late").exists(), "a grandchild outlived its run");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn the_fallbacks_tear_down_the_group_too() {
        let cases = [
            (
                "( sleep 0.4; touch \"$DIR/late\" ) & echo up; sleep 30",
                100,
                Some(Cause::TimedOut),
            ),
            ("( sleep 0.4; touch \"$DIR/late\" ) & echo up", 10_000, None),
        ];
        for (mode, (script, timeout_ms, cause)) in [Watch::Thread, Watch::Poll]
            .into_iter()
            .flat_map(|mode| cases.clone().map(|case| (mode, case)))
        {
            let dir = tempfile::tempdir().unwrap();
            let start = Instant::now();
            let finished = sh(script, dir.path()).supervise_with(&limits(timeout_ms), mode);
            assert_eq!(finished.cause, cause);
            assert_eq!(finished.stdout, "up\n");
            if cause.is_none() {
                assert!(finished.status.unwrap().success());
            }
            assert_no_late_write(dir.path(), start);
        }
    }

    #[test]
    fn the_waiter_sees_the_exit_without_reaping() {
        let dir = tempfile::tempdir().unwrap();
        let finished = sh("exit 7", dir.path()).supervise(&limits(10_000));
        assert_eq!(finished.status.and_then(|s| s.code()), Some(7));
        assert_eq!(finished.cause, None);
    }

    /// Tests of the processes that leave the group, which need `setsid`
    /// (util-linux) and `/proc`.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    mod escapees {
        use super::*;

        /// Whether `setsid` exists; the tests skip themselves without it.
        fn have_setsid() -> bool {
            let found = which::which("setsid").is_ok();
            if !found {
                eprintln!("setsid is not installed: skipped");
            }
            found
        }

        /// An escapee that writes its pid to `up`, then `late` after 1.5 s,
        /// unless killed first. With `stubborn`, it ignores SIGTERM.
        fn escapee(stubborn: bool) -> String {
            let trap = if stubborn { "trap '' TERM; " } else { "" };
            format!(
                "sh -c '{trap}echo $$ >\"$DIR/pid\"; mv \"$DIR/pid\" \"$DIR/up\"; \
                 sleep 1.5; touch \"$DIR/late\"' >/dev/null 2>&1"
            )
        }

        /// Waits until the escapee is up.
        const WAIT_UP: &str = "while [ ! -e \"$DIR/up\" ]; do sleep 0.01; done";

        /// Checks that the escapee started and is dead (a zombie at most),
        /// and that nothing carries the cookie any more.
        fn assert_followed(dir: &Path, cookie: &str) {
            let pid = std::fs::read_to_string(dir.join("up")).expect("the escapee started");
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
            if let Ok(stat) = stat {
                let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                assert!(state.starts_with('Z'), "the escapee lives: {stat}");
            }
            assert_eq!(cookie::signal_carriers(cookie, None), 0, "an escapee lives");
            assert!(!dir.join("late").exists());
        }

        /// Kills what still carries `cookie`, so no test leaves a process.
        fn clean_up(cookie: &str) -> usize {
            let found = cookie::signal_carriers(cookie, Some(Signal::SIGKILL));
            let deadline = Instant::now() + Duration::from_secs(10);
            while cookie::signal_carriers(cookie, Some(Signal::SIGKILL)) > 0 {
                assert!(Instant::now() < deadline, "{cookie} cannot be killed");
                std::thread::sleep(Duration::from_millis(10));
            }
            found
        }

        #[test]
        fn a_timeout_follows_processes_that_left_the_group() {
            if !have_setsid() {
                return;
            }
            let cases = [
                // setsid, and a double fork whose middle process exits.
                (
                    format!("setsid {} & {WAIT_UP}; sleep 30", escapee(false)),
                    Watch::Best,
                ),
                (
                    format!("( setsid {} & ); {WAIT_UP}; sleep 30", escapee(true)),
                    Watch::Thread,
                ),
                (
                    format!("setsid {} & {WAIT_UP}; sleep 30", escapee(true)),
                    Watch::Poll,
                ),
            ];
            // The cases run side by side: each waits out its late write.
            let threads: Vec<_> = cases
                .into_iter()
                .map(|(script, mode)| {
                    std::thread::spawn(move || {
                        let dir = tempfile::tempdir().unwrap();
                        let running = sh(&script, dir.path());
                        let cookie = running.cookie.clone();
                        let finished = running.supervise_with(&limits(1_000), mode);
                        clean_up(&cookie);
                        assert_eq!(finished.cause, Some(Cause::TimedOut), "{script}");
                        assert_followed(dir.path(), &cookie);
                    })
                })
                .collect();
            for case in threads {
                case.join().unwrap();
            }
        }

        #[test]
        fn a_cancel_follows_processes_that_left_the_group() {
            if !have_setsid() {
                return;
            }
            let dir = tempfile::tempdir().unwrap();
            let script = format!("setsid {} & {WAIT_UP}; sleep 30", escapee(true));
            let running = sh(&script, dir.path());
            let cookie = running.cookie.clone();
            let token = CancelToken::new();
            let canceller = {
                let (token, up) = (token.clone(), dir.path().join("up"));
                std::thread::spawn(move || {
                    let deadline = Instant::now() + Duration::from_secs(10);
                    while !up.exists() && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    token.cancel("stop");
                })
            };
            let limits = Limits {
                timeout: None,
                cancel: Some(&token),
                ..limits(0)
            };
            let finished = running.supervise(&limits);
            canceller.join().unwrap();
            clean_up(&cookie);
            assert_eq!(finished.cause, Some(Cause::Cancelled("stop".into())));
            assert_followed(dir.path(), &cookie);
        }

        #[test]
        fn members_left_behind_by_the_leader_bring_their_escapees_down() {
            if !have_setsid() {
                return;
            }
            let dir = tempfile::tempdir().unwrap();
            let script = format!(
                "setsid {} & sleep 30 >/dev/null 2>&1 & {WAIT_UP}; echo done",
                escapee(false)
            );
            let running = sh(&script, dir.path());
            let cookie = running.cookie.clone();
            let finished = running.supervise(&limits(10_000));
            clean_up(&cookie);
            assert_eq!(finished.cause, None);
            assert!(finished.status.unwrap().success());
            assert_eq!(finished.stdout, "done\n");
            assert_followed(dir.path(), &cookie);
        }

        #[test]
        fn a_clean_exit_leaves_a_detached_process_alone() {
            // The common path: the group is empty once the leader exits, so
            // nothing is scanned and a daemon started on purpose survives.
            if !have_setsid() {
                return;
            }
            let dir = tempfile::tempdir().unwrap();
            let script = format!("setsid {} & {WAIT_UP}", escapee(false));
            let running = sh(&script, dir.path());
            let cookie = running.cookie.clone();
            let finished = running.supervise(&limits(10_000));
            // The escapee and its `sleep`.
            let survivors = clean_up(&cookie);
            assert!(finished.status.unwrap().success());
            assert!(survivors >= 1, "the detached process was not left alone");
        }

        #[test]
        fn a_process_that_cleared_its_environment_is_lost_but_the_run_ends() {
            // The OS limit: `env -i` drops the cookie, `setsid` the group.
            if !have_setsid() {
                return;
            }
            let dir = tempfile::tempdir().unwrap();
            let pid_file = dir.path().join("pid");
            let script = format!(
                "setsid env -i /bin/sh -c 'echo $$ > {pid}.tmp; mv {pid}.tmp {pid}; exec sleep 30' & \
                 while [ ! -e {pid} ]; do sleep 0.01; done; sleep 30",
                pid = pid_file.display()
            );
            let finished = sh(&script, dir.path()).supervise(&limits(500));
            assert_eq!(finished.cause, Some(Cause::TimedOut));
            let pid: i32 = std::fs::read_to_string(&pid_file)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            // It survived, as documented; the test cleans up after it.
            let survived = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok();
            assert!(survived, "a process without the cookie was found after all");
        }
    }
}
