//! Timeout, cancel and teardown of the whole process group (SPEC §5.7
//! "Kill"; §10 items 68, 69; §9 items 15 and 18).
//!
//! The late-marker scripts fork a grandchild that sleeps and then writes a
//! file. Each test then watches for that file until well past the moment it
//! would have been written: if it never appears, the grandchild died with
//! its run.

use std::time::{Duration, Instant};

use loops_core::ExecutorStatus;
use loops_exec::{CancelToken, RunContext, RunMetadata};

use crate::support::*;

/// Forks a grandchild that writes `$MARKERS/<name>` after 0.4 s, then
/// says `started` and sleeps.
fn late_writer(name: &str) -> String {
    format!(
        r#"( sleep 0.4; echo late > "$MARKERS/{name}" ) &
touch "$MARKERS/started"
echo started
sleep 30"#
    )
}

/// When a grandchild forked at `start` would have written its marker, with
/// margin.
fn past_the_late_write(start: Instant) -> Instant {
    start + Duration::from_millis(400 + 600)
}

#[test]
fn a_timeout_kills_the_whole_group() {
    // SPEC §10 item 68.
    let fx = Fixture::new();
    fx.fake("slow", &late_writer("late"));
    let start = Instant::now();
    let r = run(&with_timeout(command("slow", &[]), 200), &fx.opts());
    let took = start.elapsed();
    assert_eq!(r.status, ExecutorStatus::TimedOut, "{r:?}");
    assert_eq!(r.error.as_deref(), Some("timed out after 200ms"));
    assert_eq!(r.stdout, "started\n");
    assert!(
        took < Duration::from_millis(200) + GRACE + Duration::from_secs(1),
        "{took:?}"
    );
    assert_eq!(live_group_members(r.pid.unwrap()), Vec::<u32>::new());
    assert_never_appears(&fx.path("late"), past_the_late_write(start));
}

#[test]
fn a_child_ignoring_sigterm_is_killed_after_the_grace() {
    // SPEC §10 item 69, with a 200 ms grace instead of 2 s.
    let fx = Fixture::new();
    fx.fake(
        "stubborn",
        "trap '' TERM\necho ready\nwhile :; do sleep 1; done",
    );
    let start = Instant::now();
    let r = run(&with_timeout(command("stubborn", &[]), 100), &fx.opts());
    let took = start.elapsed();
    assert_eq!(r.status, ExecutorStatus::TimedOut, "{r:?}");
    // The cause is kept: not "terminated by SIGKILL" (SPEC §9 item 15).
    assert_eq!(r.error.as_deref(), Some("timed out after 100ms"));
    assert_eq!(r.exit_code, None);
    assert!(took >= Duration::from_millis(100) + GRACE, "{took:?}");
    assert!(
        took < Duration::from_millis(100) + GRACE + Duration::from_secs(1),
        "{took:?}"
    );
    assert_eq!(live_group_members(r.pid.unwrap()), Vec::<u32>::new());
}

