//! Crash loop: the daemon is killed with SIGKILL at random moments while
//! eight one-second loops run, restarted each time, then stopped
//! gracefully; afterwards no run is left `running`, no slot's command
//! completed twice, every loop is still scheduled, and the work got done
//! (SPEC §1.5 LoopRun, §4.3 `claimRun`, §9 items 7, 16 and 18).
//!
//! Each loop's command appends `start` and, after a short sleep, `done`
//! lines naming its loop, slot and run to one marker file, so what really
//! ran is checked against what the database says. The helpers here (the
//! seeded random source, the foreground daemon, the sweep of stray
//! processes, the marker file and the run rows) are shared with `races`.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use loops_tests::{TestEnv, sqlite_only};

use crate::support::{Rng, figure, pick, wait_for};

/// The temporary directory that holds `env`'s data dir: the stray sweep
/// looks for it in command lines.
pub(crate) fn temp_root(env: &TestEnv) -> String {
    env.data_dir()
        .parent()
        .expect("the data dir is in the temp dir")
        .display()
        .to_string()
}

/// A `loops daemon run` child of the test, its stderr appended to a file;
/// killed with SIGKILL and reaped when dropped, so a failing test leaves no
/// daemon behind.
pub(crate) struct Foreground {
    child: Child,
    stderr: PathBuf,
}

impl Foreground {
    /// Starts `loops daemon run <args>` in `env`, stderr appended to
    /// `stderr` (a file, so the daemon writes its log lines to
    /// `daemon.log` only and the file keeps errors and panics).
    pub(crate) fn spawn(env: &TestEnv, stderr: &Path, args: &[&str]) -> Foreground {
        let file = File::options()
            .create(true)
            .append(true)
            .open(stderr)
            .expect("a stderr file for the daemon");
        let child = env
            .cmd()
            .args(["daemon", "run"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("loops daemon run starts");
        Foreground {
            child,
            stderr: stderr.to_owned(),
        }
    }

    /// The daemon's pid.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How the daemon exited, if it has (reaping it).
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("waiting on the daemon")
    }

    /// SIGKILLs the daemon and reaps it. Returns its exit status instead
    /// when it had already exited by itself.
    pub(crate) fn kill9(&mut self) -> Option<ExitStatus> {
        if let Some(status) = self.exited() {
            return Some(status);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }

    /// Waits up to `within` for the daemon to exit by itself.
    pub(crate) fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        wait_for(within, || self.exited())
    }

    /// SIGTERMs the daemon (a graceful stop) and waits up to `within` for
    /// it to exit.
    pub(crate) fn terminate(&mut self, within: Duration) -> Option<ExitStatus> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        self.wait_exit(within)
    }

    /// What the daemon wrote to stderr so far (shared by every daemon
    /// started with the same file).
    pub(crate) fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Foreground {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The processes whose command line mentions `needle` (the test's temp
/// directory): run commands a killed daemon left behind. Zombies have an
/// empty command line and never match.
pub(crate) fn strays(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|raw| {
                String::from_utf8_lossy(&raw)
                    .replace('\0', " ")
                    .contains(needle)
            })
        })
        .collect()
}

/// Waits up to `within` for the stray processes of `needle` to end by
/// themselves, then SIGKILLs what is left (the process group, when the
/// stray leads one). Returns how many had to be killed.
pub(crate) fn reap_strays(needle: &str, within: Duration) -> usize {
    if wait_for(within, || strays(needle).is_empty().then_some(())).is_some() {
        return 0;
    }
    let left = strays(needle);
    for pid in &left {
        let leads_group = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let pgrp = stat[stat.rfind(')')? + 1..].split_whitespace().nth(2)?;
                pgrp.parse::<u32>().ok()
            })
            == Some(*pid);
        let target = if leads_group {
            format!("-{pid}")
        } else {
            pid.to_string()
        };
        let _ = Command::new("kill")
            .args(["-KILL", "--", &target])
            .stderr(Stdio::null())
            .status();
    }
    let _ = wait_for(Duration::from_secs(5), || {
        strays(needle).is_empty().then_some(())
    });
    left.len()
}

