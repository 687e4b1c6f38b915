//! Doctor's `daemon` check: whether a daemon serves the database, as
//! `daemon status` decides.

use loops_scheduler::DaemonPaths;
use loops_store::Store;

use super::*;

/// The `daemon` check, and the running daemon's pid.
pub(super) fn check_daemon(
    store: &Store,
    paths: &DaemonPaths,
    opts: &DoctorOptions<'_>,
) -> (Check, Option<u32>) {
    let status = daemon_status(store, paths, &opts.host, opts.now);
    let pid = status
        .as_ref()
        .ok()
        .filter(|s| s.running)
        .and_then(|s| s.pid);
    let check = match status {
        Ok(s) if s.running => {
            let check = Check::new(
                "daemon",
                CheckStatus::Ok,
                format!("daemon is running pid={}", s.pid.unwrap_or_default()),
            );
            match &s.lease {
                Some(l) => check.detail(format!(
                    "lease {} on {} since {}, expires {}",
                    l.id, l.hostname, l.created_at, l.expires_at
                )),
                None => check,
            }
        }
        Ok(s) if s.stale => Check::new("daemon", CheckStatus::Warn, "daemon pid file is stale")
            .detail(paths.pid_file().display().to_string()),
        Ok(_) => Check::new("daemon", CheckStatus::Ok, "daemon is not running"),
        Err(e) => {
            Check::new("daemon", CheckStatus::Warn, "daemon state unknown").detail(e.to_string())
        }
    };
    (check, pid)
}
