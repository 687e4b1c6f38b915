//! Agent argv against the agents note's §2.1 table, for every provider
//! and option, and what a spec sends on stdin.

use super::*;
use crate::user_file::PROMPT_FILE_MAX_BYTES;
use loops_core::{AgentAllowlist, CommandTarget};

/// The prompt never appears in argv: it goes on stdin (agents note §2.3).
const PROMPT: &str = "do it";

/// An agent target with the options every provider takes set.
fn full(provider: AgentProvider, isolation: ConfigIsolation) -> AgentTarget {
    let mut t = AgentTarget::new(provider, PROMPT);
    t.cwd = Some("/w".into());
    t.model = Some("m1".into());
    t.extra_args = Some(vec!["--x".into(), "y".into()]);
    t.config_isolation = Some(isolation);
    match provider {
        AgentProvider::Codewith | AgentProvider::Codex => {
            t.variant = Some("high".into());
            t.add_dirs = Some(vec!["/a".into(), " /b ".into()]);
        }
        AgentProvider::Cursor => t.agent = Some("a1".into()),
        _ => {
            t.variant = Some("high".into());
            t.agent = Some("a1".into());
        }
    }
    t
}

fn check(target: &AgentTarget, program: &str, expected: &str) {
    let (p, args) = agent_argv(target);
    assert_eq!(p, program);
    assert_eq!(
        args.join(" "),
        expected,
        "{:?} {:?} {:?} {:?}",
        target.provider,
        target.config_isolation,
        target.permission_mode,
        target.sandbox
    );
    assert!(!args.iter().any(|a| a.contains(PROMPT)), "{args:?}");
}

const SAFE_CLAUDE: &str = "--safe-mode --setting-sources local --no-session-persistence";
const CODEX_EXEC: &str = "--ask-for-approval never exec --json --ephemeral --sandbox";

#[test]
fn every_provider_and_isolation_mode() {
    use AgentProvider::*;
    use ConfigIsolation::{None as Off, Safe};
    let effort = "-c model_reasoning_effort=\"high\"";
    let net = "-c sandbox_workspace_write.network_access=true";
    let dirs = "--cd /w --add-dir /a --add-dir /b --model m1 --x y";
    let table: &[(AgentProvider, ConfigIsolation, &str, String)] = &[
        (
            Claude,
            Safe,
            "claude",
            format!(
                "{SAFE_CLAUDE} -p --output-format json --model m1 --effort high --agent a1 --x y"
            ),
        ),
        (
            Claude,
            Off,
            "claude",
            "-p --output-format json --model m1 --effort high --agent a1 --x y".into(),
        ),
        (
            Cursor,
            Safe,
            "agent",
            "-p --trust --sandbox enabled --model m1 --agent a1 --x y".into(),
        ),
        (
            Cursor,
            Off,
            "agent",
            "-p --trust --model m1 --agent a1 --x y".into(),
        ),
        // Isolation does nothing to codewith in 0.5.11.
        (
            Codewith,
            Safe,
            "codewith",
            format!("{effort} {net} {CODEX_EXEC} workspace-write --skip-git-repo-check {dirs}"),
        ),
        (
            Codewith,
            Off,
            "codewith",
            format!("{effort} {net} {CODEX_EXEC} workspace-write --skip-git-repo-check {dirs}"),
        ),
        (
            Codex,
            Safe,
            "codex",
            format!(
                "{effort} {CODEX_EXEC} workspace-write --skip-git-repo-check --ignore-rules {dirs}"
            ),
        ),
        (
            Codex,
            Off,
            "codex",
            format!("{effort} {CODEX_EXEC} workspace-write --skip-git-repo-check {dirs}"),
        ),
        (
            Opencode,
            Safe,
            "opencode",
            "run --format json --pure --dir /w --model m1 --variant high --agent a1 --x y".into(),
        ),
        (
            Opencode,
            Off,
            "opencode",
            "run --format json --dir /w --model m1 --variant high --agent a1 --x y".into(),
        ),
        (
            Aicopilot,
            Safe,
            "aicopilot",
            "run --format json --pure --dir /w --model m1 --variant high --agent a1 --x y".into(),
        ),
        (
            Aicopilot,
            Off,
            "aicopilot",
            "run --format json --dir /w --model m1 --variant high --agent a1 --x y".into(),
        ),
    ];
    for (provider, isolation, program, expected) in table {
        check(&full(*provider, *isolation), program, expected);
    }
}

