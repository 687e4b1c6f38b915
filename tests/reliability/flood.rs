//! Output floods: however much a run prints, the runner's memory and the
//! stored output stay bounded, and the run's status is still right (SPEC
//! §5.7 "Capture", §9 items 22 and 23).
//!
//! Two floods: 200 MB on stdout from a run that then succeeds (2 GB in the
//! long variant), and both streams printing as fast as they can until the
//! run's `--timeout` (2 s; 20 s long). The first goes through `loops
//! run-now`, `loops tick` (four flood loops at once in the long variant)
//! and the daemon, the second through `run-now` and the daemon. For each,
//! the peak resident memory of the `loops` process stays under 64 MiB,
//! each stored stream is at most the 256 KiB cap plus the `[truncated <n>
//! bytes]` marker, the marker and the kept tail add up to every byte
//! printed (the tail being the stream's last bytes), and the status is
//! `succeeded`, or `timed_out` with its error.
//!
//! The peak is the `loops` process's own `VmHWM`, polled from `/proc`
//! while it runs. When GNU or BusyBox `time` is installed, the run is
//! wrapped in `/usr/bin/time -f %M` too, whose figure covers the whole
//! life of `loops` (and is an upper bound: it is the largest of `loops` and
//! the processes it waited for).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use loops_tests::{TestEnv, loops_bin};

use crate::support::{figure, pick, wait_for};

/// The per-stream cap, `DEFAULT_MAX_OUTPUT_BYTES` in
/// `crates/loops-exec/src/output.rs` (SPEC §5.7: 262144 bytes).
const CAP: usize = 262_144;

/// The bound on the runner's peak resident memory.
const RSS_LIMIT_KIB: u64 = 64 * 1024;

/// The line the stdout flood repeats.
const LINE: &[u8] = b"0123456789abcdef\n";

/// How long any runner may take before the test calls it hung.
const HANG: Duration = Duration::from_secs(120);

/// The bytes of the stdout flood.
fn flood_bytes() -> u64 {
    pick(200_000_000, 2_000_000_000)
}

/// The command printing exactly `bytes` bytes of [`LINE`]s to stdout.
fn stdout_flood(bytes: u64) -> String {
    let line = std::str::from_utf8(&LINE[..LINE.len() - 1]).unwrap_or("x");
    format!("yes {line} | head -c {bytes}")
}

/// The command printing to both streams until it is killed.
const BOTH_FLOOD: &str = "yes stdout-flood & yes stderr-flood >&2";

/// The timeout of [`BOTH_FLOOD`], in seconds: long enough that each
/// stream prints past the cap even when a loaded machine starts the run
/// late and schedules it little (2 s once left a daemon's run under it).
fn both_timeout() -> u64 {
    pick(5, 20)
}

