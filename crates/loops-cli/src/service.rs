//! Service management: the commands around the daemon that are OS glue,
//! not scheduling. `daemon start|stop|status` (`control`), the systemd and
//! launchd units (`install`), the log file with its rotation and `logs -f`
//! (`log`), and `doctor`.
//!
//! They live in the CLI, not in `loops-scheduler`, because only the two
//! binaries use them and they are about this machine (its service manager,
//! its terminal, its files), while the scheduler is about loops and runs.
//! They reach a running daemon only through what `loops-scheduler` defines:
//! the pid file, the database lease and the datagrams of `daemon.sock`.

pub(crate) mod control;
pub(crate) mod doctor;
pub(crate) mod install;
pub(crate) mod log;