#[test]
fn minimal_targets_default_to_safe() {
    use AgentProvider::*;
    let table: &[(AgentProvider, String)] = &[
        (Claude, format!("{SAFE_CLAUDE} -p --output-format json")),
        (Cursor, "-p --trust --sandbox enabled".into()),
        (
            Codewith,
            format!(
                "-c sandbox_workspace_write.network_access=true {CODEX_EXEC} workspace-write \
                 --skip-git-repo-check"
            ),
        ),
        (
            Codex,
            format!("{CODEX_EXEC} workspace-write --skip-git-repo-check --ignore-rules"),
        ),
        (Opencode, "run --format json --pure".into()),
        (Aicopilot, "run --format json --pure".into()),
    ];
    for (provider, expected) in table {
        check(
            &AgentTarget::new(*provider, PROMPT),
            provider.executable(),
            expected,
        );
    }
}

/// A minimal target of `provider` with no isolation, changed by `set`.
fn with(provider: AgentProvider, set: impl Fn(&mut AgentTarget)) -> AgentTarget {
    let mut t = AgentTarget::new(provider, PROMPT);
    t.config_isolation = Some(ConfigIsolation::None);
    set(&mut t);
    t
}

#[test]
fn permission_modes_and_sandboxes() {
    use AgentProvider::*;
    use PermissionMode::*;
    let mode = |m| move |t: &mut AgentTarget| t.permission_mode = Some(m);
    let sandbox = |s: &'static str| move |t: &mut AgentTarget| t.sandbox = Some(s.into());
    let json = "-p --output-format json";
    let exec = |s: &str| format!("{CODEX_EXEC} {s} --skip-git-repo-check");
    let net = "-c sandbox_workspace_write.network_access=true";
    let cases: Vec<(AgentTarget, String)> = vec![
        (with(Claude, mode(Default)), json.into()),
        (
            with(Claude, mode(Plan)),
            format!("--permission-mode plan {json}"),
        ),
        (
            with(Claude, mode(Auto)),
            format!("--permission-mode auto {json}"),
        ),
        (
            with(Claude, mode(Bypass)),
            format!("--permission-mode bypassPermissions {json}"),
        ),
        (
            with(Claude, |t| {
                t.permission_mode = Some(Plan);
                t.config_isolation = None;
            }),
            format!("{SAFE_CLAUDE} --permission-mode plan {json}"),
        ),
        (with(Cursor, mode(Plan)), "-p --trust --mode plan".into()),
        (with(Cursor, mode(Bypass)), "-p --trust --force".into()),
        (
            with(Cursor, sandbox("disabled")),
            "-p --trust --sandbox disabled".into(),
        ),
        (
            with(Cursor, |t| {
                t.permission_mode = Some(Bypass);
                t.config_isolation = None;
            }),
            "-p --trust --force --sandbox enabled".into(),
        ),
        // Bypass makes codewith's and codex's default sandbox full access,
        // and codewith loses its network flag with workspace-write.
        (with(Codewith, mode(Bypass)), exec("danger-full-access")),
        (with(Codex, mode(Bypass)), exec("danger-full-access")),
        (
            with(Codewith, |t| {
                t.permission_mode = Some(Bypass);
                t.sandbox = Some("workspace-write".into());
            }),
            format!("{net} {}", exec("workspace-write")),
        ),
        (with(Codewith, sandbox("read-only")), exec("read-only")),
        (
            with(Codex, sandbox("workspace-write")),
            exec("workspace-write"),
        ),
        (
            with(Codex, sandbox("danger-full-access")),
            exec("danger-full-access"),
        ),
        (
            with(Opencode, mode(Bypass)),
            "run --format json --dangerously-skip-permissions".into(),
        ),
        (
            with(Aicopilot, |t| {
                t.permission_mode = Some(Bypass);
                t.config_isolation = None;
            }),
            "run --format json --pure --dangerously-skip-permissions".into(),
        ),
    ];
    for (target, expected) in cases {
        check(&target, target.provider.executable(), &expected);
    }
}

