//! Agent targets: the exact argv and cwd each provider binary receives
//! (SPEC §5.2; §10 items 58–62), checked against fake provider binaries.

use loops_core::{AgentProvider, AgentTarget, ConfigIsolation, ExecutorStatus, ProcessTarget};
use loops_exec::agent_argv;

use crate::support::*;

/// A fake provider: prints its cwd, then each argument on its own line.
const ECHO_ARGS: &str = r#"pwd; for a in "$@"; do printf '%s\n' "$a"; done"#;

#[test]
fn every_provider_receives_the_spec_argv_in_its_cwd() {
    let fx = Fixture::new();
    for provider in AgentProvider::ALL {
        fx.fake(provider.binary(), ECHO_ARGS);
    }
    std::fs::create_dir(fx.path("repo")).unwrap();
    let repo = fx.path_str("repo");
    for provider in AgentProvider::ALL {
        for isolation in [ConfigIsolation::Safe, ConfigIsolation::None] {
            let mut agent = AgentTarget::new(*provider, "summarize; the $HOME 'repo'");
            agent.cwd = Some(repo.clone());
            agent.model = Some("big".into());
            agent.agent = Some("reviewer".into());
            agent.extra_args = Some(vec!["--verbose".into()]);
            agent.config_isolation = Some(isolation);
            let (program, expected) = agent_argv(&agent);
            assert_eq!(program, provider.binary());
            let r = run(&ProcessTarget::Agent(agent), &fx.opts());
            assert_eq!(r.status, ExecutorStatus::Succeeded, "{provider} {r:?}");
            let mut lines = r.stdout.lines();
            assert_eq!(
                lines.next(),
                Some(repo.as_str()),
                "{provider}: the process cwd is the target cwd"
            );
            let got: Vec<&str> = lines.collect();
            assert_eq!(got, expected, "{provider} {isolation}");
            assert_eq!(got.last(), Some(&"summarize; the $HOME 'repo'"));
        }
    }
}

#[test]
fn spec_examples() {
    // SPEC §10 items 58–62, spelled out.
    let argv = |provider, isolation| {
        let mut a = AgentTarget::new(provider, "P");
        a.config_isolation = isolation;
        a.cwd = Some("/w".into());
        a.agent = Some("A".into());
        agent_argv(&a)
    };
    let (_, claude) = argv(AgentProvider::Claude, None);
    assert_eq!(
        claude[..7],
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
    assert_eq!(codewith[..3], ["--ask-for-approval", "never", "exec"]);
    let (_, codex) = argv(AgentProvider::Codex, None);
    assert_eq!(
        codex[..7],
        [
            "exec",
            "--json",
            "--ephemeral",
            "--ask-for-approval",
            "never",
            "--sandbox",
            "workspace-write"
        ]
    );
    assert!(!codex.contains(&"--agent".to_owned()));
    for provider in [AgentProvider::Opencode, AgentProvider::Aicopilot] {
        let (_, args) = argv(provider, None);
        assert_eq!(
            args[..6],
            ["run", "--format", "json", "--pure", "--dir", "/w"]
        );
    }
    let (program, cursor) = argv(AgentProvider::Cursor, None);
    assert_eq!(
        (program, &cursor[..1]),
        ("cursor-agent", &["-p".to_owned()][..])
    );
    let (_, plain) = argv(AgentProvider::Claude, Some(ConfigIsolation::None));
    assert_eq!(
        plain,
        ["-p", "--output-format", "json", "--agent", "A", "P"]
    );
}

#[test]
fn a_missing_provider_binary_is_reported() {
    let fx = Fixture::new();
    let r = run(
        &ProcessTarget::Agent(AgentTarget::new(AgentProvider::Cursor, "hi")),
        &fx.opts(),
    );
    assert_eq!(r.status, ExecutorStatus::Failed);
    assert!(
        r.error
            .unwrap()
            .starts_with("Executable not found in PATH: cursor-agent. Effective PATH=")
    );
}
