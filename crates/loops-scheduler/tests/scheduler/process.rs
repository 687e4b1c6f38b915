//! End to end through `ProcessExecutor`: real `true`, `false` and `sh`
//! processes (SPEC §3.3 with the production executor).

use loops_core::{CommandTarget, ManualClock, RunStatus, Target};
use loops_scheduler::{ProcessExecutor, run_now, tick};

use crate::common::*;

fn command(cmd: &str, shell: bool) -> Target {
    let mut target = CommandTarget::new(cmd);
    target.shell = Some(shell);
    Target::Command(target)
}

#[test]
fn a_true_command_loop_succeeds_with_its_pid_recorded() {
    let fx = Fixture::new();
    let store = fx.system_store();
    let clock = ManualClock::new(at(60));
    let executor = ProcessExecutor::new(&clock);
    let mut new = command_loop("true", once(at(60)));
    new.target = command("true", false);
    store.create_loop(&new, t0()).unwrap();

    let r = tick(&store, &opts(&clock, &executor)).unwrap();
    assert_eq!(r.completed.len(), 1);
    let run = &r.completed[0];
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    assert_eq!(run.exit_code, Some(0));
    assert!(run.pid.is_some_and(|p| p > 0), "{run:?}");
}

#[test]
fn a_false_command_loop_fails_with_exit_code_one() {
    let fx = Fixture::new();
    let store = fx.system_store();
    let clock = ManualClock::new(at(60));
    let executor = ProcessExecutor::new(&clock);
    let mut new = command_loop("false", once(at(60)));
    new.target = command("false", false);
    store.create_loop(&new, t0()).unwrap();

    let r = tick(&store, &opts(&clock, &executor)).unwrap();
    let run = &r.completed[0];
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.exit_code, Some(1));
    assert_eq!(run.error.as_deref(), Some("process exited with code 1"));
}

#[test]
fn run_now_of_a_shell_command_captures_its_stdout() {
    let fx = Fixture::new();
    let store = fx.system_store();
    let clock = ManualClock::new(at(30));
    let executor = ProcessExecutor::new(&clock);
    let mut new = command_loop("printf", every(60_000));
    new.target = command("printf hi", true);
    let lp = store.create_loop(&new, t0()).unwrap();

    let run = run_now(&store, &lp, &opts(&clock, &executor)).unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    assert_eq!(run.stdout.as_deref(), Some("hi"));
    assert!(run.pid.is_some());
    assert_eq!(run.scheduled_for, at(30));
}

#[test]
fn a_hook_runs_with_the_runners_options_and_its_report_is_masked() {
    // Issue 25 §2: the runner hands its options to its hooks, so a hook
    // starts from the runner's base environment and what it reports is
    // masked of the runner's secret values (the database's password).
    let fx = Fixture::new();
    let store = fx.system_store();
    let clock = ManualClock::new(at(60));
    let mut executor = ProcessExecutor::new(&clock);
    let mut base: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    base.insert("RUNNER_MARK".to_owned(), "from-the-runner".to_owned());
    executor.exec.base_env = Some(base);
    executor.exec.secret_values = vec!["runner-db-password".to_owned()];
    let mut new = command_loop("false", once(at(60)));
    new.target = command("false", false);
    new.hooks.on_failure =
        Some(r#"echo "$RUNNER_MARK says runner-db-password" >&2; exit 3"#.to_owned());
    let lp = store.create_loop(&new, t0()).unwrap();

    let reports = std::sync::Mutex::new(Vec::new());
    let report = |line: &str| reports.lock().unwrap().push(line.to_owned());
    let options = loops_scheduler::TickOptions {
        on_hook_error: Some(&report),
        ..opts(&clock, &executor)
    };
    let r = tick(&store, &options).unwrap();
    assert_eq!(r.completed.len(), 1);
    let run = &r.completed[0];
    // `tick` waits for its hooks before it returns.
    assert_eq!(
        reports.into_inner().unwrap(),
        [format!(
            "on-failure hook of loop false ({}) for run {} failed: exited with code 3: \
             from-the-runner says [redacted]",
            lp.id, run.id
        )]
    );
}
