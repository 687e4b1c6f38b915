//! The human surface of issue 16: local and relative times frozen with
//! `LOOPS_DISPLAY_NOW` and `TZ`, schedules in words, the last run, colour
//! only where anstream's rules allow it, empty states and hints on stderr,
//! `-q`, and `runs <run-id>`.

use loops_tests::store_testing::lit;
use loops_tests::{Test, TestEnv, loops_bin, snapshot_settings};

/// `loops <args>` with "now" frozen and Berlin's local time.
fn at_now<const N: usize>(env: &TestEnv, args: [&str; N]) -> Test {
    env.loops(args).frozen()
}

/// Three loops and two runs, their instants rewritten to fixed ones:
/// `backup` succeeded 2h ago and is overdue by 5m, `report` failed with
/// exit 2 3m ago and runs at 09:00 on weekdays, `later` runs once
/// tomorrow and is paused.
fn history(env: &TestEnv) {
    env.create_command("backup", "true", &["--every", "1h"]);
    env.create_command(
        "report",
        "printf 'partial\\n'; printf 'disk full\\nmore\\n' >&2; exit 2",
        &["--cron", "0 9 * * MON-FRI", "--tz", "Europe/Berlin"],
    );
    let later = env.create_command("later", "true", &["--at", "2026-01-06T08:00:00Z"]);
    env.loops(["pause", &later]).run();
    env.loops(["run-now", "backup"]).run();
    env.loops(["run-now", "report"]).code(1).run();
    env.set_run_times(
        "backup",
        "2026-01-05T09:59:58.000Z",
        "2026-01-05T10:00:00.000Z",
        1500,
    );
    env.set_run_times(
        "report",
        "2026-01-05T11:56:50.000Z",
        "2026-01-05T11:57:00.000Z",
        10_250,
    );
    let raw = env.raw();
    for (name, next) in [
        ("backup", "2026-01-05T11:55:00.000Z"),
        ("report", "2026-01-06T08:00:00.000Z"),
    ] {
        raw.exec(&format!(
            "UPDATE loops SET next_run_at = {} WHERE name = {}",
            lit(next),
            lit(name)
        ));
    }
}

fn run_id(env: &TestEnv, name: &str) -> String {
    let runs = env.loops(["--json", "runs", name]).run().json();
    runs[0]["id"].as_str().expect("a run id").to_owned()
}

#[test]
fn list_shows_schedules_in_words_next_runs_and_last_results() {
    let env = TestEnv::new();
    history(&env);
    let ran = at_now(&env, ["list"]).run();
    let _guard = snapshot_settings().bind_to_scope();
    insta::assert_snapshot!("list_frozen", ran.stdout);
    // The overdue loop is marked; JSON keeps the SPEC's UTC instants.
    assert!(ran.stdout.contains("overdue 5m (12:55)"), "{}", ran.stdout);
    let json = at_now(&env, ["--json", "list"]).run().json();
    let backup = json
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "backup")
        .unwrap();
    assert_eq!(backup["nextRunAt"], "2026-01-05T11:55:00.000Z");
}

#[test]
fn runs_show_exit_codes_durations_times_and_first_error_lines() {
    let env = TestEnv::new();
    history(&env);
    let ran = at_now(&env, ["runs"]).run();
    let _guard = snapshot_settings().bind_to_scope();
    insta::assert_snapshot!("runs_frozen", ran.stdout);
    assert_eq!(ran.stderr, "");
}

#[test]
fn a_run_id_prints_that_run() {
    let env = TestEnv::new();
    history(&env);
    let id = run_id(&env, "report");
    let ran = at_now(&env, ["runs", id.as_str()]).run();
    let _guard = snapshot_settings().bind_to_scope();
    insta::assert_snapshot!("run_by_id", ran.stdout);
    let shown = at_now(&env, ["runs", id.as_str(), "--show-output"]).run();
    insta::assert_snapshot!("run_by_id_show_output", shown.stdout);
    // JSON: the array `runs` prints, with this one run.
    let json = env.loops(["--json", "runs", &id]).run().json();
    assert_eq!(json.as_array().map(Vec::len), Some(1));
    assert_eq!(json[0]["id"], id.as_str());
    assert_eq!(json[0]["stderr"], "[redacted 15 chars]");
    assert_eq!(
        json,
        env.loops(["--json", "runs", "report"]).run().json(),
        "the same shape as a loop's runs"
    );
    // Neither a loop nor a run: the error is the loop lookup's.
    env.loops(["runs", "0123456789ab"])
        .code(1)
        .stderr_has("error: loop not found: 0123456789ab")
        .run();
}

