//! Issue 30, pools (`docs/triggers.md` Q1–Q4): `loops pools set|list|
//! remove`, `--pool` on create and edit, what `status` and `runs` say of
//! a member, and a daemon that never runs more members than the pool
//! allows.

use std::path::Path;
use std::time::Duration;

use loops_tests::store_testing::lit;
use loops_tests::{Daemon, TestEnv, wait_for};
use serde_json::Value;

/// How long a daemon gets to start or finish the runs a test waits for.
const DEADLINE: Duration = Duration::from_secs(30);

fn pools_json(env: &TestEnv) -> Value {
    env.loops(["--json", "pools", "list"]).run().json()
}

/// Makes a loop due: its next run in the past.
fn make_due(env: &TestEnv, id: &str) {
    env.raw().exec(&format!(
        "UPDATE loops SET next_run_at = {} WHERE id = {}",
        lit("2020-01-01T00:00:00.000Z"),
        lit(id)
    ));
}

#[test]
fn pools_are_set_listed_changed_and_removed() {
    let env = TestEnv::new();
    // No pools: an empty stdout, and a word on stderr.
    env.loops(["pools", "list"])
        .stdout("")
        .stderr_has("no pools")
        .run();
    assert_eq!(pools_json(&env), serde_json::json!([]));

    env.loops(["pools", "set", "agents", "--max", "2"])
        .stdout("pool agents: at most 2 running at once (0 running, no member loops)\n")
        .run();
    let set = env
        .loops(["--json", "pools", "set", "builds", "--max", "1"])
        .run()
        .json();
    assert_eq!(set["name"], "builds");
    assert_eq!(set["maxRunning"], 1);
    assert_eq!(
        (set["members"].as_u64(), set["running"].as_u64()),
        (Some(0), Some(0))
    );
    assert!(set["createdAt"].is_string() && set["updatedAt"].is_string());

    env.create_command("review", "true", &["--every", "1h", "--pool", "agents"]);
    let listed = env.loops(["pools", "list"]).run().stdout;
    let lines: Vec<Vec<&str>> = listed
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines,
        [
            vec!["NAME", "MAX", "RUNNING", "MEMBERS"],
            vec!["agents", "2", "0", "1"],
            vec!["builds", "1", "0", "0"],
        ],
        "{listed}"
    );

    // Setting it again changes the limit, and keeps when it was made.
    let before = pools_json(&env)[0].clone();
    env.loops(["pools", "set", "agents", "--max", "5"])
        .stdout_has("at most 5 running at once (0 running, 1 member loop)")
        .run();
    let after = pools_json(&env)[0].clone();
    assert_eq!(after["maxRunning"], 5);
    assert_eq!(after["createdAt"], before["createdAt"]);

    // `pools ls` and `pools rm` are the same commands.
    env.loops(["--json", "pools", "rm", "builds"])
        .stdout_has("\"removed\": true")
        .run();
    env.loops(["pools", "ls"]).stdout_has("agents").run();
    assert_eq!(pools_json(&env).as_array().map(Vec::len), Some(1));

    // Taken out of the pool, the loop no longer holds it.
    env.loops(["edit", "review", "--pool", ""])
        .stdout_has(": pool; next")
        .run();
    env.loops(["pools", "remove", "agents"])
        .stdout("removed pool agents\n")
        .run();
    assert_eq!(pools_json(&env), serde_json::json!([]));
}

#[test]
fn bad_pools_are_refused_with_what_to_do() {
    let env = TestEnv::new();
    env.loops(["pools", "set", "agents", "--max", "0"])
        .code(1)
        .stderr_has("error: --max must be a positive integer")
        .run();
    env.loops(["pools", "set", "no good", "--max", "1"])
        .code(1)
        .stderr_has("invalid pool name \"no good\"")
        .run();
    // A usage error: --max is required.
    env.loops(["pools", "set", "agents"]).code(2).run();

    // A pool nobody made: create (and its dry run) and edit refuse it.
    let missing = "no pool named agents; create it first with loops pools set agents --max N";
    for dry_run in [&["--dry-run"][..], &[]] {
        env.loops(["create", "command", "a", "--cmd", "true", "--every", "1h"])
            .args(["--pool", "agents"])
            .args(dry_run)
            .code(1)
            .stderr_has(missing)
            .run();
    }
    env.create_command("a", "true", &["--every", "1h"]);
    env.loops(["edit", "a", "--pool", "agents"])
        .code(1)
        .stderr_has(missing)
        .run();
    assert!(
        env.loops(["--json", "show", "a"])
            .run()
            .json()
            .get("pool")
            .is_none()
    );

    // Removing: a missing pool, and one loops still name (named back).
    env.loops(["pools", "remove", "agents"])
        .code(1)
        .stderr_has("no pool named agents")
        .run();
    env.loops(["pools", "set", "agents", "--max", "1"]).run();
    env.loops(["edit", "a", "--pool", "agents"]).run();
    env.create_command("b", "true", &["--every", "1h", "--pool", "agents"]);
    env.loops(["pools", "remove", "agents"])
        .code(1)
        .stderr_has("pool agents is still used by loops a, b; take them out first")
        .run();
    assert_eq!(pools_json(&env)[0]["members"], 2);
}