#[test]
fn the_effort_is_a_json_quoted_toml_string_for_codewith_and_codex() {
    let t = with(AgentProvider::Codex, |t| {
        t.variant = Some("x \"hi\"".into())
    });
    assert_eq!(
        agent_argv(&t).1[..2],
        ["-c", r#"model_reasoning_effort="x \"hi\"""#]
    );
}

#[test]
fn codex_and_codewith_never_get_an_agent_flag() {
    // A stored row of 0.3.1 may carry one; 0.5.11 refuses new ones.
    for provider in [AgentProvider::Codex, AgentProvider::Codewith] {
        let t = with(provider, |t| t.agent = Some("a1".into()));
        let args = agent_argv(&t).1;
        assert!(
            !args.iter().any(|a| a == "--agent" || a == "a1"),
            "{args:?}"
        );
    }
}

#[test]
fn the_prompt_goes_on_stdin_even_when_it_looks_like_flags() {
    let prompt = "--model x; rm -rf / $(id)";
    let mut agent = AgentTarget::new(AgentProvider::Claude, prompt);
    agent.extra_args = Some(vec!["--verbose".into()]);
    let target = ProcessTarget::Agent(agent);
    let spec = ProcessSpec::of_target(&target);
    assert_eq!(spec.refused, None);
    assert_eq!(spec.stdin.as_deref(), Some(prompt));
    let Program::Exec { args, .. } = spec.program else {
        panic!("an agent is exec'd");
    };
    assert_eq!(args.last().map(String::as_str), Some("--verbose"));
    assert!(!args.iter().any(|a| a == prompt));
    let command = ProcessTarget::Command(CommandTarget::new("true"));
    assert_eq!(ProcessSpec::of_target(&command).stdin, None);
}

#[test]
fn a_prompt_file_is_read_when_the_spec_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.md");
    let mut agent = AgentTarget::new(AgentProvider::Cursor, "stored at create");
    agent.prompt_file = Some(path.to_str().unwrap().to_owned());
    let target = ProcessTarget::Agent(agent);
    let refused = ProcessSpec::of_target(&target).refused.unwrap();
    assert!(refused.starts_with("cannot read prompt file"), "{refused}");
    std::fs::write(&path, "  \n").unwrap();
    let refused = ProcessSpec::of_target(&target).refused.unwrap();
    assert!(refused.contains("is empty"), "{refused}");
    std::fs::write(&path, "from the file").unwrap();
    let spec = ProcessSpec::of_target(&target);
    assert_eq!(spec.refused, None);
    assert_eq!(spec.stdin.as_deref(), Some("from the file"));
    assert_eq!(spec.fallback, Some("cursor-agent"));
    let Program::Exec { program, args } = spec.program else {
        panic!("an agent is exec'd");
    };
    assert_eq!(
        (program.as_str(), &args[..]),
        (
            "agent",
            &["-p", "--trust", "--sandbox", "enabled"].map(String::from)[..]
        )
    );
}

#[test]
fn a_stored_target_that_breaks_the_option_rules_is_refused() {
    let refused = |set: &dyn Fn(&mut AgentTarget)| {
        let mut agent = AgentTarget::new(AgentProvider::Claude, "fix it");
        set(&mut agent);
        ProcessSpec::of_target(&ProcessTarget::Agent(agent)).refused
    };
    assert_eq!(
        refused(&|a| a.permission_mode = Some(PermissionMode::Bypass)).as_deref(),
        Some(
            "refused to run claude: claude.manualBreakGlass=true is required when permissionMode=bypass"
        )
    );
    let consented = |a: &mut AgentTarget| {
        a.permission_mode = Some(PermissionMode::Bypass);
        a.manual_break_glass = Some(true);
        a.allowlist = Some(AgentAllowlist {
            safety_reason: Some("a throwaway VM".into()),
            ..AgentAllowlist::default()
        });
    };
    assert_eq!(refused(&consented), None);
    // 0.3.1 accepted these; they keep running (rules 5 and 7 are create's).
    let mut opencode = AgentTarget::new(AgentProvider::Opencode, "fix it");
    opencode.agent = Some("build".into());
    assert_eq!(
        ProcessSpec::of_target(&ProcessTarget::Agent(opencode)).refused,
        None
    );
    let mut codex = AgentTarget::new(AgentProvider::Codex, "fix it");
    codex.agent = Some("reviewer".into());
    assert_eq!(
        ProcessSpec::of_target(&ProcessTarget::Agent(codex)).refused,
        None
    );
}

