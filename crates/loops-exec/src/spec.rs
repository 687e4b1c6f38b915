//! From a target to what runs: the program, its argv, cwd, extra env,
//! timers and account (SPEC §5.1, §5.2).
//!
//! Agent argv is a pure function, [`agent_argv`], so every provider and
//! isolation mode is checked by table tests without spawning anything. The
//! prompt is always the last argv element and never passes through a shell.
//!
//! A prompt that begins with `-` would reach the agent as an option (for
//! claude, `--dangerously-skip-permissions` would be a flag). Validation
//! refuses such prompts; one stored before that (by the original, say) is
//! refused here too: the spec carries [`ProcessSpec::refused`], and the
//! executor reports it as a failed run without spawning anything. The same
//! holds for a `model`, `agent` or `cwd` that begins with `-` (issue 25):
//! each follows a flag in the argv, and the agent would read it as one.

use std::collections::BTreeMap;
use std::time::Duration;

use loops_core::{
    Account, AgentOption, AgentProvider, AgentTarget, ConfigIsolation, ProcessTarget, Timers,
    agent_value_reads_as_option, prompt_reads_as_option,
};

use crate::prompt_file::{Interrupted, PromptError, PromptRead, read_prompt_file};

/// What the child executes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Program {
    /// Exec'd directly: no shell, the arguments are passed as they are.
    Exec {
        /// The program as the target names it.
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// Run as `/bin/sh -c <script>`.
    Shell {
        /// The command text and its arguments, joined by spaces, unquoted
        /// (SPEC §5.7).
        script: String,
    },
}

/// The process a target describes (SPEC §5.1).
#[derive(Debug)]
pub(crate) struct ProcessSpec<'a> {
    /// What runs.
    pub(crate) program: Program,
    /// The target's `command` (or the provider binary): what preflight reports.
    pub(crate) command: &'a str,
    /// Working directory.
    pub(crate) cwd: Option<&'a str>,
    /// Extra environment (command targets only).
    pub(crate) env: Option<&'a BTreeMap<String, String>>,
    /// The run's wall clock and idle watchdog (issue 27).
    pub(crate) timers: Timers,
    /// The account to run under.
    pub(crate) account: Option<&'a Account>,
    /// The tool `accounts env` is asked for when the account names none:
    /// the provider's tool for agents, nothing for commands.
    pub(crate) tool_hint: Option<&'static str>,
    /// Why the target must not run at all: an agent prompt that the agent
    /// would read as an option. The run fails with this error before
    /// anything (even `accounts env`) is spawned.
    pub(crate) refused: Option<String>,
}

