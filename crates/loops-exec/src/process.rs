//! Processes that are not a run's own child: the daemon itself (started
//! detached, signalled by `loops daemon stop`, probed through its pid file)
//! and the process groups a dead daemon's runs left behind (SPEC §7.6, §9
//! items 16–18).
//!
//! Invariant: a process is signalled only when its identity is known. A
//! pid file's pid is signalled only after the caller matched it against the
//! daemon lease; an orphaned run group only when its leader's recorded
//! start time matches the live process, or when the leader is gone and
//! members of its group are still alive (a group id cannot be handed out
//! again while any member of the group exists).

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use loops_core::ProcessRef;
use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::cookie;
use crate::group;
use crate::liveness::{START_TOLERANCE_MS, process_start_ms};

/// How often a teardown re-checks whether a group or process is gone.
const RECHECK: Duration = Duration::from_millis(10);

/// The signals loops sends to processes it did not spawn in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessSignal {
    /// SIGTERM: asks the process to stop (a daemon then shuts down
    /// gracefully).
    Terminate,
    /// SIGKILL.
    Kill,
}

impl ProcessSignal {
    fn nix(self) -> Signal {
        match self {
            ProcessSignal::Terminate => Signal::SIGTERM,
            ProcessSignal::Kill => Signal::SIGKILL,
        }
    }
}

/// This host's name, as the daemon records it in its lease and runner id
/// (SPEC §0): `$LOOPS_HOSTNAME` when set (hosts or containers sharing one
/// PostgreSQL database whose OS names clash, and tests that play several
/// hosts on one machine), else the OS's; `localhost` when neither says.
/// A name is cut at the first `:`, which separates the parts of a runner id.
pub fn hostname() -> String {
    host_name_from(
        std::env::var("LOOPS_HOSTNAME").ok(),
        nix::unistd::gethostname()
            .ok()
            .map(|h| h.to_string_lossy().into_owned()),
    )
}

/// [`hostname`] given the override and the OS's name.
fn host_name_from(over: Option<String>, system: Option<String>) -> String {
    if let Some(name) = over {
        let name = name.split(':').next().unwrap_or_default().trim();
        if !name.is_empty() {
            return name.to_owned();
        }
    }
    system
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// Whether process `pid` exists and is not a zombie. A process we may not
/// signal (`EPERM`) exists (SPEC §4.2 counts it alive for the pid file).
///
/// Unlike [`SystemProbe`](crate::SystemProbe), an exited process that its
/// parent has not reaped yet counts as gone, which is what a caller waiting
/// for a daemon to exit needs.
pub fn is_running(pid: u32) -> bool {
    let Some(raw) = raw_pid(pid) else {
        return false;
    };
    match kill(raw, None) {
        Ok(()) | Err(Errno::EPERM) => !is_zombie(pid),
        Err(_) => false,
    }
}

/// Whether process `pid` runs and started no later than `at` (within the
/// clock tick start times are read to): the process that took a lease or
/// wrote a pid file at `at`, not a later process that reused its pid.
pub fn started_by(pid: u32, at: loops_core::Timestamp) -> bool {
    is_running(pid)
        && process_start_ms(pid).is_none_or(|start| start <= at.as_millis() + START_TOLERANCE_MS)
}

/// Sends `signal` to process `pid` (not its group). `Ok(false)` when there
/// is no such process.
pub fn signal_process(pid: u32, signal: ProcessSignal) -> io::Result<bool> {
    let Some(raw) = raw_pid(pid) else {
        return Ok(false);
    };
    match kill(raw, signal.nix()) {
        Ok(()) => Ok(true),
        Err(Errno::ESRCH) => Ok(false),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// A child started by [`spawn_detached`].
#[derive(Debug)]
pub struct Detached {
    child: Child,
}

impl Detached {
    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit code if the child has already exited (reaping it), else
    /// `None`. A child killed by a signal reports -1.
    pub fn exited(&mut self) -> Option<i32> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.code().unwrap_or(-1)),
            Ok(None) | Err(_) => None,
        }
    }
}