#[test]
fn an_agent_gets_its_env() {
    let mut agent = AgentTarget::new(AgentProvider::Claude, "fix it");
    agent.env = Some(std::collections::BTreeMap::from([(
        "K".to_owned(),
        "v".to_owned(),
    )]));
    let target = ProcessTarget::Agent(agent);
    let spec = ProcessSpec::of_target(&target);
    assert_eq!(
        spec.env.and_then(|e| e.get("K")).map(String::as_str),
        Some("v")
    );
}

#[test]
fn a_prompt_file_that_became_a_pipe_or_a_device_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.md");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let zero = dir.path().join("zero.md");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let big = dir.path().join("big.md");
    std::fs::write(&big, "x".repeat(PROMPT_FILE_MAX_BYTES as usize + 1)).unwrap();
    let cases = [
        (
            fifo,
            "is a named pipe (FIFO), not a regular file; restore the file",
        ),
        (
            zero,
            "is a character device, not a regular file; restore the file",
        ),
        (
            big,
            "is larger than 1 MiB, the most loops reads; shorten it",
        ),
    ];
    for (path, expected) in cases {
        let path = path.to_str().unwrap().to_owned();
        let (tx, rx) = std::sync::mpsc::channel();
        let given = path.clone();
        // A read that blocks or never ends fails the test at the
        // deadline instead of hanging it.
        std::thread::spawn(move || {
            let mut agent = AgentTarget::new(AgentProvider::Claude, "stored at create");
            agent.prompt_file = Some(given);
            let _ = tx.send(ProcessSpec::of_target(&ProcessTarget::Agent(agent)).refused);
        });
        let refused = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the prompt file is refused without blocking")
            .expect("refused");
        assert_eq!(
            refused,
            format!("prompt file {path} {expected}, or edit the loop to use --prompt")
        );
    }
}

#[test]
fn a_stored_option_value_that_reads_as_an_option_is_refused() {
    let refused = |f: &dyn Fn(&mut AgentTarget)| {
        let mut agent = AgentTarget::new(AgentProvider::Codex, "fix it");
        f(&mut agent);
        ProcessSpec::of_target(&ProcessTarget::Agent(agent)).refused
    };
    let error = refused(&|a| {
        a.model = Some("--dangerously-bypass-approvals-and-sandbox".into());
    })
    .unwrap();
    assert_eq!(
        error,
        "refused to run codex: the model begins with \"-\", which codex would read as an \
         option; edit the loop or workflow to give a model that starts with another character"
    );
    assert!(refused(&|a| a.agent = Some("-x".into())).is_some_and(|e| e.contains("the agent")));
    assert!(refused(&|a| a.cwd = Some("--help".into())).is_some_and(|e| e.contains("the cwd")));
    assert_eq!(refused(&|a| a.model = Some("gpt-5-codex".into())), None);
}

#[test]
fn shell_commands_join_args_unquoted() {
    let mut c = CommandTarget::new("printf");
    c.args = Some(vec!["'%s\\n'".into(), "a b".into()]);
    c.shell = Some(true);
    let target = ProcessTarget::Command(c);
    let spec = ProcessSpec::of_target(&target);
    assert_eq!(
        spec.program,
        Program::Shell {
            script: "printf '%s\\n' a b".into()
        }
    );
    assert_eq!(spec.command, "printf");
    assert_eq!(spec.account_tool(), None);
}

#[test]
fn agents_always_have_an_account_tool() {
    let mut a = AgentTarget::new(AgentProvider::Cursor, "p");
    let target = ProcessTarget::Agent(a.clone());
    assert_eq!(
        ProcessSpec::of_target(&target).account_tool().as_deref(),
        Some("cursor")
    );
    a.account = Some(Account {
        profile: "w".into(),
        tool: Some("claude".into()),
    });
    let target = ProcessTarget::Agent(a);
    assert_eq!(
        ProcessSpec::of_target(&target).account_tool().as_deref(),
        Some("claude")
    );
}
