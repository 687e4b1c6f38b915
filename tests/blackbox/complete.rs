//! Dynamic shell completion (issue 28): `loops` called the way each
//! shell's registration script calls it (`COMPLETE=<shell> loops -- <words>`,
//! as clap_complete's `env/shells.rs` defines the protocol), and through
//! the real bash, zsh and fish.
//!
//! A test that needs a shell that is not installed prints `skipped
//! complete::<test>: …` and passes, unless `CI` is set (CI installs them).

use std::path::PathBuf;
use std::process::Command;

use loops_tests::TestEnv;
use serde_json::json;

use crate::workflows::create_workflow;

/// bash's `$'\013'`, the separator its registration sets in `_CLAP_IFS`.
const BASH_IFS: &str = "\u{b}";

/// A data directory with two loops (labels `team:ops`, `nightly`, `web`),
/// one run, a workflow and one run of it. Returns the loops' ids, the run's
/// id, the workflow's id and its run's id.
struct Stored {
    env: TestEnv,
    backup_id: String,
    web_id: String,
    run_id: String,
    workflow_id: String,
    workflow_run_id: String,
}

fn stored() -> Stored {
    let env = TestEnv::new();
    let create = |name: &str, labels: &str| {
        let ran = env
            .loops([
                "--json", "create", "command", name, "--every", "1h", "--cmd", "true", "--label",
                labels,
            ])
            .run();
        ran.json()["id"].as_str().expect("an id").to_owned()
    };
    let backup_id = create("nightly-backup", "team:ops,nightly");
    let web_id = create("web-check", "web");
    let ran = env.loops(["--json", "run-now", "web-check"]).run();
    let run_id = ran.json()["id"].as_str().expect("a run id").to_owned();
    let workflow_id = create_workflow(
        &env,
        &json!({"name": "deploy-site", "steps": [{"id": "a",
            "target": {"type": "command", "command": "true"}}]}),
    );
    let ran = env
        .loops(["--json", "workflows", "run", "deploy-site"])
        .run();
    let workflow_run_id = ran.json()["workflowRun"]["id"]
        .as_str()
        .expect("a workflow run id")
        .to_owned();
    Stored {
        env,
        backup_id,
        web_id,
        run_id,
        workflow_id,
        workflow_run_id,
    }
}

/// The values `shell` gets for the command line `words` (the last one is
/// the word being completed), asking as the shell's registration does.
/// With an empty word clap offers the flags too: they are left out.
fn ask(env: &TestEnv, shell: &str, words: &[&str]) -> Vec<String> {
    let index = (words.len() - 1).to_string();
    let mut test = env.loops(["--"]).args(words).env("COMPLETE", Some(shell));
    match shell {
        // bash passes COMP_CWORD and its IFS; zsh `$CURRENT - 1` and a
        // newline; fish only the words (the last is the current one).
        "bash" => {
            test = test
                .env("_CLAP_COMPLETE_INDEX", Some(&index))
                .env("_CLAP_IFS", Some(BASH_IFS))
        }
        "zsh" => {
            test = test
                .env("_CLAP_COMPLETE_INDEX", Some(&index))
                .env("_CLAP_IFS", Some("\n"))
        }
        _ => {}
    }
    let ran = test.run();
    assert!(ran.stderr.is_empty(), "{shell} {words:?}: {}", ran.stderr);
    let out = ran.stdout;
    let items: Vec<&str> = match shell {
        "bash" => out.split(BASH_IFS).collect(),
        _ => out.lines().collect(),
    };
    items
        .into_iter()
        .filter(|s| !s.is_empty())
        .filter(|s| !s.starts_with('-') || words.last().is_some_and(|w| w.starts_with('-')))
        .map(|item| match shell {
            // zsh: `value:help`, a colon in the value escaped.
            "zsh" => unescape_zsh(item),
            // fish: `value<TAB>help`.
            "fish" => item.split('\t').next().unwrap_or_default().to_owned(),
            _ => item.to_owned(),
        })
        .collect()
}

/// The value of a zsh candidate `value:help`, with `\:` back to `:`.
fn unescape_zsh(item: &str) -> String {
    let mut value = String::new();
    let mut chars = item.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => value.extend(chars.next()),
            ':' => break,
            c => value.push(c),
        }
    }
    value
}

fn sorted(mut values: Vec<String>) -> Vec<String> {
    values.sort();
    values
}