/// Starts `program args…` detached from the caller, for `loops daemon
/// start` (SPEC §7.6): in its own process group, so the terminal's Ctrl-C
/// and job control do not reach it; stdin from `/dev/null`; stdout and
/// stderr appended to `log` (created with mode 0600, never through a
/// symbolic link: see [`crate::owner_only`]). The environment, with `env`
/// added, and the working directory are inherited. The caller does not
/// wait for it.
pub fn spawn_detached(
    program: &Path,
    args: &[OsString],
    env: &[(&str, &str)],
    log: &Path,
) -> io::Result<Detached> {
    let out = open_log(log)?;
    let err = out.try_clone()?;
    let child = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()?;
    Ok(Detached { child })
}

/// The log, opened as the daemon opens it: never through a planted link.
fn open_log(path: &Path) -> io::Result<File> {
    crate::owner_only::open_private_append(path)
}

/// What a dead runner's run left behind, for [`kill_orphans`] to tear
/// down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Orphans<'a> {
    /// The process group a run recorded as `process` (the group's leader).
    Group(ProcessRef),
    /// The processes that carry a run's spawn id in `LOOPS_SPAWN_ID` (see
    /// [`new_spawn_id`](crate::new_spawn_id)): those that left the run's
    /// process group (`setsid`, a daemonizing double fork), which the group
    /// signal cannot reach.
    Carriers(&'a str),
}

/// What [`kill_orphans`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrphanKill {
    /// Nothing of them was alive; nothing was signalled.
    Gone,
    /// They were signalled and are gone now; `forced` when SIGKILL was
    /// needed after the grace period.
    Killed {
        /// SIGKILL was sent.
        forced: bool,
    },
    /// Nothing was signalled: for a group, no start time was recorded for
    /// its leader, or the pid now belongs to another process, or the
    /// platform cannot tell who is in the group; for carriers, the spawn id
    /// is not a single token, or the platform cannot read process
    /// environments (only Linux can).
    NotVerified,
    /// Some survived SIGKILL (a process we may not signal).
    Survived,
}

/// Tears down what a run left behind after its runner died (SPEC §9 item
/// 18): SIGTERM, up to `grace` for it to go, then SIGKILL.
///
/// Only what is verified is signalled. A [`Orphans::Group`] is signalled
/// when its leader has a recorded start time and either is alive with
/// that start time, or is gone while members of its group live on (see
/// the module docs). For [`Orphans::Carriers`], the spawn id is unique to
/// one run, so carrying it is the identity check.
pub fn kill_orphans(orphans: Orphans<'_>, grace: Duration) -> OrphanKill {
    match orphans {
        Orphans::Group(process) => {
            let pgid = match verify_group(process) {
                Ok(pgid) => pgid,
                Err(outcome) => return outcome,
            };
            if !group_alive(pgid) {
                return OrphanKill::Gone;
            }
            // The leader may stay a zombie until its new parent (init or a
            // subreaper) reaps it; liveness probes count such a leader dead.
            terminate(
                |signal| {
                    group::signal(pgid, signal);
                    true
                },
                || !group_alive(pgid),
                grace,
            )
        }
        Orphans::Carriers(spawn_id) => {
            if spawn_id.is_empty() || spawn_id.contains(char::is_whitespace) {
                return OrphanKill::NotVerified;
            }
            if !cfg!(any(target_os = "linux", target_os = "android")) {
                return OrphanKill::NotVerified;
            }
            terminate(
                |signal| cookie::signal_carriers(spawn_id, Some(signal), None) > 0,
                || cookie::signal_carriers(spawn_id, None, None) == 0,
                grace,
            )
        }
    }
}