impl<'a> ProcessSpec<'a> {
    /// The spec of `target`, run with `timers`. An agent's prompt file is
    /// read now, as `read` says, within the wall clock, else the idle
    /// watchdog, else until a cancel (`prompt_file.rs`); a file that
    /// cannot be used makes the spec [`refused`](ProcessSpec::refused), a
    /// read that the timeout or a cancel ended is `Err`.
    pub(crate) fn of(
        target: &'a ProcessTarget,
        read: &PromptRead<'_>,
        timers: Timers,
    ) -> Result<ProcessSpec<'a>, Interrupted> {
        Ok(match target {
            ProcessTarget::Command(c) => {
                let program = if c.is_shell() {
                    let mut words = vec![c.command.as_str()];
                    words.extend(c.args().iter().map(String::as_str));
                    Program::Shell {
                        script: words.join(" "),
                    }
                } else {
                    Program::Exec {
                        program: c.command.clone(),
                        args: c.args().to_vec(),
                    }
                };
                ProcessSpec {
                    program,
                    command: &c.command,
                    cwd: non_empty(c.cwd.as_deref()),
                    env: c.env.as_ref(),
                    timers,
                    account: c.account.as_ref(),
                    tool_hint: None,
                    refused: None,
                }
            }
            ProcessTarget::Agent(a) => {
                // Issue 17: a prompt file is read now, at each run, so an
                // edit changes the next run; the stored `prompt` (the text
                // at create time) is never sent in its place.
                // Within the wall clock, else the idle watchdog (nothing is
                // printed meanwhile), else until a cancel.
                let timeout = timers
                    .wall_ms
                    .or(timers.idle_ms)
                    .map_or(Duration::MAX, Duration::from_millis);
                let (prompt, unreadable) = match &a.prompt_file {
                    None => (None, None),
                    Some(path) => match read_prompt_file(path, timeout, read) {
                        Ok(text) => (Some(text), None),
                        Err(PromptError::Unusable(error)) => (None, Some(error)),
                        Err(PromptError::Interrupted(why)) => return Err(why),
                    },
                };
                let (program, args) = match &prompt {
                    Some(text) => agent_argv(&AgentTarget {
                        prompt: text.clone(),
                        ..a.clone()
                    }),
                    None => agent_argv(a),
                };
                let sent = prompt.as_deref().unwrap_or(&a.prompt);
                let refused = unreadable
                    .or_else(|| prompt_reads_as_option(sent).then(|| refusal(program)))
                    .or_else(|| agent_value_reads_as_option(a).map(|o| value_refusal(program, o)));
                ProcessSpec {
                    program: Program::Exec {
                        program: program.to_owned(),
                        args,
                    },
                    command: program,
                    cwd: non_empty(a.cwd.as_deref()),
                    env: None,
                    timers,
                    account: a.account.as_ref(),
                    tool_hint: Some(a.provider.tool()),
                    refused,
                }
            }
        })
    }

    /// The account tool: the account's own, else the provider's. Always set
    /// for agents (SPEC §5.6), even without an account.
    pub(crate) fn account_tool(&self) -> Option<String> {
        self.account
            .and_then(|a| a.tool.clone())
            .or_else(|| self.tool_hint.map(str::to_owned))
    }
}

/// The error of a run whose agent prompt begins with `-`.
fn refusal(program: &str) -> String {
    format!(
        "refused to run {program}: the prompt begins with \"-\", which {program} would read as \
         an option; recreate the loop or workflow with a prompt that starts with another \
         character, for example \"Task: --fix\""
    )
}

/// The error of a run whose agent option value begins with `-` (issue 25),
/// stored before create refused such values.
fn value_refusal(program: &str, option: AgentOption) -> String {
    format!(
        "refused to run {program}: the {key} begins with \"-\", which {program} would read as \
         an option; edit the loop or workflow to give a {key} that starts with another character",
        key = option.key
    )
}

/// An empty cwd means "no cwd", as it does for the original's `spawn`.
fn non_empty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

/// The program and arguments an agent target runs (SPEC §5.2).
///
/// ```
/// use loops_core::{AgentProvider, AgentTarget};
/// let target = AgentTarget::new(AgentProvider::Cursor, "fix the build");
/// let (program, args) = loops_exec::agent_argv(&target);
/// assert_eq!(program, "cursor-agent");
/// assert_eq!(args, ["-p", "fix the build"]);
/// ```
pub fn agent_argv(target: &AgentTarget) -> (&'static str, Vec<String>) {
    let safe = target.config_isolation() == ConfigIsolation::Safe;
    let mut args: Vec<String> = Vec::new();
    let mut push = |words: &[&str]| args.extend(words.iter().map(|w| (*w).to_owned()));
    let cwd = non_empty(target.cwd.as_deref());
    // Where `--cd`/`--dir` go for the providers that take the cwd as a flag.
    let mut dir_flag = None;
    let mut takes_agent = true;
    match target.provider {
        AgentProvider::Claude => {
            if safe {
                push(&[
                    "--safe-mode",
                    "--setting-sources",
                    "local",
                    "--no-session-persistence",
                ]);
            }
            push(&["-p", "--output-format", "json"]);
        }
        AgentProvider::Cursor => push(&["-p"]),
        AgentProvider::Codewith => {
            // The approval flag is global to codewith, so it precedes `exec`.
            push(&[
                "--ask-for-approval",
                "never",
                "exec",
                "--json",
                "--ephemeral",
            ]);
            push(&["--sandbox", "workspace-write", "--skip-git-repo-check"]);
            if safe {
                push(&["--ignore-rules"]);
            }
            dir_flag = Some("--cd");
        }
        AgentProvider::Codex => {
            push(&[
                "exec",
                "--json",
                "--ephemeral",
                "--ask-for-approval",
                "never",
            ]);
            push(&["--sandbox", "workspace-write"]);
            if safe {
                push(&["--ignore-rules"]);
            }
            dir_flag = Some("--cd");
            takes_agent = false;
        }
        AgentProvider::Aicopilot | AgentProvider::Opencode => {
            push(&["run", "--format", "json"]);
            if safe {
                push(&["--pure"]);
            }
            dir_flag = Some("--dir");
        }
    }
    if let (Some(flag), Some(cwd)) = (dir_flag, cwd) {
        push(&[flag, cwd]);
    }
    if let Some(model) = &target.model {
        push(&["--model", model]);
    }
    if let (true, Some(agent)) = (takes_agent, &target.agent) {
        push(&["--agent", agent]);
    }
    args.extend(target.extra_args.iter().flatten().cloned());
    args.push(target.prompt.clone());
    (target.provider.binary(), args)
}

