//! Secrets: inherited credentials never reach a target that runs under an
//! account profile, one run's account never leaks into another's, and no
//! surface prints run output, long prompts or environment values unless
//! `--show-output` asks for the output (SPEC §5.3, §5.4, §7.2; §9 item 26).
//!
//! A fake `accounts` on `PATH` answers `accounts env <profile> --tool
//! <tool>` with a profile directory and an API key of that profile; the
//! targets (commands, a fake `claude`, workflow steps) dump their whole
//! environment to a file. The runner is given every variable loops strips
//! for an account run (the provider keys, `GITHUB_TOKEN`, the tool homes,
//! `XDG_*`), set to values no run under an account may see. Loops under
//! different profiles run side by side in one `loops tick`, in one workflow
//! run with `maxParallel`, and under the daemon.
//!
//! Nor does any value `accounts env` exported (issue 12 §2): a run record,
//! `--json` output, the daemon log and `doctor` are grepped for them after
//! runs that print their account's keys, an account whose tool takes a
//! token for its profile directory, and a failing `accounts` that echoes
//! its key on stderr.
//!
//! For the read surfaces, unique markers are planted in run stdout and
//! stderr, in step output, in the tail of long prompts (past the 80
//! characters that are shown) and in `--env` values; every read command,
//! with and without `--json`, is then grepped for them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use loops_tests::TestEnv;
use serde_json::{Value, json};

use crate::support::{figure, pick, wait_for};

/// What loops removes from an account run's inherited environment
/// (`ACCOUNT_STRIPPED` in loops-exec's `credentials.rs`): the SPEC §5.3
/// list and, since issue 12, the documented auth variables of every
/// provider and the clouds they use.
const STRIPPED: [&str; 56] = [
    "CLAUDE_CONFIG_DIR",
    "CODEWITH_HOME",
    "CODEX_HOME",
    "CURSOR_CONFIG_DIR",
    "OPENCODE_CONFIG_DIR",
    "AICOPILOT_CONFIG_DIR",
    "GH_CONFIG_DIR",
    "CLOUDSDK_CONFIG",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_CUSTOM_HEADERS",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_GENAI_API_KEY",
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "CODEX_ACCESS_TOKEN",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_AD_TOKEN",
    "AZURE_API_KEY",
    "AZURE_CLIENT_ID",
    "AZURE_TENANT_ID",
    "AZURE_CLIENT_SECRET",
    "AZURE_CLIENT_CERTIFICATE_PATH",
    "AZURE_CLIENT_CERTIFICATE_PASSWORD",
    "AZURE_USERNAME",
    "AZURE_PASSWORD",
    "AZURE_FEDERATED_TOKEN_FILE",
    "OPENROUTER_API_KEY",
    "CURSOR_API_KEY",
    "CURSOR_AUTH_TOKEN",
    "COPILOT_GITHUB_TOKEN",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
];

/// The start of the `GH_TOKEN` the fake `accounts` exports for `--tool gh`
/// (the profile name follows).
const GH_TOKEN_PREFIX: &str = "ghp_7f3aExportedTokenOf";

/// A token the fake `accounts` prints on stderr when it fails.
const STDERR_TOKEN: &str = "ghp_7f3aStderrToken0123456789abcdef";

/// The inherited value of `name`: what an account run must never see.
fn inherited(name: &str) -> String {
    format!("inherited-secret-{name}")
}