#[test]
fn status_shows_the_pool_and_a_member_waiting_for_it() {
    let env = TestEnv::new();
    env.loops(["pools", "set", "agents", "--max", "1"]).run();
    let a = env.create_command("a", "true", &["--every", "1h", "--pool", "agents"]);
    env.create_command("plain", "true", &["--every", "1h"]);
    env.loops(["status", "a"])
        .stdout_has("     Pool: agents (max 1, 0 running)\n")
        .run();
    let plain = env.loops(["status", "plain"]).run().stdout;
    assert!(!plain.contains("Pool:"), "{plain}");

    // A running run of the pool, and `a` due: it waits for the pool.
    let b = env.create_command("b", "true", &["--every", "1h", "--pool", "agents"]);
    env.raw().exec(&format!(
        "INSERT INTO loop_runs (id, loop_id, loop_name, scheduled_for, attempt, status, \
         started_at, claimed_by, lease_expires_at, created_at, updated_at, pool) \
         VALUES ('0123456789ab', {b}, 'b', {t}, 1, 'running', {t}, 'elsewhere:1:x', \
         {lease}, {t}, {t}, 'agents')",
        b = lit(&b),
        t = lit("2020-01-01T00:00:00.000Z"),
        lease = lit("2999-01-01T00:00:00.000Z"),
    ));
    let status = env.loops(["status", "a"]).run().stdout;
    assert!(
        status.contains("     Pool: agents (max 1, 1 running)\n"),
        "{status}"
    );
    // Not yet due: not waiting.
    assert!(!status.contains("waiting for pool"), "{status}");
    env.loops(["runs", "a"]).stdout("").run();

    make_due(&env, &a);
    env.loops(["status", "a"])
        .stdout_has("     Pool: agents (max 1, 1 running)\n           waiting for pool agents\n")
        .run();
    env.loops(["runs", "a"])
        .stdout("waiting for pool agents\n")
        .run();
    // A raised limit: room again.
    env.loops(["pools", "set", "agents", "--max", "2"]).run();
    let status = env.loops(["status", "a"]).run().stdout;
    assert!(!status.contains("waiting for pool"), "{status}");
}

/// A command that says it started (`started-<name>` appears) and then runs
/// until the test removes its gate file.
fn gated(dir: &Path, name: &str) -> String {
    let gate = dir.join(format!("gate-{name}"));
    std::fs::write(&gate, "").expect("a gate file");
    format!(
        "echo >> '{started}'; while [ -e '{gate}' ]; do sleep 0.05; done",
        started = dir.join(format!("started-{name}")).display(),
        gate = gate.display(),
    )
}

/// The runs of every loop, as `runs --json` lists them.
fn all_runs(env: &TestEnv) -> Vec<Value> {
    let runs = env.loops(["--json", "runs"]).run().json();
    runs.as_array().expect("an array").clone()
}

/// How many runs `runs --json` shows running; asserts there is at most one.
fn at_most_one_running(env: &TestEnv) -> usize {
    let runs = all_runs(env);
    let running = runs.iter().filter(|r| r["status"] == "running").count();
    assert!(
        running <= 1,
        "two members of a pool of 1 ran at once: {runs:#?}"
    );
    running
}

