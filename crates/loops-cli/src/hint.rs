//! The one hint of issue 16 §1: after `create`, `resume` and `list`, when
//! no daemon serves the database and no service is installed, say on
//! stderr how to start one. Nothing runs a loop on its schedule otherwise,
//! and nothing else would say so.
//!
//! A daemon counts when this host's pid file and lease say it runs (as
//! `daemon status` decides) or, on a shared PostgreSQL database, when any
//! host's daemon is live. An installed systemd or launchd service counts
//! too: it starts the daemon at login, whether or not it runs now. The
//! hint is never printed with `--json` or `-q`, and a failure to look is
//! no reason to print it.

use loops_core::Timestamp;
use loops_scheduler::DaemonPaths;
use loops_store::Store;

use crate::context::Context;
use crate::service::control::daemon_serves;
use crate::service::install::{Platform, service_path};

/// Prints the daemon hint on stderr when nothing will run the loops.
pub(crate) fn no_daemon(ctx: &Context, store: &Store, now: Timestamp) {
    if ctx.quiet || service_installed() {
        return;
    }
    let Ok(dir) = ctx.data_dir() else {
        return;
    };
    let paths = DaemonPaths::new(&dir);
    if let Ok(false) = daemon_serves(store, &paths, &loops_exec::hostname(), now) {
        ctx.hint(
            "hint: no daemon is running, so loops run only with `loops tick` or `loops run-now`; \
             start one with `loops daemon start`, or install it as a service with \
             `loops daemon install --enable`",
        );
    }
}

/// Whether this user has the systemd unit or the launchd agent of
/// `loops daemon install`.
fn service_installed() -> bool {
    let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) else {
        return false;
    };
    let home = std::path::Path::new(&home);
    [Platform::Linux, Platform::Macos]
        .into_iter()
        .any(|p| service_path(p, home).exists())
}