#[test]
fn daemon_status_prints_local_and_relative_times() {
    let env = TestEnv::new();
    history(&env);
    let ran = at_now(&env, ["daemon", "status"]).run();
    let mut settings = snapshot_settings();
    settings.add_filter(r"(?m)^log: .*$", "log: [path]");
    // What only a shared PostgreSQL database adds.
    settings.add_filter(r"(?m)^(database|this host's clock|daemons|  gone).*\n", "");
    let _guard = settings.bind_to_scope();
    insta::assert_snapshot!("daemon_status_frozen", ran.stdout);
}

#[test]
fn runs_say_on_stderr_when_the_limit_cut_the_listing() {
    let env = TestEnv::new();
    history(&env);
    let ran = env.loops(["runs", "--limit", "1"]).run();
    assert_eq!(ran.stdout.lines().count(), 2, "{}", ran.stdout);
    assert_eq!(
        ran.stderr,
        "showing the newest 1 run; raise --limit to see more\n"
    );
    let ran = env.loops(["runs", "--limit", "2"]).run();
    assert_eq!(ran.stdout.lines().count(), 3, "{}", ran.stdout);
    assert_eq!(ran.stderr, "");
    let json = env.loops(["--json", "runs", "--limit", "1"]).run();
    assert_eq!(json.stderr, "");
    assert_eq!(json.json().as_array().map(Vec::len), Some(1));
}

#[test]
fn empty_states_go_to_stderr_with_an_empty_stdout() {
    let env = TestEnv::new();
    let ran = env.loops(["list"]).stdout("").run();
    assert_eq!(ran.stderr, "no loops yet — loops create --help\n");
    let ran = env.loops(["runs"]).stdout("").run();
    assert_eq!(ran.stderr, "no runs yet\n");
    let ran = env.loops(["list", "--status", "paused"]).stdout("").run();
    assert_eq!(ran.stderr, "no paused loops\n");
    // JSON is unchanged: an empty array, and nothing on stderr.
    let ran = env.loops(["--json", "list"]).stdout("[]\n").run();
    assert_eq!(ran.stderr, "");
    let ran = env.loops(["--json", "runs"]).stdout("[]\n").run();
    assert_eq!(ran.stderr, "");
}

const HINT: &str = "hint: no daemon is running";

#[test]
fn create_resume_and_list_hint_at_starting_a_daemon() {
    let env = TestEnv::new();
    let ran = env
        .loops(["create", "command", "a", "--cmd", "true", "--every", "1h"])
        .run();
    assert!(ran.stderr.starts_with(HINT), "{}", ran.stderr);
    assert!(ran.stderr.contains("loops daemon start"), "{}", ran.stderr);
    assert!(
        ran.stderr.contains("loops daemon install"),
        "{}",
        ran.stderr
    );
    assert_eq!(ran.stderr.lines().count(), 1, "one hint: {}", ran.stderr);
    assert!(env.loops(["list"]).run().stderr.starts_with(HINT));
    env.loops(["pause", "a"]).run();
    assert!(env.loops(["resume", "a"]).run().stderr.starts_with(HINT));
    // Not with --json, nor -q.
    for args in [
        vec!["--json", "list"],
        vec!["-q", "list"],
        vec!["--json", "resume", "a"],
    ] {
        let ran = env.loops(&args).run();
        assert_eq!(ran.stderr, "", "{args:?}");
    }
    let ran = env
        .loops([
            "--json", "create", "command", "b", "--cmd", "true", "--every", "1h",
        ])
        .run();
    assert_eq!(ran.stderr, "");
}

