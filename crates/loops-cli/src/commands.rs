//! The commands, one module per group: `create`, loop management
//! (`manage`: list, show, pause, resume, stop, remove), `status` (one
//! loop's card, which `show` prints on a terminal), `next`, `runs`, the
//! reports over runs (`health`, `cost`), and the runners (`execute`:
//! run-now, tick), `workflows`, `daemon`, `doctor`, `backup`, `restore`,
//! `gc`, `transfer` (export, import), and `docs` (completions, man pages).

pub(crate) mod apply;
pub(crate) mod backup;
pub(crate) mod cancel;
pub(crate) mod cost;
pub(crate) mod create;
pub(crate) mod daemon;
pub(crate) mod docs;
pub(crate) mod doctor;
pub(crate) mod edit;
pub(crate) mod execute;
pub(crate) mod gc;
pub(crate) mod health;
pub(crate) mod labels;
pub(crate) mod logs;
pub(crate) mod manage;
pub(crate) mod next;
pub(crate) mod pools;
pub(crate) mod restore;
pub(crate) mod runs;
pub(crate) mod status;
pub(crate) mod transfer;
pub(crate) mod trigger;
pub(crate) mod workflows;

use anyhow::{Result, bail};
use loops_core::{Clock, Timestamp};
use loops_exec::SystemClock;

use crate::context::Context;

/// The current instant, from the system clock.
pub(crate) fn now() -> Timestamp {
    SystemClock.now()
}

/// Refuses `doing` (`"restoring a backup over the database"`) while this
/// data directory's daemon runs, judged by its pid file alone, so a
/// database that cannot be opened does not stand in the way.
fn refuse_while_daemon_runs(ctx: &Context, doing: &str) -> Result<()> {
    let paths = daemon::daemon_paths(ctx)?;
    if let Some(pid) = crate::service::control::running_daemon_pid(&paths) {
        bail!(
            "a daemon is running on this database (pid {pid}); stop it (loops daemon stop) \
             before {doing}, then start it again"
        );
    }
    Ok(())
}