/// Sweeps the stray processes of a temp directory when dropped, so no
/// process outlives the test, even a failing one.
pub(crate) struct StrayGuard(pub(crate) String);

impl Drop for StrayGuard {
    fn drop(&mut self) {
        reap_strays(&self.0, Duration::ZERO);
    }
}

/// A shell command that appends `start <loop> <slot> <run>` to `marks`,
/// sleeps `sleep` seconds, then appends `done <loop> <slot> <run>`.
pub(crate) fn marker_command(marks: &Path, sleep: &str) -> String {
    let line = "$LOOPS_LOOP_ID $LOOPS_SCHEDULED_FOR $LOOPS_RUN_ID";
    let m = marks.display();
    format!("echo \"start {line}\" >> '{m}'; sleep {sleep}; echo \"done {line}\" >> '{m}'")
}

/// What the commands recorded for one slot: the run ids of its `start` and
/// `done` lines, in order.
#[derive(Debug, Default)]
pub(crate) struct SlotMarks {
    /// The run id of each start.
    pub(crate) starts: Vec<String>,
    /// The run id of each completion.
    pub(crate) dones: Vec<String>,
}

/// The marker file, by `(loop id, slot)`. Every line must be well formed.
pub(crate) fn read_marks(marks: &Path) -> BTreeMap<(String, String), SlotMarks> {
    let text = std::fs::read_to_string(marks).unwrap_or_default();
    let mut by_slot: BTreeMap<(String, String), SlotMarks> = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let [event, loop_id, slot, run_id] = fields[..] else {
            panic!("a malformed marker line {line:?} in:\n{text}");
        };
        assert!(
            !loop_id.is_empty() && !slot.is_empty() && !run_id.is_empty(),
            "a marker line without the LOOPS_* variables: {line:?}"
        );
        let entry = by_slot
            .entry((loop_id.to_owned(), slot.to_owned()))
            .or_default();
        match event {
            "start" => entry.starts.push(run_id.to_owned()),
            "done" => entry.dones.push(run_id.to_owned()),
            _ => panic!("a marker line with an unknown event: {line:?}"),
        }
    }
    by_slot
}

/// One row of `loop_runs`.
#[derive(Debug, Clone)]
pub(crate) struct RunRow {
    /// `id`.
    pub(crate) id: String,
    /// `loop_id`.
    pub(crate) loop_id: String,
    /// `scheduled_for`.
    pub(crate) scheduled_for: String,
    /// `attempt`.
    pub(crate) attempt: i64,
    /// `status`.
    pub(crate) status: String,
    /// `claimed_by`.
    pub(crate) claimed_by: Option<String>,
}

/// A connection to the test's database, for reading only.
pub(crate) fn open_db(env: &TestEnv) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(env.db_path()).expect("the database opens");
    conn.busy_timeout(Duration::from_secs(10))
        .expect("a busy timeout");
    conn
}

/// Every run, oldest first.
pub(crate) fn run_rows(env: &TestEnv) -> Vec<RunRow> {
    let conn = open_db(env);
    let mut stmt = conn
        .prepare(
            "SELECT id, loop_id, scheduled_for, attempt, status, claimed_by
             FROM loop_runs ORDER BY created_at, rowid",
        )
        .expect("a runs query");
    stmt.query_map([], |r| {
        Ok(RunRow {
            id: r.get(0)?,
            loop_id: r.get(1)?,
            scheduled_for: r.get(2)?,
            attempt: r.get(3)?,
            status: r.get(4)?,
            claimed_by: r.get(5)?,
        })
    })
    .expect("runs")
    .collect::<Result<_, _>>()
    .expect("run rows")
}