#[test]
fn every_shell_gets_loops_runs_workflows_and_labels_from_the_store() {
    let s = stored();
    let env = &s.env;
    if env.on_postgres() {
        eprintln!("skipped complete::stored values: on PostgreSQL no stored value completes");
        return;
    }
    for shell in ["bash", "zsh", "fish"] {
        // Loop names and ids, for every command that takes a loop.
        for command in [
            &["pause"][..],
            &["show"],
            &["resume"],
            &["stop"],
            &["remove"],
            &["edit"],
            &["rename"],
            &["run-now"],
            &["next"],
            &["labels", "clear"],
            &["labels", "add"],
        ] {
            let mut words = vec!["loops"];
            words.extend_from_slice(command);
            words.push("");
            let got = ask(env, shell, &words);
            for want in ["nightly-backup", "web-check", &s.backup_id, &s.web_id] {
                assert!(got.iter().any(|g| g == want), "{shell} {words:?}: {got:?}");
            }
            assert!(!got.contains(&s.run_id), "{shell} {words:?}: {got:?}");
        }
        // The word typed narrows them, and flags stay flags.
        assert_eq!(
            ask(env, shell, &["loops", "pause", "nig"]),
            ["nightly-backup"],
            "{shell}"
        );
        assert_eq!(
            ask(env, shell, &["loops", "daemon", "logs", "--loop", "web"]),
            ["web-check"],
            "{shell}"
        );
        // Loops and run ids where either is taken.
        for command in ["logs", "runs", "cancel"] {
            let got = ask(env, shell, &["loops", command, ""]);
            for want in ["nightly-backup", &s.web_id, &s.run_id] {
                assert!(got.iter().any(|g| g == want), "{shell} {command}: {got:?}");
            }
        }
        let prefix = &s.run_id[..s.run_id.len() - 2];
        let got = ask(env, shell, &["loops", "logs", prefix]);
        assert!(got.contains(&s.run_id), "{shell}: {got:?}");
        // Workflow names and ids, and workflow run ids.
        for words in [
            &["loops", "workflows", "show", ""][..],
            &["loops", "workflows", "run", ""],
            &["loops", "workflows", "archive", ""],
            &[
                "loops",
                "create",
                "workflow",
                "w",
                "--every",
                "1h",
                "--workflow",
                "",
            ],
        ] {
            let got = ask(env, shell, words);
            assert!(got.iter().any(|g| g == "deploy-site"), "{shell}: {got:?}");
            assert!(got.contains(&s.workflow_id), "{shell}: {got:?}");
        }
        for words in [
            &["loops", "workflows", "inspect", ""][..],
            &["loops", "workflows", "cancel", ""],
        ] {
            let got = ask(env, shell, words);
            assert_eq!(got, std::slice::from_ref(&s.workflow_run_id), "{shell}");
        }
        // Labels: of the filters, of create and edit, of labels add, and
        // after a comma.
        for words in [
            &["loops", "list", "--label", ""][..],
            &["loops", "runs", "--label", ""],
            &["loops", "edit", "web-check", "--label", ""],
            &["loops", "labels", "remove", "web-check", ""],
        ] {
            assert_eq!(
                sorted(ask(env, shell, words)),
                ["nightly", "team:ops", "web"],
                "{shell} {words:?}"
            );
        }
        assert_eq!(
            ask(env, shell, &["loops", "list", "--label", "web,te"]),
            ["web,team:ops"],
            "{shell}"
        );
    }
}

#[test]
fn enumerated_values_are_the_ones_the_command_accepts() {
    let env = TestEnv::new();
    for shell in ["bash", "zsh", "fish"] {
        for (words, want) in [
            (
                &["loops", "list", "--status", ""][..],
                &["active", "paused", "stopped", "expired"][..],
            ),
            (
                &["loops", "runs", "--status", ""],
                &[
                    "running",
                    "succeeded",
                    "failed",
                    "timed_out",
                    "abandoned",
                    "skipped",
                    "cancelled",
                ],
            ),
            (
                &["loops", "create", "command", "x", "--catch-up", ""],
                &["none", "latest", "all"],
            ),
            (&["loops", "edit", "x", "--overlap", ""], &["skip", "allow"]),
            (
                &["loops", "create", "agent", "x", "--provider", ""],
                &[
                    "claude",
                    "cursor",
                    "codewith",
                    "aicopilot",
                    "opencode",
                    "codex",
                ],
            ),
            (
                &["loops", "edit", "x", "--permission-mode", ""],
                &["default", "plan", "auto", "bypass"],
            ),
            (
                &["loops", "create", "agent", "x", "--sandbox", ""],
                &[
                    "enabled",
                    "disabled",
                    "read-only",
                    "workspace-write",
                    "danger-full-access",
                ],
            ),
            (
                &["loops", "create", "agent", "x", "--worktree", ""],
                &["off", "auto", "required"],
            ),
            (
                &["loops", "create", "command", "x", "--backoff", ""],
                &["fixed", "exponential"],
            ),
            (
                &["loops", "workflows", "list", "--status", ""],
                &["active", "archived"],
            ),
            (
                &["loops", "cost", "--by", ""],
                &["loop", "provider", "day", "label"],
            ),
            (
                &["loops", "next", "--cron", "0 9 * * *", "--tz", "Asia/Kol"],
                &["Asia/Kolkata"],
            ),
            (&["loops", "list", "--status", "st"], &["stopped"]),
        ] {
            assert_eq!(ask(&env, shell, words), want, "{shell} {words:?}");
        }
    }
    // Completing created nothing.
    assert!(env.database_is_untouched());
    assert!(!env.data_dir().exists());
    // Each value is one the command takes: a run status filters.
    env.loops(["runs", "--status", "cancelled"]).run();
}