/// A scratch environment with a fake `accounts`, a fake `claude` and a
/// directory the targets dump their environment into.
struct Setup {
    env: TestEnv,
    dumps: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let env = TestEnv::new();
        let dumps = env.home().join("dumps");
        let profiles = env.home().join("profiles");
        std::fs::create_dir_all(&dumps).expect("a dump dir");
        // `accounts env <profile> --tool <tool>`: the profile's directory
        // and key, and a variable only this profile has.
        env.write_script(
            "accounts",
            &format!(
                r##"[ "$1" = env ] && [ "$3" = --tool ] || {{ echo "usage: accounts env <profile> --tool <tool>" >&2; exit 2; }}
if [ "$4" = gh ]; then
  # A token first, and no GH_CONFIG_DIR: the original took the token for
  # the profile directory and printed it in the error.
  echo "export GH_TOKEN=\"{gh_token}$2\""
  echo "export GH_HOST=github.com"
  exit 0
fi
dir="{profiles}/$2"
mkdir -p "$dir"
echo "# profile $2 for $4"
echo "export CLAUDE_CONFIG_DIR=\"$dir\""
echo "export ANTHROPIC_API_KEY=\"key-of-$2\""
echo "export OPENAI_API_KEY=\"openai-of-$2\""
echo "export ONLY_$2=\"only-$2\""
if [ "$2" = broken ]; then
  echo "cannot refresh key-of-$2 ({stderr_token}) for $2" >&2
  exit 1
fi"##,
                gh_token = GH_TOKEN_PREFIX,
                stderr_token = STDERR_TOKEN,
                profiles = profiles.display()
            ),
        );
        // A provider CLI that dumps its environment, named by its loop or
        // step.
        env.write_script(
            "claude",
            &format!(
                r#"env > "{dumps}/${{LOOPS_WORKFLOW_STEP_ID:-$LOOPS_LOOP_NAME}}.env"; echo agent-ran"#,
                dumps = dumps.display()
            ),
        );
        Setup { env, dumps }
    }

    /// A shell command that dumps the environment to `<name>.env`.
    fn dump_cmd(&self, name: &str) -> String {
        format!("env > '{}/{name}.env'", self.dumps.display())
    }

    /// The `loops` command with every stripped variable inherited.
    fn cmd_with_secrets(&self) -> Command {
        let mut cmd = self.env.cmd();
        for name in STRIPPED {
            cmd.env(name, inherited(name));
        }
        cmd
    }

    /// Runs `loops <args>` with the inherited secrets: its exit code, and
    /// everything it printed (stdout, then stderr).
    fn printed(&self, args: &[&str]) -> (Option<i32>, String) {
        let out = self
            .cmd_with_secrets()
            .args(args)
            .output()
            .expect("loops runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    }

    /// Runs `loops <args>` with the inherited secrets; it must succeed.
    fn loops(&self, args: &[&str]) -> String {
        let out = self
            .cmd_with_secrets()
            .args(args)
            .output()
            .expect("loops runs");
        assert!(
            out.status.success(),
            "loops {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The environment `name` dumped.
    fn dumped(&self, name: &str) -> BTreeMap<String, String> {
        let path = self.dumps.join(format!("{name}.env"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{name} did not dump its environment to {path:?}: {e}"));
        text.lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

/// Checks what a run under `profile` (or none) saw; returns the number of
/// variables checked.
fn check_run(setup: &Setup, name: &str, profile: Option<&str>, others: &[&str]) -> usize {
    let env = setup.dumped(name);
    let text: String = env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    let mut checked = 0;
    match profile {
        Some(profile) => {
            for var in STRIPPED {
                checked += 1;
                assert!(
                    !text.contains(&inherited(var)),
                    "{name} (profile {profile}) saw the inherited {var}:\n{text}"
                );
            }
            let dir = setup.env.home().join("profiles").join(profile);
            for (var, value) in [
                ("ANTHROPIC_API_KEY", format!("key-of-{profile}")),
                ("OPENAI_API_KEY", format!("openai-of-{profile}")),
                ("CLAUDE_CONFIG_DIR", dir.display().to_string()),
                (&format!("ONLY_{profile}"), format!("only-{profile}")),
                ("LOOPS_ACCOUNT_PROFILE", profile.to_owned()),
            ] {
                checked += 1;
                assert_eq!(env.get(var), Some(&value), "{name}: {var}\n{text}");
            }
        }
        None => {
            // The control: without an account, the inherited values pass
            // (SPEC §5.3), so the harness would see a leak.
            for var in STRIPPED {
                checked += 1;
                assert_eq!(env.get(var), Some(&inherited(var)), "{name}: {var}");
            }
            assert!(!env.contains_key("LOOPS_ACCOUNT_PROFILE"), "{name}");
        }
    }
    for other in others {
        checked += 1;
        for leak in [
            format!("key-of-{other}"),
            format!("openai-of-{other}"),
            format!("only-{other}"),
            format!("profiles/{other}"),
        ] {
            assert!(
                !text.contains(&leak),
                "{name} (profile {profile:?}) saw {leak}, which belongs to profile {other}:\n{text}"
            );
        }
    }
    checked
}

/// Creates a loop due at once (`--at` in the past) with `extra` arguments.
fn due_loop(setup: &Setup, kind_and_name: &[&str], extra: &[&str]) {
    let mut args = vec!["create"];
    args.extend(kind_and_name);
    args.extend(["--at", "2000-01-01T00:00:00Z"]);
    args.extend(extra);
    setup.loops(&args);
}

#[test]
fn account_runs_see_only_their_own_profile() {
    let test = "secrets_accounts";
    let started = Instant::now();
    let setup = Setup::new();
    let profiles = ["alpha", "beta", "gamma"];
    let mut checked = 0;
    let mut runs = 0;
    // One tick, several loops side by side: commands under two profiles,
    // an agent whose tool comes from its provider, and a loop without an
    // account. Repeated in the long variant.
    for round in 0..pick(1, 5) {
        let name = |base: &str| format!("{base}-{round}");
        for (loop_name, profile) in [(name("cmd-alpha"), "alpha"), (name("cmd-beta"), "beta")] {
            let cmd = setup.dump_cmd(&loop_name);
            due_loop(
                &setup,
                &["command", &loop_name, "--cmd", &cmd],
                &["--account", profile, "--account-tool", "claude"],
            );
        }
        due_loop(
            &setup,
            &[
                "agent",
                &name("agent-gamma"),
                "--provider",
                "claude",
                "--prompt",
                "hello",
            ],
            &["--account", "gamma"],
        );
        let plain = name("plain");
        due_loop(
            &setup,
            &["command", &plain, "--cmd", &setup.dump_cmd(&plain)],
            &[],
        );
        let tick = setup.loops(&["--json", "tick", "--max-parallel", "4"]);
        let tick: Value = serde_json::from_str(&tick).expect("tick --json");
        let completed = tick["completed"].as_array().map_or(0, Vec::len);
        assert_eq!(completed, 4, "{tick}");
        runs += completed;
        checked += check_run(
            &setup,
            &name("cmd-alpha"),
            Some("alpha"),
            &["beta", "gamma"],
        );
        checked += check_run(&setup, &name("cmd-beta"), Some("beta"), &["alpha", "gamma"]);
        checked += check_run(
            &setup,
            &name("agent-gamma"),
            Some("gamma"),
            &["alpha", "beta"],
        );
        checked += check_run(&setup, &plain, None, &profiles);
    }

    // One workflow run whose steps run side by side under different
    // accounts.
    let workflow = json!({
        "name": "accounts",
        "maxParallel": 4,
        "steps": [
            {"id": "step-alpha", "account": {"profile": "alpha", "tool": "claude"},
             "target": {"type": "command", "command": setup.dump_cmd("step-alpha"), "shell": true}},
            {"id": "step-beta",
             "target": {"type": "command", "command": setup.dump_cmd("step-beta"), "shell": true,
                        "account": {"profile": "beta", "tool": "claude"}}},
            {"id": "step-gamma", "target": {"type": "agent", "provider": "claude", "prompt": "p",
                                             "account": {"profile": "gamma"}}},
            {"id": "step-plain", "target": {"type": "command", "command": setup.dump_cmd("step-plain"), "shell": true}},
        ],
    });
    let file = setup.env.home().join("accounts.json");
    std::fs::write(&file, workflow.to_string()).expect("a workflow file");
    setup.loops(&["workflows", "create", &file.display().to_string()]);
    setup.loops(&["workflows", "run", "accounts"]);
    runs += 4;
    checked += check_run(&setup, "step-alpha", Some("alpha"), &["beta", "gamma"]);
    checked += check_run(&setup, "step-beta", Some("beta"), &["alpha", "gamma"]);
    checked += check_run(&setup, "step-gamma", Some("gamma"), &["alpha", "beta"]);
    checked += check_run(&setup, "step-plain", None, &profiles);

    // The daemon, started with the secrets in its environment.
    let daemon = Daemon::start(&setup);
    for (loop_name, profile) in [
        ("daemon-alpha", Some("alpha")),
        ("daemon-beta", Some("beta")),
        ("daemon-plain", None),
    ] {
        let cmd = setup.dump_cmd(loop_name);
        let mut extra = vec![];
        if let Some(p) = profile {
            extra = vec!["--account", p, "--account-tool", "claude"];
        }
        due_loop(&setup, &["command", loop_name, "--cmd", &cmd], &extra);
    }
    let all_dumped = wait_for(Duration::from_secs(15), || {
        ["daemon-alpha", "daemon-beta", "daemon-plain"]
            .iter()
            .all(|n| {
                let path = setup.dumps.join(format!("{n}.env"));
                std::fs::read_to_string(path).is_ok_and(|t| t.contains("LOOPS_RUN_ID="))
            })
            .then_some(())
    });
    drop(daemon);
    assert!(
        all_dumped.is_some(),
        "the daemon did not run the three loops"
    );
    runs += 3;
    checked += check_run(&setup, "daemon-alpha", Some("alpha"), &["beta", "gamma"]);
    checked += check_run(&setup, "daemon-beta", Some("beta"), &["alpha", "gamma"]);
    checked += check_run(&setup, "daemon-plain", None, &profiles);
    figure(
        test,
        &format!(
            "{runs} runs (tick, workflow steps, daemon) under 3 profiles and none: {checked} variables checked, 0 leaks, \
             in {:.1}s",
            started.elapsed().as_secs_f64()
        ),
    );
}

/// A background daemon, stopped when dropped.
struct Daemon<'a> {
    setup: &'a Setup,
}

impl<'a> Daemon<'a> {
    fn start(setup: &'a Setup) -> Daemon<'a> {
        let out = setup.loops(&["daemon", "start"]);
        assert!(out.starts_with("started pid="), "{out}");
        Daemon { setup }
    }
}

impl Drop for Daemon<'_> {
    fn drop(&mut self) {
        let pid_file = self.setup.env.data_dir().join("daemon.pid");
        let pid = std::fs::read_to_string(&pid_file).unwrap_or_default();
        let _ = self
            .setup
            .env
            .cmd()
            .args(["daemon", "stop", "--grace", "0"])
            .output();
        let pid = pid.lines().next().unwrap_or_default().trim();
        if !pid.is_empty() && Path::new(&format!("/proc/{pid}")).exists() {
            let stopped = wait_for(Duration::from_secs(5), || {
                (!Path::new(&format!("/proc/{pid}")).exists()).then_some(())
            });
            if stopped.is_none() {
                let _ = Command::new("kill").args(["-9", pid]).status();
            }
        }
    }
}

/// The markers planted in what must stay hidden.
struct Markers {
    stdout: &'static str,
    stderr: &'static str,
    step_stdout: &'static str,
    prompt_tail: &'static str,
    step_prompt_tail: &'static str,
    env_value: &'static str,
}

const MARKERS: Markers = Markers {
    stdout: "mk-run-stdout-7f3a",
    stderr: "mk-run-stderr-7f3a",
    step_stdout: "mk-step-stdout-7f3a",
    prompt_tail: "mk-prompt-tail-7f3a",
    step_prompt_tail: "mk-step-prompt-tail-7f3a",
    env_value: "mk-env-value-7f3a",
};

impl Markers {
    /// The output markers: shown by `--show-output`.
    fn output(&self) -> [&'static str; 3] {
        [self.stdout, self.stderr, self.step_stdout]
    }

    /// Never shown: prompt tails and environment values.
    fn never(&self) -> [&'static str; 3] {
        [self.prompt_tail, self.step_prompt_tail, self.env_value]
    }
}

/// A shell command that prints `marker` without containing it.
fn print(marker: &str) -> String {
    let (head, tail) = marker.split_at(marker.len() / 2);
    format!("printf '%s%s' '{head}' '{tail}'")
}

/// A prompt whose first 80 characters are shown and whose tail holds
/// `marker`.
fn long_prompt(marker: &str) -> String {
    format!(
        "{} {marker} and more",
        "Review the repository carefully. ".repeat(3)
    )
}

#[test]
fn no_surface_prints_output_prompts_or_env_values_unless_asked() {
    let test = "secrets_surfaces";
    let started = Instant::now();
    let setup = Setup::new();
    let env = &setup.env;
    let m = &MARKERS;
    // A command loop that prints both markers and carries a secret `--env`,
    // and an agent loop with a long prompt.
    // The commands print the markers without containing them, since a
    // command's text is shown by design.
    let chatty = format!("{}; {} >&2", print(m.stdout), print(m.stderr));
    let chatty_id = env.create_command(
        "chatty",
        &chatty,
        &["--every", "1h", "--env", &format!("TOKEN={}", m.env_value)],
    );
    setup.loops(&[
        "create",
        "agent",
        "agent",
        "--provider",
        "claude",
        "--prompt",
        &long_prompt(m.prompt_tail),
        "--every",
        "1h",
    ]);
    setup.loops(&["run-now", "chatty"]);
    setup.loops(&["run-now", "agent"]);
    // A workflow with step output, a secret step env and a long step prompt,
    // run once directly and once as a loop.
    let workflow = json!({
        "name": "wf",
        "steps": [
            {"id": "say", "target": {"type": "command", "command": print(m.step_stdout), "shell": true,
                                      "env": {"STEP_TOKEN": m.env_value}}},
            {"id": "think", "target": {"type": "agent", "provider": "claude", "prompt": long_prompt(m.step_prompt_tail)}},
        ],
    });
    let file = env.home().join("wf.json");
    std::fs::write(&file, workflow.to_string()).expect("a workflow file");
    let file = file.display().to_string();
    setup.loops(&["workflows", "create", &file]);
    let ran: Value =
        serde_json::from_str(&setup.loops(&["--json", "workflows", "run", "wf"])).expect("JSON");
    let run_id = ran["workflowRun"]["id"]
        .as_str()
        .expect("a workflow run id")
        .to_owned();
    setup.loops(&[
        "create",
        "workflow",
        "wf-loop",
        "--workflow",
        "wf",
        "--at",
        "2000-01-01T00:00:00Z",
    ]);
    setup.loops(&["tick"]);
    // The daemon's log sees runs too.
    let daemon = Daemon::start(&setup);
    due_loop(&setup, &["command", "chatty-daemon", "--cmd", &chatty], &[]);
    let logged = wait_for(Duration::from_secs(15), || {
        let runs = setup.loops(&["--json", "runs", "chatty-daemon"]);
        runs.contains("succeeded").then_some(())
    });
    assert!(logged.is_some(), "the daemon did not run chatty-daemon");

    // Every read surface, and the commands that print what they wrote.
    let surfaces: Vec<Vec<String>> = [
        vec!["list"],
        vec!["list", "--status", "active"],
        vec!["show", "chatty"],
        vec!["show", "agent"],
        vec!["show", "wf-loop"],
        vec!["runs"],
        vec!["runs", "chatty"],
        vec!["runs", "--status", "succeeded"],
        vec!["runs", "--limit", "1"],
        vec!["workflows", "list"],
        vec!["workflows", "list", "--status", "active"],
        vec!["workflows", "show", "wf"],
        vec!["workflows", "runs"],
        vec!["workflows", "runs", "wf"],
        vec!["workflows", "inspect", &run_id],
        vec!["workflows", "events", &run_id],
        vec!["workflows", "validate", &file],
        vec!["daemon", "status"],
        vec!["daemon", "logs", "-n", "0"],
        vec!["doctor"],
        vec!["run-now", "chatty"],
        vec!["workflows", "run", "wf"],
        vec![
            "create",
            "agent",
            "again",
            "--provider",
            "claude",
            "--prompt",
            &long_prompt(m.prompt_tail),
            "--every",
            "1h",
        ],
        vec![
            "create",
            "command",
            "again-cmd",
            "--cmd",
            "true",
            "--env",
            &format!("TOKEN={}", m.env_value),
            "--every",
            "1h",
        ],
        vec!["pause", "agent"],
        vec!["resume", "agent"],
        vec!["workflows", "create", &file, "--name", "wf-copy"],
        vec!["workflows", "archive", "wf-copy"],
        vec!["stop", "chatty"],
        vec!["resume", "chatty"],
    ]
    .into_iter()
    .map(|args| args.into_iter().map(str::to_owned).collect())
    .collect();
    let mut leaks = Vec::new();
    let mut invocations = 0;
    for args in &surfaces {
        for json in [false, true] {
            let mut full: Vec<&str> = args.iter().map(String::as_str).collect();
            if json {
                full.insert(0, "--json");
            }
            // Names must stay unique for the second pass of the creates.
            let renamed: Vec<String>;
            if json
                && (full.contains(&"create") && !full.contains(&"workflows")
                    || full.contains(&"wf-copy"))
            {
                renamed = full
                    .iter()
                    .map(|a| match *a {
                        "again" => "again-json".to_owned(),
                        "again-cmd" => "again-cmd-json".to_owned(),
                        "wf-copy" => "wf-copy-json".to_owned(),
                        other => other.to_owned(),
                    })
                    .collect();
                full = renamed.iter().map(String::as_str).collect();
            }
            let (code, text) = setup.printed(&full);
            invocations += 1;
            assert!(
                matches!(code, Some(0 | 1)) && !text.contains("panicked"),
                "loops {full:?} exited {code:?}:\n{text}"
            );
            for marker in m.output().iter().chain(&m.never()) {
                if text.contains(marker) {
                    leaks.push(format!("loops {} printed {marker}", full.join(" ")));
                }
            }
        }
    }

    // `--show-output` shows the output where it is documented, and still
    // never a prompt's tail or an env value.
    let shown: &[(&[&str], &[&str])] = &[
        (&["runs", "--show-output"], &[m.stdout, m.stderr]),
        (&["runs", "chatty", "--show-output"], &[m.stdout, m.stderr]),
        (
            &["run-now", "chatty", "--show-output"],
            &[m.stdout, m.stderr],
        ),
        (
            &["workflows", "inspect", &run_id, "--show-output"],
            &[m.step_stdout],
        ),
        (
            &["workflows", "run", "wf", "--show-output"],
            &[m.step_stdout],
        ),
        // A workflow loop's run records the workflow's summary as output.
        (&["runs", "wf-loop", "--show-output"], &[m.step_stdout]),
    ];
    let mut shown_count = 0;
    for (args, expected) in shown {
        for json in [false, true] {
            let mut full: Vec<&str> = args.to_vec();
            if json {
                full.insert(0, "--json");
            }
            let (_, text) = setup.printed(&full);
            invocations += 1;
            for marker in *expected {
                assert!(
                    text.contains(marker),
                    "loops {full:?} does not show {marker}:\n{text}"
                );
                shown_count += 1;
            }
            for marker in m.never() {
                if text.contains(marker) {
                    leaks.push(format!("loops {} printed {marker}", full.join(" ")));
                }
            }
        }
    }
    drop(daemon);
    // A tick, human and JSON, with and without `--show-output`.
    for (n, (args, show)) in [
        (&["tick"][..], false),
        (&["--json", "tick"], false),
        (&["tick", "--show-output"], true),
        (&["--json", "tick", "--show-output"], true),
    ]
    .into_iter()
    .enumerate()
    {
        due_loop(
            &setup,
            &["command", &format!("tick-{n}"), "--cmd", &chatty],
            &[],
        );
        let (_, text) = setup.printed(args);
        invocations += 1;
        assert!(
            text.contains("completed=1") || text.contains(&format!("tick-{n}")),
            "loops {args:?} ran nothing:\n{text}"
        );
        assert_eq!(text.contains(m.stdout), show, "loops {args:?}:\n{text}");
        if show {
            shown_count += 1;
        }
    }
    let log = std::fs::read_to_string(env.data_dir().join("daemon.log")).unwrap_or_default();
    for marker in m.output().iter().chain(&m.never()) {
        if log.contains(marker) {
            leaks.push(format!("daemon.log holds {marker}"));
        }
    }
    let _ = chatty_id;
    figure(
        test,
        &format!(
            "{invocations} invocations over {} surfaces (human and --json), 6 markers: {} leaks; --show-output showed \
             {shown_count} expected markers; in {:.1}s",
            surfaces.len() + shown.len() + 2,
            leaks.len(),
            started.elapsed().as_secs_f64()
        ),
    );
    assert!(
        leaks.is_empty(),
        "secrets leaked:\n- {}",
        leaks.join("\n- ")
    );
}

/// What a run under `profile` must never show: what `accounts env`
/// exported for it.
fn exported(profile: &str) -> Vec<String> {
    vec![
        format!("key-of-{profile}"),
        format!("openai-of-{profile}"),
        format!("only-{profile}"),
        format!("profiles/{profile}"),
        format!("{GH_TOKEN_PREFIX}{profile}"),
    ]
}

#[test]
fn no_surface_shows_a_value_accounts_env_exported() {
    let test = "secrets_exported";
    let started = Instant::now();
    let setup = Setup::new();
    let env_value = "mk-env-secret-7f3a-value";
    // Prints its account's variables and its own `env` value to both
    // streams, then fails.
    let leaky = r#"for fd in 1 2; do echo "key=$ANTHROPIC_API_KEY openai=$OPENAI_API_KEY only=$ONLY_alpha dir=$CLAUDE_CONFIG_DIR env=$TOKEN" >&$fd; done; exit 1"#;
    let token_env = format!("TOKEN={env_value}");
    let leaky_args = [
        "--env",
        token_env.as_str(),
        "--account",
        "alpha",
        "--account-tool",
        "claude",
    ];
    let gh_args = ["--account", "alpha", "--account-tool", "gh"];
    let broken_args = ["--account", "broken", "--account-tool", "claude"];
    let kinds: [(&str, &str, &[&str]); 3] = [
        ("leaky", leaky, &leaky_args),
        ("gh", "true", &gh_args),
        ("broken", "true", &broken_args),
    ];
    let mut printed = Vec::new();
    // Active loops (doctor preflights them), run with `run-now`.
    for (name, cmd, args) in kinds {
        let mut all = vec!["create", "command", name, "--cmd", cmd, "--every", "1h"];
        all.extend(args);
        setup.loops(&all);
        for json in [false, true] {
            let mut run = vec!["run-now", name, "--show-output"];
            if json {
                run.insert(0, "--json");
            }
            printed.push((run.join(" "), setup.printed(&run).1));
        }
    }
    // Due loops, run by a tick that shows its output.
    for (name, cmd, args) in kinds {
        let due = format!("{name}-tick");
        due_loop(&setup, &["command", &due, "--cmd", cmd], args);
    }
    for args in [
        &["--json", "tick", "--show-output"][..],
        &["tick", "--show-output"],
    ] {
        printed.push((args.join(" "), setup.printed(args).1));
    }
    // And the daemon, whose log names every run and its error.
    let daemon = Daemon::start(&setup);
    for (name, cmd, args) in kinds {
        let due = format!("{name}-daemon");
        due_loop(&setup, &["command", &due, "--cmd", cmd], args);
    }
    let ran = wait_for(Duration::from_secs(15), || {
        ["leaky-daemon", "gh-daemon", "broken-daemon"]
            .iter()
            .all(|n| setup.loops(&["--json", "runs", n]).contains("failed"))
            .then_some(())
    });
    assert!(ran.is_some(), "the daemon did not run the three loops");
    drop(daemon);

    let surfaces: &[&[&str]] = &[
        &["runs", "--show-output"],
        &["runs", "leaky", "--show-output"],
        &["runs", "gh", "--show-output"],
        &["runs", "broken", "--show-output"],
        &["runs", "--status", "failed", "--show-output"],
        &["show", "leaky"],
        &["list"],
        &["doctor"],
        &["daemon", "logs", "-n", "0"],
        &["daemon", "status"],
    ];
    for args in surfaces {
        for json in [false, true] {
            let mut full = args.to_vec();
            if json {
                full.insert(0, "--json");
            }
            printed.push((full.join(" "), setup.printed(&full).1));
        }
    }
    let log = std::fs::read_to_string(setup.env.data_dir().join("daemon.log")).unwrap_or_default();
    printed.push(("daemon.log".to_owned(), log));

    // What must never appear, and what shows the surfaces were not empty.
    let mut never = exported("alpha");
    never.extend(exported("broken"));
    never.extend([env_value.to_owned(), STDERR_TOKEN.to_owned()]);
    let mut leaks = Vec::new();
    for (surface, text) in &printed {
        for value in &never {
            if text.contains(value.as_str()) {
                leaks.push(format!("{surface} shows {value}"));
            }
        }
    }
    figure(
        test,
        &format!(
            "{} surfaces (run-now, tick, runs, show, doctor, daemon log; human and --json) checked for {} \
             exported values: {} leaks, in {:.1}s",
            printed.len(),
            never.len(),
            leaks.len(),
            started.elapsed().as_secs_f64()
        ),
    );
    assert!(
        leaks.is_empty(),
        "exported values leaked:\n- {}",
        leaks.join("\n- ")
    );
    let shown = |surface: &str, expected: &str| {
        let (_, text) = printed
            .iter()
            .find(|(s, _)| s == surface)
            .unwrap_or_else(|| panic!("no surface {surface}"));
        assert!(
            text.contains(expected),
            "{surface} does not show {expected:?}:\n{text}"
        );
    };
    // The output is shown, masked; the errors name the variable and keep
    // the scrubbed stderr.
    shown(
        "runs leaky --show-output",
        "key=[redacted] openai=[redacted] only=[redacted] dir=[redacted] env=[redacted]",
    );
    shown(
        "--json runs gh --show-output",
        "accounts env returned no profile directory for alpha/gh: expected GH_CONFIG_DIR in its exports",
    );
    shown(
        "--json runs broken --show-output",
        "accounts env failed for broken/claude: cannot refresh [redacted] ([redacted]) for broken",
    );
    shown("doctor", "expected GH_CONFIG_DIR in its exports");
    shown(
        "--json doctor",
        "cannot refresh [redacted] ([redacted]) for broken",
    );
    shown("daemon.log", "gh-daemon");
    shown("daemon.log", "expected GH_CONFIG_DIR");
}