/// `(id, status, next_run_at)` of every loop.
pub(crate) fn loop_rows(env: &TestEnv) -> Vec<(String, String, Option<String>)> {
    let conn = open_db(env);
    let mut stmt = conn
        .prepare("SELECT id, status, next_run_at FROM loops ORDER BY rowid")
        .expect("a loops query");
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("loops")
        .collect::<Result<_, _>>()
        .expect("loop rows")
}

/// Slots that hold more than one row, or more than one row with `status`
/// when given (the schema's UNIQUE(loop_id, scheduled_for) forbids both).
pub(crate) fn duplicate_slots(env: &TestEnv, status: Option<&str>) -> Vec<(String, String, i64)> {
    let conn = open_db(env);
    let mut stmt = conn
        .prepare(
            "SELECT loop_id, scheduled_for, COUNT(*) FROM loop_runs
             WHERE ?1 IS NULL OR status = ?1
             GROUP BY loop_id, scheduled_for HAVING COUNT(*) > 1",
        )
        .expect("a duplicates query");
    stmt.query_map([status], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("duplicates")
        .collect::<Result<_, _>>()
        .expect("duplicate rows")
}

/// Checks the marker file against the runs: no slot's command completed
/// twice (nor started more than `max_starts` times, when given), every
/// start and completion belongs to its slot's run, a skipped slot ran
/// nothing, and every succeeded run's command completed exactly once.
/// Returns the failures.
pub(crate) fn marks_against_runs(
    marks: &BTreeMap<(String, String), SlotMarks>,
    runs: &[RunRow],
    max_starts: Option<usize>,
) -> Vec<String> {
    let by_slot: BTreeMap<(&str, &str), &RunRow> = runs
        .iter()
        .map(|r| ((r.loop_id.as_str(), r.scheduled_for.as_str()), r))
        .collect();
    let mut failures = Vec::new();
    for ((loop_id, slot), m) in marks {
        if m.dones.len() > 1 {
            failures.push(format!(
                "slot {slot} of loop {loop_id} completed {} times: {m:?}",
                m.dones.len()
            ));
        }
        if max_starts.is_some_and(|max| m.starts.len() > max) {
            failures.push(format!(
                "slot {slot} of loop {loop_id} started {} times: {m:?}",
                m.starts.len()
            ));
        }
        let row = by_slot.get(&(loop_id.as_str(), slot.as_str()));
        for run_id in m.starts.iter().chain(&m.dones) {
            match row {
                None => failures.push(format!(
                    "run {run_id} ran slot {slot} of loop {loop_id}, which has no run row"
                )),
                Some(row) if &row.id != run_id => failures.push(format!(
                    "run {run_id} ran slot {slot} of loop {loop_id}, whose row is {row:?}"
                )),
                Some(row) if row.status == "skipped" => failures.push(format!(
                    "skipped slot {slot} of loop {loop_id} ran a command: {row:?} {m:?}"
                )),
                Some(_) => {}
            }
        }
    }
    for row in runs.iter().filter(|r| r.status == "succeeded") {
        let done = marks
            .get(&(row.loop_id.clone(), row.scheduled_for.clone()))
            .map_or(0, |m| m.dones.iter().filter(|d| **d == row.id).count());
        if done != 1 {
            failures.push(format!(
                "succeeded run {row:?} has {done} completion markers"
            ));
        }
    }
    failures
}

/// Runs by status, as `status=n` pairs.
pub(crate) fn status_counts(runs: &[RunRow]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in runs {
        *counts.entry(r.status.as_str()).or_default() += 1;
    }
    counts
        .iter()
        .map(|(s, n)| format!("{s}={n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The daemon's log so far.
pub(crate) fn daemon_log(env: &TestEnv) -> String {
    std::fs::read_to_string(env.data_dir().join("daemon.log")).unwrap_or_default()
}

/// The marker check itself catches what it is there to catch: a slot
/// completed twice, a command under another run id, a skipped slot that
/// ran, a succeeded run whose command never completed, a second start.
#[test]
fn the_marker_check_catches_double_runs() {
    let row = |id: &str, slot: &str, status: &str| RunRow {
        id: id.to_owned(),
        loop_id: "l".to_owned(),
        scheduled_for: slot.to_owned(),
        attempt: 1,
        status: status.to_owned(),
        claimed_by: None,
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let marks = dir.path().join("marks");
    std::fs::write(
        &marks,
        "start l s1 r1\ndone l s1 r1\nstart l s1 r1\ndone l s1 r1\n\
         start l s2 rx\nstart l s3 r3\nstart l s4 r4\nstart l s5 r5\n",
    )
    .expect("a marker file");
    let runs = [
        row("r1", "s1", "succeeded"),
        row("r2", "s2", "abandoned"),
        row("r3", "s3", "skipped"),
        row("r4", "s4", "succeeded"),
    ];
    let failures = marks_against_runs(&read_marks(&marks), &runs, Some(1));
    let text = failures.join("\n");
    for expected in [
        "slot s1 of loop l completed 2 times",
        "slot s1 of loop l started 2 times",
        "run rx ran slot s2 of loop l, whose row is",
        "skipped slot s3 of loop l ran a command",
        "run r5 ran slot s5 of loop l, which has no run row",
        "succeeded run RunRow { id: \"r1\"",
        "succeeded run RunRow { id: \"r4\"",
    ] {
        assert!(text.contains(expected), "{expected:?} not in:\n{text}");
    }
    assert_eq!(failures.len(), 7, "{text}");
    // Without a bound on starts, a second start is no failure.
    assert_eq!(
        marks_against_runs(&read_marks(&marks), &runs, None).len(),
        6
    );
}

/// Eight one-second loops survive SIGKILLs of the daemon at random moments
/// (SHORT: 6, LONG: 30) and a graceful stop: nothing stays running, no
/// slot's command completes twice, every loop stays scheduled, and every
/// loop got work done.
#[test]
fn kill_9_at_random_moments_loses_and_repeats_nothing() {
    sqlite_only!(
        "reads the runs from the SQLite file; the reliability suite stays on SQLite for now"
    );
    const TEST: &str = "crash";
    const LOOPS: usize = 8;
    let started = Instant::now();
    let kills = pick(6, 30);
    let least_succeeded: usize = pick(1, 3);
    let mut rng = Rng::seeded(TEST);
    let env = TestEnv::new();
    let root = temp_root(&env);
    let _strays = StrayGuard(root.clone());
    let marks = env.home().join("marks");
    let stderr = env.home().join("daemon.stderr");
    let ids: Vec<String> = (0..LOOPS)
        .map(|i| {
            // 0.2 s to 0.5 s, so kills often land mid-run.
            let sleep = format!("0.{}", 2 + i % 4);
            env.create_command(
                &format!("crash-{i}"),
                &marker_command(&marks, &sleep),
                &["--every", "1s", "--lease", "2s"],
            )
        })
        .collect();

    // Kill the daemon at random moments, restarting it each time.
    let mut early_exits = Vec::new();
    for kill in 1..=kills {
        let mut daemon = Foreground::spawn(&env, &stderr, &["--grace", "10s"]);
        std::thread::sleep(rng.millis(300, 2000));
        if let Some(status) = daemon.kill9() {
            early_exits.push(format!("before kill {kill}: {status}"));
        }
    }
    assert!(
        early_exits.is_empty(),
        "a restarted daemon exited by itself (a dead daemon must not block a restart): \
         {early_exits:?}\nstderr:\n{}\nlog:\n{}",
        std::fs::read_to_string(&stderr).unwrap_or_default(),
        daemon_log(&env)
    );

    // Once more, until every loop has done its share and the dead daemons'
    // runs are all settled, then a graceful stop.
    let mut daemon = Foreground::spawn(&env, &stderr, &["--grace", "10s"]);
    let pid = daemon.pid();
    let own = format!(":{pid}:");
    // Up and holding the lease before anything else, so the graceful stop
    // below is never a SIGTERM during process start-up.
    let started_line = format!("started pid={pid} ");
    assert!(
        wait_for(Duration::from_secs(20), || daemon_log(&env)
            .contains(&started_line)
            .then_some(()))
        .is_some(),
        "the last daemon did not start:\n{}",
        daemon.stderr()
    );
    let settled = wait_for(
        pick(Duration::from_secs(20), Duration::from_secs(60)),
        || {
            let runs = run_rows(&env);
            let foreign_running = runs.iter().any(|r| {
                r.status == "running" && !r.claimed_by.as_deref().is_some_and(|c| c.contains(&own))
            });
            let all_did = ids.iter().all(|id| {
                runs.iter()
                    .filter(|r| &r.loop_id == id && r.status == "succeeded")
                    .count()
                    >= least_succeeded
            });
            (!foreign_running && all_did).then_some(())
        },
    );
    assert!(
        daemon.exited().is_none(),
        "the last daemon exited by itself:\n{}",
        daemon.stderr()
    );
    let status = daemon.terminate(Duration::from_secs(30));
    assert!(
        status.is_some_and(|s| s.success()),
        "the last daemon's graceful stop: {status:?}\nstderr:\n{}",
        daemon.stderr()
    );
    let running: Vec<RunRow> = run_rows(&env)
        .into_iter()
        .filter(|r| r.status == "running")
        .collect();
    assert!(
        running.is_empty(),
        "runs left running after a graceful stop (settled in time: {}): {running:#?}\nlog:\n{}",
        settled.is_some(),
        daemon_log(&env)
    );
    // A last tick recovers whatever a lease still covered and runs what is
    // due; then nothing may be running either.
    env.loops(["tick"]).run();
    let killed_strays = reap_strays(&root, Duration::from_secs(5));

    let runs = run_rows(&env);
    let running: Vec<&RunRow> = runs.iter().filter(|r| r.status == "running").collect();
    assert!(running.is_empty(), "runs left running: {running:#?}");
    assert_eq!(duplicate_slots(&env, None), vec![], "slots with two runs");
    assert_eq!(
        duplicate_slots(&env, Some("succeeded")),
        vec![],
        "slots that succeeded twice"
    );
    // A slot may start twice (a re-claim after its first process died
    // unfinished), but its command never completes twice.
    let marked = read_marks(&marks);
    let failures = marks_against_runs(&marked, &runs, None);
    assert!(
        failures.is_empty(),
        "the commands disagree with the runs:\n{}",
        failures.join("\n")
    );
    let loops = loop_rows(&env);
    assert_eq!(loops.len(), LOOPS);
    for (id, status, next) in &loops {
        assert_eq!(status, "active", "loop {id} is no longer active");
        assert!(next.is_some(), "loop {id} has no next run");
    }
    let succeeded: Vec<usize> = ids
        .iter()
        .map(|id| {
            runs.iter()
                .filter(|r| &r.loop_id == id && r.status == "succeeded")
                .count()
        })
        .collect();
    let (min, max) = (
        succeeded.iter().copied().min().unwrap_or(0),
        succeeded.iter().copied().max().unwrap_or(0),
    );
    assert!(
        min >= least_succeeded,
        "succeeded runs per loop {succeeded:?}, expected at least {least_succeeded} each"
    );
    let log = daemon_log(&env);
    let stderr_text = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert!(
        !stderr_text.contains("panicked"),
        "a daemon panicked:\n{stderr_text}"
    );

    figure(TEST, &format!("kills survived: {kills}"));
    figure(
        TEST,
        &format!("runs checked: {} ({})", runs.len(), status_counts(&runs)),
    );
    figure(
        TEST,
        &format!("succeeded runs per loop: min {min} max {max} ({succeeded:?})"),
    );
    figure(
        TEST,
        &format!(
            "orphaned process groups killed by restarts: {}; runs abandoned by restarts: {}; \
             slots started twice: {}; strays killed at the end: {killed_strays}",
            log.matches("killed orphaned process group").count(),
            log.matches("exited before the run completed").count(),
            marked.values().filter(|m| m.starts.len() > 1).count(),
        ),
    );
    figure(
        TEST,
        &format!("duration: {:.1}s", started.elapsed().as_secs_f64()),
    );
}

/// Whether `pid` is a process that is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit(')').next().unwrap_or("").trim_start();
        !(state.starts_with('Z') || state.starts_with('X'))
    })
}

/// SIGKILLs `pid` on drop, so no escaped process outlives the test.
struct KillOnDrop(Vec<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    }
}

#[test]
fn recovery_after_a_crash_kills_the_processes_that_left_the_runs_group() {
    sqlite_only!(
        "reads the runs from the SQLite file; the reliability suite stays on SQLite for now"
    );
    // Issue 12 §5: the run's spawn id is stored with it, so the next daemon
    // finds the processes that left the group (`setsid`) by the
    // `LOOPS_SPAWN_ID` they carry, and kills them with the group.
    let have_setsid = Command::new("sh")
        .args(["-c", "command -v setsid"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have_setsid || !Path::new("/proc/self/environ").exists() {
        figure(
            "crash",
            "setsid or /proc is missing: escape recovery skipped",
        );
        return;
    }
    let env = TestEnv::new();
    let marks = env.home().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let job = env.write_script(
        "escaper",
        r#"M="$1"
setsid sh -c 'echo $$ >"$1.tmp"; mv "$1.tmp" "$1"; exec sleep 300' sh "$M/escaped.pid" </dev/null >/dev/null 2>&1 &
sleep 300 &
echo $! >"$M/member.tmp"; mv "$M/member.tmp" "$M/member.pid"
wait"#,
    );
    let cmd = format!("{} {}", job.display(), marks.display());
    env.create_command("escaper", &cmd, &["--at", "2020-01-01T00:00:00Z"]);
    let stderr = env.home().join("daemon.stderr");
    let mut first = Foreground::spawn(&env, &stderr, &[]);
    let read_pid = |name: &str| -> Option<u32> {
        std::fs::read_to_string(marks.join(name))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    };
    let pids = wait_for(Duration::from_secs(30), || {
        Some((read_pid("escaped.pid")?, read_pid("member.pid")?))
    })
    .expect("the run's processes to start");
    let _guard = KillOnDrop(vec![pids.0, pids.1]);
    // The spawn id is recorded with the pid.
    let recorded = wait_for(Duration::from_secs(30), || {
        open_db(&env)
            .query_row(
                "SELECT spawn_id FROM loop_runs WHERE status = 'running' AND spawn_id IS NOT NULL",
                [],
                |r| r.get::<_, String>(0),
            )
            .ok()
    });
    assert!(recorded.is_some(), "no spawn id recorded");
    first.kill9();
    assert!(alive(pids.0), "the escaped process outlives the crash");

    let _second = Foreground::spawn(&env, &stderr, &[]);
    // The log line comes once the daemon saw them gone, a moment after.
    let gone = wait_for(Duration::from_secs(30), || {
        (!alive(pids.0)
            && !alive(pids.1)
            && daemon_log(&env).contains("that left its process group"))
        .then_some(())
    });
    let log = daemon_log(&env);
    assert!(
        gone.is_some(),
        "escaped {} alive: {}, member {} alive: {}\n{log}",
        pids.0,
        alive(pids.0),
        pids.1,
        alive(pids.1)
    );
    assert!(log.contains("that left its process group"), "{log}");
}
