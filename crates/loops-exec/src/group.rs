//! Process groups: signalling a run's whole group and asking whether
//! anything is left in it (SPEC §5.7 "Kill", §9 items 15 and 18).
//!
//! Every child leads its own group (`process_group(0)`), so its pid is the
//! group id and a signal to `-pid` reaches the grandchildren too.
//!
//! Invariant: a group id is only signalled while it cannot have been handed
//! to someone else. Until the leader is reaped, its zombie owns the pid and
//! with it the group id. After the reap, the group is signalled only right
//! after a probe saw members in it: while any member (even a zombie) is
//! left, the kernel keeps the group id allocated.
//!
//! Once a run's leader has exited, the supervisor reaps it and probes the
//! group with `kill(-pgid, 0)`, one system call; only when that finds
//! members does it read `/proc` to tell live members from zombies waiting
//! for their new parent to reap them (which a container's init may do
//! slowly, or never). Scanning `/proc` for every run would cost much of a
//! tick (`docs/perf.md#process-group-probe`).
//!
//! A process that left the group (`setsid`, a daemonizing fork) is beyond
//! these signals; the supervisor finds it by its spawn cookie instead
//! (`cookie.rs`), with a second `/proc` scan that likewise runs only during
//! a teardown. Neither reaches a process that left the group and also
//! dropped the cookie from its environment, nor one of another uid.

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Sends `signal` to every process in group `pgid`. A group that is already
/// gone is not an error.
pub(crate) fn signal(pgid: Pid, signal: Signal) {
    match killpg(pgid, signal) {
        Ok(()) | Err(Errno::ESRCH) => {}
        // EPERM: a member changed its credentials (a setuid helper). Nothing
        // more can be done for it; the members we may signal got the signal.
        Err(_) => {}
    }
}

/// Whether any process is in group `pgid`, counting an unreaped zombie
/// leader. `EPERM` means a member exists that we may not signal.
pub(crate) fn exists(pgid: Pid) -> bool {
    matches!(killpg(pgid, None), Ok(()) | Err(Errno::EPERM))
}

/// Whether group `pgid` has a member that is not a zombie, or `None` when
/// the platform cannot tell without reaping the leader first.
///
/// On Linux this reads `/proc/<pid>/stat` of every process, which costs a
/// few milliseconds; the supervisor calls it only after a probe found the
/// group still populated, and then every few milliseconds only while a
/// teardown is under way.
pub(crate) fn has_live_members(pgid: Pid) -> Option<bool> {
    imp::has_live_members(pgid)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    use nix::unistd::Pid;

    pub(super) fn has_live_members(pgid: Pid) -> Option<bool> {
        let entries = std::fs::read_dir("/proc").ok()?;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            // A process that exits between the listing and the read is gone,
            // which is what we want to know anyway.
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            if is_live_member(&stat, pgid.as_raw()) {
                return Some(true);
            }
        }
        Some(false)
    }

    /// Parses `/proc/<pid>/stat`: the command name (field 2) may contain
    /// spaces and parentheses, so fields are counted from the last `)`;
    /// after it come the state (3), the parent pid (4) and the group (5).
    pub(super) fn is_live_member(stat: &str, pgid: i32) -> bool {
        let Some(close) = stat.rfind(')') else {
            return false;
        };
        let mut fields = stat[close + 1..].split_whitespace();
        let state = fields.next().unwrap_or("");
        let group = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
        // Zombies (Z) and dead tasks (X) can neither run nor be killed.
        group == Some(pgid) && !matches!(state, "Z" | "X" | "x")
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod imp {
    use nix::unistd::Pid;

    pub(super) fn has_live_members(_pgid: Pid) -> Option<bool> {
        None
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::imp::is_live_member;

    #[test]
    fn stat_lines_are_read_from_the_last_parenthesis() {
        assert!(is_live_member("12 (sh) S 1 12 12 0", 12));
        assert!(is_live_member("13 (a) b) (c) R 12 12 12 0", 12));
        assert!(!is_live_member("12 (sh) Z 1 12 12 0", 12));
        assert!(!is_live_member("14 (sleep) S 1 14 14 0", 12));
        assert!(!is_live_member("garbage", 12));
    }
}
