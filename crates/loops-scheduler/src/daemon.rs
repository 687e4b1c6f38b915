//! The daemon: one long-lived scheduler per database (SPEC §7.6). The
//! commands around it (start, stop, status, logs, install) are the CLI's
//! (`loops-cli/src/service/`); they reach the daemon through the pid file,
//! the lease and the datagrams of `daemon.sock`, all defined here.
//!
//! [`run_daemon`] takes the database lease, writes the pid file, recovers
//! what a dead daemon of this host left behind, and then loops over named
//! steps: renew the lease, plan due slots, apply the overlap policy to
//! loops it is running, start runs, renew run leases, then sleep until the
//! next thing to do. It keeps one dispatcher (`dispatch.rs`) for its whole
//! life, so runs execute concurrently up to `max_parallel` and a long run
//! never delays another loop's slot (SPEC §9 item 1).
//!
//! **Wake-ups** (SPEC §9 item 6). There is no polling interval. The daemon
//! sleeps until the earliest of: the next due slot or retry of a loop it is
//! not already running, the next loop expiry, the next overlap slot of a
//! loop it is running, the next run-lease heartbeat, its own lease
//! heartbeat, the lease expiry of a run another runner holds, and
//! [`DaemonOptions::max_sleep`] (a minute at most, so a wall-clock jump or a
//! suspend is noticed within a minute; missed slots then go through each
//! loop's catch-up policy). Worker reports and the CLI's datagram on
//! `daemon.sock` (`wake.rs`) end the sleep at once.
//!
//! **Crash recovery** (SPEC §9 items 16 and 18). A daemon killed with
//! SIGKILL leaves its lease, its pid file and its runs behind. The next
//! daemon on the same host takes the lease over at once when the holder's
//! pid is gone or now belongs to a process started after the lease was
//! taken. It then abandons the dead daemon's runs at once (instead of
//! waiting out their run leases), after tearing down their orphaned
//! process groups, but only groups whose recorded identity (pid and start
//! time) still matches. The loops then retry or move on by their policy.
//! A slot never runs twice at the same time: claims are exclusive, and an
//! orphaned run is abandoned only once its processes are gone.
//!
//! **Stopping** (SPEC §9 item 17). SIGTERM, SIGINT or `loops daemon stop`
//! stop the daemon gracefully: it stops claiming (slots that were due but
//! not started stay due, unclaimed), lets runs in flight finish within the
//! grace period (`--grace`, 30 s by default), then cancels the rest. A run
//! cancelled that way is recorded as abandoned with the error
//! `interrupted by daemon shutdown; not counted as an attempt`, and its
//! slot is claimed again, under the same attempt number, by the next
//! daemon. Then the pid file is removed and the lease released.
//!
//! **Files, socket and identity** (issue 12 §3). `daemon.log` and
//! `daemon.pid` are never opened through a symbolic link (a planted log
//! link is refused, a pid-file link replaced), the pid file is written
//! under a random temporary name, and `daemon.sock` is 0600 whatever the
//! umask; on Linux a datagram from another user is ignored. `daemon stop`
//! and `daemon status` take the pid file's process for the daemon only if
//! it started before the file was written and before the lease was taken,
//! so a reused pid is never signalled; without a readable database, `stop`
//! relies on the pid file alone. Before every turn the daemon checks that
//! the database file and its WAL are still the files it opened, and stops
//! with an error in its log when one was deleted or replaced.
//!
//! **Commands on a loop with a run in flight** (SPEC §9 item 20).
//! - `pause`, `stop` and `remove` never kill a run in flight: it finishes
//!   and is recorded, but the loop is not advanced or rescheduled (the
//!   advance applies only to an active loop, and only to a loop that still
//!   exists). A paused loop that is resumed later continues after the slot
//!   that ran; `remove --purge` deletes the row under the run, whose result
//!   is then only logged.
//! - `run-now` of the slot the daemon is running is refused (`could not
//!   claim manual run`); a `run-now` of another slot runs beside it, and the
//!   daemon then applies the loop's overlap policy to its own next slot.
//! - `resume` of a loop the daemon is running changes nothing until the run
//!   is recorded.
//!
//! **Retention** (issue 14). With `--gc-max-age`, the daemon deletes old
//! finished runs at most once an hour, on a thread of its own, in short
//! batches ([`collect_garbage`], which `loops gc` runs too). Without it,
//! the daemon keeps every run, as the original does.
//!
//! **Modules.** `options.rs` is what [`run_daemon`] is given, `run.rs` the
//! serve loop and its shutdown, `recover.rs` the start-up recovery,
//! `wake.rs` the socket, `pidfile.rs` the pid file and `gc.rs` the
//! retention pass; imports go one way, from `run.rs` to the others.

mod database_clock;
mod database_files;
mod describe;
mod gc;
mod options;
mod pidfile;
mod recover;
mod run;
mod wake;
mod watch;

pub use self::database_clock::{ClockSync, DatabaseClock, SKEW_WARN_MS};
pub use self::gc::{GC_FIRST_DELAY, GC_PERIOD, GcReport, collect_garbage, sweep_run_logs};
pub use self::options::{
    DEFAULT_GC_KEEP_PER_LOOP, DEFAULT_GRACE, DEFAULT_LEASE_TTL, DEFAULT_MAX_SLEEP, DaemonOptions,
    DaemonPaths, GcSettings, LOG_FILE, POLL_ONLY_MAX_SLEEP,
};
pub use self::pidfile::{PID_FILE, PidRecord, read_pid, read_pid_record, remove_pid_if};
pub use self::run::{DaemonError, DaemonExit, run_daemon};
pub use self::wake::{SOCKET_FILE, notify_daemon, request_stop};