/// [`ProcessSpec::of`] for tests: the prompt file is read from disk, with
/// no cancel.
#[cfg(test)]
impl<'a> ProcessSpec<'a> {
    pub(crate) fn of_target(target: &'a ProcessTarget) -> ProcessSpec<'a> {
        let reader = crate::prompt_file::file_reader();
        let read = PromptRead {
            cancel: None,
            step: None,
            reader: &reader,
        };
        let timers = loops_core::effective_timers(target, None);
        ProcessSpec::of(target, &read, timers).expect("only a cancel or a hung read interrupts it")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::user_file::PROMPT_FILE_MAX_BYTES;
    use loops_core::CommandTarget;

    /// An agent target with every optional argv field set.
    fn full(provider: AgentProvider, isolation: ConfigIsolation) -> AgentTarget {
        let mut t = AgentTarget::new(provider, "do it");
        t.cwd = Some("/w".into());
        t.model = Some("m1".into());
        t.agent = Some("a1".into());
        t.extra_args = Some(vec!["--x".into(), "y".into()]);
        t.config_isolation = Some(isolation);
        t
    }

    fn check(target: &AgentTarget, program: &str, expected: &str) {
        let (p, args) = agent_argv(target);
        assert_eq!(p, program);
        assert_eq!(
            args.join(" "),
            expected,
            "{:?} {:?}",
            target.provider,
            target.config_isolation
        );
        assert_eq!(
            args.last().map(String::as_str),
            Some(target.prompt.as_str())
        );
    }

    #[test]
    fn every_provider_and_isolation_mode() {
        use AgentProvider::*;
        use ConfigIsolation::{None as Off, Safe};
        let table: &[(AgentProvider, ConfigIsolation, &str, &str)] = &[
            (
                Claude,
                Safe,
                "claude",
                "--safe-mode --setting-sources local --no-session-persistence -p --output-format json --model m1 --agent a1 --x y do it",
            ),
            (
                Claude,
                Off,
                "claude",
                "-p --output-format json --model m1 --agent a1 --x y do it",
            ),
            (
                Cursor,
                Safe,
                "cursor-agent",
                "-p --model m1 --agent a1 --x y do it",
            ),
            (
                Cursor,
                Off,
                "cursor-agent",
                "-p --model m1 --agent a1 --x y do it",
            ),
            (
                Codewith,
                Safe,
                "codewith",
                "--ask-for-approval never exec --json --ephemeral --sandbox workspace-write --skip-git-repo-check --ignore-rules --cd /w --model m1 --agent a1 --x y do it",
            ),
            (
                Codewith,
                Off,
                "codewith",
                "--ask-for-approval never exec --json --ephemeral --sandbox workspace-write --skip-git-repo-check --cd /w --model m1 --agent a1 --x y do it",
            ),
            (
                Codex,
                Safe,
                "codex",
                "exec --json --ephemeral --ask-for-approval never --sandbox workspace-write --ignore-rules --cd /w --model m1 --x y do it",
            ),
            (
                Codex,
                Off,
                "codex",
                "exec --json --ephemeral --ask-for-approval never --sandbox workspace-write --cd /w --model m1 --x y do it",
            ),
            (
                Opencode,
                Safe,
                "opencode",
                "run --format json --pure --dir /w --model m1 --agent a1 --x y do it",
            ),
            (
                Opencode,
                Off,
                "opencode",
                "run --format json --dir /w --model m1 --agent a1 --x y do it",
            ),
            (
                Aicopilot,
                Safe,
                "aicopilot",
                "run --format json --pure --dir /w --model m1 --agent a1 --x y do it",
            ),
            (
                Aicopilot,
                Off,
                "aicopilot",
                "run --format json --dir /w --model m1 --agent a1 --x y do it",
            ),
        ];
        for (provider, isolation, program, expected) in table {
            check(&full(*provider, *isolation), program, expected);
        }
    }

    #[test]
    fn minimal_targets_default_to_safe() {
        use AgentProvider::*;
        let table: &[(AgentProvider, &str)] = &[
            (
                Claude,
                "--safe-mode --setting-sources local --no-session-persistence -p --output-format json p",
            ),
            (Cursor, "-p p"),
            (
                Codewith,
                "--ask-for-approval never exec --json --ephemeral --sandbox workspace-write --skip-git-repo-check --ignore-rules p",
            ),
            (
                Codex,
                "exec --json --ephemeral --ask-for-approval never --sandbox workspace-write --ignore-rules p",
            ),
            (Opencode, "run --format json --pure p"),
            (Aicopilot, "run --format json --pure p"),
        ];
        for (provider, expected) in table {
            check(
                &AgentTarget::new(*provider, "p"),
                provider.binary(),
                expected,
            );
        }
    }

    #[test]
    fn the_prompt_is_one_final_element_even_when_it_looks_like_flags() {
        let mut t = AgentTarget::new(AgentProvider::Claude, "--model x; rm -rf / $(id)");
        t.extra_args = Some(vec!["--verbose".into()]);
        let (_, args) = agent_argv(&t);
        assert_eq!(args[args.len() - 2], "--verbose");
        assert_eq!(args[args.len() - 1], "--model x; rm -rf / $(id)");
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
        std::fs::write(&path, "-p").unwrap();
        let refused = ProcessSpec::of_target(&target).refused.unwrap();
        assert!(
            refused.starts_with("refused to run cursor-agent"),
            "{refused}"
        );
        std::fs::write(&path, "from the file").unwrap();
        let spec = ProcessSpec::of_target(&target);
        assert_eq!(spec.refused, None);
        let Program::Exec { args, .. } = spec.program else {
            panic!("an agent is exec'd");
        };
        assert_eq!(args, ["-p", "from the file"]);
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
    fn a_prompt_that_reads_as_an_option_is_refused() {
        let refused = |prompt: &str| {
            let target = ProcessTarget::Agent(AgentTarget::new(AgentProvider::Claude, prompt));
            ProcessSpec::of_target(&target).refused
        };
        let error = refused("--dangerously-skip-permissions").unwrap();
        assert!(
            error.starts_with("refused to run claude: the prompt begins with \"-\""),
            "{error}"
        );
        assert!(refused("-p").is_some());
        assert_eq!(refused(" --x"), None);
        assert_eq!(refused("fix -x"), None);
        let command = ProcessTarget::Command(CommandTarget::new("-x"));
        assert_eq!(ProcessSpec::of_target(&command).refused, None);
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
    fn codex_never_gets_an_agent_flag() {
        let t = full(AgentProvider::Codex, ConfigIsolation::Safe);
        assert!(!agent_argv(&t).1.iter().any(|a| a == "--agent" || a == "a1"));
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
}
