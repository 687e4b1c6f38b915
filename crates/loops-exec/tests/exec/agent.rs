//! Agent targets: the exact argv, cwd and stdin each provider executable
//! receives (agents note §2.1 and §2.3, which replace SPEC §5.2 and §10
//! items 58–62), checked against fake provider executables.

use std::time::{Duration, Instant};

use loops_core::{AgentProvider, AgentTarget, ConfigIsolation, ExecutorStatus, ProcessTarget};
use loops_exec::agent_argv;

use crate::support::*;

/// A fake provider: prints its cwd, each argument on its own line, a
/// marker, then what it reads on stdin.
const ECHO_ARGS: &str = r#"pwd; for a in "$@"; do printf '%s\n' "$a"; done; echo '--stdin--'; cat"#;

/// A prompt with shell metacharacters and two lines.
const PROMPT: &str = "summarize; the $HOME 'repo'\n-- and then: `id`";

/// A target of `provider` with every option it takes set.
fn full(provider: AgentProvider, repo: &str, isolation: ConfigIsolation) -> AgentTarget {
    let mut agent = AgentTarget::new(provider, PROMPT);
    agent.cwd = Some(repo.to_owned());
    agent.model = Some("big".into());
    agent.extra_args = Some(vec!["--verbose".into()]);
    agent.config_isolation = Some(isolation);
    if !matches!(provider, AgentProvider::Codex | AgentProvider::Codewith) {
        agent.agent = Some("reviewer".into());
    } else {
        agent.add_dirs = Some(vec!["/tmp".into()]);
    }
    if provider != AgentProvider::Cursor {
        agent.variant = Some("high".into());
    }
    agent
}

#[test]
fn every_provider_receives_the_table_argv_and_the_prompt_on_stdin() {
    let fx = Fixture::new();
    for provider in AgentProvider::ALL {
        fx.fake(provider.executable(), ECHO_ARGS);
    }
    std::fs::create_dir(fx.path("repo")).unwrap();
    let repo = fx.path_str("repo");
    for provider in AgentProvider::ALL {
        for isolation in [ConfigIsolation::Safe, ConfigIsolation::None] {
            let agent = full(*provider, &repo, isolation);
            let (program, expected) = agent_argv(&agent);
            assert_eq!(program, provider.executable());
            let r = run(&ProcessTarget::Agent(agent), &fx.opts());
            assert_eq!(r.status, ExecutorStatus::Succeeded, "{provider} {r:?}");
            let (argv, stdin) = r.stdout.split_once("--stdin--\n").unwrap();
            let mut lines = argv.lines();
            assert_eq!(
                lines.next(),
                Some(repo.as_str()),
                "{provider}: the process cwd is the target cwd"
            );
            let got: Vec<&str> = lines.collect();
            assert_eq!(got, expected, "{provider} {isolation}");
            assert_eq!(got.last(), Some(&"--verbose"), "extraArgs come last");
            assert_eq!(stdin, PROMPT, "{provider}: the prompt, then EOF");
        }
    }
}

#[test]
fn note_examples() {
    // Agents note §2.1, spelled out; they replace SPEC §10 items 58–62.
    let argv = |provider, isolation| {
        let mut a = AgentTarget::new(provider, "P");
        a.config_isolation = isolation;
        a.cwd = Some("/w".into());
        agent_argv(&a)
    };
    let (_, claude) = argv(AgentProvider::Claude, None);
    assert_eq!(
        claude,
        [
            "--safe-mode",
            "--setting-sources",
            "local",
            "--no-session-persistence",
            "-p",
            "--output-format",
            "json"
        ]
    );
    let (_, codewith) = argv(AgentProvider::Codewith, None);
    assert_eq!(
        codewith,
        [
            "-c",
            "sandbox_workspace_write.network_access=true",
            "--ask-for-approval",
            "never",
            "exec",
            "--json",
            "--ephemeral",
            "--sandbox",
            "workspace-write",
            "--skip-git-repo-check",
            "--cd",
            "/w"
        ]
    );
    let (_, codex) = argv(AgentProvider::Codex, None);
    assert_eq!(
        codex,
        [
            "--ask-for-approval",
            "never",
            "exec",
            "--json",
            "--ephemeral",
            "--sandbox",
            "workspace-write",
            "--skip-git-repo-check",
            "--ignore-rules",
            "--cd",
            "/w"
        ]
    );
    for provider in [AgentProvider::Opencode, AgentProvider::Aicopilot] {
        let (_, args) = argv(provider, None);
        assert_eq!(args, ["run", "--format", "json", "--pure", "--dir", "/w"]);
    }
    let (program, cursor) = argv(AgentProvider::Cursor, Some(ConfigIsolation::None));
    assert_eq!(
        (program, &cursor[..]),
        ("agent", &["-p", "--trust"].map(String::from)[..])
    );
}