/// `/usr/bin/time`, when it exists and understands `-o FILE -f %M`.
fn gnu_time() -> Option<&'static Path> {
    static TIME: OnceLock<bool> = OnceLock::new();
    let path = Path::new("/usr/bin/time");
    let works = *TIME.get_or_init(|| {
        let Ok(dir) = tempfile::tempdir() else {
            return false;
        };
        let out = dir.path().join("rss");
        let ran = Command::new(path)
            .arg("-o")
            .arg(&out)
            .args(["-f", "%M", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ran && read_kib(&out).is_some()
    });
    works.then_some(path)
}

/// The number in a `time -f %M` output file.
fn read_kib(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().last()?.trim().parse().ok()
}

/// A `loops` process whose peak memory is being watched.
struct Watched {
    /// `loops` itself, or `time` running it.
    child: Child,
    /// The `loops` process, once known.
    loops_pid: Option<u32>,
    /// The last `VmHWM` read for it, in KiB.
    hwm_kib: Option<u64>,
    /// The `time -f %M` output file, when wrapped.
    time_out: Option<(tempfile::TempDir, std::path::PathBuf)>,
}

/// What a watched `loops` process used.
struct Peak {
    exit_code: Option<i32>,
    /// The last `VmHWM` read while `loops` ran.
    hwm_kib: Option<u64>,
    /// `time`'s maximum RSS, when wrapped.
    time_kib: Option<u64>,
    elapsed: Duration,
}

impl Watched {
    /// Starts `loops <args>` in `env`, wrapped in `time` when possible.
    fn start(env: &TestEnv, args: &[&str]) -> Watched {
        let base = env.cmd();
        let (mut cmd, time_out) = match gnu_time() {
            Some(time) => {
                let dir = tempfile::tempdir().expect("a temp dir");
                let out = dir.path().join("rss");
                let mut cmd = Command::new(time);
                cmd.arg("-o").arg(&out).args(["-f", "%M"]).arg(loops_bin());
                (cmd, Some((dir, out)))
            }
            None => (Command::new(loops_bin()), None),
        };
        for (key, value) in base.get_envs() {
            match value {
                Some(value) => cmd.env(key, value),
                None => cmd.env_remove(key),
            };
        }
        let child = cmd
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("loops starts");
        let loops_pid = time_out.is_none().then(|| child.id());
        Watched {
            child,
            loops_pid,
            hwm_kib: None,
            time_out,
        }
    }

    /// The `loops` pid, waiting briefly for `time` to start it.
    fn loops_pid(&mut self) -> Option<u32> {
        if self.loops_pid.is_none() {
            self.loops_pid = child_of(self.child.id());
        }
        self.loops_pid
    }

    /// Reads `VmHWM` of `loops` once.
    fn sample(&mut self) {
        let Some(pid) = self.loops_pid() else {
            return;
        };
        // A zombie has no VmHWM: keep the last value read.
        if let Some(kib) = vm_hwm_kib(pid) {
            self.hwm_kib = Some(self.hwm_kib.map_or(kib, |h| h.max(kib)));
        }
    }

    /// Samples until `loops` exits.
    fn wait(mut self, started: Instant) -> Peak {
        let deadline = started + HANG;
        loop {
            self.sample();
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Peak {
                    exit_code: status.code(),
                    hwm_kib: self.hwm_kib,
                    time_kib: self.time_out.as_ref().and_then(|(_, out)| read_kib(out)),
                    elapsed: started.elapsed(),
                };
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!("loops hung for {HANG:?}");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        // Only reached with the child still running when the test failed.
        if let Ok(None) = self.child.try_wait() {
            if let Some(pid) = self.loops_pid {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The child of `parent` (the `loops` that `time` started), if any yet.
fn child_of(parent: u32) -> Option<u32> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            return Some(pid);
        }
    }
    None
}

/// `VmHWM` of `pid` in KiB.
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A stored stream, split into its marker's count and the kept tail.
struct Stored {
    /// Bytes as stored.
    len: usize,
    /// The count in `[truncated <n> bytes]`.
    dropped: u64,
    /// The kept tail.
    tail: String,
}

impl Stored {
    /// Checks the stored text of a flooded stream: it carries the marker,
    /// keeps at most [`CAP`] bytes after it, and is no longer than the cap
    /// plus the marker.
    fn parse(what: &str, text: &str) -> Stored {
        let rest = text
            .strip_prefix("[truncated ")
            .unwrap_or_else(|| panic!("{what}: no truncation marker: {:?}", head(text)));
        let (count, tail) = rest
            .split_once(" bytes]\n")
            .unwrap_or_else(|| panic!("{what}: a malformed marker: {:?}", head(text)));
        let dropped: u64 = count.parse().expect("the marker counts bytes");
        let marker = format!("[truncated {dropped} bytes]\n");
        assert!(tail.len() <= CAP, "{what}: kept {} bytes", tail.len());
        assert!(
            text.len() <= CAP + marker.len(),
            "{what}: stored {} bytes",
            text.len()
        );
        Stored {
            len: text.len(),
            dropped,
            tail: tail.to_owned(),
        }
    }

    /// Every byte printed: dropped plus kept.
    fn printed(&self) -> u64 {
        self.dropped + self.tail.len() as u64
    }
}

/// The first characters of `text`, for messages.
fn head(text: &str) -> &str {
    let end = text.char_indices().nth(80).map_or(text.len(), |(i, _)| i);
    &text[..end]
}

/// The last `n` bytes of a stream of `total` bytes of repeated [`LINE`]s.
fn expected_tail(total: u64, n: usize) -> String {
    let start = total - n as u64;
    (start..total)
        .map(|i| char::from(LINE[(i % LINE.len() as u64) as usize]))
        .collect()
}

/// The newest run of loop `id`, with its output.
fn newest_run(env: &TestEnv, id: &str) -> serde_json::Value {
    let runs = env
        .loops(["--json", "runs", id, "--show-output"])
        .run()
        .json();
    runs[0].clone()
}

/// Asserts the memory bound and returns the figure text for it.
fn check_peak(what: &str, peak: &Peak) -> String {
    assert!(
        peak.hwm_kib.is_some() || peak.time_kib.is_some(),
        "{what}: the peak memory of loops could not be read"
    );
    for kib in [peak.hwm_kib, peak.time_kib].into_iter().flatten() {
        assert!(
            kib < RSS_LIMIT_KIB,
            "{what}: loops peaked at {kib} KiB, over the {RSS_LIMIT_KIB} KiB bound"
        );
    }
    let show = |k: Option<u64>| k.map_or_else(|| "n/a".to_owned(), |k| format!("{k} KiB"));
    format!(
        "peak RSS {} (VmHWM), {} (time %M), {} ms",
        show(peak.hwm_kib),
        show(peak.time_kib),
        peak.elapsed.as_millis()
    )
}

/// Checks the stored run of the stdout flood.
fn check_stdout_flood(what: &str, run: &serde_json::Value, bytes: u64) -> String {
    assert_eq!(
        run["status"],
        "succeeded",
        "{what}: {}",
        head(&run.to_string())
    );
    assert_eq!(run["exitCode"], 0);
    let stdout = Stored::parse(what, run["stdout"].as_str().expect("stdout"));
    assert_eq!(stdout.printed(), bytes, "{what}: dropped + kept");
    assert_eq!(stdout.tail.len(), CAP);
    assert!(
        stdout.tail == expected_tail(bytes, CAP),
        "{what}: the kept tail is not the last {CAP} bytes printed"
    );
    assert!(run.get("stderr").is_none_or(|s| s == ""), "{what}: stderr");
    format!(
        "printed {bytes} B, stored stdout {} B (the last {} B after the marker), status succeeded",
        stdout.len,
        stdout.tail.len()
    )
}

/// Checks the stored run of the two-stream flood.
fn check_both_flood(what: &str, run: &serde_json::Value) -> String {
    let timeout_ms = both_timeout() * 1000;
    assert_eq!(
        run["status"],
        "timed_out",
        "{what}: {}",
        head(&run.to_string())
    );
    assert_eq!(run["error"], format!("timed out after {timeout_ms}ms"));
    let mut text = Vec::new();
    for (stream, line) in [("stdout", "stdout-flood\n"), ("stderr", "stderr-flood\n")] {
        let stored = Stored::parse(
            &format!("{what} {stream}"),
            run[stream].as_str().expect("a stream"),
        );
        assert_eq!(stored.tail.len(), CAP, "{what} {stream}");
        assert!(
            stored.tail.bytes().all(|b| line.as_bytes().contains(&b)),
            "{what} {stream}: the kept tail is not the stream's"
        );
        text.push(format!(
            "{stream} printed {} B, stored {} B",
            stored.printed(),
            stored.len
        ));
    }
    format!("{}, status timed_out", text.join(", "))
}

/// Runs `loops <args>` to its end under watch.
fn watched(env: &TestEnv, args: &[&str]) -> Peak {
    let started = Instant::now();
    Watched::start(env, args).wait(started)
}

/// Runs the daemon until `done` holds, then stops it with SIGTERM.
fn watched_daemon(env: &TestEnv, mut done: impl FnMut() -> bool) -> Peak {
    let started = Instant::now();
    let mut daemon = Watched::start(env, &["daemon", "run", "--interval-ms", "100"]);
    let deadline = started + HANG;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "the daemon never finished the run"
        );
        // Sampling every few milliseconds between the checks.
        for _ in 0..10 {
            daemon.sample();
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let pid = wait_for(Duration::from_secs(10), || daemon.loops_pid()).expect("the daemon's pid");
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    daemon.wait(started)
}

/// Whether loop `id` has a finished run.
fn finished(env: &TestEnv, id: &str) -> bool {
    let runs = env.loops(["--json", "runs", id]).run().json();
    runs.get(0)
        .is_some_and(|r| r["status"] != "running" && !r["status"].is_null())
}

#[test]
fn a_200_mb_stdout_flood_keeps_memory_and_storage_bounded() {
    let test = "flood_stdout";
    let bytes = flood_bytes();
    let cmd = stdout_flood(bytes);

    // run-now.
    let env = TestEnv::new();
    let id = env.create_command("flood", &cmd, &["--every", "1h"]);
    let peak = watched(&env, &["run-now", &id]);
    assert_eq!(peak.exit_code, Some(0), "run-now");
    let stored = check_stdout_flood("run-now", &newest_run(&env, &id), bytes);
    let memory = check_peak("run-now", &peak);
    figure(test, &format!("run-now: {stored}; {memory}"));

    // tick, with several flood loops due at once in the long variant.
    let env = TestEnv::new();
    let ids: Vec<String> = (0..pick(1, 4))
        .map(|i| env.create_command(&format!("flood-{i}"), &cmd, &["--at", "2020-01-01"]))
        .collect();
    let peak = watched(&env, &["tick"]);
    assert_eq!(peak.exit_code, Some(0), "tick");
    for id in &ids {
        let stored = check_stdout_flood("tick", &newest_run(&env, id), bytes);
        figure(test, &format!("tick ({} loops): {stored}", ids.len()));
    }
    figure(
        test,
        &format!("tick ({} loops): {}", ids.len(), check_peak("tick", &peak)),
    );

    // The daemon.
    let env = TestEnv::new();
    let id = env.create_command("flood", &cmd, &["--at", "2020-01-01"]);
    let peak = watched_daemon(&env, || finished(&env, &id));
    let stored = check_stdout_flood("daemon", &newest_run(&env, &id), bytes);
    let memory = check_peak("daemon", &peak);
    figure(test, &format!("daemon: {stored}; {memory}"));
}

#[test]
fn a_flood_on_both_streams_until_the_timeout_keeps_memory_and_storage_bounded() {
    let test = "flood_both_streams";
    let timeout = format!("{}s", both_timeout());

    // run-now.
    let env = TestEnv::new();
    let id = env.create_command(
        "flood",
        BOTH_FLOOD,
        &["--every", "1h", "--timeout", &timeout],
    );
    let peak = watched(&env, &["run-now", &id]);
    assert_eq!(peak.exit_code, Some(1), "run-now");
    let stored = check_both_flood("run-now", &newest_run(&env, &id));
    let memory = check_peak("run-now", &peak);
    figure(test, &format!("run-now: {stored}; {memory}"));

    // The daemon.
    let env = TestEnv::new();
    let id = env.create_command(
        "flood",
        BOTH_FLOOD,
        &["--at", "2020-01-01", "--timeout", &timeout],
    );
    let peak = watched_daemon(&env, || finished(&env, &id));
    let stored = check_both_flood("daemon", &newest_run(&env, &id));
    let memory = check_peak("daemon", &peak);
    figure(test, &format!("daemon: {stored}; {memory}"));
}
