//! Races: two daemons started at once on one data directory (one is
//! refused, and so is every later one), while four CLI writer threads
//! (create, pause, resume, run-now) hammer the same database.
//!
//! What must hold (SPEC §3.5, §4.1, §4.3, §9 item 8, §10 items 18, 31, 96):
//! - no CLI call and no daemon log line reports a locked or busy database;
//! - no lost update: each pause/resume thread owns its loops, so a loop's
//!   final status is the one its owner's last successful call set, and a
//!   paused loop is never flipped back to active nor moved (its
//!   `nextRunAt` stays what `pause` printed) by the daemon or `run-now`;
//! - each slot is claimed once: UNIQUE(loop_id, scheduled_for) leaves one
//!   row per slot (a retry rewrites it, SPEC §1.4), so what is checked is
//!   that no slot's command ran twice (every loop has one attempt, and the
//!   daemon is stopped with a grace its runs fit in), that every command
//!   ran under its slot's row, and that a skipped slot ran nothing.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use loops_tests::{Ran, TestEnv, sqlite_only};
use serde_json::Value;

use crate::crash::{
    Foreground, StrayGuard, daemon_log, duplicate_slots, loop_rows, marker_command,
    marks_against_runs, read_marks, reap_strays, run_rows, status_counts, temp_root,
};
use crate::support::{Rng, figure, pick, wait_for};

const TEST: &str = "races";
/// Loops owned by each pause/resume thread.
const OWNED: usize = 4;
/// How many of the created loops run every second (the rest every hour,
/// so the creator can keep creating without drowning the two cores).
const CREATED_BUSY: usize = 4;

/// Whether a message reports a locked or busy database.
fn mentions_lock(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("locked") || t.contains("busy")
}

/// What one thread did: its calls by kind and what went wrong.
#[derive(Default)]
struct Tally {
    calls: BTreeMap<&'static str, usize>,
    /// Calls that failed or answered wrongly, with what they printed.
    errors: Vec<String>,
    /// Calls whose output mentioned a locked or busy database.
    locked: usize,
    /// `run-now` calls refused with `could not claim manual run`.
    refused: usize,
}

impl Tally {
    /// Runs `loops <args>`, counting it as `kind`; a locked or busy
    /// database in its stderr is an error whatever the exit code.
    fn call(&mut self, env: &TestEnv, kind: &'static str, args: &[&str]) -> Ran {
        *self.calls.entry(kind).or_default() += 1;
        let ran = Ran::from(env.cmd().args(args).output().expect("loops runs"));
        if mentions_lock(&ran.stderr) {
            self.locked += 1;
            self.fail(args, &ran, "reported a locked or busy database");
        }
        ran
    }

    fn fail(&mut self, args: &[&str], ran: &Ran, why: &str) {
        self.errors.push(format!(
            "loops {args:?} {why}: exit {}\nstdout: {}\nstderr: {}",
            ran.code,
            ran.stdout.trim_end(),
            ran.stderr.trim_end()
        ));
    }

    fn merge(&mut self, other: Tally) {
        for (kind, n) in other.calls {
            *self.calls.entry(kind).or_default() += n;
        }
        self.errors.extend(other.errors);
        self.locked += other.locked;
        self.refused += other.refused;
    }
}

/// The JSON a successful `--json` call printed, or `Null`.
fn json(ran: &Ran) -> Value {
    serde_json::from_str(&ran.stdout).unwrap_or(Value::Null)
}

/// A loop owned by one pause/resume thread, as that thread last set it.
#[derive(Debug)]
struct Owned {
    id: String,
    /// The status the owner's last successful call set.
    active: bool,
    /// `nextRunAt` as the last successful `pause` printed it.
    paused_next: Value,
    /// The owner's last successful call on it.
    last_call: &'static str,
}