#[test]
fn no_hint_when_a_daemon_runs_or_a_service_is_installed() {
    let env = TestEnv::new();
    env.create_command("a", "true", &["--every", "1h"]);
    let pid = env.start_daemon(&[]);
    let ran = env.loops(["list"]).run();
    env.stop_daemon(pid);
    assert_eq!(ran.stderr, "", "a running daemon");
    assert!(env.loops(["list"]).run().stderr.starts_with(HINT));

    let unit = env.systemd_unit_path();
    std::fs::create_dir_all(unit.parent().unwrap()).unwrap();
    std::fs::write(&unit, "[Unit]\n").unwrap();
    assert_eq!(env.loops(["list"]).run().stderr, "", "an installed service");
}

#[test]
fn quiet_prints_nothing_on_success_and_still_reports_errors() {
    let env = TestEnv::new();
    let ran = env
        .loops([
            "-q",
            "create",
            "command",
            "a",
            "--cmd",
            "true",
            "--at",
            "2001-01-01T00:00:00Z",
        ])
        .stdout("")
        .run();
    assert_eq!(ran.stderr, "", "no hint and no warning");
    env.loops(["-q", "list"]).stdout("").run();
    env.loops(["list", "--quiet"]).stdout("").run();
    env.loops(["-q", "run-now", "a"]).stdout("").run();
    env.loops(["-q", "--json", "runs"]).stdout("").run();
    // Errors still say what was wrong, with the same exit code.
    env.loops(["-q", "pause", "missing"])
        .code(1)
        .stdout("")
        .stderr_has("error: loop not found: missing")
        .run();
}

/// `loops <args>` on a pseudo-terminal through script(1); its output
/// with the terminal's CRLF line ends.
fn on_terminal(env: &TestEnv, args: &str, extra_env: &[(&str, &str)]) -> String {
    let mut cmd = env.cmd();
    cmd.env_remove("NO_COLOR")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE")
        .env("TERM", "xterm-256color");
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let line = format!("{} {args}", loops_bin().display());
    let out = cmd_with_program(cmd, "script")
        .args(["-qec", &line, "/dev/null"])
        .output()
        .expect("script runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// `cmd`'s environment on another program.
fn cmd_with_program(cmd: std::process::Command, program: &str) -> std::process::Command {
    let mut other = std::process::Command::new(program);
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => other.env(key, value),
            None => other.env_remove(key),
        };
    }
    other.stdin(std::process::Stdio::null());
    other
}

#[test]
fn list_is_coloured_on_a_terminal_only() {
    let env = TestEnv::new();
    history(&env);
    let tty = on_terminal(&env, "list", &[]);
    assert!(tty.contains("\u{1b}[36mactive\u{1b}[0m"), "{tty:?}");
    assert!(tty.contains("\u{1b}[1mID"), "a bold header: {tty:?}");
    let no_color = on_terminal(&env, "list", &[("NO_COLOR", "1")]);
    assert!(!no_color.contains('\u{1b}'), "{no_color:?}");
    assert!(
        no_color
            .lines()
            .any(|l| l.starts_with("ID            NAME    STATUS  SCHEDULE")),
        "the same layout: {no_color:?}"
    );

    // Piped: no colour, unless CLICOLOR_FORCE asks for it.
    let piped = env.loops(["list"]).env("NO_COLOR", None).run();
    assert!(!piped.stdout.contains('\u{1b}'), "{}", piped.stdout);
    let forced = env
        .loops(["list"])
        .env("NO_COLOR", None)
        .env("CLICOLOR_FORCE", Some("1"))
        .run();
    assert!(
        forced.stdout.contains("\u{1b}[31mfailed exit 2"),
        "{}",
        forced.stdout
    );
    // Colour changes no width: the rows line up as without it.
    let strip = |s: &str| {
        s.replace("\u{1b}[0m", "")
            .replace("\u{1b}[1m", "")
            .replace("\u{1b}[31m", "")
            .replace("\u{1b}[32m", "")
            .replace("\u{1b}[33m", "")
            .replace("\u{1b}[36m", "")
            .replace("\u{1b}[1m\u{1b}[31m", "")
    };
    assert_eq!(strip(&forced.stdout), piped.stdout);
    // JSON is never coloured.
    let json = env
        .loops(["--json", "list"])
        .env("NO_COLOR", None)
        .env("CLICOLOR_FORCE", Some("1"))
        .run();
    assert!(!json.stdout.contains('\u{1b}'));
}

