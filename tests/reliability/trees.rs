//! Process trees: a run's whole tree ends with the run (SPEC §5.7 "Kill",
//! §9 items 15 and 18).
//!
//! Each target builds a tree of a given [`Shape`]: background grandchildren
//! in the run's process group, a tree that ignores SIGTERM, processes that
//! leave the group with `setsid`, and a daemonizing double fork. Every
//! process that would survive writes a marker file some seconds later. A
//! timeout, a Ctrl-C of `loops run-now` and `loops workflows cancel` must
//! each leave no survivor: once the runner has exited, no process of the
//! tree is alive (checked in `/proc`), and no marker appears until well past
//! the moment it would have been written.
//!
//! One shape is beyond what loops can follow, and is tested for what loops
//! does anyway: a process that leaves the group *and* clears its
//! environment (`setsid env -i ...`) carries nothing that ties it to the run.
//! The run must still end on time; the process survives, and the test
//! kills it.
//!
//! Every process of a tree carries a tag in its environment (the loop's
//! `--env`), and the processes without an environment write their pid to a
//! file: a [`Tree`] finds both, and kills whatever is left when it is
//! dropped, so no process outlives a test, failed or not.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use loops_tests::TestEnv;

use crate::support::{figure, pick, wait_for};

/// The variable that tags every process of a tree.
const TAG_VAR: &str = "LOOPS_RELIABILITY_TREE";

/// The run timeout of the timeout trigger, in seconds.
const TIMEOUT_SECS: u64 = 2;

/// After the moment a marker would be written, how long the test keeps
/// looking for it (a loaded machine may be slow to run `touch`).
const MARGIN: Duration = Duration::from_millis(1_500);

/// How long any runner may take before the test calls it hung.
const HANG: Duration = Duration::from_secs(60);

/// The seconds a surviving process sleeps before it writes its marker:
/// well past the timeout plus the 2 s grace before SIGKILL.
fn delay() -> u64 {
    pick(8, 12)
}

/// How many copies of its pattern each tree starts.
fn fanout() -> usize {
    pick(2, 8)
}

/// A kind of process tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Background subshells and `sh -c` children in the run's group.
    Grandchildren,
    /// A leader and children that ignore SIGTERM: only SIGKILL ends them.
    IgnoresTerm,
    /// Processes that leave the group with `setsid`.
    Setsid,
    /// A daemonizing double fork: `setsid` in a subshell that exits at
    /// once, output closed, SIGTERM ignored.
    Daemon,
    /// `setsid env -i`: leaves the group and drops the environment, so
    /// nothing ties it to the run any more (the documented limit).
    DropsEnvironment,
}

impl Shape {
    /// The shapes loops must bring down.
    const FOLLOWED: [Shape; 4] = [
        Shape::Grandchildren,
        Shape::IgnoresTerm,
        Shape::Setsid,
        Shape::Daemon,
    ];

    fn name(self) -> &'static str {
        match self {
            Shape::Grandchildren => "grandchildren",
            Shape::IgnoresTerm => "ignores-term",
            Shape::Setsid => "setsid",
            Shape::Daemon => "daemon",
            Shape::DropsEnvironment => "drops-environment",
        }
    }

    /// The target script. It gets `M` (the marker directory), `D` (the
    /// delay) and `N` (the fanout) through the loop's environment. Each
    /// copy `$i` touches `ready-$i` once it is in place; a survivor touches
    /// `marker-*` after `D` seconds.
    fn script(self) -> &'static str {
        match self {
            Shape::Grandchildren => {
                r#"i=0
while [ $i -lt "$N" ]; do
  ( sleep "$D"; touch "$M/marker-$i-subshell" ) &
  sh -c 'sleep "$D"; touch "$M/marker-$1-sh"' sh "$i" &
  touch "$M/ready-$i"
  i=$((i+1))
done
sleep 300"#
            }
            Shape::IgnoresTerm => {
                r#"trap '' TERM
i=0
while [ $i -lt "$N" ]; do
  ( trap '' TERM; sleep "$D"; touch "$M/marker-$i" ) &
  touch "$M/ready-$i"
  i=$((i+1))
done
sleep 300"#
            }
            Shape::Setsid => {
                r#"i=0
while [ $i -lt "$N" ]; do
  setsid sh -c 'touch "$M/ready-$1"; sleep "$D"; touch "$M/marker-$1"' sh "$i" &
  i=$((i+1))
done
sleep 300"#
            }
            Shape::Daemon => {
                r#"i=0
while [ $i -lt "$N" ]; do
  ( setsid sh -c 'trap "" TERM; touch "$M/ready-$1"; sleep "$D"; touch "$M/marker-$1"' sh "$i" </dev/null >/dev/null 2>&1 & )
  i=$((i+1))
done
sleep 300"#
            }
            Shape::DropsEnvironment => {
                r#"i=0
while [ $i -lt "$N" ]; do
  setsid env -i /bin/sh -c 'echo $$ >"$1.tmp"; mv "$1.tmp" "$1"; exec sleep 300' sh "$M/lost-$i.pid" </dev/null >/dev/null 2>&1 &
  while [ ! -e "$M/lost-$i.pid" ]; do sleep 0.01; done
  touch "$M/ready-$i"
  i=$((i+1))
done
sleep 300"#
            }
        }
    }
}

