//! An agent prompt that begins with `-` never reaches the agent as an
//! option: a stored one (validation refuses new ones) fails the run before
//! anything is spawned, not even `accounts env`.

use loops_core::{Account, AgentProvider, AgentTarget, ExecutorStatus, ProcessTarget};

use crate::support::*;

#[test]
fn a_prompt_that_reads_as_an_option_fails_the_run_and_spawns_nothing() {
    let fx = Fixture::new();
    for provider in AgentProvider::ALL {
        fx.fake(
            provider.binary(),
            // Issue 27: an agent that exits 0 must print something.
            r#"touch "$MARKERS/ran-$(basename "$0")"; echo ran"#,
        );
    }
    fx.fake("accounts", r#"touch "$MARKERS/accounts"; exit 1"#);
    for provider in AgentProvider::ALL {
        let mut agent = AgentTarget::new(*provider, "--dangerously-skip-permissions");
        agent.account = Some(Account {
            profile: "work".into(),
            tool: None,
        });
        let (result, spawned) = run_full(
            &ProcessTarget::Agent(agent),
            &Default::default(),
            &fx.opts(),
        );
        let r = result.unwrap();
        assert_eq!(spawned, None, "{provider}");
        assert_eq!(
            (r.status, r.pid, r.exit_code),
            (ExecutorStatus::Failed, None, None)
        );
        let error = r.error.unwrap_or_default();
        assert!(
            error.contains("the prompt begins with \"-\""),
            "{provider}: {error}"
        );
    }
    let markers: Vec<_> = std::fs::read_dir(fx.path(""))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ran-") || n == "accounts")
        .collect();
    assert!(markers.is_empty(), "spawned: {markers:?}");

    // Preflight (doctor, `workflows validate --preflight`) refuses it too.
    let agent = AgentTarget::new(AgentProvider::Claude, "--dangerously-skip-permissions");
    let refused = loops_exec::preflight_target(
        &ProcessTarget::Agent(agent),
        &Default::default(),
        &fx.opts(),
    )
    .unwrap_err();
    assert!(
        matches!(refused, loops_exec::ExecError::Refused { .. }),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("the prompt begins with \"-\""));

    // A leading space makes it the prompt.
    let agent = AgentTarget::new(AgentProvider::Cursor, " --dangerously-skip-permissions");
    let r = run(&ProcessTarget::Agent(agent), &fx.opts());
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
}
