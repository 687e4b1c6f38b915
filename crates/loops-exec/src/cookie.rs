//! Spawn cookies: finding the processes of a run that left its process
//! group (Linux).
//!
//! A run's process group reaches every descendant that stays in it, but a
//! process can leave: `setsid` (or `setpgid`) moves it to a new session or
//! group, and a daemonizing double fork also hands it to init. Signals to
//! the run's group no longer reach it.
//!
//! So every spawn gets a cookie, unique to that spawn, in its environment:
//! [`VAR`]`=<runner pid>-<random>-<counter>`. Descendants inherit the
//! environment, and `/proc/<pid>/environ` keeps showing the block a process
//! was exec'd with even if it later unsets the variable. When the
//! supervisor tears a run down, it also scans `/proc` for processes of its
//! own uid whose environment carries the cookie and signals them: the
//! technique of Jenkins' `ProcessTreeKiller`.
//!
//! A loops runner that is itself part of a run (a loop whose command runs
//! `loops run-now`) inherits its parent run's cookie; its own spawns then
//! carry both, space-separated, so that a teardown of the outer run reaches
//! the inner run's escaped processes too.
//!
//! A scan reads the environment of every process of the uid, which costs a
//! few milliseconds, so it happens only during a teardown, never for a run
//! whose group is already empty when its leader exits (see
//! `supervise.rs`).
//!
//! What the OS does not allow to follow (documented in `supervise.rs` too):
//! - a process that clears or rewrites its environment before an `exec`
//!   (`env -i`, `env -u LOOPS_SPAWN_ID`) *and* leaves the group: it carries
//!   no trace of the run any more;
//! - a process of another uid (a setuid helper, `sudo`), and a process that
//!   made itself non-dumpable (as `ssh-agent` does): their `environ` cannot
//!   be read;
//! - on other platforms than Linux nothing is scanned; only the process
//!   group is torn down.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

/// The environment variable that carries the spawn cookie.
pub(crate) const VAR: &str = "LOOPS_SPAWN_ID";

/// A fresh cookie: unique to this spawn among every spawn on the host. The
/// runner's pid and a per-process random value tell runners apart (also a
/// later runner that got the same pid), the counter tells spawns apart.
pub(crate) fn next() -> String {
    static PREFIX: OnceLock<String> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        // std seeds every `RandomState` from the OS's random source.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        #[expect(
            clippy::disallowed_methods,
            reason = "entropy for the seed, not a reading of time"
        )]
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        format!("{}-{:016x}", std::process::id(), hasher.finish())
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{n}")
}

/// A fresh spawn id for a runner to put in a run's environment as
/// `LOOPS_SPAWN_ID` (through [`RunContext::spawn_id`](crate::RunContext::spawn_id)), and
/// record with the run: every process of the run then carries it, also the
/// ones that leave its process group, so a later runner can find them after
/// a crash ([`kill_orphans`](crate::kill_orphans)).
pub fn new_spawn_id() -> String {
    next()
}

/// The value of [`VAR`] for a child: `cookie`, after the cookies of the
/// runs this runner is itself part of (`inherited`, when set).
pub(crate) fn chain(inherited: Option<&str>, cookie: &str) -> String {
    match inherited.map(str::trim) {
        Some(outer) if !outer.is_empty() => format!("{outer} {cookie}"),
        _ => cookie.to_owned(),
    }
}

/// Whether a NUL-separated environment block (`/proc/<pid>/environ`)
/// carries `cookie` in [`VAR`].
pub(crate) fn carries(environ: &[u8], cookie: &str) -> bool {
    let cookie = cookie.as_bytes();
    environ
        .split(|&b| b == 0)
        .filter_map(|entry| entry.strip_prefix(VAR.as_bytes())?.strip_prefix(b"="))
        .any(|value| value.split(|&b| b == b' ').any(|token| token == cookie))
}

