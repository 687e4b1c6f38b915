//! The idle watchdog and the result guards of agent runs (issue 27;
//! `agents-0.5.11.md` §4, §5.2, §6), against fake provider binaries.
//!
//! The timings are real: the watchdog's 2 s of the issue, the runner's 2 s
//! kill grace where SIGKILL is checked. Assertions poll or measure; nothing
//! waits a fixed time.

use std::time::{Duration, Instant};

use loops_core::{AgentProvider, AgentTarget, ExecutorStatus, ProcessTarget, WallClock};
use loops_exec::DEFAULT_KILL_GRACE;

use crate::support::*;

/// The idle timeout of the issue's tests.
const IDLE_MS: u64 = 2_000;

/// Slack for a loaded machine on top of an expected duration.
const SLACK: Duration = Duration::from_millis(1_500);

fn agent(provider: AgentProvider, idle_ms: Option<u64>) -> AgentTarget {
    let mut a = AgentTarget::new(provider, "keep going");
    a.idle_timeout_ms = idle_ms;
    a
}

fn idle_error(ms: u64) -> String {
    format!("idle timed out after {ms}ms without stdout/stderr")
}

#[test]
fn a_silent_agent_is_killed_by_the_idle_watchdog() {
    let fx = Fixture::new();
    fx.fake("claude", r#"touch "$MARKERS/started"; sleep 30"#);
    let start = Instant::now();
    let target = ProcessTarget::Agent(agent(AgentProvider::Claude, Some(IDLE_MS)));
    let r = run(&target, &fx.opts());
    let took = start.elapsed();
    assert!(fx.path("started").exists(), "the fake ran");
    assert_eq!(r.status, ExecutorStatus::TimedOut, "{r:?}");
    assert_eq!(r.error, Some(idle_error(IDLE_MS)));
    assert_eq!(r.exit_code, None, "killed by a signal");
    let idle = Duration::from_millis(IDLE_MS);
    assert!(took >= idle, "{took:?}");
    assert!(took < idle + GRACE + SLACK, "{took:?}");
    assert_eq!(live_group_members(r.pid.unwrap()), Vec::<u32>::new());
}

/// A fake that prints one line every 0.5 s for 5 s on `stream` (1 or 2).
fn chatty(stream: u8) -> String {
    format!("i=0; while [ $i -lt 10 ]; do echo tick $i >&{stream}; sleep 0.5; i=$((i+1)); done")
}

#[test]
fn an_agent_printing_on_stdout_outlives_its_idle_timeout() {
    let fx = Fixture::new();
    fx.fake("codex", &chatty(1));
    let start = Instant::now();
    let r = run(
        &ProcessTarget::Agent(agent(AgentProvider::Codex, Some(IDLE_MS))),
        &fx.opts(),
    );
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
    assert_eq!(r.stdout.lines().count(), 10, "{r:?}");
    assert!(
        start.elapsed() >= Duration::from_secs(4),
        "it ran to its end"
    );
}

#[test]
fn an_agent_printing_only_on_stderr_outlives_its_idle_timeout() {
    let fx = Fixture::new();
    fx.fake("agent", &chatty(2));
    let r = run(
        &ProcessTarget::Agent(agent(AgentProvider::Cursor, Some(IDLE_MS))),
        &fx.opts(),
    );
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
    assert_eq!(
        (r.stdout.as_str(), r.stderr.lines().count()),
        ("", 10),
        "{r:?}"
    );
}

#[test]
fn an_agent_ignoring_sigterm_is_killed_two_seconds_later() {
    let fx = Fixture::new();
    // The shell survives SIGTERM (its trap notes it), and starts new
    // sleeps; only the SIGKILL ends it.
    fx.fake(
        "opencode",
        r#"trap 'echo term >> "$MARKERS/term"' TERM; while :; do sleep 1; done"#,
    );
    let opts = loops_exec::ExecOptions {
        kill_grace: DEFAULT_KILL_GRACE,
        ..fx.opts()
    };
    let idle_ms = 1_000;
    let start = Instant::now();
    let r = run(
        &ProcessTarget::Agent(agent(AgentProvider::Opencode, Some(idle_ms))),
        &opts,
    );
    let took = start.elapsed();
    assert_eq!(r.status, ExecutorStatus::TimedOut, "{r:?}");
    // The cause is kept, not "terminated by SIGKILL".
    assert_eq!(r.error, Some(idle_error(idle_ms)));
    assert_eq!(r.exit_code, None);
    let term = std::fs::read_to_string(fx.path("term")).expect("SIGTERM came first");
    assert_eq!(term, "term\n");
    let killed_at = Duration::from_millis(idle_ms) + DEFAULT_KILL_GRACE;
    assert_eq!(DEFAULT_KILL_GRACE, Duration::from_secs(2));
    assert!(took >= killed_at, "{took:?}");
    assert!(took < killed_at + SLACK, "{took:?}");
    assert_eq!(live_group_members(r.pid.unwrap()), Vec::<u32>::new());
}

#[test]
fn the_variable_sets_the_default_watchdog_of_an_agent_without_timers() {
    let fx = Fixture::new();
    fx.fake("codex", "sleep 30");
    let mut env = fx.env();
    env.insert("LOOPS_AGENT_IDLE_TIMEOUT_MS".into(), " 300 ".into());
    let r = run(
        &ProcessTarget::Agent(agent(AgentProvider::Codex, None)),
        &fx.opts_with(env.clone()),
    );
    assert_eq!(r.status, ExecutorStatus::TimedOut, "{r:?}");
    assert_eq!(r.error, Some(idle_error(300)));

    // With a wall clock and no idleTimeoutMs there is no default watchdog:
    // the wall clock ends the run.
    let mut timed = agent(AgentProvider::Codex, None);
    timed.timeout_ms = WallClock::Ms(800);
    let r = run(&ProcessTarget::Agent(timed), &fx.opts_with(env));
    assert_eq!(r.status, ExecutorStatus::TimedOut, "{r:?}");
    assert_eq!(r.error.as_deref(), Some("timed out after 800ms"));
}

#[test]
fn when_both_timers_are_due_the_idle_message_wins() {
    let fx = Fixture::new();
    fx.fake("claude", "sleep 30");
    let mut a = agent(AgentProvider::Claude, Some(300));
    a.timeout_ms = WallClock::Ms(300);
    let r = run(&ProcessTarget::Agent(a), &fx.opts());
    assert_eq!(r.status, ExecutorStatus::TimedOut, "{r:?}");
    assert_eq!(r.error, Some(idle_error(300)));
}

#[test]
fn an_agent_that_exits_0_without_output_failed() {
    let fx = Fixture::new();
    fx.fake("claude", r#"printf ' \n' >&2; exit 0"#);
    let r = run(
        &ProcessTarget::Agent(agent(AgentProvider::Claude, None)),
        &fx.opts(),
    );
    assert_eq!(r.status, ExecutorStatus::Failed, "{r:?}");
    assert_eq!(
        r.error.as_deref(),
        Some(
            "agent exited 0 with no output on stdout or stderr: the provider produced nothing, \
             so the run did no work and is not reported as succeeded"
        )
    );
    assert_eq!(r.exit_code, Some(0));
    // Commands are exempt.
    let r = run(&shell("exit 0"), &fx.opts());
    assert_eq!((r.status, r.error), (ExecutorStatus::Succeeded, None));
}

#[test]
fn a_claude_run_reporting_is_error_failed_although_it_exited_0() {
    let fx = Fixture::new();
    let envelope = r#"{"type":"result","subtype":"success","is_error":true,"duration_ms":812,"num_turns":1,"result":"Credit balance is too low","session_id":"0b5f-77","total_cost_usd":0}"#;
    fx.fake("claude", &format!("printf '%s\\n' '{envelope}'"));
    let r = run(
        &ProcessTarget::Agent(agent(AgentProvider::Claude, None)),
        &fx.opts(),
    );
    assert_eq!(r.status, ExecutorStatus::Failed, "{r:?}");
    assert_eq!(
        r.error.as_deref(),
        Some("agent reported an error (is_error) although it exited 0")
    );
    assert_eq!((r.exit_code, r.stdout.trim()), (Some(0), envelope));

    // The same envelope without the error succeeds.
    let fine = envelope.replace(r#""is_error":true"#, r#""is_error":false"#);
    fx.fake("claude", &format!("printf '%s\\n' '{fine}'"));
    let r = run(
        &ProcessTarget::Agent(agent(AgentProvider::Claude, None)),
        &fx.opts(),
    );
    assert_eq!((r.status, r.error), (ExecutorStatus::Succeeded, None));
}