#[test]
fn a_missing_database_offers_no_values_and_is_not_created() {
    let env = TestEnv::new();
    for shell in ["bash", "zsh", "fish"] {
        assert!(
            ask(&env, shell, &["loops", "pause", "x"]).is_empty(),
            "{shell}"
        );
        assert!(
            ask(&env, shell, &["loops", "logs", ""]).is_empty(),
            "{shell}"
        );
        // Subcommands complete as ever.
        assert_eq!(ask(&env, shell, &["loops", "run-"]), ["run-now"], "{shell}");
    }
    assert!(!env.data_dir().exists());
    // Without COMPLETE, `--` is an ordinary argument.
    env.loops(["--", "loops"]).code(2).run();
    // COMPLETE=0 turns completion off.
    env.loops(["--version"])
        .env("COMPLETE", Some("0"))
        .stdout("0.3.1\n")
        .run();
}

/// The path of `shell`, or `None` after saying why the test skips; in CI a
/// missing shell fails the test.
fn shell(test: &str, name: &str) -> Option<PathBuf> {
    loops_tests::program_on_path(&format!("complete::{test}"), name)
}

/// Runs `script` with `shell` in `env`, with `loops` first on its PATH,
/// and returns its stdout's lines.
fn in_shell(env: &TestEnv, shell: &PathBuf, script: &str) -> Vec<String> {
    let bin = loops_tests::loops_bin();
    let dir = bin.parent().expect("the binary is in a directory");
    let base = env.cmd();
    let mut cmd = Command::new(shell);
    for (key, value) in base.get_envs() {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = cmd
        .env("PATH", path)
        .env_remove("COMPLETE")
        .args(["-c", script])
        .output()
        .expect("the shell runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script}\n{stderr}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completes_through_its_registration() {
    let Some(bash) = shell("bash_completes_through_its_registration", "bash") else {
        return;
    };
    let s = stored();
    // What bash does on Tab after `loops pause ni`: it finds the function
    // `complete -p loops` names, sets COMP_WORDS and COMP_CWORD, and calls
    // it with the command, the word and the word before.
    let script = r#"
source <(COMPLETE=bash loops)
complete -p loops
complete_line() {
    local fn
    fn=$(complete -p loops | sed 's/.*-F \([^ ]*\) .*/\1/')
    COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_TYPE=9
    COMPREPLY=()
    "$fn" loops "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf '%s\n' "${COMPREPLY[@]}"
}
complete_line loops pa
complete_line loops list --status p
complete_line loops pause nig
"#;
    let lines = in_shell(&s.env, &bash, script);
    assert!(
        lines[0].contains("-F _clap_complete_loops loops"),
        "{lines:?}"
    );
    let want = if s.env.on_postgres() {
        vec!["pause", "paused"]
    } else {
        vec!["pause", "paused", "nightly-backup"]
    };
    // An empty COMPREPLY prints one empty line.
    let got: Vec<&str> = lines[1..]
        .iter()
        .map(String::as_str)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(got, want, "{lines:?}");
}

#[test]
fn zsh_completes_through_its_registration() {
    let Some(zsh) = shell("zsh_completes_through_its_registration", "zsh") else {
        return;
    };
    let s = stored();
    // The registration's function, run with the `words` and `CURRENT` zsh
    // gives it; `_describe` (which needs a live prompt) prints what it was
    // given, and `compdef` records what was registered.
    let script = r#"
compdef() { print -r -- "compdef $*" }
_describe() { local name=${@[-1]}; print -rl -- ${(P)name} }
source <(COMPLETE=zsh loops)
words=(loops pa); CURRENT=2; _clap_dynamic_completer_loops
words=(loops list --status p); CURRENT=4; _clap_dynamic_completer_loops
words=(loops pause nig); CURRENT=3; _clap_dynamic_completer_loops
"#;
    let lines = in_shell(&s.env, &zsh, script);
    assert_eq!(lines[0], "compdef _clap_dynamic_completer_loops loops");
    let values: Vec<String> = lines[1..].iter().map(|l| unescape_zsh(l)).collect();
    let want = if s.env.on_postgres() {
        vec!["pause", "paused"]
    } else {
        vec!["pause", "paused", "nightly-backup"]
    };
    assert_eq!(values, want, "{lines:?}");
}

#[test]
fn fish_completes_through_its_registration() {
    let Some(fish) = shell("fish_completes_through_its_registration", "fish") else {
        return;
    };
    let s = stored();
    // `complete -C` is fish's own completion of a command line.
    let script = "COMPLETE=fish loops | source
complete -C 'loops pa'
complete -C 'loops list --status p'
complete -C 'loops pause nig'";
    let lines = in_shell(&s.env, &fish, script);
    let values: Vec<&str> = lines
        .iter()
        .map(|l| l.split('\t').next().unwrap_or_default())
        .collect();
    let want = if s.env.on_postgres() {
        vec!["pause", "paused"]
    } else {
        vec!["pause", "paused", "nightly-backup"]
    };
    assert_eq!(values, want, "{lines:?}");
}
