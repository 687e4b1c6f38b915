//! The production [`Liveness`] probe (SPEC §4.2 "Liveness", §9 item 14).
//!
//! A pid alone is not an identity: once a run's child dies the kernel may
//! hand its pid to an unrelated process, and the original then believed the
//! run alive forever. The spawner records the child's start time next to its
//! pid, and the probe answers "alive" only while a process with that pid
//! exists *and* started at that time.
//!
//! Rows written by the original carry no start time. For those the probe
//! falls back to existence, and counts `EPERM` (a process we may not signal)
//! as alive: wrongly believing a run dead would run its slot twice, while
//! wrongly believing it alive only delays recovery.

mod identity;

pub use self::identity::{BootId, ProcessIdentity, is_same_process, process_identity};

use loops_core::{Liveness, ProcessRef};
use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;

/// Checks processes of this host.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemProbe;

impl Liveness for SystemProbe {
    fn is_alive(&self, process: ProcessRef) -> bool {
        let Ok(raw) = i32::try_from(process.pid) else {
            return false;
        };
        if raw <= 0 {
            return false;
        }
        let exists = match kill(Pid::from_raw(raw), None) {
            Ok(()) => true,
            Err(Errno::EPERM) => true,
            Err(_) => false,
        };
        if !exists {
            return false;
        }
        let current = imp::process_state(process.pid);
        // A zombie has finished: it holds its pid only until its parent
        // reaps it, which a container's init may do late or never. Counting
        // it alive would block recovery of a run whose process is gone.
        if current.is_some_and(|c| c.zombie) {
            return false;
        }
        match (process.start, current.and_then(|c| c.start_ms)) {
            // Both known: the identity must match. The tolerance covers the
            // clock-tick rounding of the kernel's start time.
            (Some(recorded), Some(current)) => (recorded - current).abs() <= START_TOLERANCE_MS,
            // A process whose start we cannot read: trust the pid.
            _ => true,
        }
    }
}

/// Start times read twice for one process agree exactly; the tolerance only
/// absorbs a boot-time reading that moved by a second (NTP adjusting `btime`).
pub(crate) const START_TOLERANCE_MS: i64 = 1_000;

/// The start time of process `pid` in milliseconds since the Unix epoch, or
/// `None` when it does not exist or the platform does not tell.
pub fn process_start_ms(pid: u32) -> Option<i64> {
    imp::process_state(pid).and_then(|s| s.start_ms)
}

/// What `/proc/<pid>/stat` says about a process.
#[derive(Debug, Clone, Copy)]
struct ProcessState {
    /// Exited, waiting to be reaped (state `Z`, or `X` while dying).
    zombie: bool,
    /// Start time in milliseconds since the Unix epoch.
    start_ms: Option<i64>,
    /// Start time in clock ticks since boot (field 22), which no step of
    /// the wall clock moves.
    start_ticks: Option<u64>,
}

#[cfg(target_os = "linux")]
mod imp {
    use nix::unistd::{SysconfVar, sysconf};

    use super::ProcessState;

    pub(super) fn process_state(pid: u32) -> Option<ProcessState> {
        let mut buf = [0u8; STAT_BUFFER];
        let stat = read_stat(pid, &mut buf)?;
        // The command name (field 2) is in parentheses and may contain
        // spaces or parentheses itself, so fields are counted from the last
        // `)`: the state (field 3) first, starttime (field 22) 20th.
        let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
        let state = fields.next()?;
        let ticks: Option<u64> = fields.nth(18).and_then(|t| t.parse().ok());
        Some(ProcessState {
            zombie: matches!(state, "Z" | "X" | "x"),
            start_ms: ticks.and_then(|t| i64::try_from(t).ok()).and_then(start_ms),
            start_ticks: ticks,
        })
    }

    /// Room for a whole `/proc/<pid>/stat` line: 52 numeric fields and a
    /// command name of at most 64 bytes come to well under 1 KiB.
    const STAT_BUFFER: usize = 1024;

    /// `/proc/<pid>/stat` in one `read`: procfs hands out the whole line at
    /// once when the buffer holds it, and `read_to_string` would make two
    /// more system calls (`docs/perf.md#process-group-probe`).
    fn read_stat(pid: u32, buf: &mut [u8; STAT_BUFFER]) -> Option<&str> {
        use std::io::Read;
        let mut file = std::fs::File::open(format!("/proc/{pid}/stat")).ok()?;
        let n = loop {
            match file.read(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                other => break other.ok()?,
            }
        };
        // A full buffer may have cut the line: then it is not trusted.
        if n == buf.len() {
            return None;
        }
        std::str::from_utf8(&buf[..n]).ok()
    }

    fn start_ms(ticks: i64) -> Option<i64> {
        let hz = sysconf(SysconfVar::CLK_TCK).ok()??;
        if hz <= 0 {
            return None;
        }
        let boot_s = boot_time_s()?;
        Some(boot_s * 1000 + ticks * 1000 / hz)
    }

    fn boot_time_s() -> Option<i64> {
        // The boot time is fixed while the host runs; read it once per
        // process instead of once per spawn.
        static BOOT: std::sync::OnceLock<Option<i64>> = std::sync::OnceLock::new();
        *BOOT.get_or_init(|| {
            let stat = std::fs::read_to_string("/proc/stat").ok()?;
            stat.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse().ok())
        })
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::ProcessState;

    pub(super) fn process_state(_pid: u32) -> Option<ProcessState> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_with_its_start_time() {
        let me = std::process::id();
        let start = process_start_ms(me);
        assert!(cfg!(not(target_os = "linux")) || start.is_some());
        assert!(SystemProbe.is_alive(ProcessRef { pid: me, start }));
        assert!(SystemProbe.is_alive(ProcessRef::pid(me)));
    }

    #[test]
    fn a_reused_pid_is_not_the_recorded_process() {
        let me = std::process::id();
        let Some(start) = process_start_ms(me) else {
            return;
        };
        // Same pid, but the recorded process started an hour earlier: the
        // pid now belongs to someone else.
        let old = ProcessRef {
            pid: me,
            start: Some(start - 3_600_000),
        };
        assert!(!SystemProbe.is_alive(old));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn an_unreaped_zombie_is_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start = process_start_ms(pid);
        // Wait until it has exited but leave it unreaped: a zombie.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while imp::process_state(pid).is_some_and(|s| !s.zombie) {
            assert!(std::time::Instant::now() < deadline, "child never exited");
            std::thread::yield_now();
        }
        assert!(!SystemProbe.is_alive(ProcessRef { pid, start }));
        assert!(!SystemProbe.is_alive(ProcessRef::pid(pid)));
        child.wait().unwrap();
    }

    #[test]
    fn an_exited_child_is_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start = process_start_ms(pid);
        child.wait().unwrap();
        assert!(!SystemProbe.is_alive(ProcessRef { pid, start }));
    }

    #[test]
    fn dead_and_invalid_pids_are_dead() {
        assert!(!SystemProbe.is_alive(ProcessRef::pid(0)));
        assert!(!SystemProbe.is_alive(ProcessRef::pid(u32::MAX)));
        // pid_max on Linux is at most 2^22, so this pid cannot exist.
        assert!(!SystemProbe.is_alive(ProcessRef::pid(4_194_305)));
    }
}
