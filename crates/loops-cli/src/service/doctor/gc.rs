//! The `retention` check of `loops doctor` (issue 14): a warning when the
//! runs table has passed [`MANY_RUNS`] rows and nothing prunes it.
//!
//! Gc counts as on when the daemon is asked to run it with `--gc-max-age`,
//! seen in one of two places:
//! - the command line of the running daemon (the pid `daemon status`
//!   vouches for), read from `/proc/<pid>/cmdline`; on systems without
//!   `/proc` this source tells nothing;
//! - the installed service file (`daemon install`), whose daemon runs gc
//!   whenever the service manager starts it, running now or not.
//!
//! A `loops gc --apply` run from cron is invisible to both; such a user
//! keeps the table below the threshold anyway, or can ignore the warning,
//! which never fails the report.

use std::path::Path;

use loops_store::Store;

use super::{Check, CheckStatus};
use crate::service::install::{self, Platform};

/// The number of runs past which a database without gc gets a warning.
pub(super) const MANY_RUNS: u64 = 100_000;

/// The flag that turns the daemon's gc on.
const GC_FLAG: &str = "--gc-max-age";

/// The `retention` check. `daemon_pid` is the running daemon's, if one
/// runs; `home` is where the service file would be.
pub(super) fn check_retention(
    store: &Store,
    daemon_pid: Option<u32>,
    home: Option<&Path>,
) -> Check {
    let runs = match store.count_runs(None) {
        Ok(n) => n,
        Err(e) => {
            return Check::new("retention", CheckStatus::Warn, "runs cannot be counted")
                .detail(e.to_string());
        }
    };
    let on = gc_source(daemon_pid, home);
    match on {
        Some(source) => Check::new(
            "retention",
            CheckStatus::Ok,
            format!("{runs} runs recorded; the daemon deletes old ones (gc)"),
        )
        .detail(source),
        None if runs > MANY_RUNS => Check::new(
            "retention",
            CheckStatus::Warn,
            format!(
                "{runs} runs recorded and nothing deletes old ones; run `loops gc --apply`, \
                 or give the daemon --gc-max-age 30d (daemon start, daemon install)"
            ),
        )
        .detail(format!(
            "more than {MANY_RUNS} runs make listing and counting them slower; \
             neither the running daemon nor the installed service has {GC_FLAG}"
        )),
        None => Check::new(
            "retention",
            CheckStatus::Ok,
            format!("{runs} runs recorded; gc is off, which is fine below {MANY_RUNS}"),
        ),
    }
}

/// Where gc was found to be on, if anywhere.
fn gc_source(daemon_pid: Option<u32>, home: Option<&Path>) -> Option<String> {
    if let Some(pid) = daemon_pid
        && daemon_runs_gc(pid)
    {
        return Some(format!("the running daemon (pid {pid}) has {GC_FLAG}"));
    }
    let platform = Platform::current()?;
    let file = install::service_path(platform, home?);
    // Bounded and never waiting on a pipe planted at the path (issue 25 §1);
    // a unit file is a few hundred bytes.
    let text = loops_exec::read_user_file(&file, "service file", 1 << 20).ok()?;
    text.contains(GC_FLAG)
        .then(|| format!("the installed service {} has {GC_FLAG}", file.display()))
}

/// Whether process `pid` was started with the gc flag (`--gc-max-age V`
/// or `--gc-max-age=V`).
fn daemon_runs_gc(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|raw| has_gc_flag(&raw))
}

/// Whether a NUL-separated command line holds the gc flag.
fn has_gc_flag(cmdline: &[u8]) -> bool {
    cmdline.split(|b| *b == 0).any(|arg| {
        arg == GC_FLAG.as_bytes()
            || arg
                .strip_prefix(GC_FLAG.as_bytes())
                .is_some_and(|rest| rest.starts_with(b"="))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_is_found_as_a_whole_argument_only() {
        assert!(has_gc_flag(b"loops\0daemon\0run\0--gc-max-age\x0030d\0"));
        assert!(has_gc_flag(b"loops\0daemon\0run\0--gc-max-age=30d\0"));
        assert!(!has_gc_flag(b"loops\0daemon\0run\0--gc-max-ages\0"));
        assert!(!has_gc_flag(b"loops\0daemon\0run\0--max-parallel\x004\0"));
    }

    #[test]
    fn a_running_process_is_read_by_its_command_line() {
        assert!(!daemon_runs_gc(std::process::id()));
        // A live process whose command line carries the flag, and one
        // whose does not. Each says it is ready once it runs as `sh`:
        // until the exec, /proc shows the test binary's command line.
        let spawn = |args: &[&str]| {
            use std::io::BufRead;
            let mut child = std::process::Command::new("sh")
                .args(["-c", "echo ready; read -r _", "sh"])
                .args(args)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut line = String::new();
            std::io::BufReader::new(child.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            assert_eq!(line, "ready\n");
            child
        };
        let mut with = spawn(&["daemon", "run", "--gc-max-age", "30d"]);
        let mut without = spawn(&["daemon", "run", "--max-parallel", "4"]);
        let (gc, no_gc) = (daemon_runs_gc(with.id()), daemon_runs_gc(without.id()));
        for child in [&mut with, &mut without] {
            drop(child.stdin.take());
            child.wait().unwrap();
        }
        assert!(gc, "the flag on a live process's command line was missed");
        assert!(!no_gc);
    }
}