#[test]
fn a_daemon_runs_one_member_of_a_pool_of_one_at_a_time() {
    let env = TestEnv::new();
    let dir = env.home();
    env.loops(["pools", "set", "solo", "--max", "1"]).run();
    let names = ["a", "b"];
    let ids: Vec<String> = names
        .iter()
        .map(|n| env.create_command(n, &gated(&dir, n), &["--every", "1h", "--pool", "solo"]))
        .collect();
    for id in &ids {
        make_due(&env, id);
    }
    let _daemon = Daemon::start(&env, &[]);

    let started = |n: &str| dir.join(format!("started-{n}")).exists();
    let first = wait_for("a member to start", Duration::from_secs(30), || {
        names.iter().copied().find(|n| started(n))
    });
    let second = names.iter().copied().find(|n| *n != first).unwrap();
    // While the first runs, the second waits, and says so. Each sample is
    // a whole `loops` process, so these span a while of the daemon's life.
    for _ in 0..10 {
        assert_eq!(at_most_one_running(&env), 1);
    }
    assert!(!started(second), "{second} started beside {first}");
    env.loops(["runs", second])
        .stdout_has("waiting for pool solo")
        .run();
    // The one running holds the pool; it waits for nothing.
    let holder = env.loops(["status", first]).run().stdout;
    assert!(holder.contains("Pool: solo (max 1, 1 running)"), "{holder}");
    assert!(!holder.contains("waiting for pool"), "{holder}");

    // The first ends: the second starts, alone.
    std::fs::remove_file(dir.join(format!("gate-{first}"))).unwrap();
    wait_for(
        "the second member to start",
        Duration::from_secs(30),
        || started(second).then_some(()),
    );
    for _ in 0..5 {
        at_most_one_running(&env);
    }
    std::fs::remove_file(dir.join(format!("gate-{second}"))).unwrap();
    let runs = wait_for("both runs to succeed", Duration::from_secs(30), || {
        let runs = all_runs(&env);
        (runs.len() == 2 && runs.iter().all(|r| r["status"] == "succeeded")).then_some(runs)
    });
    // And by the runs' own times, never side by side: one finished before
    // the other started.
    let time = |r: &Value, key: &str| r[key].as_str().expect(key).to_owned();
    let (x, y) = (&runs[0], &runs[1]);
    let apart = time(x, "finishedAt") <= time(y, "startedAt")
        || time(y, "finishedAt") <= time(x, "startedAt");
    assert!(apart, "{runs:#?}");
}