/// A pause/resume thread: until `until`, flips a random loop of its own
/// (pause if active, resume if paused, checking with `show` first that
/// nothing else touched a paused loop), then flips each loop that is not
/// yet `end_active` once more, so its last call decides its status.
fn toggler(
    env: &TestEnv,
    mut rng: Rng,
    ids: &[String],
    until: Instant,
    end_active: bool,
) -> (Tally, Vec<Owned>) {
    let mut tally = Tally::default();
    let mut owned: Vec<Owned> = ids
        .iter()
        .map(|id| Owned {
            id: id.clone(),
            active: true,
            paused_next: Value::Null,
            last_call: "create",
        })
        .collect();
    let flip = |tally: &mut Tally, lp: &mut Owned| {
        let id = lp.id.clone();
        if lp.active {
            let args = ["--json", "pause", id.as_str()];
            let ran = tally.call(env, "pause", &args);
            let shown = json(&ran);
            if ran.code != 0 || shown["status"] != "paused" {
                tally.fail(&args, &ran, "did not pause an active loop");
                return;
            }
            lp.active = false;
            lp.paused_next = shown["nextRunAt"].clone();
            lp.last_call = "pause";
        } else {
            let args = ["--json", "show", id.as_str()];
            let ran = tally.call(env, "show", &args);
            let shown = json(&ran);
            if ran.code != 0 || shown["status"] != "paused" || shown["nextRunAt"] != lp.paused_next
            {
                tally.fail(
                    &args,
                    &ran,
                    &format!(
                        "shows a loop this thread paused (nextRunAt {}) changed behind its back",
                        lp.paused_next
                    ),
                );
            }
            let args = ["--json", "resume", id.as_str()];
            let ran = tally.call(env, "resume", &args);
            if ran.code != 0 || json(&ran)["status"] != "active" {
                tally.fail(&args, &ran, "did not resume a paused loop");
                return;
            }
            lp.active = true;
            lp.last_call = "resume";
        }
    };
    while Instant::now() < until {
        let i = rng.below(owned.len());
        flip(&mut tally, &mut owned[i]);
        std::thread::sleep(rng.millis(0, 20));
    }
    for lp in &mut owned {
        if lp.active != end_active {
            flip(&mut tally, lp);
        }
    }
    (tally, owned)
}

