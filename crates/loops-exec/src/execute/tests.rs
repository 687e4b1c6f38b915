//! Unit tests of the executor's outcomes and of a prompt-file read that hangs.

use super::*;

fn finished(status: Option<ExitStatus>, cause: Option<Cause>) -> Finished {
    Finished {
        status,
        cause,
        stdout: String::new(),
        stderr: String::new(),
    }
}

#[test]
fn outcomes_record_the_cause_as_it_happened() {
    let code = |c: i32| Some(ExitStatus::from_raw(c << 8));
    let killed_by = |s: Signal| Some(ExitStatus::from_raw(s as i32));
    let cases = [
        (finished(code(0), None), ExecutorStatus::Succeeded, None),
        (
            finished(code(3), None),
            ExecutorStatus::Failed,
            Some("process exited with code 3"),
        ),
        (
            finished(killed_by(Signal::SIGKILL), None),
            ExecutorStatus::Failed,
            Some("terminated by SIGKILL"),
        ),
        (
            finished(None, None),
            ExecutorStatus::Failed,
            Some("process exited with code unknown"),
        ),
        // SPEC §9 item 15: the signal loops sent does not replace the cause.
        (
            finished(killed_by(Signal::SIGTERM), Some(Cause::TimedOut)),
            ExecutorStatus::TimedOut,
            Some("timed out after 50ms"),
        ),
        (
            finished(
                killed_by(Signal::SIGKILL),
                Some(Cause::Cancelled("cancelled".into())),
            ),
            ExecutorStatus::Failed,
            Some("cancelled"),
        ),
        (
            finished(code(0), Some(Cause::TimedOut)),
            ExecutorStatus::TimedOut,
            Some("timed out after 50ms"),
        ),
    ];
    let timers = Timers {
        wall_ms: Some(50),
        idle_ms: Some(20),
    };
    for (f, status, error) in cases {
        let got = outcome(&f, timers, None, None);
        assert_eq!(got, (status, error.map(str::to_owned)), "{f:?}");
    }
    // The idle watchdog's own message.
    let idle = finished(killed_by(Signal::SIGTERM), Some(Cause::Idle));
    assert_eq!(
        outcome(&idle, timers, Some(AgentProvider::Codex), None),
        (
            ExecutorStatus::TimedOut,
            Some("idle timed out after 20ms without stdout/stderr".to_owned())
        )
    );
}

#[test]
fn an_agent_that_exits_0_must_have_said_something_and_not_an_error() {
    let code = |c: i32| Some(ExitStatus::from_raw(c << 8));
    let with = |stdout: &str, stderr: &str, c: i32| Finished {
        stdout: stdout.to_owned(),
        stderr: stderr.to_owned(),
        ..finished(code(c), None)
    };
    let is_error = r#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: 529","session_id":"s"}"#;
    let fine = r#"{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s"}"#;
    let ok = (ExecutorStatus::Succeeded, None);
    let failed = |e: &str| (ExecutorStatus::Failed, Some(e.to_owned()));
    let cases = [
        (with("", "", 0), None, ok.clone()),
        (with(" \n\t", "\n", 0), None, ok.clone()),
        (
            with("", "", 0),
            Some(AgentProvider::Cursor),
            failed(NO_OUTPUT),
        ),
        (
            with(" \n", "\r\n ", 0),
            Some(AgentProvider::Claude),
            failed(NO_OUTPUT),
        ),
        (
            with("", "warming up", 0),
            Some(AgentProvider::Codex),
            ok.clone(),
        ),
        (with(".", "", 0), Some(AgentProvider::Opencode), ok.clone()),
        (
            with("", "", 2),
            Some(AgentProvider::Codex),
            failed("process exited with code 2"),
        ),
        (
            with(is_error, "", 0),
            Some(AgentProvider::Claude),
            failed(REPORTED_ERROR),
        ),
        (with(fine, "", 0), Some(AgentProvider::Claude), ok.clone()),
        // Only claude's envelope counts, and a command's output is its own.
        (with(is_error, "", 0), None, ok.clone()),
        (
            with(is_error, "", 0),
            Some(AgentProvider::Codex),
            ok.clone(),
        ),
        (
            with(is_error, "", 1),
            Some(AgentProvider::Claude),
            failed("process exited with code 1"),
        ),
    ];
    for (f, agent, want) in cases {
        let report = agent.map(|p| parse_agent_output(p, &f.stdout));
        assert_eq!(
            outcome(&f, Timers::default(), agent, report.as_ref()),
            want,
            "{f:?} {agent:?}"
        );
    }
    assert_eq!(
        NO_OUTPUT,
        "agent exited 0 with no output on stdout or stderr: the provider produced nothing, \
         so the run did no work and is not reported as succeeded"
    );
}