/// Issue 25 item 11: `--json` keeps one `provider:<bin>` check for each
/// of the six providers, as the original does (scripts read
/// `provider:claude`); the human report folds the ones no loop uses into
/// one line.
#[test]
fn doctor_reports_every_provider_in_json_and_folds_unused_ones_for_humans() {
    let env = TestEnv::new();
    let all = [
        "provider:claude",
        "provider:cursor-agent",
        "provider:codewith",
        "provider:aicopilot",
        "provider:opencode",
        "provider:codex",
    ];
    let ids = |env: &TestEnv| -> Vec<String> {
        let report = env.loops(["--json", "doctor"]).run().json();
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["id"].as_str())
            .filter(|id| id.starts_with("provider"))
            .map(str::to_owned)
            .collect()
    };
    let human_ids = |env: &TestEnv| -> Vec<String> {
        let ran = env.loops(["doctor"]).run();
        ran.stdout
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter(|id| id.starts_with("provider"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(ids(&env), all);
    assert_eq!(human_ids(&env), ["providers"]);
    // A fake codex on the PATH a run gets is found; the others are not.
    env.write_script("codex", "exit 0");
    let ran = env.loops(["doctor"]).run();
    // (What else is available depends on this machine's PATH.)
    let folded = ran
        .stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix("ok    providers")?
                .trim_start()
                .strip_prefix("not used by any loop: ")
        })
        .unwrap_or_else(|| panic!("no folded line: {}", ran.stdout));
    let available = folded.split(';').next().unwrap().strip_suffix(" available");
    assert!(
        available.is_some_and(|a| a.split(", ").any(|bin| bin == "codex")),
        "{}",
        ran.stdout
    );
    let report = env.loops(["--json", "doctor"]).run().json();
    let status = |id: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .map(|c| c["status"].clone())
    };
    assert_eq!(status("provider:codex"), Some("ok".into()));

    env.loops(["create", "agent", "r", "--provider", "codex"])
        .args(["--prompt", "review", "--every", "1h"])
        .run();
    let file = env.home().join("w.json");
    std::fs::write(
        &file,
        r#"{"name": "w", "steps": [{"id": "a", "target": {"type": "agent", "provider": "claude", "prompt": "hi"}}]}"#,
    )
    .unwrap();
    env.loops(["workflows", "create", file.to_str().unwrap()])
        .run();
    assert_eq!(ids(&env), all);
    assert_eq!(
        human_ids(&env),
        ["provider:claude", "providers", "provider:codex"]
    );

    // The human report lines its messages up after the longest id.
    let ran = env.loops(["doctor"]).run();
    let starts: Vec<usize> = ran
        .stdout
        .lines()
        .filter_map(|l| {
            let id_end = l[6..].find(' ')? + 6;
            Some(id_end + l[id_end..].len() - l[id_end..].trim_start().len())
        })
        .collect();
    assert!(starts.windows(2).all(|w| w[0] == w[1]), "{}", ran.stdout);
}

#[test]
fn doctor_human_output() {
    loops_tests::sqlite_only!("the database checks name the SQLite file");
    let env = TestEnv::new();
    env.loops(["create", "agent", "triage", "--every", "1h"])
        .args(["--provider", "claude", "--prompt", "hi"])
        .run();
    let ran = env.loops(["doctor"]).run();
    let mut settings = snapshot_settings();
    // This machine's paths and PATH, and the loop's id.
    let dir = env.data_dir().display().to_string();
    settings.add_filter(&regex_escape(&dir), "[data]");
    settings.add_filter(r"(?m)(PATH of )\d+( entries) \(.*\)$", "$1[n]$2 ([PATH])");
    settings.add_filter(r"loop:[0-9a-f]{12}:preflight", "loop:[id-of-12]:preflight");
    settings.add_filter(r"loops \(Rust\) [0-9.]+", "loops (Rust) [version]");
    let _guard = settings.bind_to_scope();
    insta::assert_snapshot!("doctor_human", ran.stdout);
}

/// `text` with the characters a regex gives meaning escaped.
fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special.then_some('\\').into_iter().chain(Some(c))
        })
        .collect()
}
