//! Process liveness, as the store needs it for claims and recovery.
//!
//! The store does no process work, so it is handed a [`Liveness`]. The
//! production probe lives in `loops-exec` and compares the process's start
//! time as well as its pid (SPEC §9.14); tests pass a fake.

/// A recorded child process: its pid and, when known, an OS-specific token
/// of its start time that tells a reused pid apart from the original.
///
/// Rows written by the original 0.3.1 carry only a pid, so `start` is `None`
/// for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessRef {
    /// The process id.
    pub pid: u32,
    /// The process's start time in milliseconds since the Unix epoch, as the
    /// spawner read it right after the spawn.
    pub start: Option<i64>,
}

impl ProcessRef {
    /// A process known only by its pid.
    pub fn pid(pid: u32) -> ProcessRef {
        ProcessRef { pid, start: None }
    }
}

/// Answers whether a recorded process is still the same live process.
pub trait Liveness: Send + Sync {
    /// True when `process` is alive and, if its start time is known, is the
    /// very process that was recorded.
    fn is_alive(&self, process: ProcessRef) -> bool;
}

/// Any closure over a [`ProcessRef`] is a liveness check; tests use this.
impl<F> Liveness for F
where
    F: Fn(ProcessRef) -> bool + Send + Sync,
{
    fn is_alive(&self, process: ProcessRef) -> bool {
        self(process)
    }
}