/// Two daemons started at once (one refused, and every later one too) and
/// four CLI writers on one database for 8 s (LONG: 60 s): no locked
/// database reaches a user, no pause is lost or undone, no slot runs twice.
#[test]
fn two_daemons_and_four_writers_on_one_database() {
    sqlite_only!(
        "about SQLite's one write lock (no locked or busy error), checked through the SQLite file"
    );
    let started = Instant::now();
    let hammer = pick(Duration::from_secs(8), Duration::from_secs(60));
    let mut rng = Rng::seeded(TEST);
    let env = TestEnv::new();
    let root = temp_root(&env);
    let _strays = StrayGuard(root.clone());
    let marks = env.home().join("marks");
    let command = marker_command(&marks, "0.1");
    let create = |name: &str| env.create_command(name, &command, &["--every", "1s"]);
    let to_pause: Vec<String> = (0..OWNED).map(|i| create(&format!("p-{i}"))).collect();
    let to_resume: Vec<String> = (0..OWNED).map(|i| create(&format!("r-{i}"))).collect();

    // Two daemons at once: exactly one comes up, the other is refused.
    let err = |name: &str| env.home().join(format!("{name}.stderr"));
    let mut a = Foreground::spawn(&env, &err("a"), &["--grace", "10s"]);
    let mut b = Foreground::spawn(&env, &err("b"), &["--grace", "10s"]);
    let first_out = wait_for(Duration::from_secs(20), || {
        a.exited()
            .map(|s| (true, s))
            .or_else(|| b.exited().map(|s| (false, s)))
    });
    let Some((a_lost, lost_status)) = first_out else {
        panic!(
            "two daemons run on one data directory: pids {} and {}\nlog:\n{}",
            a.pid(),
            b.pid(),
            daemon_log(&env)
        );
    };
    let (mut daemon, loser) = if a_lost { (b, a) } else { (a, b) };
    let pid = daemon.pid();
    let refusal = format!("error: another loops daemon holds the database lease: pid {pid} on ");
    assert_eq!(
        lost_status.code(),
        Some(1),
        "the refused daemon's exit\nstderr:\n{}",
        loser.stderr()
    );
    assert!(
        loser.stderr().contains(&refusal),
        "the refused daemon's message lacks {refusal:?}:\n{}",
        loser.stderr()
    );
    drop(loser);
    let holder = wait_for(Duration::from_secs(20), || {
        let s = json(&env.run(&["--json", "daemon", "status"]).into());
        (s["running"] == true && s["pid"] == pid && s["lease"]["pid"] == pid).then_some(())
    });
    assert!(
        holder.is_some() && daemon.exited().is_none(),
        "the first daemon (pid {pid}) does not hold the lease\nstderr:\n{}\nlog:\n{}",
        daemon.stderr(),
        daemon_log(&env)
    );

    // Four writers, and a refused daemon now and then.
    let created = Mutex::new(Vec::<String>::new());
    let until = Instant::now() + hammer;
    let mut refused_daemons = 0;
    let mut rogue_daemons = Vec::new();
    let (mut tally, paused_by_owner, resumed_by_owner) = std::thread::scope(|s| {
        let creator = {
            let (env, mut rng, created, command) = (&env, rng.fork(), &created, &command);
            s.spawn(move || {
                let mut tally = Tally::default();
                let mut n = 0;
                while Instant::now() < until {
                    n += 1;
                    let name = format!("c-{n}");
                    let every = if n <= CREATED_BUSY { "1s" } else { "1h" };
                    let args = [
                        "--json", "create", "command", &name, "--cmd", command, "--every", every,
                    ];
                    let ran = tally.call(env, "create", &args);
                    match json(&ran)["id"].as_str() {
                        Some(id) if ran.code == 0 => {
                            created
                                .lock()
                                .expect("the created list")
                                .push(id.to_owned());
                        }
                        _ => tally.fail(&args, &ran, "did not create a loop"),
                    }
                    std::thread::sleep(rng.millis(0, 30));
                }
                tally
            })
        };
        let pauser = {
            let (env, rng, ids) = (&env, rng.fork(), &to_pause);
            s.spawn(move || toggler(env, rng, ids, until, false))
        };
        let resumer = {
            let (env, rng, ids) = (&env, rng.fork(), &to_resume);
            s.spawn(move || toggler(env, rng, ids, until, true))
        };
        let runner = {
            let (env, mut rng, created) = (&env, rng.fork(), &created);
            let fixed: Vec<String> = to_pause.iter().chain(&to_resume).cloned().collect();
            s.spawn(move || {
                let mut tally = Tally::default();
                while Instant::now() < until {
                    let mut pool = fixed.clone();
                    pool.extend(created.lock().expect("the created list").iter().cloned());
                    let i = rng.below(pool.len());
                    let args = ["--json", "run-now", pool[i].as_str()];
                    let ran = tally.call(env, "run-now", &args);
                    match ran.code {
                        0 if json(&ran)["status"] == "succeeded" => {}
                        // The slot is the daemon's (SPEC §10 item 51).
                        1 if ran.stderr.contains("could not claim manual run") => {
                            tally.refused += 1;
                        }
                        _ => tally.fail(&args, &ran, "failed"),
                    }
                    std::thread::sleep(rng.millis(0, 20));
                }
                tally
            })
        };
        let mut attempt = 0;
        while Instant::now() + Duration::from_secs(1) < until {
            std::thread::sleep(rng.millis(500, 2000));
            attempt += 1;
            let mut second = Foreground::spawn(&env, &err(&format!("second-{attempt}")), &[]);
            match second.wait_exit(Duration::from_secs(30)) {
                Some(status) if status.code() == Some(1) && second.stderr().contains(&refusal) => {
                    refused_daemons += 1;
                }
                status => rogue_daemons.push(format!(
                    "a second daemon (pid {}): {status:?}\n{}",
                    second.pid(),
                    second.stderr()
                )),
            }
        }
        let mut tally = creator.join().expect("the creator thread");
        let (t, paused) = pauser.join().expect("the pause thread");
        tally.merge(t);
        let (t, resumed) = resumer.join().expect("the resume thread");
        tally.merge(t);
        tally.merge(runner.join().expect("the run-now thread"));
        (tally, paused, resumed)
    });
    let created = created.into_inner().expect("the created list");
    assert!(
        rogue_daemons.is_empty(),
        "a second daemon was not refused:\n{}",
        rogue_daemons.join("\n")
    );
    assert!(
        daemon.exited().is_none(),
        "the daemon exited under the writers:\n{}\nlog:\n{}",
        daemon.stderr(),
        daemon_log(&env)
    );

    // The daemon keeps running past the paused loops' slots without
    // touching them: wait until every resumed loop ran a slot later than
    // every paused loop's nextRunAt.
    let latest_paused = paused_by_owner
        .iter()
        .filter_map(|lp| lp.paused_next.as_str())
        .max()
        .map(str::to_owned)
        .unwrap_or_default();
    let past_paused = wait_for(Duration::from_secs(20), || {
        let runs = run_rows(&env);
        to_resume
            .iter()
            .all(|id| {
                runs.iter().any(|r| {
                    &r.loop_id == id
                        && r.status == "succeeded"
                        && r.scheduled_for.as_str() > latest_paused.as_str()
                })
            })
            .then_some(())
    });
    assert!(
        past_paused.is_some(),
        "the resumed loops did not run past {latest_paused}\nlog:\n{}",
        daemon_log(&env)
    );
    let mut stop = Tally::default();
    let stop_args = ["daemon", "stop", "--grace", "10s"];
    let ran = stop.call(&env, "daemon stop", &stop_args);
    if ran.code != 0 || ran.stdout != format!("stopped pid={pid}\n") {
        stop.fail(&stop_args, &ran, "did not stop the daemon");
    }
    tally.merge(stop);
    let exit = daemon.wait_exit(Duration::from_secs(30));
    assert!(
        exit.is_some_and(|s| s.success()),
        "the daemon's graceful stop: {exit:?}\n{}",
        daemon.stderr()
    );
    let killed_strays = reap_strays(&root, Duration::from_secs(5));

    // No call failed, and nothing reported a locked database.
    let log = daemon_log(&env);
    let log_locked: Vec<&str> = log.lines().filter(|l| mentions_lock(l)).collect();
    assert!(
        tally.errors.is_empty() && log_locked.is_empty(),
        "{} CLI call(s) failed:\n{}\ndaemon log lines about a locked database:\n{}",
        tally.errors.len(),
        tally.errors.join("\n"),
        log_locked.join("\n")
    );
    assert!(
        !daemon.stderr().contains("panicked"),
        "the daemon panicked:\n{}",
        daemon.stderr()
    );

    // No lost update: every loop is as its owner last left it.
    let loops: BTreeMap<String, (String, Option<String>)> = loop_rows(&env)
        .into_iter()
        .map(|(id, status, next)| (id, (status, next)))
        .collect();
    assert_eq!(
        loops.len(),
        2 * OWNED + created.len(),
        "loops in the database"
    );
    for lp in paused_by_owner.iter().chain(&resumed_by_owner) {
        let (status, next) = &loops[&lp.id];
        let expected = if lp.active { "active" } else { "paused" };
        assert_eq!(
            status, expected,
            "loop {} after its owner's last call ({}): {lp:?}",
            lp.id, lp.last_call
        );
        if !lp.active {
            assert_eq!(
                next.as_deref(),
                lp.paused_next.as_str(),
                "a paused loop's nextRunAt moved: {lp:?}"
            );
        }
    }
    assert!(
        paused_by_owner.iter().all(|lp| !lp.active) && resumed_by_owner.iter().all(|lp| lp.active),
        "the owners' last calls failed: {paused_by_owner:?} {resumed_by_owner:?}"
    );
    for id in &created {
        let (status, next) = &loops[id];
        assert_eq!(status, "active", "created loop {id}");
        assert!(next.is_some(), "created loop {id} has no next run");
    }

    // Each slot claimed once.
    let runs = run_rows(&env);
    let running: Vec<_> = runs.iter().filter(|r| r.status == "running").collect();
    assert!(
        running.is_empty(),
        "runs left running by a graceful stop: {running:#?}"
    );
    assert_eq!(duplicate_slots(&env, None), vec![], "slots with two runs");
    let odd: Vec<_> = runs
        .iter()
        .filter(|r| r.attempt != 1 || !matches!(r.status.as_str(), "succeeded" | "skipped"))
        .collect();
    assert!(
        odd.is_empty(),
        "runs of one-attempt loops whose commands always succeed: {odd:#?}"
    );
    let failures = marks_against_runs(&read_marks(&marks), &runs, Some(1));
    assert!(
        failures.is_empty(),
        "the commands disagree with the runs:\n{}",
        failures.join("\n")
    );

    let calls: Vec<String> = tally
        .calls
        .iter()
        .map(|(kind, n)| format!("{kind}={n}"))
        .collect();
    figure(
        TEST,
        &format!(
            "CLI calls: {} in {:.0}s ({})",
            tally.calls.values().sum::<usize>(),
            hammer.as_secs_f64(),
            calls.join(" ")
        ),
    );
    figure(
        TEST,
        &format!(
            "errors: {} (locked/busy: {}); run-now refused (slot in flight): {}; \
             second daemons refused: {refused_daemons}",
            tally.errors.len(),
            tally.locked,
            tally.refused
        ),
    );
    figure(
        TEST,
        &format!(
            "runs checked: {} ({}); loops: {}; strays killed: {killed_strays}",
            runs.len(),
            status_counts(&runs),
            loops.len()
        ),
    );
    figure(
        TEST,
        &format!("duration: {:.1}s", started.elapsed().as_secs_f64()),
    );
}
