//! A process identity no wall-clock step moves (issue 32).
//!
//! A start time in milliseconds since the epoch is derived from `btime`,
//! which the kernel recomputes from the wall clock: step the clock forward
//! and every process seems to have started later. The identity here is the
//! boot id (`/proc/sys/kernel/random/boot_id`, fresh at each boot) and the
//! start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`),
//! neither of which a clock step changes. Together they name one process of
//! one boot: a reused pid starts at other ticks, and a pid of an earlier
//! boot carries another boot id.
//!
//! Only Linux tells; elsewhere [`process_identity`] is `None` and callers
//! keep their wall-clock checks.

use std::fmt;
use std::str::FromStr;

use super::imp;

/// The boot id, a UUID, kept as its 128 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BootId(u128);

impl BootId {
    /// This boot's id, or `None` where the platform does not tell.
    pub fn current() -> Option<BootId> {
        static BOOT: std::sync::OnceLock<Option<BootId>> = std::sync::OnceLock::new();
        *BOOT.get_or_init(|| {
            if cfg!(target_os = "linux") {
                std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            } else {
                None
            }
        })
    }
}

impl FromStr for BootId {
    type Err = ();

    /// A UUID in its usual form (`8-4-4-4-12` hexadecimal digits).
    fn from_str(s: &str) -> Result<BootId, ()> {
        let groups: Vec<&str> = s.split('-').collect();
        let lengths: Vec<usize> = groups.iter().map(|g| g.len()).collect();
        if lengths != [8, 4, 4, 4, 12] || !groups.iter().all(|g| is_hex(g)) {
            return Err(());
        }
        u128::from_str_radix(&groups.concat(), 16)
            .map(BootId)
            .map_err(|_| ())
    }
}

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl fmt::Display for BootId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = format!("{:032x}", self.0);
        write!(
            f,
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        )
    }
}

/// One process of one boot: the boot id and the start time in clock ticks
/// since boot. Written `boot=<uuid> start=<ticks>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessIdentity {
    /// The boot the process runs in.
    pub boot: BootId,
    /// Its start time in clock ticks since boot.
    pub start_ticks: u64,
}

impl fmt::Display for ProcessIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "boot={} start={}", self.boot, self.start_ticks)
    }
}

impl FromStr for ProcessIdentity {
    type Err = ();

    /// `boot=<uuid> start=<ticks>`, fields in any order, unknown fields
    /// ignored (room for later additions).
    fn from_str(s: &str) -> Result<ProcessIdentity, ()> {
        let (mut boot, mut start_ticks) = (None, None);
        for field in s.split_whitespace() {
            if let Some(v) = field.strip_prefix("boot=") {
                boot = Some(v.parse()?);
            } else if let Some(v) = field.strip_prefix("start=") {
                start_ticks = Some(v.parse().map_err(|_| ())?);
            }
        }
        Ok(ProcessIdentity {
            boot: boot.ok_or(())?,
            start_ticks: start_ticks.ok_or(())?,
        })
    }
}

/// The identity of process `pid`, or `None` when it does not exist (or is
/// a zombie) or the platform does not tell.
pub fn process_identity(pid: u32) -> Option<ProcessIdentity> {
    let state = imp::process_state(pid)?;
    if state.zombie {
        return None;
    }
    Some(ProcessIdentity {
        boot: BootId::current()?,
        start_ticks: state.start_ticks?,
    })
}

/// Whether process `pid` runs and is the process `identity` names: same
/// boot, same start tick. A pid of an earlier boot, or reused by a later
/// process, is not. When the identity of a running `pid` cannot be read
/// (not Linux), the pid alone is trusted.
pub fn is_same_process(pid: u32, identity: ProcessIdentity) -> bool {
    if !crate::is_running(pid) {
        return false;
    }
    match process_identity(pid) {
        Some(current) => current == identity,
        None => !cfg!(target_os = "linux"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_reads_back_from_its_text() {
        let id = ProcessIdentity {
            boot: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".parse().unwrap(),
            start_ticks: 123_456,
        };
        let text = id.to_string();
        assert_eq!(
            text,
            "boot=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0 start=123456"
        );
        assert_eq!(text.parse(), Ok(id));
        assert_eq!(
            "start=123456 future=1 boot=0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0".parse(),
            Ok(id)
        );
        for bad in [
            "",
            "boot=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
            "start=1",
            "boot=xyz start=1",
            "boot=0f1e2d3c4b5a69788796a5b4c3d2e1f0 start=1",
            "boot=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0 start=-1",
        ] {
            assert_eq!(bad.parse::<ProcessIdentity>(), Err(()), "{bad:?}");
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_process_is_itself_and_not_another_start_or_boot() {
        let me = std::process::id();
        let id = process_identity(me).expect("Linux tells");
        assert_eq!(process_identity(me), Some(id), "stable across reads");
        assert!(is_same_process(me, id));
        let later = ProcessIdentity {
            start_ticks: id.start_ticks + 1,
            ..id
        };
        assert!(!is_same_process(me, later), "a reused pid");
        let other_boot = ProcessIdentity {
            boot: BootId(!id.boot.0),
            ..id
        };
        assert!(!is_same_process(me, other_boot), "an earlier boot");
    }

    #[test]
    fn an_exited_child_is_not_its_former_self() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let id = process_identity(pid);
        child.wait().unwrap();
        assert_eq!(process_identity(pid), None);
        if let Some(id) = id {
            assert!(!is_same_process(pid, id));
        }
    }
}