#[test]
fn a_child_that_exits_on_sigterm_is_not_sent_sigkill() {
    // No SIGKILL is scheduled once the group is gone, so the run ends well
    // before the grace period would have run out.
    let fx = Fixture::new();
    let mut opts = fx.opts();
    opts.kill_grace = Duration::from_secs(5);
    let start = Instant::now();
    let r = run(&with_timeout(shell("sleep 30"), 100), &opts);
    assert_eq!(r.status, ExecutorStatus::TimedOut);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn an_external_signal_is_recorded_by_name() {
    // SPEC §10 item 69, second half.
    let fx = Fixture::new();
    // Tests started as a background job of a shell without job control
    // inherit an ignored SIGINT, which `sh` then cannot un-ignore. loops
    // itself runs with handlers (`SignalCancel`), which `exec` resets to
    // the default in a run; so does this test.
    let _signals = loops_exec::SignalCancel::install().unwrap();
    for (signal, name) in [("KILL", "SIGKILL"), ("TERM", "SIGTERM"), ("INT", "SIGINT")] {
        let r = run(
            &shell(&format!("echo before; kill -{signal} $$; sleep 5")),
            &fx.opts(),
        );
        assert_eq!(r.status, ExecutorStatus::Failed, "{r:?}");
        assert_eq!(r.error, Some(format!("terminated by {name}")));
        assert_eq!(r.exit_code, None);
        assert_eq!(r.stdout, "before\n");
    }
}

#[test]
fn a_cancel_mid_run_kills_the_group_promptly() {
    let fx = Fixture::new();
    fx.fake("slow", &late_writer("late"));
    let token = CancelToken::new();
    let ctx = RunContext {
        cancel: Some(&token),
        ..RunContext::default()
    };
    let started = fx.path("started");
    let start = Instant::now();
    let canceller = std::thread::spawn({
        let token = token.clone();
        move || {
            assert!(eventually(Duration::from_secs(5), || started.exists()));
            token.cancel("cancelled by test");
            Instant::now()
        }
    });
    let r = run_in(
        &command("slow", &[]),
        &RunMetadata::default(),
        &fx.opts(),
        &ctx,
    )
    .0
    .unwrap();
    let returned = Instant::now();
    let cancelled_at = canceller.join().unwrap();
    assert_eq!(r.status, ExecutorStatus::Failed, "{r:?}");
    // The cause is kept: not "terminated by SIGTERM" (SPEC §9 item 15).
    assert_eq!(r.error.as_deref(), Some("cancelled by test"));
    let reaction = returned.duration_since(cancelled_at);
    assert!(reaction < GRACE + Duration::from_secs(1), "{reaction:?}");
    assert_eq!(live_group_members(r.pid.unwrap()), Vec::<u32>::new());
    assert_never_appears(&fx.path("late"), past_the_late_write(start));
}

#[test]
fn a_cancel_without_a_reason_reads_cancelled() {
    let fx = Fixture::new();
    let token = CancelToken::new();
    let ctx = RunContext {
        cancel: Some(&token),
        ..RunContext::default()
    };
    let started = fx.path("started");
    let canceller = std::thread::spawn({
        let token = token.clone();
        move || {
            assert!(eventually(Duration::from_secs(5), || started.exists()));
            token.cancel("");
        }
    });
    let target = shell(r#"touch "$MARKERS/started"; sleep 30"#);
    let r = run_in(&target, &RunMetadata::default(), &fx.opts(), &ctx)
        .0
        .unwrap();
    canceller.join().unwrap();
    assert_eq!(r.error.as_deref(), Some("cancelled"));
}

#[test]
fn a_normal_exit_tears_down_background_grandchildren() {
    // A run's process group never outlives its run: a grandchild holding
    // the pipes (first) or detached from them (second, third) is killed once
    // the leader has exited and the pipes reached EOF or the leak timeout
    // (500 ms). The grandchildren would write 0.8 s in, after that timeout.
    let fx = Fixture::new();
    let scripts = [
        r#"( sleep 0.8; echo late > "$MARKERS/late1" ) & echo done"#,
        r#"( sleep 0.8; echo late > "$MARKERS/late2" ) >/dev/null 2>&1 & echo done"#,
        r#"( trap '' TERM; sleep 0.8; echo late > "$MARKERS/late3" ) >/dev/null 2>&1 & echo done"#,
    ];
    let start = Instant::now();
    for script in scripts {
        let begun = Instant::now();
        let r = run(&shell(script), &fx.opts());
        assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
        assert_eq!(r.stdout, "done\n");
        assert_eq!(
            live_group_members(r.pid.unwrap()),
            Vec::<u32>::new(),
            "{script}"
        );
        assert!(
            begun.elapsed() < Duration::from_secs(2),
            "{:?}",
            begun.elapsed()
        );
    }
    let deadline = start + Duration::from_millis(800 + 600);
    for name in ["late1", "late2", "late3"] {
        assert_never_appears(&fx.path(name), deadline);
    }
}

#[test]
fn a_run_with_a_pid_recorded_by_on_spawn_is_dead_when_it_returns() {
    let fx = Fixture::new();
    let (result, spawned) = run_full(
        &with_timeout(shell("sleep 30"), 50),
        &RunMetadata::default(),
        &fx.opts(),
    );
    let spawned = spawned.unwrap();
    assert_eq!(result.unwrap().status, ExecutorStatus::TimedOut);
    assert!(
        !std::path::Path::new(&format!("/proc/{}", spawned.pid)).exists()
            || live_group_members(spawned.pid).is_empty()
    );
    use loops_core::Liveness;
    assert!(!loops_exec::SystemProbe.is_alive(spawned));
}