#[test]
fn pool_names_complete_where_a_pool_is_taken() {
    let env = TestEnv::new();
    if env.on_postgres() {
        eprintln!("skipped pools::completion: on PostgreSQL no stored value completes");
        return;
    }
    env.loops(["pools", "set", "agents", "--max", "2"]).run();
    env.loops(["pools", "set", "builds", "--max", "1"]).run();
    // As fish asks: the words, the last the one being completed; each
    // answer `value<TAB>help`.
    let ask = |words: &[&str]| -> Vec<String> {
        let ran = env
            .loops(["--", "loops"])
            .args(words)
            .env("COMPLETE", Some("fish"))
            .run();
        ran.stdout
            .lines()
            .filter(|l| !l.starts_with('-'))
            .map(|l| l.split('\t').next().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(ask(&["pools", "remove", ""]), ["agents", "builds"]);
    assert_eq!(ask(&["pools", "set", "a"]), ["agents"]);
    assert_eq!(
        ask(&["create", "command", "x", "--every", "1h", "--pool", "b"]),
        ["builds"]
    );
    assert_eq!(ask(&["edit", "x", "--pool", ""]), ["agents", "builds"]);
}

#[test]
fn a_pool_and_the_agent_lane_both_apply() {
    // Q5: a pool of 2 with two agents and two commands, under a daemon
    // whose agent lane holds 1: one agent runs (the lane), one command runs
    // beside it (the pool's second place), and the others wait.
    let env = TestEnv::new();
    let release = env.home().join("release");
    env.write_script(
        "claude",
        &format!(
            "while [ ! -e '{}' ]; do sleep 0.05; done; echo done",
            release.display()
        ),
    );
    env.loops(["pools", "set", "p", "--max", "2"]).run();
    for name in ["agent-a", "agent-b"] {
        env.loops(["create", "agent", name, "--provider", "claude"])
            .args(["--prompt", "slow work", "--at", "2020-01-01", "--pool", "p"])
            .run();
    }
    let wait = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done",
        release.display()
    );
    for name in ["cmd-c", "cmd-d"] {
        env.create_command(name, &wait, &["--at", "2020-01-01", "--pool", "p"]);
    }
    let _daemon = Daemon::start(&env, &["--max-parallel", "4", "--agent-concurrency", "1"]);
    let running = |prefix: &str| {
        all_runs(&env)
            .iter()
            .filter(|r| r["status"] == "running")
            .filter(|r| {
                r["loopName"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(prefix))
            })
            .count()
    };
    wait_for("an agent and a command to run", DEADLINE, || {
        (running("agent") == 1 && running("cmd") == 1).then_some(())
    });
    // Room in the daemon (4) but not in the lane or the pool: a moment
    // later it is still so.
    env.loops(["status", "cmd-d"]).run();
    assert_eq!((running("agent"), running("cmd")), (1, 1));
    std::fs::write(&release, "").unwrap();
    wait_for("all four to run", DEADLINE, || {
        let runs = all_runs(&env);
        (runs.len() == 4 && runs.iter().all(|r| r["status"] == "succeeded")).then_some(())
    });
}

/// A shell step in `pool` that appends `start <id> <ns>` and, after a
/// pause long enough for a second step to overlap it, `end <id> <ns>` to
/// `log` (issue 30, Q2).
fn timed_step(id: &str, pool: &str, log: &Path) -> Value {
    let log = log.display();
    serde_json::json!({
        "id": id,
        "pool": pool,
        "target": {
            "type": "command",
            "shell": true,
            "command": format!(
                "echo start {id} $(date +%s%N) >> '{log}'; sleep 0.4; \
                 echo end {id} $(date +%s%N) >> '{log}'"
            ),
        },
    })
}

/// The `(start, end)` of each step id in `log`, in nanoseconds.
fn intervals(log: &Path) -> Vec<(String, u128, u128)> {
    let text = std::fs::read_to_string(log).expect("the steps wrote their times");
    let mut out: Vec<(String, u128, u128)> = Vec::new();
    for line in text.lines() {
        let [kind, id, ns] = line.split_whitespace().collect::<Vec<_>>()[..] else {
            panic!("unexpected line {line:?} in {text}");
        };
        let ns: u128 = ns.parse().expect("nanoseconds");
        match kind {
            "start" => out.push((id.to_owned(), ns, 0)),
            "end" => {
                let entry = out.iter_mut().find(|(i, ..)| i == id).expect("a start");
                entry.2 = ns;
            }
            other => panic!("unexpected {other:?} in {text}"),
        }
    }
    out
}

#[test]
fn parallel_workflow_steps_in_a_pool_of_one_never_overlap() {
    let env = TestEnv::new();
    let log = env.home().join("times.log");
    let workflow = serde_json::json!({
        "name": "pooled",
        "maxParallel": 2,
        "steps": [timed_step("a", "p", &log), timed_step("b", "p", &log)],
    });
    let file = crate::workflows::workflow_file(&env, "pooled.json", &workflow);
    // A step's pool must exist, as a loop's must.
    env.loops(["workflows", "create", &file])
        .code(1)
        .stderr_has("workflow.steps[0].pool: no pool named p; create it first with loops pools set p --max N")
        .run();
    env.loops(["pools", "set", "p", "--max", "1"]).run();
    env.loops(["workflows", "create", &file]).run();

    let ran = env.loops(["workflows", "run", "pooled"]).run();
    assert!(ran.stdout.contains(" succeeded\n"), "{}", ran.stdout);
    // The step that found the pool full said so while it waited.
    assert!(
        ran.stderr.contains("waiting for pool p (1 running)"),
        "{}",
        ran.stderr
    );
    let steps = intervals(&log);
    assert_eq!(steps.len(), 2, "{steps:?}");
    let (first, second) = if steps[0].1 <= steps[1].1 {
        (&steps[0], &steps[1])
    } else {
        (&steps[1], &steps[0])
    };
    assert!(first.2 > 0 && second.2 > 0, "both ended: {steps:?}");
    assert!(
        first.2 <= second.1,
        "the steps overlapped in a pool of one: {steps:?}"
    );
    // Both succeeded, and the pool is free again.
    for id in ["a", "b"] {
        let line = ran
            .stdout
            .lines()
            .find(|l| l.split_whitespace().nth(2) == Some(id))
            .unwrap_or_else(|| panic!("no line for step {id}: {}", ran.stdout));
        assert_eq!(line.split_whitespace().nth(1), Some("succeeded"), "{line}");
    }
    assert_eq!(pools_json(&env)[0]["running"], 0);

    // The pool cannot go while a step names it.
    env.loops(["pools", "remove", "p"])
        .code(1)
        .stderr_has(
            "pool p is still used by workflow steps pooled/a, pooled/b; take the \"pool\" out",
        )
        .run();

    // A loop of the workflow may not hold a place in the pool its steps
    // wait for, on create or edit.
    let shared = "pool p is also the pool of step a of workflow pooled";
    env.loops(["create", "workflow", "nightly", "--workflow", "pooled"])
        .args(["--every", "1h", "--pool", "p"])
        .code(1)
        .stderr_has(shared)
        .run();
    env.loops(["pools", "set", "q", "--max", "1"]).run();
    env.loops(["create", "workflow", "nightly", "--workflow", "pooled"])
        .args(["--every", "1h", "--pool", "q"])
        .run();
    env.loops(["edit", "nightly", "--pool", "p"])
        .code(1)
        .stderr_has(shared)
        .run();
}