#[test]
fn a_missing_provider_executable_is_reported() {
    let fx = Fixture::new();
    let r = run(
        &ProcessTarget::Agent(AgentTarget::new(AgentProvider::Cursor, "hi")),
        &fx.opts(),
    );
    assert_eq!(r.status, ExecutorStatus::Failed);
    assert!(
        r.error
            .unwrap()
            .starts_with("Executable not found in PATH: agent. Effective PATH=")
    );
    assert_eq!(
        preflight_err(
            &ProcessTarget::Agent(AgentTarget::new(AgentProvider::Cursor, "hi")),
            &fx.opts()
        )
        .split(". ")
        .next(),
        Some("Executable not found in PATH: agent")
    );
}

#[test]
fn cursor_falls_back_to_cursor_agent_and_says_so() {
    let fx = Fixture::new();
    fx.fake("cursor-agent", r#"echo "ran $(basename "$0")"; cat"#);
    let target = ProcessTarget::Agent(AgentTarget::new(AgentProvider::Cursor, "hi"));
    let r = run(&target, &fx.opts());
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
    assert_eq!(r.stdout, "ran cursor-agent\nhi");
    assert_eq!(
        r.stderr,
        "loops: cursor-agent ran, since agent is not on PATH\n"
    );
    let preflight = loops_exec::preflight_target(&target, &Default::default(), &fx.opts()).unwrap();
    assert_eq!(preflight.command, "cursor-agent");

    // With `agent` on the PATH, it runs, and nothing is said.
    fx.fake("agent", r#"echo "ran $(basename "$0")""#);
    let r = run(&target, &fx.opts());
    assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("ran agent\n", ""));
    let preflight = loops_exec::preflight_target(&target, &Default::default(), &fx.opts()).unwrap();
    assert_eq!(preflight.command, "agent");
}

/// Every process's command line, NULs as spaces.
fn all_command_lines() -> Vec<(String, String)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter_map(|e| {
            let bytes = std::fs::read(e.path().join("cmdline")).ok()?;
            let line = String::from_utf8_lossy(&bytes).replace('\0', " ");
            Some((e.file_name().to_string_lossy().into_owned(), line))
        })
        .collect()
}

#[test]
fn the_prompt_is_in_no_command_line_while_the_agent_runs() {
    let fx = Fixture::new();
    // It records its own command line, then waits for the test's go.
    fx.fake(
        "claude",
        r#"tr '\0' ' ' < /proc/$$/cmdline > "$MARKERS/cmdline"
echo $$ > "$MARKERS/pid.tmp"; mv "$MARKERS/pid.tmp" "$MARKERS/pid"
while [ ! -e "$MARKERS/go" ]; do sleep 0.01; done
cat > "$MARKERS/stdin"; echo done"#,
    );
    let prompt = format!("secret-prompt-{}", std::process::id());
    let target = ProcessTarget::Agent(AgentTarget::new(AgentProvider::Claude, prompt.clone()));
    let opts = fx.opts();
    let running = std::thread::spawn(move || run(&target, &opts));
    let pid_file = fx.path("pid");
    assert!(eventually(Duration::from_secs(20), || pid_file.exists()));
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let lines = all_command_lines();
    assert!(
        lines.iter().any(|(p, _)| p == pid.trim()),
        "the fake agent {pid} is running"
    );
    for (pid, line) in &lines {
        assert!(!line.contains(&prompt), "{pid}: {line}");
    }
    let own = std::fs::read_to_string(fx.path("cmdline")).unwrap();
    assert!(own.contains("--output-format json"), "{own}");
    assert!(!own.contains(&prompt), "{own}");
    std::fs::write(fx.path("go"), "").unwrap();
    let r = running.join().unwrap();
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
    assert_eq!(std::fs::read_to_string(fx.path("stdin")).unwrap(), prompt);
}

#[test]
fn a_large_prompt_arrives_whole() {
    let fx = Fixture::new();
    fx.fake("codex", r#"cat > "$MARKERS/stdin"; echo done"#);
    let prompt = "0123456789abcdef\n".repeat(256 * 1024);
    let target = ProcessTarget::Agent(AgentTarget::new(AgentProvider::Codex, prompt.clone()));
    let r = run(&target, &fx.opts());
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
    assert!(std::fs::read_to_string(fx.path("stdin")).unwrap() == prompt);
}

#[test]
fn an_agent_that_never_reads_its_stdin_cannot_hold_the_run() {
    let fx = Fixture::new();
    // 4 MiB: far more than a pipe holds, so the write blocks.
    let prompt = "x".repeat(4 << 20);
    fx.fake("opencode", "echo done");
    let mut agent = AgentTarget::new(AgentProvider::Opencode, prompt.clone());
    agent.model = Some("m".into());
    let r = run(&ProcessTarget::Agent(agent), &fx.opts());
    assert_eq!(
        (r.status, r.stdout.as_str()),
        (ExecutorStatus::Succeeded, "done\n")
    );

    // One that neither reads nor exits still times out on time.
    fx.fake("claude", "exec sleep 60");
    let start = Instant::now();
    let target = with_timeout(
        ProcessTarget::Agent(AgentTarget::new(AgentProvider::Claude, prompt)),
        300,
    );
    let r = run(&target, &fx.opts());
    assert_eq!(r.status, ExecutorStatus::TimedOut, "{r:?}");
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
}