/// A reader that blocks until the test ends it, and says on the
/// returned receiver when it has started.
fn blocking_reader() -> (Reader, std::sync::mpsc::Receiver<()>) {
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let entered_tx = std::sync::Mutex::new(entered_tx);
    let reader: Reader = std::sync::Arc::new(move |_path| {
        let _ = entered_tx.lock().expect("lock").send(());
        // As a read on a hung mount: it never returns while the test
        // runs (the thread is left behind, as the executor leaves it).
        loop {
            std::thread::park();
        }
    });
    (reader, entered)
}

/// An agent whose prompt file is read by a blocking reader, run on a
/// thread with `timeout_ms` and `cancel`; the result arrives on the
/// returned receiver.
fn run_blocked(
    timeout_ms: u64,
    cancel: &CancelToken,
) -> (
    std::sync::mpsc::Receiver<Result<ExecutorResult, ExecError>>,
    std::sync::mpsc::Receiver<()>,
) {
    let (reader, entered) = blocking_reader();
    let mut agent =
        loops_core::AgentTarget::new(loops_core::AgentProvider::Claude, "stored at create");
    agent.prompt_file = Some("/mnt/hung/prompt.md".to_owned());
    agent.timeout_ms = loops_core::WallClock::Ms(timeout_ms);
    let target = ProcessTarget::Agent(agent);
    let (tx, rx) = std::sync::mpsc::channel();
    let cancel = cancel.clone();
    std::thread::spawn(move || {
        let ctx = RunContext {
            cancel: Some(&cancel),
            ..RunContext::default()
        };
        let result = execute_with(
            &target,
            &RunMetadata::default(),
            &ExecOptions::default(),
            &ctx,
            &mut |_| panic!("nothing is spawned"),
            &reader,
        );
        let _ = tx.send(result);
    });
    (rx, entered)
}

/// How long the tests wait before a run counts as hung.
const DEADLINE: Duration = Duration::from_secs(20);

#[test]
fn a_cancel_ends_a_run_whose_prompt_file_read_hangs() {
    let cancel = CancelToken::new();
    // An hour: only the cancel can end the run.
    let (result, entered) = run_blocked(3_600_000, &cancel);
    entered.recv_timeout(DEADLINE).expect("the read started");
    cancel.cancel("daemon stopping");
    let result = result
        .recv_timeout(DEADLINE)
        .expect("the cancel ends the run")
        .expect("a cancel is a result");
    assert_eq!(result.status, ExecutorStatus::Failed);
    assert_eq!(result.error.as_deref(), Some("daemon stopping"));
    assert_eq!((result.pid, result.exit_code), (None, None));
}

#[test]
fn the_timeout_ends_a_run_whose_prompt_file_read_hangs() {
    let (result, _entered) = run_blocked(50, &CancelToken::new());
    let result = result
        .recv_timeout(DEADLINE)
        .expect("the timeout ends the run")
        .expect("a timeout is a result");
    assert_eq!(result.status, ExecutorStatus::TimedOut);
    assert_eq!(
        result.error.as_deref(),
        Some(
            "reading prompt file /mnt/hung/prompt.md did not finish within 50ms, the run's \
             timeout; check the file system the file is on (a network mount that stopped \
             answering?)"
        )
    );
    assert_eq!((result.pid, result.exit_code), (None, None));
}

#[test]
fn tokens_and_errors_can_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<CancelToken>();
    send_sync::<ExecError>();
}