/// How a run is brought down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trigger {
    /// The loop's `--timeout` passes during `loops run-now`.
    Timeout,
    /// `loops run-now` gets SIGINT (Ctrl-C).
    Interrupt,
    /// `loops workflows cancel` cancels the workflow run whose step it is.
    WorkflowCancel,
}

impl Trigger {
    fn name(self) -> &'static str {
        match self {
            Trigger::Timeout => "timeout",
            Trigger::Interrupt => "sigint",
            Trigger::WorkflowCancel => "workflow-cancel",
        }
    }
}

/// The processes of one tree, found by their tag or pid file; dropping it
/// kills them all.
struct Tree {
    tag: String,
    markers: PathBuf,
}

impl Tree {
    /// The live processes that carry the tag, or that wrote a pid file.
    fn alive(&self) -> Vec<u32> {
        let mut pids = tagged(&format!("{TAG_VAR}={}", self.tag));
        for pid in self.pid_files() {
            if is_live(pid) && !pids.contains(&pid) {
                pids.push(pid);
            }
        }
        pids
    }

    /// The pids the environment-less processes wrote.
    fn pid_files(&self) -> Vec<u32> {
        self.files("lost-")
            .iter()
            .filter(|name| name.ends_with(".pid"))
            .filter_map(|name| std::fs::read_to_string(self.markers.join(name)).ok())
            .filter_map(|pid| pid.trim().parse().ok())
            .collect()
    }