/// The group of `process` when it may be signalled, else what
/// [`kill_orphans`] reports instead.
fn verify_group(process: ProcessRef) -> Result<Pid, OrphanKill> {
    let (Some(recorded), Some(pgid)) = (process.start, raw_pid(process.pid)) else {
        return Err(OrphanKill::NotVerified);
    };
    let leader_exists = matches!(kill(pgid, None), Ok(()) | Err(Errno::EPERM));
    if leader_exists {
        match process_start_ms(process.pid) {
            Some(current) if (current - recorded).abs() <= START_TOLERANCE_MS => Ok(pgid),
            _ => Err(OrphanKill::NotVerified),
        }
    } else {
        match group::has_live_members(pgid) {
            Some(true) => Ok(pgid),
            Some(false) => Err(OrphanKill::Gone),
            None => Err(OrphanKill::NotVerified),
        }
    }
}

/// SIGTERM through `signal` (false when it reached nothing: they are
/// gone), up to `grace` for `gone`, then SIGKILL and up to a second more.
fn terminate(
    mut signal: impl FnMut(Signal) -> bool,
    mut gone: impl FnMut() -> bool,
    grace: Duration,
) -> OrphanKill {
    if !signal(Signal::SIGTERM) {
        return OrphanKill::Gone;
    }
    if wait_until(&mut gone, grace) {
        return OrphanKill::Killed { forced: false };
    }
    signal(Signal::SIGKILL);
    if wait_until(&mut gone, Duration::from_secs(1)) {
        OrphanKill::Killed { forced: true }
    } else {
        OrphanKill::Survived
    }
}

/// Whether `done` holds within `within`, re-checked every [`RECHECK`].
fn wait_until(done: &mut impl FnMut() -> bool, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(RECHECK);
    }
}

/// Whether group `pgid` has a member that can still run. Where the platform
/// cannot list members, an existing group (a zombie leader included)
/// counts.
fn group_alive(pgid: Pid) -> bool {
    group::has_live_members(pgid).unwrap_or_else(|| group::exists(pgid))
}

fn raw_pid(pid: u32) -> Option<Pid> {
    i32::try_from(pid)
        .ok()
        .filter(|p| *p > 0)
        .map(Pid::from_raw)
}

/// Whether `pid` is a zombie (exited, not yet reaped). False where the
/// platform does not tell.
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let rest = &stat[stat.rfind(')')? + 1..];
            rest.split_whitespace()
                .next()
                .map(|s| matches!(s, "Z" | "X" | "x"))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreaped_child_is_not_running() {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        while is_running(pid) {
            assert!(Instant::now() < deadline, "true never exited");
            std::thread::sleep(RECHECK);
        }
        child.wait().unwrap();
        assert!(is_running(std::process::id()));
        assert!(!is_running(0));
    }

    #[test]
    fn an_unrecorded_start_time_is_never_signalled() {
        let me = std::process::id();
        assert_eq!(
            kill_orphans(Orphans::Group(ProcessRef::pid(me)), Duration::ZERO),
            OrphanKill::NotVerified
        );
        let Some(start) = process_start_ms(me) else {
            return;
        };
        // A pid that now belongs to a process started an hour later.
        let reused = ProcessRef {
            pid: me,
            start: Some(start - 3_600_000),
        };
        assert_eq!(
            kill_orphans(Orphans::Group(reused), Duration::ZERO),
            OrphanKill::NotVerified
        );
    }

    #[test]
    fn the_host_name_is_the_override_cut_at_a_colon_else_the_os_name() {
        let name = |over: Option<&str>, system: Option<&str>| {
            host_name_from(over.map(str::to_owned), system.map(str::to_owned))
        };
        assert_eq!(name(Some("box-b"), Some("os")), "box-b");
        assert_eq!(name(Some(" box-b:7:x "), Some("os")), "box-b");
        assert_eq!(name(Some(":x"), Some("os")), "os");
        assert_eq!(name(Some("  "), Some("os")), "os");
        assert_eq!(name(None, Some("os")), "os");
        assert_eq!(name(None, Some("")), "localhost");
        assert_eq!(name(None, None), "localhost");
        // Without the override, the OS's own name.
        if std::env::var_os("LOOPS_HOSTNAME").is_none() {
            let os = nix::unistd::gethostname().unwrap();
            let os = os.to_string_lossy();
            assert_eq!(hostname(), if os.is_empty() { "localhost" } else { &*os });
        }
    }
}
