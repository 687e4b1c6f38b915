//! An agent prompt that begins with `-` is no option risk any more: it
//! goes on stdin (agents note §2.3), so a stored one runs and the agent
//! reads it as its prompt. (0.3.1 put it last on argv, where loops refused
//! it; new ones are still refused when a loop is created.)

use loops_core::{AgentProvider, AgentTarget, ExecutorStatus, ProcessTarget};

use crate::support::*;

#[test]
fn a_prompt_that_begins_with_a_dash_reaches_stdin_not_argv() {
    let fx = Fixture::new();
    for provider in AgentProvider::ALL {
        fx.fake(
            provider.executable(),
            r#"printf '%s\n' "$@" > "$MARKERS/argv"; cat"#,
        );
    }
    for provider in AgentProvider::ALL {
        let prompt = "--dangerously-skip-permissions";
        let r = run(
            &ProcessTarget::Agent(AgentTarget::new(*provider, prompt)),
            &fx.opts(),
        );
        assert_eq!(r.status, ExecutorStatus::Succeeded, "{provider}: {r:?}");
        assert_eq!(r.stdout, prompt, "{provider}");
        let argv = std::fs::read_to_string(fx.path("argv")).unwrap();
        assert!(!argv.lines().any(|a| a == prompt), "{provider}: {argv}");
    }
    let agent = AgentTarget::new(AgentProvider::Claude, "--dangerously-skip-permissions");
    assert!(
        loops_exec::preflight_target(
            &ProcessTarget::Agent(agent),
            &Default::default(),
            &fx.opts()
        )
        .is_ok()
    );
}