    /// The names of the files in the marker directory starting with
    /// `prefix`.
    fn files(&self, prefix: &str) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.markers) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| name.starts_with(prefix))
            .collect();
        names.sort();
        names
    }

    /// SIGKILLs every live process of the tree until two looks in a row
    /// find none (a process between dropping its environment and writing
    /// its pid file is invisible for a moment).
    fn kill_all(&self) -> usize {
        let mut killed = 0;
        let mut empty_looks = 0;
        let deadline = Instant::now() + Duration::from_secs(10);
        while empty_looks < 2 && Instant::now() < deadline {
            let alive = self.alive();
            empty_looks = if alive.is_empty() { empty_looks + 1 } else { 0 };
            for pid in alive {
                killed += usize::from(signal(pid, "-KILL"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        killed
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// The live (not zombie) processes of this uid whose environment has the
/// entry `entry`.
fn tagged(entry: &str) -> Vec<u32> {
    let me = std::process::id();
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for entry_dir in entries.flatten() {
        let Some(pid) = entry_dir
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        // Other users' environments cannot be read: the error skips them.
        let Ok(environ) = std::fs::read(entry_dir.path().join("environ")) else {
            continue;
        };
        if environ.split(|&b| b == 0).any(|e| e == entry.as_bytes()) && is_live(pid) {
            pids.push(pid);
        }
    }
    pids
}

/// Whether `pid` is a process that is not a zombie.
fn is_live(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat.rsplit(')').next().unwrap_or("").trim_start();
    !(state.starts_with('Z') || state.starts_with('X'))
}

/// Sends a signal with `kill(1)`; whether it was delivered.
fn signal(pid: u32, sig: &str) -> bool {
    Command::new("kill")
        .args([sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A `loops` process the test waits for; killed if the test fails first.
struct Runner(Option<Child>);

impl Runner {
    fn pid(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    /// Whether the runner has exited (without reaping it).
    fn exited(&mut self) -> bool {
        self.0
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))))
    }

    /// Waits for the runner to exit, failing the test if it hangs.
    fn finish(mut self) -> Output {
        let child = self.0.take().expect("a runner");
        let pid = child.id();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(HANG) {
            Ok(out) => out.expect("the runner can be waited for"),
            Err(_) => {
                signal(pid, "-KILL");
                panic!("loops (pid {pid}) hung for {HANG:?}");
            }
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What one case saw.
struct Seen {
    /// Processes of the tree alive when it was ready.
    tree: usize,
    /// Whether the whole tree was in place before the run ended (a timeout
    /// on a loaded machine may strike first).
    complete: bool,
    /// Processes of the tree alive right after the runner exited.
    survivors: usize,
    /// From the trigger to the runner's exit.
    teardown: Duration,
}

/// Builds a tree of `shape` under a run, brings the run down by
/// `trigger`, and checks what is left. The caller's assertions on
/// `survivors` decide.
#[expect(
    clippy::disallowed_methods,
    reason = "entropy for a seed or a unique name, not a reading of time"
)]
fn case(shape: Shape, trigger: Trigger) -> Seen {
    let env = TestEnv::new();
    let markers = env.home().join("markers");
    std::fs::create_dir_all(&markers).expect("a marker dir");
    let tree = Tree {
        tag: format!(
            "{}-{}-{}-{}",
            std::process::id(),
            shape.name(),
            trigger.name(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        ),
        markers: markers.clone(),
    };
    let script = env.write_script(&format!("tree-{}", shape.name()), shape.script());
    let vars = [
        format!("M={}", markers.display()),
        format!("D={}", delay()),
        format!("N={}", fanout()),
        format!("{TAG_VAR}={}", tree.tag),
    ];

    let spawned = Instant::now();
    let mut runner = Runner(Some(match trigger {
        Trigger::Timeout | Trigger::Interrupt => {
            let timeout = if trigger == Trigger::Timeout {
                format!("{TIMEOUT_SECS}s")
            } else {
                "10m".to_owned()
            };
            let mut args = vec!["--every", "1h", "--timeout", timeout.as_str()];
            for var in &vars {
                args.extend(["--env", var.as_str()]);
            }
            let id = env.create_command(shape.name(), &script.display().to_string(), &args);
            env.spawn(&["run-now", &id])
        }
        Trigger::WorkflowCancel => {
            let vars: serde_json::Map<String, serde_json::Value> = vars
                .iter()
                .filter_map(|v| v.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.into()))
                .collect();
            let workflow = serde_json::json!({
                "name": "tree",
                "steps": [{
                    "id": "tree",
                    "target": {
                        "type": "command",
                        "command": script.display().to_string(),
                        "shell": true,
                        "env": vars,
                    },
                }],
            });
            let file = env.home().join("tree.json");
            std::fs::write(&file, workflow.to_string()).expect("a workflow file");
            env.loops(["workflows".as_ref(), "create".as_ref(), file.as_os_str()])
                .run();
            env.spawn(&["workflows", "run", "tree"])
        }
    }));

    let what = format!("{} {}", trigger.name(), shape.name());
    // Every copy of the pattern is in place; on a loaded machine a timeout
    // may strike first, and then every process that started at all did so
    // before the runner exited.
    let (ready, complete) = wait_for(Duration::from_secs(30), || {
        if tree.files("ready-").len() == fanout() {
            Some((Instant::now(), true))
        } else if trigger == Trigger::Timeout && runner.exited() {
            Some((Instant::now(), false))
        } else {
            None
        }
    })
    .unwrap_or_else(|| panic!("{what}: the tree never became ready"));
    let size = tree.alive().len();

    let triggered = match trigger {
        // Counted from loops' spawn of the target, a little later.
        Trigger::Timeout => spawned + Duration::from_secs(TIMEOUT_SECS),
        _ => Instant::now(),
    };
    match trigger {
        Trigger::Timeout => {}
        Trigger::Interrupt => assert!(signal(runner.pid(), "-INT")),
        Trigger::WorkflowCancel => {
            let runs = env.loops(["--json", "workflows", "runs"]).run().json();
            let run = runs[0]["id"].as_str().expect("a workflow run").to_owned();
            env.loops(["workflows", "cancel", &run]).run();
        }
    }
    let out = runner.finish();
    let teardown = Instant::now().saturating_duration_since(triggered);
    let survivors = tree.alive();

    // The run ended as the trigger says.
    assert_eq!(out.status.code(), Some(1), "{what}: {out:?}");
    match trigger {
        Trigger::Timeout | Trigger::Interrupt => {
            let run = &env.loops(["--json", "runs"]).run().json()[0];
            let (status, error) = if trigger == Trigger::Timeout {
                (
                    "timed_out",
                    format!("timed out after {}ms", TIMEOUT_SECS * 1000),
                )
            } else {
                ("failed", "cancelled by SIGINT".to_owned())
            };
            assert_eq!(run["status"], status, "{what}: {run}");
            assert_eq!(run["error"], error, "{what}: {run}");
        }
        Trigger::WorkflowCancel => {
            let runs = env.loops(["--json", "workflows", "runs"]).run().json();
            assert_eq!(runs[0]["status"], "cancelled", "{what}: {}", runs[0]);
        }
    }

    if shape != Shape::DropsEnvironment {
        assert!(
            survivors.is_empty(),
            "{what}: processes of the tree outlived the run: {}",
            describe(&survivors)
        );
        // Past the moment every marker would have been written.
        let until = ready + Duration::from_secs(delay()) + MARGIN;
        loop {
            let written = tree.files("marker-");
            assert!(written.is_empty(), "{what}: a survivor wrote {written:?}");
            if Instant::now() >= until {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Seen {
        tree: size,
        complete,
        survivors: survivors.len(),
        teardown,
    }
}

/// `pid (command line)` for each process, for failure messages.
fn describe(pids: &[u32]) -> String {
    pids.iter()
        .map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            format!("{pid} ({})", cmdline.trim())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs `cases` side by side (each mostly waits out its marker delay) and
/// prints a figure for each; a failing case fails the test once every case
/// has finished and cleaned up.
fn run_cases(test: &str, cases: &[(Shape, Trigger)]) -> Vec<Seen> {
    let handles: Vec<_> = cases
        .iter()
        .map(|&(shape, trigger)| std::thread::spawn(move || case(shape, trigger)))
        .collect();
    let mut seen = Vec::new();
    let mut failure = None;
    for (handle, (shape, trigger)) in handles.into_iter().zip(cases) {
        match handle.join() {
            Ok(s) => {
                figure(
                    test,
                    &format!(
                        "{} {}: tree of {} processes{}, {} left after the run, runner exited {} ms after the trigger",
                        trigger.name(),
                        shape.name(),
                        s.tree,
                        if s.complete {
                            ""
                        } else {
                            " (incomplete: the timeout came first)"
                        },
                        s.survivors,
                        s.teardown.as_millis()
                    ),
                );
                seen.push(s);
            }
            Err(panic) => failure = failure.or(Some(panic)),
        }
    }
    if let Some(panic) = failure {
        std::panic::resume_unwind(panic);
    }
    seen
}

/// Whether `setsid` (util-linux) is installed; the tests need it.
fn have_setsid() -> bool {
    let found = Command::new("sh")
        .args(["-c", "command -v setsid"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        figure("trees", "setsid is not installed: skipped");
    }
    found
}

#[test]
fn a_timeout_leaves_no_process_of_the_tree() {
    if !have_setsid() {
        return;
    }
    let cases: Vec<_> = Shape::FOLLOWED
        .iter()
        .map(|&shape| (shape, Trigger::Timeout))
        .collect();
    run_cases("trees_timeout", &cases);
}

#[test]
fn a_ctrl_c_of_run_now_leaves_no_process_of_the_tree() {
    if !have_setsid() {
        return;
    }
    let cases: Vec<_> = Shape::FOLLOWED
        .iter()
        .map(|&shape| (shape, Trigger::Interrupt))
        .collect();
    run_cases("trees_sigint", &cases);
}

#[test]
fn a_workflow_cancel_leaves_no_process_of_the_tree() {
    if !have_setsid() {
        return;
    }
    let shapes = pick(
        &[Shape::IgnoresTerm, Shape::Daemon][..],
        &Shape::FOLLOWED[..],
    );
    let cases: Vec<_> = shapes
        .iter()
        .map(|&shape| (shape, Trigger::WorkflowCancel))
        .collect();
    run_cases("trees_workflow_cancel", &cases);
}

#[test]
fn a_process_that_drops_its_environment_survives_but_the_run_ends() {
    if !have_setsid() {
        return;
    }
    let cases = [
        (Shape::DropsEnvironment, Trigger::Timeout),
        (Shape::DropsEnvironment, Trigger::Interrupt),
    ];
    // The runs ended (each case checked its run's status and that the
    // runner exited); what survived is reported, then killed by the case.
    for seen in run_cases("trees_drops_environment", &cases) {
        assert!(seen.survivors <= fanout());
    }
}