/// Finds the live processes of this uid whose environment carries `cookie`,
/// sends them `signal` (none: only counts them), and returns how many it
/// found. Members of process group `spare` are counted but not signalled:
/// the caller has just signalled that group, and a second SIGTERM would
/// run a member's handler twice. Zombies do not count: their environment reads empty. Always 0
/// where `/proc` cannot be read.
///
/// A process found here is signalled by pid right after its environment was
/// read; for that pid to name another process by then, the old one must
/// have exited and the kernel must have cycled through the whole pid space
/// in between.
pub(crate) fn signal_carriers(cookie: &str, signal: Option<Signal>, spare: Option<Pid>) -> usize {
    imp::signal_carriers(cookie, signal, spare)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;

    use nix::sys::signal::{Signal, kill};
    use nix::unistd::{Pid, getpgid};

    use super::carries;

    pub(super) fn signal_carriers(
        cookie: &str,
        signal: Option<Signal>,
        spare: Option<Pid>,
    ) -> usize {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return 0;
        };
        let me = std::process::id();
        // Our effective uid, without nix's `user` feature: `/proc/self`
        // belongs to it.
        let Ok(uid) = std::fs::metadata("/proc/self").map(|m| m.uid()) else {
            return 0;
        };
        let mut environ = Vec::new();
        let mut found = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            // `/proc/<pid>` belongs to the process's effective uid (root
            // when it is not dumpable). Other owners cannot be read anyway;
            // skipping them saves an open per process.
            if pid == me || entry.metadata().map_or(true, |m| m.uid() != uid) {
                continue;
            }
            environ.clear();
            // Gone, or not readable: either way not one to signal.
            let read = std::fs::File::open(entry.path().join("environ"))
                .and_then(|mut f| f.read_to_end(&mut environ));
            if read.is_err() || !carries(&environ, cookie) {
                continue;
            }
            found += 1;
            if let (Some(signal), Ok(raw)) = (signal, i32::try_from(pid)) {
                let pid = Pid::from_raw(raw);
                if spare.is_some() && getpgid(Some(pid)).ok() == spare {
                    continue;
                }
                // ESRCH: it exited meanwhile, which is what we wanted.
                let _ = kill(pid, signal);
            }
        }
        found
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod imp {
    use nix::sys::signal::Signal;
    use nix::unistd::Pid;

    pub(super) fn signal_carriers(
        _cookie: &str,
        _signal: Option<Signal>,
        _spare: Option<Pid>,
    ) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_unique_and_name_the_runner() {
        let a = next();
        let b = next();
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("{}-", std::process::id())), "{a}");
        assert!(!a.contains(' ') && !a.contains('='), "{a}");
    }

    #[test]
    fn an_inherited_cookie_is_kept_in_front() {
        assert_eq!(chain(None, "c"), "c");
        assert_eq!(chain(Some(" "), "c"), "c");
        assert_eq!(chain(Some("a b"), "c"), "a b c");
    }

    #[test]
    fn the_cookie_must_be_a_whole_token_of_the_variable() {
        let env = |entries: &[&str]| entries.join("\0").into_bytes();
        assert!(carries(
            &env(&["A=1", "LOOPS_SPAWN_ID=1-ab-2", "B=2"]),
            "1-ab-2"
        ));
        assert!(carries(&env(&["LOOPS_SPAWN_ID=0-aa-1 1-ab-2"]), "1-ab-2"));
        assert!(carries(&env(&["LOOPS_SPAWN_ID=1-ab-2 3-cd-4\0"]), "1-ab-2"));
        // A prefix, another variable, or the value alone is not the cookie.
        assert!(!carries(&env(&["LOOPS_SPAWN_ID=1-ab-20"]), "1-ab-2"));
        assert!(!carries(&env(&["X_LOOPS_SPAWN_ID=1-ab-2"]), "1-ab-2"));
        assert!(!carries(&env(&["LOOPS_SPAWN_IDX=1-ab-2"]), "1-ab-2"));
        assert!(!carries(&env(&["OTHER=1-ab-2"]), "1-ab-2"));
        assert!(!carries(b"", "1-ab-2"));
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    mod scan {
        use std::os::unix::process::ExitStatusExt;
        use std::process::{Child, Command, Stdio};
        use std::time::{Duration, Instant};

        use super::super::*;

        fn sleeper(cookie: &str) -> Child {
            Command::new("sleep")
                .arg("30")
                .env(VAR, chain(Some("0-outer-0"), cookie))
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        }

        /// Polls until `cookie` is seen on `n` processes: a spawned child
        /// may not have exec'd yet, and only the exec shows its environment.
        fn until_seen(cookie: &str, n: usize) {
            let deadline = Instant::now() + Duration::from_secs(10);
            while signal_carriers(cookie, None, None) != n {
                assert!(Instant::now() < deadline, "{cookie} not seen {n} times");
                std::thread::sleep(Duration::from_millis(5));
            }
        }

        #[test]
        fn only_the_carriers_of_the_cookie_are_signalled() {
            let (mine, other) = (next(), next());
            let mut a = sleeper(&mine);
            let mut b = sleeper(&mine);
            let mut c = sleeper(&other);
            until_seen(&mine, 2);
            until_seen(&other, 1);
            assert_eq!(signal_carriers(&mine, Some(Signal::SIGKILL), None), 2);
            for child in [&mut a, &mut b] {
                assert_eq!(child.wait().unwrap().signal(), Some(libc_sigkill()));
            }
            assert_eq!(signal_carriers(&mine, None, None), 0);
            assert!(c.try_wait().unwrap().is_none(), "another cookie was hit");
            assert_eq!(signal_carriers(&other, Some(Signal::SIGKILL), None), 1);
            assert_eq!(c.wait().unwrap().signal(), Some(libc_sigkill()));
        }

        #[test]
        fn the_spared_group_is_counted_but_not_signalled() {
            use std::os::unix::process::CommandExt;
            let cookie = next();
            let mut grouped = Command::new("sleep")
                .arg("30")
                .env(VAR, &cookie)
                .process_group(0)
                .spawn()
                .unwrap();
            let mut loose = sleeper(&cookie);
            until_seen(&cookie, 2);
            let group = Pid::from_raw(i32::try_from(grouped.id()).unwrap());
            assert_eq!(
                signal_carriers(&cookie, Some(Signal::SIGKILL), Some(group)),
                2
            );
            assert_eq!(loose.wait().unwrap().signal(), Some(libc_sigkill()));
            assert!(
                grouped.try_wait().unwrap().is_none(),
                "the spared group was hit"
            );
            assert_eq!(signal_carriers(&cookie, Some(Signal::SIGKILL), None), 1);
            assert_eq!(grouped.wait().unwrap().signal(), Some(libc_sigkill()));
        }

        #[test]
        fn a_zombie_is_not_counted() {
            let cookie = next();
            let mut child = Command::new("true").env(VAR, &cookie).spawn().unwrap();
            let pid = child.id();
            // Not reaped yet: wait for the zombie state.
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
                if stat
                    .rsplit(')')
                    .next()
                    .unwrap()
                    .trim_start()
                    .starts_with('Z')
                {
                    break;
                }
                assert!(Instant::now() < deadline, "never became a zombie");
                std::thread::sleep(Duration::from_millis(5));
            }
            assert_eq!(signal_carriers(&cookie, None, None), 0);
            assert!(child.wait().unwrap().success());
        }

        fn libc_sigkill() -> i32 {
            Signal::SIGKILL as i32
        }
    }
}
